"""Figure 5, scaling: campaign size, workers, journal size, memory.

- Campaign rate: trials per second of a whole ``run_trials`` (golden runs
  included: each random trial has a seed, so a golden run, of its own) on
  ``tests/data/scenarios/mini.toml``, random trials only, at a small and a big
  size. Flat means the cost of a trial does not grow with the campaign.
- Workers: the same small campaign with 2 workers and with 1.
- RAM against disk: the default campaign's exhaustive trials (every shipped
  scenario of ``scenarios/``, as ``make chaos`` runs them but without its 200
  random trials, so both sides run the very same trials) in a RAM folder and in
  the run folder on disk (``run_default_campaign``).
- Recovery planning: journals of 10 to 100,000 records (intents and finishes
  of fake ops, one in ten left running) built in memory, then ``scan_bytes``,
  ``fold`` and ``plan_recovery`` timed; time per record at each size.
- Memory: the RSS of the pool workers (the processes that run the
  ``Supervisor``) when the campaign's last result comes in.
"""

from __future__ import annotations

import functools
import resource
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from harness.bench.figures import BenchError, interleave, median_of
from harness.runtime.classes import ToolTable
from harness.runtime.journal import FILE_HEADER, encode_frame, scan_bytes
from harness.runtime.records import FinishRecord, IntentRecord, Record, digest
from harness.runtime.recovery import fold, plan_recovery

__all__ = [
    "MINI_SCENARIO",
    "CampaignRun",
    "PlanningPoint",
    "run_campaign",
    "run_default_campaign",
    "synthetic_journal",
    "time_planning",
]

MINI_SCENARIO = Path(__file__).resolve().parents[2] / "tests" / "data" / "scenarios" / "mini.toml"
SHIPPED_SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
CAMPAIGN_SEED = 20261203


@dataclass(frozen=True, slots=True)
class CampaignRun:
    trials: int
    workers: int
    seconds: float
    worker_rss: int
    """The largest pool worker's RSS (bytes) when the last result came in."""
    not_passed: tuple[str, ...] = ()
    """Trials that did not pass, each with its replay command: a finding, not a timing error."""
    cpu_seconds: float = 0.0
    """CPU time of this process and every descendant it reaped (workers, fork servers, agents)."""
    workdir: Path | None = None
    """Where its trials ran (a RAM folder), or None: on disk, in the run folder."""

    @property
    def cpu_busy(self) -> float:
        """CPU time over wall time: 1.0 is one core busy all along."""
        return self.cpu_seconds / self.seconds

    @property
    def trials_per_s(self) -> float:
        return self.trials / self.seconds


def run_campaign(
    scratch: Path, trials: int, workers: int, workdir: Path | None = None
) -> CampaignRun:
    """``trials`` random trials in a fresh folder under ``scratch``, removed afterwards;
    run under ``workdir`` (as ``chaos`` runs them in RAM), or on disk in that folder."""
    from harness.chaos.campaign import CampaignConfig, run_trials
    from harness.chaos.trial import TrialResult, TrialSpec

    if not MINI_SCENARIO.is_file():
        raise BenchError(f"{MINI_SCENARIO}: the campaign scenario is missing")
    me = psutil.Process()
    planned: list[int] = []
    seen = 0
    rss = 0
    failed: list[str] = []

    def on_plan(count: int) -> None:
        planned.append(count)

    def on_result(result: TrialResult) -> None:
        nonlocal seen, rss
        seen += 1
        if result.status != "pass":
            failed.append(
                f"{result.spec.trial_id} ({result.status}: "
                f"{', '.join(result.failed_invariants) or 'unknown'}): "
                f"{result.spec.replay_command()}"
            )
        if planned and seen == planned[0]:
            rss = max((_rss(child) for child in me.children()), default=0)

    def random_only(spec: TrialSpec) -> bool:
        return spec.kind == "random"

    with tempfile.TemporaryDirectory(dir=scratch, prefix="campaign-") as run_dir:
        config = CampaignConfig(
            Path(run_dir),
            (str(MINI_SCENARIO),),
            CAMPAIGN_SEED,
            random_trials=trials,
            workers=workers,
            workdir=workdir,
        )
        cpu_before = _cpu_seconds()
        started = time.perf_counter_ns()
        run_trials(config, on_result, on_plan=on_plan, select=random_only)
        seconds = (time.perf_counter_ns() - started) / 1e9
        cpu = _cpu_seconds() - cpu_before
    if seen != trials:
        raise BenchError(f"campaign of {trials} random trials ran {seen}")
    return CampaignRun(trials, workers, seconds, rss, tuple(failed), cpu, workdir)


def run_default_campaign(scratch: Path, workdir: Path | None) -> CampaignRun:
    """The exhaustive trials of every shipped scenario, with 2 workers, in a fresh folder
    under ``scratch`` (removed afterwards): under ``workdir`` or, when None, on disk."""
    from harness.chaos.campaign import CampaignConfig, run_trials
    from harness.chaos.scenario import load_scenarios
    from harness.chaos.trial import TrialResult

    scenarios = tuple(s.source for s in load_scenarios(SHIPPED_SCENARIOS))
    results: list[TrialResult] = []
    with tempfile.TemporaryDirectory(dir=scratch, prefix="default-") as run_dir:
        config = CampaignConfig(
            Path(run_dir), scenarios, CAMPAIGN_SEED, 0, 2, workdir=workdir, keep="sample"
        )
        cpu_before = _cpu_seconds()
        started = time.perf_counter_ns()
        run_trials(config, results.append)
        seconds = (time.perf_counter_ns() - started) / 1e9
        cpu = _cpu_seconds() - cpu_before
    failed = tuple(
        f"{r.spec.trial_id} ({r.status}): {r.spec.replay_command()}"
        for r in results
        if r.status != "pass"
    )
    return CampaignRun(len(results), 2, seconds, 0, failed, cpu, workdir)


def _cpu_seconds() -> float:
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def _rss(process: psutil.Process) -> int:
    try:
        return int(process.memory_info().rss)
    except psutil.Error:
        return 0


# -- recovery planning -------------------------------------------------------------------


def synthetic_journal(records: int) -> bytes:
    """A journal of exactly ``records`` frames: intents and finishes, every tenth left running."""
    table = ToolTable.shipped()
    tools = ("write_file", "ui_tap", "shell_execute", "read_file")
    snapshots = {tool: table.classify(tool) for tool in tools}
    result = {"ok": True}
    args_digest, result_digest = digest({"path": "/x"}), digest(result)
    frames: list[bytes] = []
    op = 0
    while len(frames) < records:
        op_id, tool = f"op{op:06d}", tools[op % len(tools)]
        intent: Record = IntentRecord(
            op_id, tool, snapshots[tool], {"path": f"/x/{op}"}, args_digest, 1, 1
        )
        frames.append(encode_frame(intent))
        if len(frames) < records and op % 10 != 9:
            finish: Record = FinishRecord(op_id, True, result, result_digest, 1, 1)
            frames.append(encode_frame(finish))
        op += 1
    return FILE_HEADER + b"".join(frames)


@dataclass(frozen=True, slots=True)
class PlanningPoint:
    """Time per record at one journal size (median over samples)."""

    records: int
    scan_us: float
    plan_us: float

    @property
    def total_us(self) -> float:
        return self.scan_us + self.plan_us

    def to_json(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "scan_us_per_record": self.scan_us,
            "fold_plan_us_per_record": self.plan_us,
            "total_us_per_record": self.total_us,
        }


def time_planning(
    sizes: Sequence[int], *, records_per_sample: int, repeats: int
) -> list[PlanningPoint]:
    """Scan, fold and plan journals of each size; a sample repeats a size up to
    ``records_per_sample`` records, so small journals are timed over many runs."""
    journals = {size: synthetic_journal(size) for size in sizes}
    scan_samples: dict[int, list[float]] = {size: [] for size in sizes}

    def measure(size: int) -> float:
        data, runs = journals[size], max(1, records_per_sample // size)
        scan_ns = plan_ns = 0
        for _ in range(runs):
            started = time.perf_counter_ns()
            scan = scan_bytes(data, source="<bench>")
            scanned = time.perf_counter_ns()
            plan_recovery(fold(s.record for s in scan.records))
            plan_ns += time.perf_counter_ns() - scanned
            scan_ns += scanned - started
            if len(scan.records) != size:
                raise BenchError(f"planning: scanned {len(scan.records)} of {size} records")
        scan_samples[size].append(scan_ns / 1e3 / (runs * size))
        return plan_ns / 1e3 / (runs * size)

    plan_samples = interleave(
        {str(size): functools.partial(measure, size) for size in sizes}, repeats
    )
    return [
        PlanningPoint(size, median_of(scan_samples[size]), median_of(plan_samples[str(size)]))
        for size in sizes
    ]
