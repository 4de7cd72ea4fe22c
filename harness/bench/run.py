"""Running the benchmarks: each figure's measurements, interleaved, into a ``BenchReport``.

Every function here measures a subject and its baseline in the same run and
returns figures; none of them decides anything about the project. Scratch
files live under the output folder (the same disk the reports and trials use,
so fsyncs cost what they cost there) and are removed when each measurement ends.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.bench import (
    blackbox,
    calls,
    compaction,
    cycles,
    fleet,
    observed,
    powerloss,
    restarts,
    scaling,
    startup,
    threads,
    wire,
)
from harness.bench.figures import (
    BenchError,
    BenchReport,
    Figure,
    Target,
    interleave,
    machine_info,
    median_of,
)
from harness.chaos import observer
from harness.runtime.compaction import Retention

__all__ = [
    "FULL",
    "QUICK",
    "STEPS",
    "BenchSettings",
    "Measurements",
    "bench_batch",
    "bench_blackbox",
    "bench_campaigns",
    "bench_compaction",
    "bench_cycles",
    "bench_failpoint",
    "bench_fleet",
    "bench_journaled_call",
    "bench_planning",
    "bench_power_loss",
    "bench_restarts",
    "bench_startup",
    "bench_threads",
    "bench_wire_guard",
    "run_bench",
]


@dataclass(frozen=True, slots=True)
class BenchSettings:
    """How much to measure; ``QUICK`` is for the smoke test and CI, ``FULL`` for ``make bench``."""

    cycles: int = 100
    cycle_repeats: int = 5
    calls: int = 200
    call_repeats: int = 7
    batch_size: int = 8
    failpoint_loops: int = 1_000_000
    failpoint_repeats: int = 5
    startup_runs: int = 20
    campaign_sizes: tuple[int, ...] = (100, 1_000, 5_000)
    """Smallest first, largest last; the smallest is also run with 1 worker."""
    default_campaign_runs: int = 2
    """How often the default campaign runs in RAM and on disk, interleaved (0: not at all)."""
    planning_sizes: tuple[int, ...] = (10, 100, 1_000, 10_000, 100_000)
    planning_records: int = 100_000
    planning_repeats: int = 5
    history_ops: int = 100_000
    """The long history compacted (figure 6); ``short_ops`` is the journal it is held to."""
    short_ops: int = 1_000
    start_repeats: int = 3
    observer_campaign_runs: int = 1
    """How often the default campaign runs with the observer and with it off, interleaved."""
    restart_ops: int = 100_000
    """The long uncompacted journal of figure 8; ``restart_short_ops`` the one it is held to."""
    restart_short_ops: int = 1_000
    restart_running: int = 10
    """Ops left running in both, as a crash leaves them (VERIFY: no tool runs)."""
    restart_repeats: int = 5
    thread_callers: int = 16
    thread_calls: int = 200
    """Calls each caller makes in a sample of figure 9 (a sample of 3,200 calls lasts about
    a second: long enough that a moment of other work on the machine is not the sample)."""
    thread_repeats: int = 5
    power_loss_repeats: int = 3
    """Rounds of figure 10: a kill-only trial, then one judged over each of ``CRASH_STATES``."""
    wire_calls: int = 50
    """MCP calls in a sample of figure 11 (direct, then through the wire guard)."""
    wire_repeats: int = 7
    blackbox_repeats: int = 5
    """Lives of each example agent started plain and warm, interleaved (figure 12)."""
    fleet_workers: tuple[int, ...] = (1, 8, 32)
    """Worker processes of figure 13, each with a task of its own."""
    fleet_calls: int = 40
    """Calls each worker makes in a sample of figure 13."""
    fleet_repeats: int = 3
    claim_repeats: int = 15
    """Claims and takeovers of each store in figure 13, interleaved."""


FULL = BenchSettings()
QUICK = BenchSettings(
    cycles=8,
    cycle_repeats=1,
    calls=20,
    call_repeats=2,
    failpoint_loops=20_000,
    failpoint_repeats=2,
    startup_runs=2,
    campaign_sizes=(20, 40, 60),
    default_campaign_runs=0,
    planning_sizes=(10, 100, 1_000),
    planning_records=5_000,
    planning_repeats=1,
    history_ops=5_000,
    short_ops=500,
    start_repeats=1,
    observer_campaign_runs=0,
    restart_ops=5_000,
    restart_short_ops=500,
    restart_repeats=1,
    thread_callers=4,
    thread_calls=10,
    thread_repeats=1,
    power_loss_repeats=1,
    wire_calls=5,
    wire_repeats=1,
    blackbox_repeats=1,
    fleet_workers=(1, 2),
    fleet_calls=5,
    fleet_repeats=1,
    claim_repeats=2,
)


@dataclass(slots=True)
class Measurements:
    """What the benchmarks measured so far: figures, the samples behind them, notes."""

    figures: list[Figure] = field(default_factory=list)
    series: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    """Measurements that could not be made (``BenchError``), with why."""


def _in_scratch(scratch: Path, measure: Callable[[Path], float]) -> Callable[[], float]:
    """A measurement run in a fresh folder under ``scratch``, removed right after."""

    def run() -> float:
        with tempfile.TemporaryDirectory(dir=scratch) as directory:
            return measure(Path(directory))

    return run


def bench_cycles(settings: BenchSettings, scratch: Path, out: Measurements) -> None:
    n = settings.cycles
    phases: dict[str, dict[str, list[float]]] = {"fork": {}, "exec": {}}

    def harness(launch: str) -> Callable[[], float]:
        return _in_scratch(scratch, lambda d: cycles.harness_cycles(d, n, launch, phases[launch]))

    samples = interleave(
        {
            "exec-loop": lambda: cycles.exec_loop(n),
            "harness-fork": harness("fork"),
            "fork-loop": _in_scratch(scratch, lambda d: cycles.fork_loop(d, n)),
            "harness-exec": harness("exec"),
        },
        settings.cycle_repeats,
    )
    rate = {name: median_of(values) for name, values in samples.items()}
    out.series["cycles_per_s"] = samples
    # Where a harness cycle's time goes, from the supervisor's own events.
    out.series["cycle_phases_ms"] = {
        launch: {gap: median_of(values) for gap, values in gaps.items()}
        for launch, gaps in phases.items()
    }
    unit = "cycles/s"
    out.figures += [
        Figure(
            "1 cycles: harness-fork / exec-loop",
            rate["harness-fork"],
            rate["exec-loop"],
            unit,
            Target(low=1.0),
        ),
        Figure(
            "1 cycles: harness-fork / fork-loop",
            rate["harness-fork"],
            rate["fork-loop"],
            unit,
            Target(low=0.5, moonshot=True),
        ),
        Figure(
            "1 cycles: harness-exec / exec-loop",
            rate["harness-exec"],
            rate["exec-loop"],
            unit,
            None,
            "exec launcher, for information",
        ),
    ]


def bench_journaled_call(settings: BenchSettings, scratch: Path, out: Measurements) -> None:
    with tempfile.TemporaryDirectory(dir=scratch) as directory:
        root = Path(directory)
        journaled = calls.JournaledCalls(root / "runtime")
        try:
            per_call = journaled.warm_up()
            raw = calls.RawCalls(root / "raw", max(1, per_call // 2))
            try:
                raw.batch(1)
                samples = interleave(
                    {
                        "runtime": functools.partial(journaled.batch, settings.calls),
                        "raw": functools.partial(raw.batch, settings.calls),
                    },
                    settings.call_repeats,
                )
            finally:
                raw.close()
        finally:
            journaled.close()
    out.series["journaled_call_us"] = samples
    out.figures.append(
        Figure(
            "2 journaled call / raw durability",
            median_of(samples["runtime"]),
            median_of(samples["raw"]),
            "µs/call",
            Target(high=1.25),
            f"{per_call} journal bytes per call, raw appends of {per_call // 2} bytes",
        )
    )


def bench_batch(settings: BenchSettings, scratch: Path, out: Measurements) -> None:
    size = settings.batch_size
    rounds = max(1, settings.calls // size)
    with tempfile.TemporaryDirectory(dir=scratch) as directory:
        root = Path(directory)
        together = calls.BatchedCalls(root / "together", size, together=True)
        apart = calls.BatchedCalls(root / "apart", size, together=False)
        try:
            together.rounds(1)
            apart.rounds(1)
            samples = interleave(
                {
                    "together": functools.partial(together.rounds, rounds),
                    "apart": functools.partial(apart.rounds, rounds),
                },
                settings.call_repeats,
            )
            writes = together.writes / (rounds * settings.call_repeats + 1)
        finally:
            together.close()
            apart.close()
    out.series["batch_call_us"] = samples
    out.figures.append(
        Figure(
            f"2 batch of {size} calls / {size} calls one after another",
            median_of(samples["together"]),
            median_of(samples["apart"]),
            "µs/call",
            Target(high=0.5),
            f"the journal alone (the tool does nothing); a batch took {writes:.1f} journal "
            f"writes, the calls one after another {2 * size}",
        )
    )


def bench_failpoint(settings: BenchSettings, out: Measurements) -> None:
    loops = settings.failpoint_loops
    samples = interleave(
        {
            "failpoint": functools.partial(calls.failpoint_loop, loops),
            "empty": functools.partial(calls.empty_call_loop, loops),
        },
        settings.failpoint_repeats,
    )
    out.series["failpoint_ns"] = samples
    out.figures.append(
        Figure(
            "3 unarmed failpoint / empty call",
            median_of(samples["failpoint"]),
            median_of(samples["empty"]),
            "ns/call",
            Target(high=1.5),
            f"loops of {loops:,}, loop included",
        )
    )


def bench_startup(settings: BenchSettings, scratch: Path, out: Measurements) -> None:
    with tempfile.TemporaryDirectory(dir=scratch) as directory:
        trial = Path(directory) / "trial"
        startup.prepare_finished_trial(trial)
        floor = startup.stdlib_floor_command()
        samples = interleave(
            {
                "agent": functools.partial(startup.time_process, startup.agent_command(trial)),
                "python": functools.partial(startup.time_process, startup.BASELINE_COMMAND),
                "stdlib": functools.partial(startup.time_process, floor),
            },
            settings.startup_runs,
        )
        target = Target(high=1.5)
        floor_ratio = median_of(samples["stdlib"]) / median_of(samples["python"])
        # The standard-library modules alone, started as the agent is: a floor no code of
        # the project's own can go under (the measured reason a miss cannot be mended).
        below = (
            "" if target.holds(floor_ratio) else f"; floor {floor_ratio:.2f}x: its stdlib imports"
        )
        figure = Figure(
            "4 agent start-up / import sqlite3",
            median_of(samples["agent"]),
            median_of(samples["python"]),
            "ms",
            target,
            f"a finished trial: import, recover, all SKIP, exit{below}",
        )
        if figure.holds is False:
            top = startup.import_profile(trial)
            out.series["agent_importtime_top"] = [
                {"module": e.module, "self_us": e.self_us, "cumulative_us": e.cumulative_us}
                for e in top
            ]
    out.series["startup_ms"] = samples
    out.figures.append(figure)
    stdlib_ms, python_ms = median_of(samples["stdlib"]), median_of(samples["python"])
    out.notes.append(
        f"agent start-up floor: the {floor[-1].count(',') + 1} standard-library modules the "
        f"agent imports, alone in a fresh python -I, take {stdlib_ms:.1f} ms, "
        f"{stdlib_ms / python_ms:.2f}x import sqlite3; a campaign forks each incarnation "
        "from a warm server (--launch fork), which pays neither"
    )


def bench_campaigns(settings: BenchSettings, scratch: Path, out: Measurements) -> None:
    from harness.chaos.workdir import ram_folder

    small, *middle, big = settings.campaign_sizes
    ram = ram_folder()  # for chaos --workdir ram; None: no RAM figure
    if ram is None:
        out.notes.append("no RAM folder (tmpfs) on this machine: no RAM campaign ran")
    # Small with 2 and 1 workers (in RAM, as chaos runs them, and on disk), the bigger
    # ones, then the small ones again: drift of the machine falls on both sides of
    # every ratio.
    home = ram  # where chaos runs trials by default (None: no tmpfs, on disk)
    smalls = [(small, 2, home), *([(small, 2, None)] if ram else []), (small, 1, home)]
    order = [*smalls, *((n, 2, home) for n in middle), (big, 2, home), *smalls]
    runs = [scaling.run_campaign(scratch, n, workers, where) for n, workers, where in order]
    for run in runs:
        out.notes += [
            f"campaign of {run.trials} ({run.workers} workers): trial did not pass: {trial}"
            for trial in run.not_passed
        ]
    small2 = [r for r in runs if r.trials == small and r.workers == 2 and r.workdir == home]
    small1 = [r for r in runs if r.trials == small and r.workers == 1]
    big2 = [r for r in runs if r.trials == big and r.workers == 2]
    on_disk = (
        []
        if ram is None
        else [r for r in runs if r.trials == small and r.workers == 2 and r.workdir is None]
    )
    out.series["campaigns"] = [
        {
            "trials": r.trials,
            "workers": r.workers,
            "seconds": r.seconds,
            "trials_per_s": r.trials_per_s,
            "worker_rss_bytes": r.worker_rss,
            "cpu_busy": r.cpu_busy,
            "where": "disk" if r.workdir is None else str(r.workdir),
        }
        for r in runs
    ]
    rate2 = median_of([r.trials_per_s for r in small2])
    # A campaign waits on fsyncs more than it computes: how busy the cores were
    # tells whether workers, or the disk, bound the rate.
    out.notes.append(
        "CPU busy over wall time (1.0 = one core), campaigns of "
        f"{small}: 1 worker {median_of([r.cpu_busy for r in small1]):.2f}, "
        f"2 workers {median_of([r.cpu_busy for r in small2]):.2f}; "
        f"{big}: {median_of([r.cpu_busy for r in big2]):.2f}"
    )
    mb = 1024 * 1024
    if on_disk:
        out.figures.append(
            Figure(
                f"5 trials/s: in RAM / on disk, {small} trials",
                rate2,
                median_of([r.trials_per_s for r in on_disk]),
                "trials/s",
                None,
                f"2 workers; RAM folder {ram}; for information: golden runs and start-up in it",
            )
        )
    if ram is not None and settings.default_campaign_runs:
        places = [ram, None] * settings.default_campaign_runs
        default = [scaling.run_default_campaign(scratch, where) for where in places]
        out.notes += [
            f"default campaign: trial did not pass: {trial}"
            for run in default
            for trial in run.not_passed
        ]
        out.series["default_campaign"] = [
            {"trials": r.trials, "seconds": r.seconds, "where": str(r.workdir or "disk")}
            for r in default
        ]
        out.figures.append(
            Figure(
                "5 trials/s: in RAM / on disk, the default campaign",
                median_of([r.trials_per_s for r in default if r.workdir is not None]),
                median_of([r.trials_per_s for r in default if r.workdir is None]),
                "trials/s",
                Target(low=2.0),
                f"its {default[0].trials} exhaustive trials, 2 workers",
            )
        )
    out.figures += [
        Figure(
            f"5 trials/s: {big} / {small} trials",
            median_of([r.trials_per_s for r in big2]),
            rate2,
            "trials/s",
            Target(0.85, 1.15),
            "2 workers, golden runs included",
        ),
        Figure(
            "5 trials/s: 2 workers / 1",
            rate2,
            median_of([r.trials_per_s for r in small1]),
            "trials/s",
            Target(low=1.8),
            # Beside the ratio, what bounds it: how many cores each kept busy, and whether
            # others used the machine's cores meanwhile.
            f"{os.cpu_count()} cores on this machine; busy: 2 workers "
            f"{median_of([r.cpu_busy for r in small2]):.2f} cores, 1 worker "
            f"{median_of([r.cpu_busy for r in small1]):.2f}; load average "
            f"{os.getloadavg()[0]:.1f}",
        ),
        Figure(
            f"5 supervisor RSS: {big} / {small} trials",
            median_of([r.worker_rss / mb for r in big2]),
            median_of([r.worker_rss / mb for r in small2]),
            "MiB",
            Target(high=1.15),
            "largest pool worker at the last result",
        ),
    ]


def bench_planning(settings: BenchSettings, out: Measurements) -> None:
    points = scaling.time_planning(
        settings.planning_sizes,
        records_per_sample=settings.planning_records,
        repeats=settings.planning_repeats,
    )
    out.series["planning"] = [p.to_json() for p in points]
    first, last = points[0], points[-1]
    figure = Figure(
        f"5 planning/record: {last.records:,} / {first.records:,}",
        last.total_us,
        first.total_us,
        "µs/record",
        Target(high=1.5),
        "scan + fold + plan_recovery; linear is ≈ 1 (the bound is this bench's)",
    )
    out.figures.append(figure)
    if figure.holds is False:
        # The usual suspect for a per-record cost that grows with the journal is
        # the cyclic GC walking every live record on each full collection.
        enabled = gc.isenabled()
        gc.disable()
        try:
            (off,) = scaling.time_planning(
                (last.records,),
                records_per_sample=settings.planning_records,
                repeats=settings.planning_repeats,
            )
        finally:
            if enabled:
                gc.enable()
        out.series["planning_gc_off"] = off.to_json()
        out.notes.append(
            f"planning at {last.records:,} records with the cyclic GC off: "
            f"{off.total_us:.2f} µs/record (GC on: {last.total_us:.2f}; "
            f"{first.records:,} records: {first.total_us:.2f})"
        )


def bench_compaction(settings: BenchSettings, scratch: Path, out: Measurements) -> None:
    """Figure 6: a compacted long history starts as fast as a short journal, in as much
    memory; compaction's time per settled op stays flat; a call costs what it did."""
    big, small = settings.history_ops, settings.short_ops
    with tempfile.TemporaryDirectory(dir=scratch) as directory:
        root = Path(directory)
        short, whole, kept = root / "short", root / "whole", root / "kept"
        short.write_bytes(compaction.history_journal(small))
        history = compaction.history_journal(big)
        whole.write_bytes(history)
        kept.write_bytes(history)
        sizes = {"history": len(history)}
        (root / "history").write_bytes(history)
        del history
        uncompacted = compaction.time_start(root / "history", root)
        seconds = {
            "whole": compaction.compact_journal(whole),
            "kept": compaction.compact_journal(kept, Retention(ops=small)),
        }
        # The short journal's compaction takes milliseconds: the median of fresh copies, so
        # one scheduling hiccup does not make the ratio.
        small_runs = []
        for repeat in range(settings.start_repeats):
            small_copy = root / f"small-compacted-{repeat}"
            shutil.copyfile(short, small_copy)
            small_runs.append(compaction.compact_journal(small_copy))
        seconds["small"] = median_of(small_runs)
        sizes |= {"whole": whole.stat().st_size, "kept": kept.stat().st_size}
        starts: dict[str, list[compaction.StartSample]] = {"whole": [], "kept": [], "short": []}
        for _ in range(settings.start_repeats):
            for name, journal in (("whole", whole), ("kept", kept), ("short", short)):
                starts[name].append(compaction.time_start(journal, root))
        calls_on = {}
        for name, given in (("compacted", whole), ("fresh", None)):
            place = root / f"calls-{name}"
            place.mkdir()
            if given is not None:
                shutil.copyfile(given, place / "journal")
            calls_on[name] = calls.JournaledCalls(place)
        try:
            for journaled in calls_on.values():
                journaled.warm_up()
            samples = interleave(
                {
                    name: functools.partial(journaled.batch, settings.calls)
                    for name, journaled in calls_on.items()
                },
                settings.call_repeats,
            )
        finally:
            for journaled in calls_on.values():
                journaled.close()

    def start(name: str) -> float:
        return median_of([s.seconds * 1e3 for s in starts[name]])

    def rss(name: str) -> float:
        return median_of([s.max_rss / 2**20 for s in starts[name]])

    out.series["compaction"] = {
        "bytes": sizes,
        "compaction_s": seconds,
        "start_ms": {name: [s.seconds * 1e3 for s in got] for name, got in starts.items()},
        "start_rss_mib": {name: [s.max_rss / 2**20 for s in got] for name, got in starts.items()},
        "call_us": samples,
    }
    out.notes.append(
        f"the {big:,}-op history uncompacted ({sizes['history'] / 2**20:.1f} MiB): open+recover "
        f"{uncompacted.seconds * 1e3:,.0f} ms, peak RSS {uncompacted.max_rss / 2**20:.1f} MiB"
    )
    short_one = f"{small:,}-op journal"
    out.figures += [
        Figure(
            f"6 open+recover: {big:,}-op history compacted / {short_one}",
            start("whole"),
            start("short"),
            "ms",
            Target(high=2),
            f"every op kept: {sizes['history'] / 2**20:.1f} MiB compacted to "
            f"{sizes['whole'] / 2**20:.1f} MiB",
        ),
        Figure(
            f"6 open+recover: {big:,}-op history, last {small:,} kept / {short_one}",
            start("kept"),
            start("short"),
            "ms",
            Target(high=2),
            f"retention of {small:,} ops: {sizes['kept'] / 2**10:.0f} KiB",
        ),
        Figure(
            f"6 peak RSS of a start: {big:,}-op history compacted / {short_one}",
            rss("whole"),
            rss("short"),
            "MiB",
            Target(high=2),
            f"last {small:,} kept: {rss('kept'):.1f} MiB (VmHWM of a fresh process)",
        ),
        Figure(
            f"6 compaction per settled op: {big:,} / {small:,} ops",
            seconds["whole"] / big * 1e6,
            seconds["small"] / small * 1e6,
            "µs/op",
            Target(high=1.5),
            f"{seconds['whole']:.2f} s for {big:,} ops; linear is ≈ 1",
        ),
        Figure(
            f"6 journaled call: on the compacted {big:,}-op history / on a fresh journal",
            median_of(samples["compacted"]),
            median_of(samples["fresh"]),
            "µs/call",
            Target(high=1.25),
            "the call of figure 2; its cost must not grow with the ops the journal holds",
        ),
    ]


def bench_observer(settings: BenchSettings, scratch: Path, out: Measurements) -> None:
    """Figure 7: the file-system observer's cost to a call, to a life, to the campaign."""
    from harness.chaos.workdir import ram_folder

    if observer.unavailable() is not None:
        raise BenchError(f"no observer: {observer.unavailable()}")
    n = settings.calls
    calls_samples = interleave(
        {
            "observed": _in_scratch(
                scratch, lambda d: observed.journaled_calls(d, n, observed=True)
            ),
            "plain": _in_scratch(scratch, lambda d: observed.journaled_calls(d, n, observed=False)),
        },
        settings.call_repeats,
    )
    lives = settings.cycles
    cycle_samples = interleave(
        {
            "cut": _in_scratch(
                scratch,
                lambda d: cycles.harness_cycles(d, lives, "fork", after_death="power-loss:drop"),
            ),
            "plain": _in_scratch(scratch, lambda d: cycles.harness_cycles(d, lives, "fork")),
        },
        settings.cycle_repeats,
    )
    out.series["observer_call_us"] = calls_samples
    out.series["observer_cycles_per_s"] = cycle_samples
    out.figures += [
        Figure(
            "7 journaled call: observed / not",
            median_of(calls_samples["observed"]),
            median_of(calls_samples["plain"]),
            "µs/call",
            Target(high=2.0),
            f"{n} calls on a fresh journal in a process of its own; each fsync copies the file",
        ),
        Figure(
            "7 cycles: each life observed and cut / plain",
            median_of(cycle_samples["cut"]),
            median_of(cycle_samples["plain"]),
            "cycles/s",
            Target(low=0.5),
            "fork launcher; a power cut rebuilt from the trace after every kill",
        ),
    ]
    if not settings.observer_campaign_runs:
        return
    ram = ram_folder()
    runs = [
        observed.observed_campaign(scratch, ram, observed=on)
        for _ in range(settings.observer_campaign_runs)
        for on in (True, False)
    ]
    out.notes += [
        f"campaign with the observer: did not pass: {t}" for r in runs for t in r.not_passed
    ]
    on = [r for r in runs if r.observed]
    off = [r for r in runs if not r.observed]
    mean = observed.ObservedCampaign.mean
    other_on = mean([ms for r in on for ms in r.other_ms])
    other_off = mean([ms for r in off for ms in r.other_ms])
    cut = mean([ms for r in on for ms in r.power_loss_ms])
    out.series["observer_campaign"] = [
        {
            "observed": r.observed,
            "other_trials": len(r.other_ms),
            "other_mean_ms": mean(r.other_ms),
            "power_loss_trials": len(r.power_loss_ms),
            "power_loss_mean_ms": mean(r.power_loss_ms),
        }
        for r in runs
    ]
    out.figures += [
        Figure(
            "7 trial time, not power loss: observer on / off",
            other_on,
            other_off,
            "ms/trial",
            Target(high=1.1),
            f"the default campaign's {len(on[0].other_ms)} exhaustive trials that are not power "
            "losses, 2 workers",
        ),
        Figure(
            "7 trial time: power loss / the rest",
            cut,
            other_on,
            "ms/trial",
            None,
            f"its {len(on[0].power_loss_ms)} power-loss trials, observed; for information",
        ),
    ]


def bench_restarts(settings: BenchSettings, scratch: Path, out: Measurements) -> None:
    """Figure 8: a long uncompacted journal starts nearly as fast as a short one, a restart
    writes for its open ops only, and compaction's memory follows its output."""
    big, small, running = settings.restart_ops, settings.restart_short_ops, settings.restart_running
    with tempfile.TemporaryDirectory(dir=scratch) as directory:
        root = Path(directory)
        long, short = root / "long", root / "short"
        first_open = {}
        for path, ops in ((long, big), (short, small)):
            path.write_bytes(restarts.uncompacted_journal(ops, running))
            first_open[path.name] = restarts.close_once(path)  # reads every record; indexes
        sizes = {"long": long.stat().st_size, "short": short.stat().st_size}
        starts = interleave(
            {
                "long": lambda: compaction.time_start(long, root).seconds * 1e3,
                "short": lambda: compaction.time_start(short, root).seconds * 1e3,
            },
            settings.restart_repeats,
        )
        first_calls = interleave(
            {
                "long": lambda: restarts.time_first_call(long, root) * 1e3,
                "short": lambda: restarts.time_first_call(short, root) * 1e3,
            },
            settings.restart_repeats,
        )
        again = root / "again"
        shutil.copyfile(long, again)
        first, second = restarts.restart_writes(again), restarts.restart_writes(again)
        again.unlink()
        copy = root / "compacted"
        shutil.copyfile(long, copy)
        memory = restarts.compaction_memory(copy)
        compacted_size = copy.stat().st_size
    mib = 2**20
    out.series["restarts"] = {
        "bytes": sizes,
        "first_open_s": first_open,
        "start_ms": starts,
        "first_call_ms": first_calls,
        "restart_writes": [
            {"records": w.records, "decisions": w.decisions, "bytes": w.bytes}
            for w in (first, second)
        ],
        "compaction_rss_bytes": {
            "before": memory.before,
            "peak": memory.peak,
            "after": memory.after,
        },
        "compacted_bytes": compacted_size,
    }
    out.notes.append(
        f"the {big:,}-op journal ({sizes['long'] / mib:.1f} MiB): its first open under this "
        f"runtime (no index yet) took {first_open['long']:.2f} s; the restarts after it "
        f"wrote {first.records} and {second.records} records ({first.bytes:,} and "
        f"{second.bytes:,} bytes); compacting it: RSS {memory.before / mib:.0f} MiB open, "
        f"{memory.peak / mib:.0f} MiB at the peak, {memory.after / mib:.0f} MiB after"
    )
    out.figures += [
        Figure(
            f"8 open+recover, uncompacted: {big:,}-op journal / {small:,}-op journal",
            median_of(starts["long"]),
            median_of(starts["short"]),
            "ms",
            Target(high=3.0),
            f"{running} ops left running in each; both closed once by the runtime (its "
            f"index); {median_of(starts['long']):.0f} against "
            f"{median_of(starts['short']):.0f} ms",
        ),
        Figure(
            f"8 open+recover+first call, uncompacted: {big:,}-op / {small:,}-op journal",
            median_of(first_calls["long"]),
            median_of(first_calls["short"]),
            "ms",
            None,
            "for information: the first tool waits for the CRC of the bytes the index "
            "covers, which runs beside the start",
        ),
        Figure(
            f"8 second restart of the {big:,}-op journal: decisions written / ops left open",
            float(second.decisions),
            float(running),
            "records",
            Target(high=1.0),
            f"the first restart wrote {first.decisions} decisions: no SKIP for a settled op",
        ),
        Figure(
            f"8 compaction of {big:,} ops: peak memory / the journal's size",
            memory.growth / mib,
            sizes["long"] / mib,
            "MiB",
            Target(high=2.0),
            f"VmHWM over RSS with the journal open; {sizes['long'] / mib:.1f} MiB compacted "
            f"to {compacted_size / mib:.1f} MiB",
        ),
    ]


def bench_threads(settings: BenchSettings, scratch: Path, out: Measurements) -> None:
    """Figure 9: threads on a ``Runtime`` share fsyncs as tasks on an ``AsyncRuntime`` do."""
    callers, calls_each = settings.thread_callers, settings.thread_calls
    rates: dict[str, list[threads.CallRate]] = {"threads": [], "tasks": []}

    def sample(name: str) -> Callable[[], float]:
        measure = threads.threads_rate if name == "threads" else threads.async_rate

        def run() -> float:
            with tempfile.TemporaryDirectory(dir=scratch) as directory:
                rate = measure(Path(directory), callers, calls_each)
            rates[name].append(rate)
            return rate.calls_per_s

        return run

    samples = interleave({name: sample(name) for name in rates}, settings.thread_repeats)
    out.series["threads_calls_per_s"] = samples

    def per_fsync(name: str) -> float:
        return median_of([2 * r.calls / max(1, r.fsyncs) for r in rates[name]])

    def cpu(name: str) -> float:
        return median_of([r.cpu_per_call_us for r in rates[name]])

    out.notes.append(
        f"figure 9: {callers} threads {median_of(samples['threads']):,.0f} calls/s, "
        f"{callers} tasks {median_of(samples['tasks']):,.0f}; durable writes per fsync "
        f"{per_fsync('threads'):.1f} against {per_fsync('tasks'):.1f}; CPU per call "
        f"{cpu('threads'):.0f} us against {cpu('tasks'):.0f} us: a thread's call hands the "
        "GIL and the journal's locks on to the others (futex wakes, system time), a task's "
        "does not, so where the cores are busy the ratio follows the CPU per call"
    )
    out.series["threads_cpu_us_per_call"] = {
        name: [r.cpu_per_call_us for r in rates[name]] for name in rates
    }
    out.figures.append(
        Figure(
            f"9 calls/s, {callers} callers: async tasks / sync threads",
            median_of(samples["tasks"]),
            median_of(samples["threads"]),
            "calls/s",
            Target(high=1.3),
            f"a tool that does nothing; durable writes per fsync: threads "
            f"{per_fsync('threads'):.1f}, tasks {per_fsync('tasks'):.1f}; CPU per call: "
            f"threads {cpu('threads'):.0f} us, tasks {cpu('tasks'):.0f} us (a thread's "
            "call hands the GIL and its locks on, a task's does not: where the cores are "
            "busy, that CPU, not the fsyncs, sets the ratio)",
        )
    )


CRASH_STATES = (1, 4, 16)
"""Figure 10's numbers of crash states, each judged as that many sub-trials."""


def bench_power_loss(settings: BenchSettings, scratch: Path, out: Measurements) -> None:
    """Figure 10: a power-loss trial judged over 1, 4 and 16 crash states / a kill-only trial."""
    if observer.unavailable() is not None:
        raise BenchError(f"no observer: {observer.unavailable()}")
    with tempfile.TemporaryDirectory(dir=scratch) as directory:
        trials = powerloss.PowerLossTrials(Path(directory))
        subjects: dict[str, Callable[[], float]] = {"kill": trials.kill_only_ms}
        for states in CRASH_STATES:
            subjects[f"states-{states}"] = functools.partial(trials.crash_states_ms, states)
        samples = interleave(subjects, settings.power_loss_repeats)
    out.series["power_loss_trial_ms"] = samples
    out.notes.append(
        f"figure 10: the cut after {powerloss.KILL} has {trials.cut_states} crash states"
    )
    kill = median_of(samples["kill"])
    out.figures += [
        Figure(
            f"10 power-loss trial, {states} crash state{'s' if states > 1 else ''} / kill only",
            median_of(samples[f"states-{states}"]),
            kill,
            "ms/trial",
            None,
            f"{powerloss.KILL} then a cut judged as {states} sub-trial{'s' if states > 1 else ''}"
            " (trial --crash-states), against the kill alone; for information",
        )
        for states in CRASH_STATES
    ]


def bench_wire_guard(settings: BenchSettings, scratch: Path, out: Measurements) -> None:
    """Figure 11: an MCP call through the wire guard / the same call made directly."""
    with tempfile.TemporaryDirectory(dir=scratch) as directory:
        calls = wire.WireCalls(Path(directory))
        with calls.open():
            calls.batch("direct", 1)  # both started and warm before any sample
            calls.batch("guarded", 1)
            samples = interleave(
                {
                    "guarded": functools.partial(calls.batch, "guarded", settings.wire_calls),
                    "direct": functools.partial(calls.batch, "direct", settings.wire_calls),
                },
                settings.wire_repeats,
            )
    out.series["wire_call_us"] = samples
    out.figures.append(
        Figure(
            "11 MCP call through the wire guard / direct",
            median_of(samples["guarded"]),
            median_of(samples["direct"]),
            "µs/call",
            Target(high=3.0),
            "stdio both; the guard adds a hop and two fsync'd journal appends per call",
        )
    )


IMPORT_SLOW_S = 1.0
"""A framework whose import takes longer is held to ``WARM_TARGET``."""
WARM_TARGET = Target(low=10.0)


def bench_blackbox(settings: BenchSettings, scratch: Path, out: Measurements) -> None:
    """Figure 12: a black box's start-up, plain / warm, for each example agent that is built."""
    boxes = []
    for name in blackbox.AGENTS:
        runtime = blackbox.built(name)
        if runtime is None:
            out.notes.append(f"figure 12: {name} is not built (make agent-{name}): not measured")
            continue
        boxes.append(blackbox.prepare(name, runtime))
    if not boxes:
        raise BenchError("no example agent is built (make agent-plain_python needs nothing)")
    try:
        subjects: dict[str, Callable[[], float]] = {}
        for box in boxes:
            for launch in ("fork", "warm"):
                subjects[f"{box.name}-{launch}"] = functools.partial(
                    blackbox.startup_ms, box, launch, scratch
                )
        node = blackbox.built(blackbox.NODE)
        if node is not None:  # plain only: there is no warm start for Node
            box = blackbox.BlackBox(blackbox.NODE, node, 0.0)
            subjects["node-fork"] = functools.partial(blackbox.startup_ms, box, "fork", scratch)
        for box in boxes:  # the zygote's start: once per worker, not in a sample
            blackbox.startup_ms(box, "warm", scratch)
        samples = interleave(subjects, settings.blackbox_repeats)
    finally:
        os.environ.pop(blackbox.PLAN_ENV, None)
    out.series["blackbox_startup_ms"] = samples
    # The samples' own (the last ones: the zygote's first life came before them).
    after_start = {k: v[-settings.blackbox_repeats :] for k, v in blackbox.program_ms().items()}
    out.series["blackbox_program_ms"] = after_start
    for box in boxes:
        own = median_of(after_start[f"{box.name}-warm"])
        out.notes.append(
            f"figure 12: {box.name}, warm: {own:.0f} ms of its "
            f"{median_of(samples[f'{box.name}-warm']):.0f} ms are the program's own, from its "
            "fork to its first model request"
        )
    if "node-fork" in samples:
        out.notes.append(
            f"figure 12: the Node agent (TypeScript, no warm start) starts in "
            f"{median_of(samples['node-fork']):.0f} ms, plain"
        )
    for box in boxes:
        slow = box.import_s > IMPORT_SLOW_S
        out.figures.append(
            Figure(
                f"12 black-box start-up: plain / warm ({box.name})",
                median_of(samples[f"{box.name}-fork"]),
                median_of(samples[f"{box.name}-warm"]),
                "ms/life",
                WARM_TARGET if slow else Target(low=1.0),
                f"from the host's ready to the agent's first model request; its zygote "
                f"imported in {box.import_s:.2f} s"
                + ("" if slow else f" (under {IMPORT_SLOW_S:g} s: not held to 10x)"),
            )
        )


def bench_fleet(settings: BenchSettings, scratch: Path, out: Measurements) -> None:
    """Figure 13: the PostgreSQL journal / the file journal, for 1, 8 and 32 workers, a claim
    and a takeover; skipped, with one line, where PostgreSQL is not installed."""
    from harness.chaos.postgres import PostgresServer, PostgresUnavailable, find_binaries

    try:
        find_binaries()
    except PostgresUnavailable as exc:
        out.notes.append(f"figure 13: skipped: {exc}")
        return
    # Both stores on the same disk: the bench's, where the server's user (not root, when
    # the bench runs as root) may pass through its folders; else both in RAM.
    with contextlib.ExitStack() as stack:
        where = scratch
        if os.geteuid() == 0 and not _passable(scratch.parent):
            where = Path(stack.enter_context(tempfile.TemporaryDirectory(dir="/dev/shm")))
            out.notes.append(
                f"figure 13: both stores in /dev/shm: PostgreSQL's user cannot pass through "
                f"{scratch.parent}"
            )
        where.chmod(0o711)
        server = stack.enter_context(PostgresServer.start(base=where))
        url = server.create_database("bench_fleet")
        files = where / "fleet-journals"
        files.mkdir()
        stores = {"postgres": url, "file": str(files)}
        rates: dict[str, list[fleet.FleetRate]] = {}
        subjects: dict[str, Callable[[], float]] = {}
        for workers in settings.fleet_workers:
            for store, journals in stores.items():
                name = f"{store}-{workers}"
                rates[name] = []

                def sample(name: str = name, journals: str = journals, n: int = workers) -> float:
                    rate = fleet.workers_rate(journals, n, settings.fleet_calls)
                    rates[name].append(rate)
                    return rate.calls_per_s

                subjects[name] = sample
        samples = interleave(subjects, settings.fleet_repeats)
        costs = interleave(
            {
                f"{what}-{store}": functools.partial(measure, journals)
                for what, measure in (("claim", fleet.claim_ms), ("takeover", fleet.takeover_ms))
                for store, journals in stores.items()
            },
            settings.claim_repeats,
        )
    out.series["fleet_calls_per_s"] = samples
    out.series["fleet_claim_ms"] = costs

    def tail(name: str) -> str:
        every = fleet.FleetRate(0.0, tuple(x for r in rates[name] for x in r.latencies_us))
        return f"p50 {every.p50_us:,.0f} us, p99 {every.p99_us:,.0f} us"

    for workers in settings.fleet_workers:
        pg, file = f"postgres-{workers}", f"file-{workers}"
        out.notes.append(
            f"figure 13: {workers} worker(s): PostgreSQL {median_of(samples[pg]):,.0f} calls/s "
            f"({tail(pg)}), file journal {median_of(samples[file]):,.0f} calls/s ({tail(file)})"
        )
        out.figures.append(
            Figure(
                f"13 journaled calls/s, {workers} worker{'s' if workers > 1 else ''}: "
                "PostgreSQL / file journal",
                median_of(samples[pg]),
                median_of(samples[file]),
                "calls/s",
                None,
                f"a task per worker, a tool that does nothing; PostgreSQL {tail(pg)}; "
                f"file {tail(file)}; for information",
            )
        )
    for what, said in (
        ("claim", "a new task's journal opened and closed"),
        ("takeover", f"a task of {fleet.TAKEOVER_CALLS} calls let go, claimed, read, recovered"),
    ):
        out.figures.append(
            Figure(
                f"13 {what}: PostgreSQL / file journal",
                median_of(costs[f"{what}-postgres"]),
                median_of(costs[f"{what}-file"]),
                "ms",
                None,
                f"{said}; for information",
            )
        )


def _passable(folder: Path) -> bool:
    """Whether every folder from the root to ``folder`` lets other users through."""
    return all(os.stat(f).st_mode & 0o001 for f in (folder, *folder.parents))


STEPS = (
    "cycle rate",
    "journaled call cost",
    "batch of calls",
    "failpoint cost",
    "agent start-up",
    "recovery planning",
    "campaigns",
    "compaction",
    "observer",
    "restarts",
    "threads",
    "crash states",
    "wire guard",
    "black-box start-up",
    "fleet",
)
"""The measurements, in the order they run (``only`` picks some by these names)."""


def run_bench(
    settings: BenchSettings,
    out_dir: Path,
    console: Console,
    *,
    run_id: str | None = None,
    only: frozenset[str] | None = None,
) -> BenchReport:
    """Measure every figure, or those of the steps ``only`` names (progress to ``console``);
    the report is not written here."""
    run_id = run_id or time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    out_dir.mkdir(parents=True, exist_ok=True)
    collected = Measurements()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".scratch-") as directory:
        scratch = Path(directory)
        steps: list[tuple[str, Callable[[], None]]] = [
            ("cycle rate", lambda: bench_cycles(settings, scratch, collected)),
            ("journaled call cost", lambda: bench_journaled_call(settings, scratch, collected)),
            ("batch of calls", lambda: bench_batch(settings, scratch, collected)),
            ("failpoint cost", lambda: bench_failpoint(settings, collected)),
            ("agent start-up", lambda: bench_startup(settings, scratch, collected)),
            ("recovery planning", lambda: bench_planning(settings, collected)),
            ("campaigns", lambda: bench_campaigns(settings, scratch, collected)),
            ("compaction", lambda: bench_compaction(settings, scratch, collected)),
            ("observer", lambda: bench_observer(settings, scratch, collected)),
            ("restarts", lambda: bench_restarts(settings, scratch, collected)),
            ("threads", lambda: bench_threads(settings, scratch, collected)),
            ("crash states", lambda: bench_power_loss(settings, scratch, collected)),
            ("wire guard", lambda: bench_wire_guard(settings, scratch, collected)),
            ("black-box start-up", lambda: bench_blackbox(settings, scratch, collected)),
            ("fleet", lambda: bench_fleet(settings, scratch, collected)),
        ]
        assert [name for name, _ in steps] == list(STEPS)
        for title, step in steps:
            if only is not None and title not in only:
                continue
            started = time.monotonic()
            console.print(f"[dim]measuring {title}...[/dim]", end="")
            try:
                step()
            except BenchError as exc:  # the other figures still stand
                collected.broken.append(f"{title}: {exc}")
                console.print(f" [red]broken: {exc}[/red]")
                continue
            console.print(f"[dim] {time.monotonic() - started:.1f} s[/dim]")
    load_end = os.getloadavg()
    # Other work on the machine shows in every figure; the interleaving spreads
    # it over subject and baseline alike, but a reader should know it was there.
    collected.notes.append(
        f"load average (1 min) {load_start[0]:.2f} at start, {load_end[0]:.2f} at end, "
        f"on {os.cpu_count()} cores"
    )
    machine = {**machine_info(), "load_average_start": load_start, "load_average_end": load_end}
    return BenchReport(
        run_id,
        machine,
        tuple(collected.figures),
        collected.series,
        tuple(collected.notes),
        tuple(collected.broken),
    )
