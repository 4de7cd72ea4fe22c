"""An example test suite that uses the ``agent_chaos`` pytest plugin on a runtime.

Run it with ``pytest examples --chaos-runtime real`` (passes) or point it at a
runtime that retries everything in flight, ``--chaos-runtime
retry-non-idempotent`` (fails, naming invariant I2 and a replay command).
Your own runtime is ``--chaos-runtime module:<your.agent.module>`` (see the
README's "Runtime adapters").
"""

from __future__ import annotations

from harness.pytest_plugin import Chaos


class TestMyRuntimeSurvivesCrashes:
    def test_my_runtime_survives_crashes(self, chaos: Chaos) -> None:
        """Every trial of a small campaign (failpoint and timed kills) keeps every invariant."""
        chaos.assert_survives(chaos.run_campaign())

    def test_a_call_killed_after_its_intent_is_not_replayed(self, chaos: Chaos) -> None:
        """A non-idempotent tap killed right after its intent is verified, not blindly re-run."""
        result = chaos.run_trial(schedule='[{"failpoints":"op.after_intent@3=kill"}]')
        chaos.assert_survives([result])
