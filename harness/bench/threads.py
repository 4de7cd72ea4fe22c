"""Figure 9, group commit: calls per second of threads sharing a ``Runtime`` against
tasks sharing an ``AsyncRuntime``.

Each side makes ``callers`` callers (threads on the ``Runtime``, tasks on the
``AsyncRuntime``), each making calls one after another of a tool that does
nothing, on a fresh journal: the journal's cost alone, with every intent and
every finish durable before the call goes on. Appends that callers make
together share one fsync on both sides (``JournalWriter.write``/``settle``
for threads, ``JournalPump`` for tasks). Each sample is one run's calls per
second; the fsyncs it took are counted from the listener's ``Synced`` events,
and the CPU it took (user and system, ``os.times``) is kept beside it: on a
machine whose cores are busy, CPU per call decides the rate as much as the
fsyncs do.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.bench.figures import BenchError
from harness.runtime.aio import AsyncRuntime
from harness.runtime.executor import CallContext
from harness.runtime.journal import JournalEvent, Synced
from harness.runtime.runtime import Runtime

__all__ = ["CallRate", "async_rate", "threads_rate"]

_TOOL = "write_file"


@dataclass(frozen=True, slots=True)
class CallRate:
    calls_per_s: float
    fsyncs: int
    calls: int
    cpu_s: float = 0.0
    """The process's CPU time (user and system) over the run, every thread's."""

    @property
    def cpu_per_call_us(self) -> float:
        return self.cpu_s / max(1, self.calls) * 1e6


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def _nothing(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
    return {"path": args["path"]}


class _FsyncCount:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, event: JournalEvent) -> None:
        if isinstance(event, Synced):
            self.count += 1


def threads_rate(root: Path, callers: int, calls: int) -> CallRate:
    """``callers`` threads on one ``Runtime``, ``calls`` calls each."""
    syncs = _FsyncCount()
    with Runtime.open(root / "journal", listener=syncs) as runtime:
        runtime.recover(_nothing)
        start = threading.Barrier(callers + 1)
        failed: list[str] = []

        def caller(n: int) -> None:
            start.wait()
            for k in range(calls):
                op_id = f"t{n}-{k}"
                outcome = runtime.call(op_id, _TOOL, {"path": f"/{op_id}"}, _nothing)
                if not outcome.ok:
                    failed.append(f"{op_id}: {outcome.status}")

        threads = [threading.Thread(target=caller, args=(n,)) for n in range(callers)]
        for thread in threads:
            thread.start()
        before = syncs.count
        start.wait()
        started, cpu = time.perf_counter(), _cpu()
        for thread in threads:
            thread.join()
        seconds, cpu = time.perf_counter() - started, _cpu() - cpu
    if failed:
        raise BenchError(f"threaded calls: {failed[0]}")
    return CallRate(callers * calls / seconds, syncs.count - before, callers * calls, cpu)


def async_rate(root: Path, callers: int, calls: int) -> CallRate:
    """``callers`` tasks on one ``AsyncRuntime``, ``calls`` calls each."""
    syncs = _FsyncCount()

    async def run() -> tuple[float, int, float]:
        async with await AsyncRuntime.open(root / "journal", listener=syncs) as runtime:
            await runtime.recover(_nothing)
            before = syncs.count

            async def caller(n: int) -> None:
                for k in range(calls):
                    op_id = f"a{n}-{k}"
                    outcome = await runtime.call(op_id, _TOOL, {"path": f"/{op_id}"}, _nothing)
                    if not outcome.ok:
                        raise BenchError(f"async calls: {op_id}: {outcome.status}")

            started, cpu = time.perf_counter(), _cpu()
            await asyncio.gather(*(caller(n) for n in range(callers)))
            return time.perf_counter() - started, syncs.count - before, _cpu() - cpu

    seconds, fsyncs, cpu = asyncio.run(run())
    return CallRate(callers * calls / seconds, fsyncs, callers * calls, cpu)
