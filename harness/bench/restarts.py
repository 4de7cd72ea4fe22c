"""Figure 8, a long journal's restarts: start-up, what a restart writes, compaction's memory.

``uncompacted_journal`` builds in memory the journal a runtime leaves after
``ops`` calls (an intent and a finish each, arguments and results of about 200
bytes, a life every 1,000 ops with its start's records), with ``running`` calls
left running at the end (an unsafe tool: recovery hands them to the model).
``close_once`` then opens and closes it with ``Runtime.open`` as any life
would, which appends the ops index a close writes, and returns the seconds that
first open took (it reads every record: the journal's first start under this
runtime). Each measured start is a fresh process on a fresh copy, fsynced before it
is timed, as in figure 6: ``compaction.time_start``.

``restart_writes`` counts what two restarts in a row append (records and bytes,
from the listener's ``Appended`` events). ``compaction_memory`` compacts a copy
in a fresh process and reports its peak RSS (``VmHWM``) over what the process
held once the journal was open.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.bench.compaction import durable_copy
from harness.bench.figures import BenchError
from harness.runtime.classes import ToolTable
from harness.runtime.compaction import Compaction
from harness.runtime.journal import FILE_HEADER, Appended, JournalEvent, encode_frame
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

__all__ = [
    "CompactionMemory",
    "RestartWrites",
    "close_once",
    "compaction_memory",
    "restart_writes",
    "time_first_call",
    "uncompacted_journal",
]

_TEXT = "x" * 150
_LIFE = 1_000


def uncompacted_journal(ops: int, running: int = 10) -> bytes:
    """The journal of ``ops`` settled calls and ``running`` left running, as a runtime
    writes it (no SKIP for a settled op), a life every 1,000 ops."""
    table = ToolTable.shipped()
    settled, unsafe = table.classify("write_file"), table.classify("ui_tap")
    frames = [encode_frame(JournalIdRecord("0123456789abcdef0123456789abcdef"))]
    life = 0
    for op in range(ops + running):
        if op % _LIFE == 0:
            if life:
                frames.append(encode_frame(RecoveredRecord(life, 0)))
            life += 1
            frames.append(encode_frame(IncarnationRecord(life, 1000 + life)))
        op_id = f"op{op:07d}"
        args = {"path": f"/notes/{op}.md", "content": _TEXT}
        snapshot = settled if op < ops else unsafe
        tool = "write_file" if op < ops else "ui_tap"
        frames.append(
            encode_frame(IntentRecord(op_id, tool, snapshot, args, digest(args), 1, life))
        )
        if op < ops:
            result = {"ok": True, "bytes": len(_TEXT), "echo": _TEXT[:100]}
            frames.append(encode_frame(FinishRecord(op_id, True, result, digest(result), 1, life)))
    return FILE_HEADER + b"".join(frames)


def close_once(path: Path) -> float:
    """Open the journal with the runtime and close it (its index written); the seconds the
    open took."""
    import time

    started = time.perf_counter()
    runtime = Runtime.open(path, compaction=Compaction.never())
    seconds = time.perf_counter() - started
    runtime.close()
    return seconds


@dataclass(frozen=True, slots=True)
class RestartWrites:
    """What a restart (open, recover, close) appended: records by kind, and bytes."""

    records: int
    decisions: int
    bytes: int


def restart_writes(path: Path) -> RestartWrites:
    """Open, recover and close the journal once; what that appended."""
    written: list[Appended] = []

    def listen(event: JournalEvent) -> None:
        if isinstance(event, Appended):
            written.append(event)

    with Runtime.open(
        path, table=ToolTable.shipped(), listener=listen, compaction=Compaction.never()
    ) as runtime:
        runtime.recover(lambda tool, args, ctx: None)
    records = [r for w in written for r in w.records]
    return RestartWrites(
        len(records),
        sum(isinstance(r, DecisionRecord) for r in records),
        sum(w.end - w.offset for w in written),
    )


_COMPACT = """
import json, sys
from harness.runtime import Compaction, Runtime

def rss(field):
    with open("/proc/self/status") as status:
        return [int(line.split()[1]) for line in status if line.startswith(field)][0] * 1024

runtime = Runtime.open(sys.argv[1], compaction=Compaction.never())
before = rss("VmRSS:")
runtime.compact()
print(json.dumps({"before": before, "peak": rss("VmHWM:"), "after": rss("VmRSS:")}))
runtime.close()
"""


@dataclass(frozen=True, slots=True)
class CompactionMemory:
    """Bytes: the process's RSS with the journal open, its peak while compacting, and its
    RSS right after."""

    before: int
    peak: int
    after: int

    @property
    def growth(self) -> int:
        return self.peak - self.before


def compaction_memory(journal: Path) -> CompactionMemory:
    """Compact ``journal`` (a copy the caller made) in a fresh process."""
    if not Path("/proc/self/status").exists():
        raise BenchError("compaction memory: no /proc/self/status on this system")
    done = subprocess.run(
        [sys.executable, "-c", _COMPACT, str(journal)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if done.returncode != 0:
        raise BenchError(f"compaction of {journal.name} exited {done.returncode}: {done.stderr}")
    data = json.loads(done.stdout)
    return CompactionMemory(int(data["before"]), int(data["peak"]), int(data["after"]))


_FIRST_CALL = """
import json, sys, time
from harness.runtime import Compaction, Runtime
started = time.perf_counter()
runtime = Runtime.open(sys.argv[1], compaction=Compaction.never())
runtime.recover(lambda tool, args, ctx: None)
outcome = runtime.call("first-new-call", "write_file", {}, lambda tool, args, ctx: {})
seconds = time.perf_counter() - started
assert outcome.ok, outcome
runtime.close()
print(json.dumps({"seconds": seconds}))
"""


def time_first_call(journal: Path, scratch: Path) -> float:
    """Seconds a fresh process takes to open a copy of ``journal``, recover, and run one new
    call (its tool waits for the CRC of the bytes an ops index covers)."""
    import time

    copy = scratch / f"first-call-{time.monotonic_ns()}.journal"
    durable_copy(journal, copy)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _FIRST_CALL, str(copy)],
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        copy.unlink(missing_ok=True)
    if done.returncode != 0:
        raise BenchError(f"a first call on {journal.name} exited {done.returncode}: {done.stderr}")
    return float(json.loads(done.stdout)["seconds"])
