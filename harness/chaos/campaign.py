"""A campaign: many trials, run in parallel, all derived from one seed.

Phase 1 runs the golden (crash-free) run of every (scenario, seed) the
campaign needs. Phase 2 runs the trials: for each scenario, every failpoint at
every hit its golden run made (the exhaustive enumeration, with kills during
recovery and a tool-table change), plus ``random_trials`` random-time trials,
each with its own scenario, seed and one to three kills.

Every random choice flows from the campaign seed, so the same seed lists the
same trials; the kill moments of random trials are drawn as fractions of the
golden run's working time and stored in each trial's schedule, whose replay
command runs it again.
"""

from __future__ import annotations

import os
import random
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import multiprocess

from harness.chaos.schedule import exhaustive_schedules, random_schedule
from harness.chaos.supervisor import Supervisor, kill_all
from harness.chaos.tables import write_table_variants
from harness.chaos.trial import Golden, TrialResult, TrialSpec, prepare_golden, run_trial

__all__ = ["CampaignConfig", "exhaustive_specs", "random_specs", "run_trials", "scenario_seed"]


@dataclass(frozen=True, slots=True)
class CampaignConfig:
    run_dir: Path
    scenarios: tuple[str, ...]
    seed: int
    random_trials: int = 200
    workers: int = 2
    runtime: str = "real"
    restart_budget: int = 8
    timeout_s: float = 60.0

    def supervisor(self) -> Supervisor:
        return Supervisor(restart_budget=self.restart_budget, timeout_s=self.timeout_s)


def scenario_seed(campaign_seed: int, scenario: str) -> int:
    """The seed of a scenario's exhaustive trials: fixed by the campaign seed and its name."""
    return random.Random(f"{campaign_seed}:{Path(scenario).stem}").randrange(2**31)


def golden_dir(run_dir: Path, scenario: str, seed: int) -> Path:
    return run_dir / "golden" / f"{Path(scenario).stem}-{seed}"


def exhaustive_specs(
    scenario: str, seed: int, golden: Golden, runtime: str = "real"
) -> list[TrialSpec]:
    return [
        TrialSpec(scenario, seed, schedule, runtime, label, "exhaustive")
        for label, schedule in exhaustive_schedules(golden.hits)
    ]


def random_picks(config: CampaignConfig) -> list[tuple[str, int, random.Random]]:
    """(scenario, seed, its own rng) for each random trial."""
    rng = random.Random(config.seed)
    picks = []
    for _ in range(config.random_trials):
        scenario = rng.choice(config.scenarios)
        trial_seed = rng.randrange(2**31)
        picks.append((scenario, trial_seed, random.Random(trial_seed)))
    return picks


def random_specs(
    picks: Iterable[tuple[str, int, random.Random]],
    goldens: dict[tuple[str, int], Golden],
    runtime: str = "real",
) -> list[TrialSpec]:
    specs = []
    for n, (scenario, seed, rng) in enumerate(picks, 1):
        schedule = random_schedule(rng, goldens[scenario, seed].working_ms)
        specs.append(TrialSpec(scenario, seed, schedule, runtime, f"random{n:04d}", "random"))
    return specs


# -- running in a pool --------------------------------------------------------------------

_worker_supervisor: Supervisor | None = None


def _init_worker(restart_budget: int, timeout_s: float) -> None:
    global _worker_supervisor
    _worker_supervisor = Supervisor(restart_budget=restart_budget, timeout_s=timeout_s)
    # The pool is terminated with SIGTERM: take this worker's agents down with it.
    signal.signal(signal.SIGTERM, _die_with_agents)


def _die_with_agents(signum: int, frame: object) -> None:
    kill_all()
    os._exit(128 + signum)


def _golden_task(args: tuple[str, int, Path]) -> tuple[str, int, Golden]:
    scenario, seed, directory = args
    assert _worker_supervisor is not None
    try:
        return scenario, seed, prepare_golden(scenario, seed, directory, _worker_supervisor)
    finally:
        kill_all()


def _trial_task(args: tuple[TrialSpec, Path, Path, dict[str, Path]]) -> TrialResult:
    spec, directory, golden, tables = args
    assert _worker_supervisor is not None
    try:
        return run_trial(spec, directory, golden, _worker_supervisor, tables=tables)
    finally:
        kill_all()


class Pool:
    """A ``multiprocess`` pool of workers, each with its own supervisor."""

    def __init__(self, workers: int, restart_budget: int, timeout_s: float) -> None:
        self._pool = multiprocess.Pool(
            workers, initializer=_init_worker, initargs=(restart_budget, timeout_s)
        )
        self.window = 2 * workers

    def goldens(
        self, run_dir: Path, wanted: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], Golden]:
        tasks = [(s, seed, golden_dir(run_dir, s, seed)) for s, seed in sorted(set(wanted))]
        return {(s, seed): g for s, seed, g in self._pool.imap_unordered(_golden_task, tasks)}

    def trials(
        self,
        run_dir: Path,
        specs: list[TrialSpec],
        goldens: dict[tuple[str, int], Golden],
        stop: Callable[[TrialResult], bool] | None = None,
    ) -> Iterator[TrialResult]:
        """Results in spec order; after ``stop`` says so, no new trial starts.

        A small window of trials is in flight at a time, so stopping early
        needs no terminate: the window drains and the pool closes cleanly.
        """
        tables = write_table_variants(run_dir / "tables")
        tasks = iter(
            [
                (
                    spec,
                    run_dir / "trials" / spec.trial_id,
                    goldens[spec.scenario, spec.seed].directory,
                    tables,
                )
                for spec in specs
            ]
        )
        in_flight: deque[Any] = deque()
        stopping = False
        while True:
            while not stopping and len(in_flight) < self.window:
                task = next(tasks, None)
                if task is None:
                    break
                in_flight.append(self._pool.apply_async(_trial_task, (task,)))
            if not in_flight:
                return
            result: TrialResult = in_flight.popleft().get()
            stopping = stopping or (stop is not None and stop(result))
            yield result

    def close(self) -> None:
        self._pool.close()
        self._pool.join()

    def terminate(self) -> None:
        self._pool.terminate()
        self._pool.join()


def run_trials(
    config: CampaignConfig,
    on_result: Callable[[TrialResult], None],
    *,
    on_plan: Callable[[int], None] | None = None,
    stop: Callable[[TrialResult], bool] | None = None,
    select: Callable[[TrialSpec], bool] | None = None,
) -> list[TrialResult]:
    """Run the whole campaign; ``select`` keeps some trials, ``stop`` may end it early."""
    pool = Pool(config.workers, config.restart_budget, config.timeout_s)
    try:
        picks = random_picks(config)
        wanted = [(s, scenario_seed(config.seed, s)) for s in config.scenarios]
        wanted += [(s, seed) for s, seed, _ in picks]
        goldens = pool.goldens(config.run_dir, wanted)
        specs: list[TrialSpec] = []
        for s in config.scenarios:
            seed = scenario_seed(config.seed, s)
            specs += exhaustive_specs(s, seed, goldens[s, seed], config.runtime)
        specs += random_specs(picks, goldens, config.runtime)
        if select is not None:
            specs = [spec for spec in specs if select(spec)]
        if on_plan is not None:
            on_plan(len(specs))
        results = []
        for result in pool.trials(config.run_dir, specs, goldens, stop):
            results.append(result)
            on_result(result)
        pool.close()
        return results
    except BaseException:
        pool.terminate()
        raise
