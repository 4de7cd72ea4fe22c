"""Figure 7: what the file-system observer costs, and who pays it.

A power-loss trial runs its lives under ``harness.chaos.observer``'s library
(every write, fsync and rename under the trial folder traced, each fsynced
file copied as an image); every other trial runs without it, though a pool
worker's fork server, once it has served an observed life, keeps the library
loaded (idle without its variables). So:

- A journaled call (figure 2's, in a process of its own) observed against
  the same call unobserved: what each call of a power-loss trial pays.
- A crash-restart cycle (figure 1's, fork launcher) followed by a power cut
  rebuilt from the trace, against the same cycle without it: what a
  power-loss life pays, the rebuild included.
- The default campaign's exhaustive trials with the observer against the same
  campaign with it turned off (``HARNESS_FS_OBSERVER=off``, so its power-loss
  trials are not applicable): the mean time of a trial that is not a power
  loss, which must not grow; the power-loss trials' mean against the rest's is
  given for information.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.bench.figures import BenchError
from harness.chaos import observer

__all__ = ["ObservedCampaign", "journaled_calls", "observed_campaign"]

_CALLS_CHILD = """
import json, sys
from pathlib import Path
from harness.bench.calls import JournaledCalls
calls = JournaledCalls(Path(sys.argv[1]) / "runtime")
calls.warm_up()
print(json.dumps(calls.batch(int(sys.argv[2]))))
calls.close()
"""


def journaled_calls(root: Path, calls: int, *, observed: bool) -> float:
    """Microseconds per journaled call over ``calls`` calls on a fresh journal, in a child
    process under the observer (``observed``) or not."""
    env = dict(os.environ)
    if observed:
        lib = observer.library()
        if lib is None:
            raise BenchError(f"no observer: {observer.unavailable()}")
        env.update(observer.observer_env(root, lib))
        observer.start_trace(root)
    done = subprocess.run(
        [sys.executable, "-c", _CALLS_CHILD, str(root), str(calls)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise BenchError(f"journaled calls in a child: {done.stderr.strip()[-300:]}")
    return float(json.loads(done.stdout))


@dataclass(frozen=True, slots=True)
class ObservedCampaign:
    observed: bool
    other_ms: list[float]
    """The duration of each trial that is not a power loss."""
    power_loss_ms: list[float]
    not_passed: tuple[str, ...]

    @staticmethod
    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else 0.0


def observed_campaign(scratch: Path, workdir: Path | None, *, observed: bool) -> ObservedCampaign:
    """The default campaign's exhaustive trials (2 workers) with the observer, or with it
    turned off; each trial's duration, power losses apart."""
    from harness.bench.scaling import CAMPAIGN_SEED, SHIPPED_SCENARIOS
    from harness.chaos.campaign import CampaignConfig, run_trials
    from harness.chaos.scenario import load_scenarios
    from harness.chaos.trial import TrialResult

    scenarios = tuple(s.source for s in load_scenarios(SHIPPED_SCENARIOS))
    results: list[TrialResult] = []
    before = os.environ.get(observer.ENV_SWITCH)
    if not observed:
        os.environ[observer.ENV_SWITCH] = "off"
    try:
        with tempfile.TemporaryDirectory(dir=scratch, prefix="observed-") as run_dir:
            config = CampaignConfig(
                Path(run_dir), scenarios, CAMPAIGN_SEED, 0, 2, workdir=workdir, keep="sample"
            )
            run_trials(config, results.append)
    finally:
        if before is None:
            os.environ.pop(observer.ENV_SWITCH, None)
        else:
            os.environ[observer.ENV_SWITCH] = before
    cut = [r for r in results if "power-loss" in r.spec.schedule.fault_kinds]
    if observed and not cut:
        raise BenchError("the campaign with the observer ran no power-loss trial")
    if not observed and cut:
        raise BenchError("the campaign with the observer turned off ran power-loss trials")
    return ObservedCampaign(
        observed,
        [r.duration_ms for r in results if r not in cut],
        [r.duration_ms for r in cut],
        tuple(
            f"{r.spec.trial_id} ({r.status}): {r.spec.replay_command()}"
            for r in results
            if r.status != "pass"
        ),
    )
