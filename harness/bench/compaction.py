"""Figure 6, a start-up that stays flat: a long history, compacted, against a short journal.

A long-lived agent's journal: per op an intent, a finish and the SKIP a later
start journaled for it (arguments and results of about 200 bytes each), a
life every 1,000 ops. ``history_journal`` builds it in memory, as the
journal of an agent that ran so many ops would hold it. Each start is a fresh
process (``python -c``) that opens the journal with ``Runtime.open`` and
recovers it, and reports the seconds both took (imports left out) and its peak
RSS (``VmHWM``; ``ru_maxrss`` where there is no ``/proc``): the memory a
restarted agent pays. Every sample starts from a fresh copy of the journal,
so each is a first start on it; the copy is fsynced before the start is
timed (``durable_copy``), as the journal a restarted agent finds is: else the
start's first fsync would also write out the copy's pages, tens of MB for a
long journal and a few hundred kB for a short one. A start on
the compacted history reads its index and one CRC over its settled block, not
its settled records (``harness.runtime.settled``): what it pays per op is the
CRC's bytes and the index, not decoding.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.bench.figures import BenchError
from harness.runtime.classes import ToolTable
from harness.runtime.compaction import Compaction, Retention
from harness.runtime.journal import FILE_HEADER, encode_frame, new_journal_id
from harness.runtime.matrix import Decision, OpState
from harness.runtime.records import (
    DecisionRecord,
    FinishRecord,
    IncarnationRecord,
    IntentRecord,
    JournalIdRecord,
    RecoveredRecord,
    digest,
)
from harness.runtime.runtime import Runtime

__all__ = ["StartSample", "compact_journal", "durable_copy", "history_journal", "time_start"]

_TEXT = "x" * 150
_LIFE = 1_000
"""Ops per life of the history."""

_START = """
import json, resource, sys, time
from harness.runtime import Compaction, Runtime
started = time.perf_counter()
runtime = Runtime.open(sys.argv[1], compaction=Compaction.never())
runtime.recover(lambda tool, args, ctx: None)
seconds = time.perf_counter() - started
runtime.close()
# VmHWM: this process's own peak (ru_maxrss on Linux keeps the parent's across exec).
with open("/proc/self/status") as status:
    peak = [int(line.split()[1]) for line in status if line.startswith("VmHWM:")]
rss = peak[0] if peak else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "max_rss_kib": rss}))
"""


def history_journal(ops: int) -> bytes:
    """The journal of ``ops`` settled ops, three records each, a life every 1,000 ops."""
    snapshot = ToolTable.shipped().classify("write_file")
    frames = [encode_frame(JournalIdRecord(new_journal_id()))]
    life = 0
    for op in range(ops):
        if op % _LIFE == 0:
            life += 1
            frames.append(encode_frame(IncarnationRecord(life, 1000 + life)))
        op_id = f"op{op:07d}"
        args = {"path": f"/notes/{op}.md", "content": _TEXT}
        result = {"ok": True, "bytes": len(_TEXT), "echo": _TEXT[:100]}
        frames.append(
            encode_frame(IntentRecord(op_id, "write_file", snapshot, args, digest(args), 1, life))
        )
        frames.append(encode_frame(FinishRecord(op_id, True, result, digest(result), 1, life)))
        frames.append(
            encode_frame(DecisionRecord(op_id, OpState.SUCCEEDED, snapshot, Decision.SKIP, life))
        )
        if op % _LIFE == _LIFE - 1:
            frames.append(encode_frame(RecoveredRecord(life, _LIFE)))
    return FILE_HEADER + b"".join(frames)


def compact_journal(path: Path, retention: Retention | None = None) -> float:
    """Compact the journal at ``path`` in place; the seconds ``Runtime.compact`` took."""
    policy = Compaction.never(retention)
    with Runtime.open(path, compaction=policy) as runtime:
        started = time.perf_counter()
        runtime.compact()
        return time.perf_counter() - started


@dataclass(frozen=True, slots=True)
class StartSample:
    seconds: float
    max_rss: int
    """Bytes."""


def durable_copy(journal: Path, copy: Path) -> None:
    """Copy ``journal`` to ``copy`` and fsync it: on disk and in the page cache, as the
    journal of an agent that restarts is."""
    shutil.copyfile(journal, copy)
    fd = os.open(copy, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def time_start(journal: Path, scratch: Path) -> StartSample:
    """One fresh process's open and recovery of a durable copy of ``journal``."""
    copy = scratch / f"start-{time.monotonic_ns()}.journal"
    durable_copy(journal, copy)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _START, str(copy)],
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        copy.unlink(missing_ok=True)
    if done.returncode != 0:
        raise BenchError(f"a start on {journal.name} exited {done.returncode}: {done.stderr}")
    data = json.loads(done.stdout)
    return StartSample(float(data["seconds"]), int(data["max_rss_kib"]) * 1024)
