"""Broken runtimes that only equal calls expose: escaping the scenarios as they were, caught now.

``key-from-args``, ``content-one-op`` and ``settled-index-one-per-content`` take two equal
calls for one. Before the shipped scenarios made equal calls on purpose (the old files
are kept in ``tests/data/scenarios_before_shapes``), every trial of the scenarios where
their mistake can act at all passed: keyed tools (``payment_flow``), identity by content
(``reissue_calls``, ``replan_calls``), a compacted journal (``long_task``). The shipped
scenarios catch each of them, and the self-check plans a catching stage for each only
where the golden runs have the shape it needs.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness.agent.broken import BROKEN_RUNTIMES
from harness.chaos.campaign import CampaignConfig, run_trials
from harness.chaos.schedule import CrashSchedule
from harness.chaos.selfcheck import plan_self_check
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import TrialResult, TrialSpec, prepare_golden, run_trial
from harness.strategies import describe_failure

ROOT = Path(__file__).parent.parent.parent
SHIPPED = ROOT / "scenarios"
BEFORE = ROOT / "tests" / "data" / "scenarios_before_shapes"

# Per broken runtime: the old scenarios where its mistake can act, and the shipped one
# that catches it.
CASES = {
    "key-from-args": ((BEFORE / "payment_flow.toml",), SHIPPED / "payment_flow.toml"),
    "content-one-op": (
        (SHIPPED / "reissue_calls.toml", SHIPPED / "replan_calls.toml", BEFORE / "long_task.toml"),
        SHIPPED / "long_task.toml",
    ),
    "settled-index-one-per-content": (
        (BEFORE / "long_task.toml", SHIPPED / "reissue_calls.toml"),
        SHIPPED / "long_task.toml",
    ),
}


def campaign(folder: Path, scenarios: tuple[Path, ...], runtime: str) -> CampaignConfig:
    return CampaignConfig(
        folder, tuple(str(s) for s in scenarios), seed=48, random_trials=20, runtime=runtime
    )


# Per broken runtime: a trial of a shipped scenario that catches it, where the real runtime
# holds (the second charge; a kill before the note is written back; one after both taps).
TARGETED = {
    "key-from-args": (SHIPPED / "payment_flow.toml", "op.after_finish@1"),
    "content-one-op": (SHIPPED / "long_task.toml", "op.before_intent@10"),
    "settled-index-one-per-content": (SHIPPED / "long_task.toml", "op.before_intent@5"),
}
SUPERVISOR = Supervisor(restart_budget=8, timeout_s=60)


class TestTargeted:
    @pytest.mark.parametrize("name", sorted(TARGETED))
    def test_one_trial_catches_it_where_real_holds(self, name: str, tmp_path: Path) -> None:
        """The targeted trial fails an invariant the broken runtime names, and passes under
        the real runtime."""
        scenario, point = TARGETED[name]
        schedule = CrashSchedule.from_json(json.dumps([{"failpoints": f"{point}=kill"}]))
        golden = prepare_golden(str(scenario), 1, tmp_path / "golden", SUPERVISOR)
        for runtime in (name, "real"):
            spec = TrialSpec(str(scenario), 1, schedule, runtime)
            result = run_trial(spec, tmp_path / runtime, golden.directory, SUPERVISOR)
            if runtime == "real":
                assert result.status == "pass", describe_failure(result)
            else:
                caught = set(BROKEN_RUNTIMES[name].caught_by) & set(result.failed_invariants)
                assert caught, describe_failure(result)


@pytest.mark.long
class TestEqualCallsExpose:
    @pytest.mark.parametrize("name", sorted(CASES))
    def test_escapes_the_old_scenarios_and_is_caught_now(self, name: str, tmp_path: Path) -> None:
        """Every trial of the old scenarios passes under the broken runtime; a trial of the
        shipped scenario with the shape fails one of the invariants it names."""
        old, new = CASES[name]
        expected = set(BROKEN_RUNTIMES[name].caught_by)
        ran: list[TrialResult] = []
        run_trials(campaign(tmp_path / "old", old, name), ran.append)
        assert len(ran) > 50
        assert [r.spec.trial_id for r in ran if r.status != "pass"] == []

        def caught(result: TrialResult) -> bool:
            return bool(expected & set(result.failed_invariants))

        now: list[TrialResult] = []
        run_trials(
            replace(campaign(tmp_path / "new", (new,), name), random_trials=0),
            now.append,
            stop=caught,
        )
        assert any(caught(r) for r in now), [r.failed_invariants for r in now][:5]


@pytest.mark.long
class TestSelfCheckPlan:
    def test_a_stage_catches_each_only_where_the_shape_is(self, tmp_path: Path) -> None:
        """On the old scenarios the self-check says each needs a shape they lack; on the
        shipped ones it plans a stage that must catch it."""
        for folder, scenarios, applicable in (
            (tmp_path / "old", (BEFORE / "payment_flow.toml", BEFORE / "long_task.toml"), False),
            (tmp_path / "new", (SHIPPED / "payment_flow.toml", SHIPPED / "long_task.toml"), True),
        ):
            config = replace(campaign(folder, scenarios, "real"), random_trials=0)
            run_trials(config, lambda result: None, select=lambda spec: False)  # golden runs
            checks = {c.name: c for c in plan_self_check(config)}
            for name in CASES:
                check = checks[name]
                if applicable:
                    assert check.not_applicable is None and check.catch is not None, name
                else:
                    assert check.catch is None and "it needs" in str(check.not_applicable), name
