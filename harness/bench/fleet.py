"""Figure 13: the PostgreSQL journal against the file journal, for a fleet of workers.

- Calls per second: ``workers`` processes, each with a task of its own (its own
  journal), make ``calls`` journaled calls of a tool that does nothing, all
  started together once every worker holds its claim. The rate is every call
  over the time from the first worker's first call to the last worker's last;
  p50 and p99 are of every call's own latency. On PostgreSQL every write is a
  transaction that checks the worker's token; on the file journal an fsync'd
  append.
- A claim: opening a new task's journal (PostgreSQL: the claim's transaction; a
  file: its lock and its fsync'd header) and closing it.
- A takeover: opening a task of ``TAKEOVER_CALLS`` settled calls whose last
  holder is gone (PostgreSQL: its lease ended, a new token taken; a file: its
  lock let go, as a death does), reading it and recovering it.

Both stores keep their files on the same disk (the PostgreSQL cluster is made
under the bench's scratch folder), so both pay that disk's fsync.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.bench.figures import BenchError
from harness.runtime import CallContext, Runtime, ToolTable
from harness.runtime.classes import IdempotencyClass
from harness.runtime.postgres import PostgresJournal

__all__ = ["TAKEOVER_CALLS", "FleetRate", "claim_ms", "run_worker", "takeover_ms", "workers_rate"]

TABLE = ToolTable({"pay": IdempotencyClass.NON_IDEMPOTENT}, source="<bench>")
TAKEOVER_CALLS = 20


@dataclass(frozen=True, slots=True)
class FleetRate:
    """One sample of ``workers_rate``."""

    calls_per_s: float
    latencies_us: tuple[float, ...]

    @property
    def p50_us(self) -> float:
        return float(statistics.median(self.latencies_us))

    @property
    def p99_us(self) -> float:
        ordered = sorted(self.latencies_us)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _nothing(tool: str, args: Mapping[str, Any], ctx: CallContext) -> None:
    return None


def _open(journal: str) -> Runtime:
    if journal.startswith("postgresql://"):
        return Runtime.open(PostgresJournal.open(journal), table=TABLE)
    return Runtime.open(journal, table=TABLE)


def workers_rate(journals: str, workers: int, calls: int) -> FleetRate:
    """``workers`` processes of this module, ``calls`` calls each (see the docstring);
    ``journals`` is a URL (a task's journal is ``&journal=<task>`` on it) or a folder."""
    tasks = [f"bench_{uuid.uuid4().hex[:12]}" for _ in range(workers)]
    where = [
        f"{journals}&journal={t}" if journals.startswith("postgresql://") else f"{journals}/{t}"
        for t in tasks
    ]
    processes = [  # started by -c: a module run by -m would be imported twice
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, journal, str(calls)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for journal in where
    ]
    try:
        for process in processes:  # each holds its claim
            assert process.stdout is not None
            if process.stdout.readline().strip() != "ready":
                raise BenchError(f"a bench worker did not open its journal (exit {process.wait()})")
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        reports = []
        for process in processes:
            out, _ = process.communicate(timeout=600)
            if process.returncode != 0:
                raise BenchError(f"a bench worker failed (exit {process.returncode})")
            reports.append(json.loads(out))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    first = min(r["start"] for r in reports)
    last = max(r["end"] for r in reports)
    latencies = tuple(x for r in reports for x in r["latencies_us"])
    return FleetRate(len(latencies) / (last - first), latencies)


def claim_ms(journals: str) -> float:
    """Open a new task's journal, then close it (one sample, ms)."""
    task = f"claim_{uuid.uuid4().hex[:12]}"
    started = time.perf_counter()
    if journals.startswith("postgresql://"):
        PostgresJournal.open(f"{journals}&journal={task}").close()
    else:
        Runtime.open(f"{journals}/{task}", table=TABLE).close()
    return (time.perf_counter() - started) * 1000


def takeover_ms(journals: str) -> float:
    """A task of ``TAKEOVER_CALLS`` settled calls is made and let go (a closed PostgreSQL
    journal ends its lease), then, timed, claimed again, read and recovered (one sample,
    ms)."""
    task = f"takeover_{uuid.uuid4().hex[:12]}"
    pg = journals.startswith("postgresql://")
    journal = f"{journals}&journal={task}" if pg else f"{journals}/{task}"
    with _open(journal) as runtime:
        for n in range(TAKEOVER_CALLS):
            runtime.call(f"s{n}", "pay", {"n": n}, _nothing)
    started = time.perf_counter()
    runtime = _open(journal)
    runtime.recover(_nothing)
    elapsed = time.perf_counter() - started
    runtime.close()
    return elapsed * 1000


_WORKER = (
    "import sys; from harness.bench.fleet import run_worker; "
    "sys.exit(run_worker(sys.argv[1], int(sys.argv[2])))"
)


def run_worker(journal: str, calls: int) -> int:
    """A bench worker: open ``journal``, say ``ready``, wait for a line, make ``calls``
    calls, print their times as JSON."""
    runtime = _open(journal)
    print("ready", flush=True)
    sys.stdin.readline()
    latencies = []
    start = time.time()
    for n in range(calls):
        began = time.perf_counter()
        runtime.call(f"s{n}", "pay", {"n": n}, _nothing)
        latencies.append((time.perf_counter() - began) * 1e6)
    end = time.time()
    runtime.close()
    print(json.dumps({"start": start, "end": end, "latencies_us": latencies}), flush=True)
    return 0
