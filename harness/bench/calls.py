"""Figures 2 and 3: what the runtime adds to one call, in process.

- Journaled call: one ``Runtime.call`` (a real journal, intent and finish
  each fsync'd) of a tool that makes one SQLite ``synchronous=FULL`` commit on
  a WAL database, like the world's, against the same durability by hand: two
  fsync'd appends of about the size of the runtime's frames around the same
  commit. Measured in batches; each sample is a batch's mean per call.
- Batch: ``size`` calls issued together on an ``AsyncRuntime`` (their intents
  share one write and one fsync, their finishes another) against the same
  calls one after another on the ``Runtime``, of a tool that does nothing: the
  journal's cost alone (a tool's own work costs the same either way), what
  group commit saves when a model issues several calls in one turn. Measured
  in rounds of one batch; each sample is a run's mean per call.
- Failpoint: an unarmed ``failpoint("op.after_effect", "s001")`` against an
  empty function of two arguments, in the same timeit-style loop (the loop's
  own cost is in both).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.bench.figures import BenchError
from harness.failpoints import hit_counts
from harness.runtime.aio import AsyncRuntime
from harness.runtime.executor import CallContext, CallOutcome
from harness.runtime.hooks import failpoint
from harness.runtime.runtime import Runtime

__all__ = ["BatchedCalls", "JournaledCalls", "RawCalls", "empty_call_loop", "failpoint_loop"]

_TOOL = "write_file"  # an idempotent write: its intent carries a class snapshot
_INSERT = "INSERT INTO effects (op, body) VALUES (?, ?)"


def _open_db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS effects (id INTEGER PRIMARY KEY, op TEXT, body TEXT)")
    return db


def _commit(db: sqlite3.Connection, op_id: str, body: str) -> None:
    db.execute("BEGIN IMMEDIATE")
    db.execute(_INSERT, (op_id, body))
    db.execute("COMMIT")


class JournaledCalls:
    """``Runtime.call`` on a fresh journal, one SQLite commit per call; close when done."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._db = _open_db(root / "world.db")
        self._runtime = Runtime.open(root / "journal")
        self._next = 0

    def _tool(self, tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        _commit(self._db, ctx.op_id, str(args["content"]))
        return {"path": args["path"], "bytes": len(str(args["content"]))}

    def batch(self, calls: int) -> float:
        """Microseconds per call over ``calls`` new calls."""
        runtime, tool = self._runtime, self._tool
        ops = [f"c{self._next + n:06d}" for n in range(calls)]
        self._next += calls
        started = time.perf_counter_ns()
        for op_id in ops:
            outcome = runtime.call(
                op_id, _TOOL, {"path": f"/bench/{op_id}", "content": op_id}, tool
            )
            if not outcome.ok:
                raise BenchError(f"journaled call {op_id}: {outcome.status} {outcome.error}")
        return (time.perf_counter_ns() - started) / 1e3 / calls

    def warm_up(self) -> int:
        """Run one call (untimed); returns the bytes it appended to the journal."""
        before = self._runtime.journal.size
        self.batch(1)
        return self._runtime.journal.size - before

    def close(self) -> None:
        self._runtime.close()
        self._db.close()


class BatchedCalls:
    """Rounds of ``size`` new calls of a tool that does nothing, at once on an
    ``AsyncRuntime`` (``together``) or one after another on its ``Runtime``. Close
    when done."""

    def __init__(self, root: Path, size: int, *, together: bool) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._runtime = Runtime.open(root / "journal")
        self._size, self._together = size, together
        self._next = 0
        self.writes = 0
        """Journal writes the batched rounds took (the intents' and the finishes')."""

    def _tool(self, tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        return {"path": args["path"]}

    def _ops(self) -> list[str]:
        ops = [f"b{self._next + n:06d}" for n in range(self._size)]
        self._next += self._size
        return ops

    def rounds(self, rounds: int) -> float:
        """Microseconds per call over ``rounds`` rounds of ``size`` calls."""
        started = time.perf_counter_ns()
        if self._together:
            outcomes = asyncio.run(self._at_once(rounds))
        else:
            outcomes = [
                self._runtime.call(op, _TOOL, {"path": f"/b/{op}", "content": op}, self._tool)
                for _ in range(rounds)
                for op in self._ops()
            ]
        elapsed = time.perf_counter_ns() - started
        failed = next((o for o in outcomes if not o.ok), None)
        if failed is not None:
            raise BenchError(f"batched call {failed.op_id}: {failed.status} {failed.error}")
        return elapsed / 1e3 / (rounds * self._size)

    async def _at_once(self, rounds: int) -> list[CallOutcome]:
        outcomes: list[CallOutcome] = []
        async with AsyncRuntime(self._runtime) as runtime:
            for _ in range(rounds):
                outcomes += await asyncio.gather(
                    *(
                        runtime.call(op, _TOOL, {"path": f"/b/{op}", "content": op}, self._tool)
                        for op in self._ops()
                    )
                )
            self.writes += runtime.journal_writes
        return outcomes

    def close(self) -> None:
        self._runtime.close()


class RawCalls:
    """The durability a journaled call needs, by hand: append+fsync, commit, append+fsync."""

    def __init__(self, root: Path, record_bytes: int) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._db = _open_db(root / "raw.db")
        self._fd = os.open(root / "raw.journal", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._record = b"x" * record_bytes
        self._next = 0

    def batch(self, calls: int) -> float:
        """Microseconds per call over ``calls`` raw calls."""
        fd, db, record = self._fd, self._db, self._record
        ops = [f"r{self._next + n:06d}" for n in range(calls)]
        self._next += calls
        started = time.perf_counter_ns()
        for op_id in ops:
            os.write(fd, record)
            os.fsync(fd)
            _commit(db, op_id, op_id)
            os.write(fd, record)
            os.fsync(fd)
        return (time.perf_counter_ns() - started) / 1e3 / calls

    def close(self) -> None:
        os.close(self._fd)
        self._db.close()


def _empty(name: str, detail: str) -> None:
    pass


def failpoint_loop(loops: int) -> float:
    """Nanoseconds per unarmed call of the runtime's ``failpoint``, loop included."""
    if hit_counts():  # anything armed installs the runtime's crash hook: not unarmed
        raise BenchError("failpoints are armed in this process: the failpoint is not unarmed")
    point = failpoint
    started = time.perf_counter_ns()
    for _ in range(loops):
        point("op.after_effect", "s001")
    return (time.perf_counter_ns() - started) / loops


def empty_call_loop(loops: int) -> float:
    """Nanoseconds per call of an empty two-argument function, loop included."""
    point = _empty
    started = time.perf_counter_ns()
    for _ in range(loops):
        point("op.after_effect", "s001")
    return (time.perf_counter_ns() - started) / loops
