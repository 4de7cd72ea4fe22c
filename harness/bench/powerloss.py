"""Figure 10: what a power-loss trial costs, judged over 1, 4 and 16 crash states.

The subject is ``trial --crash-states N`` on one kill followed by a power cut: N
sub-trials, each run from the start under the observer, its cut rebuilt as crash state
K (``power-loss:state:K``) and judged. The baseline is the same trial with the kill
alone, unobserved. Both run this project's runtime on a shipped scenario, forked by one
``Supervisor``; the golden run they are judged against is made once, untimed. Every
state asked for is run, as with several cuts (the command stops early only when one cut
has fewer states than asked; the runtime's cut here may have few, and a state past them
is one of them again), so the figure is the cost of N judged states.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from harness.bench.figures import BenchError
from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import TrialSpec, prepare_golden, run_trial

__all__ = ["CUT", "KILL", "SCENARIO", "PowerLossTrials"]

SCENARIO = str(Path(__file__).resolve().parents[2] / "scenarios" / "phone_task.toml")
KILL = "op.after_effect@3=kill"
"""A kill after the third call's effect, before its finish is journaled."""
CUT = "power-loss:drop"


class PowerLossTrials:
    """One scenario's golden run, made once in ``root``; each call times one trial (or N
    sub-trials) in a fresh folder under it, removed once timed."""

    def __init__(self, root: Path, seed: int = 7) -> None:
        self.root = root
        self.supervisor = Supervisor(launch="fork")
        golden = prepare_golden(SCENARIO, seed, root / "golden", self.supervisor)
        self.golden = golden.directory
        self.seed = seed
        self.runs = 0
        self.cut_states: int | None = None
        """How many crash states the cut has (its fault event says), once one was run."""
        # Untimed: the first observed life restarts the fork server with the library.
        self.crash_states_ms(1)
        self.kill_only_ms()

    def kill_only_ms(self) -> float:
        """Milliseconds of one trial whose one life is killed (no power loss)."""
        return self._timed([CrashSchedule((Life(KILL),))])

    def crash_states_ms(self, states: int) -> float:
        """Milliseconds of the same kill then a power cut, judged over ``states`` crash
        states (that many sub-trials)."""
        return self._timed(
            [
                CrashSchedule((Life(KILL, after_death=f"power-loss:state:{number}"),))
                for number in range(states)
            ]
        )

    def _timed(self, schedules: list[CrashSchedule]) -> float:
        self.runs += 1
        folder = self.root / f"run-{self.runs}"
        started = time.perf_counter()
        for number, schedule in enumerate(schedules):
            spec = TrialSpec(SCENARIO, self.seed, schedule, "real", schedule.describe(), "custom")
            result = run_trial(spec, folder / f"state-{number}", self.golden, self.supervisor)
            if self.cut_states is None and "power-loss" in schedule.fault_kinds:
                self.cut_states = _states(result.directory / "events.jsonl")
            if result.status != "pass":
                # The real runtime holds under these faults: anything else is a broken run.
                failed = result.failed_invariants + result.unknown_invariants
                raise BenchError(f"{schedule.describe()}: {result.status} ({', '.join(failed)})")
        took = (time.perf_counter() - started) * 1000
        shutil.rmtree(folder, ignore_errors=True)
        return took


def _states(events: Path) -> int | None:
    for line in events.read_text("utf-8").splitlines():
        event = json.loads(line)
        if event.get("event") == "fault" and "states" in event:
            return int(event["states"])
    return None
