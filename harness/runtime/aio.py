"""The runtime for asyncio code: the same contract, with the journal's writes off the loop.

    async with await AsyncRuntime.open("agent.journal") as runtime:
        report = await runtime.recover(execute)
        a, b = await asyncio.gather(
            runtime.call("s004a", "web_search", {"query": "..."}, execute),
            runtime.call("s004b", "ui_tap", {"element": "..."}, execute),
        )

An ``AsyncRuntime`` carries out the steps of a ``Runtime`` (``harness.runtime.steps``)
on the running event loop: the decisions, the write-ahead rule, the recovery and
the answers are the runtime's own, so the sync and async APIs decide the same on
the same journal, and a broken runtime is broken in both. What differs is the
journal: every append is made off the loop, one write at a time per journal (the
single writer), so the loop never blocks on a ``write`` or an ``fsync``, and the
appends that calls running together make while a write is under way go out in the
next write, in one fsync (group commit). Each call still waits for its own intent
to be durable before its tool runs: the rule holds per call, whatever the
interleaving.

The full note: docs/reference/modules.md (``harness/runtime/aio.py``).
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from harness.runtime.executor import CallOutcome
from harness.runtime.journal import JournalWriter
from harness.runtime.matrix import RecoveryDecision
from harness.runtime.records import Record, Resolution
from harness.runtime.recovery import OpHistory
from harness.runtime.runtime import RecoveryReport, Runtime, VerifyHint
from harness.runtime.steps import Append, CallContext, Invoke, Steps, advance, no_tool

__all__ = ["WRITER_THREADS", "AsyncRuntime", "AsyncToolFunction", "JournalPump"]

T = TypeVar("T")

WRITER_THREADS = min(32, (os.cpu_count() or 1) + 4)
"""How many threads write the journals of every ``AsyncRuntime`` of a process, at most."""

_writers: ThreadPoolExecutor | None = None


def _writer_pool() -> ThreadPoolExecutor:
    """The process's journal writers, started with the first write (threads come lazily)."""
    global _writers
    if _writers is None:
        _writers = ThreadPoolExecutor(WRITER_THREADS, thread_name_prefix="harness-journal")
    return _writers


AsyncToolFunction = Callable[[str, Mapping[str, Any], CallContext], Awaitable[Any] | Any]
"""``execute(tool, args, ctx)``, a coroutine function or a plain one (``ToolFunction``)."""


async def _settled(written: asyncio.Future[None]) -> None:
    """Wait for a write a cancelled call had asked for; a second cancellation stops the wait
    (the write still happens), and the write's own failure is raised."""
    try:
        await written
    except Exception:
        raise
    except BaseException:  # cancelled again: the caller is going, the writer is not
        return


class JournalPump:
    """The journal's single writer for an event loop: one write at a time, on the pool.

    ``append`` queues records and returns a future that is done once they are
    written (fsynced when any append of the write asked for it), after ``note``
    has seen each of them in journal order; a failed write fails the future of
    every append it carried, and nothing of it is journaled. ``writes`` counts
    the writes made (a bench reads how many appends each took).
    """

    def __init__(self, journal: JournalWriter, note: Callable[[Record], None]) -> None:
        self._journal = journal
        self._note = note
        self._queue: list[tuple[Append, asyncio.Future[None]]] = []
        self._busy = False
        self._idle = asyncio.Event()
        self._idle.set()
        self.writes = 0

    def append(self, step: Append) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._queue.append((step, future))
        self._idle.clear()
        if len(self._queue) == 1 and not self._busy:
            # After the tasks ready in this turn: whatever they append joins this write.
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        if self._busy or not self._queue:
            return
        group, self._queue = self._queue, []
        self._busy = True
        records = tuple(record for step, _ in group for record in step.records)
        sync = any(step.sync for step, _ in group)
        written = asyncio.get_running_loop().run_in_executor(
            _writer_pool(), self._write, records, sync
        )
        written.add_done_callback(lambda done: self._written(group, records, done))

    def _write(self, records: tuple[Record, ...], sync: bool) -> None:
        self._journal.append_many(records, sync=sync)

    def _written(
        self,
        group: list[tuple[Append, asyncio.Future[None]]],
        records: tuple[Record, ...],
        done: asyncio.Future[None],
    ) -> None:
        self._busy = False
        self.writes += 1
        error = done.exception()
        if error is None:
            for record in records:
                self._note(record)
        for _, future in group:
            if future.cancelled():
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
        if self._queue:
            asyncio.get_running_loop().call_soon(self._flush)
        else:
            self._idle.set()

    async def drain(self) -> None:
        """Wait until every queued append is written (or has failed)."""
        await self._idle.wait()

    async def close(self) -> None:
        await self.drain()

    async def alone(self, work: Callable[[], T]) -> T:
        """Run ``work`` on the pool once every queued append is written, with no write
        under way meanwhile (appends made in the while wait for it, then go out)."""
        while self._busy or self._queue:
            await self.drain()
        self._busy = True
        self._idle.clear()
        try:
            return await asyncio.get_running_loop().run_in_executor(_writer_pool(), work)
        finally:
            self._busy = False
            if self._queue:
                self._flush()
            else:
                self._idle.set()


class AsyncRuntime:
    """A ``Runtime`` for asyncio code; one instance per process life, as the runtime.

    ``AsyncRuntime(runtime)`` borrows an open runtime (closing this one leaves it
    open); ``await AsyncRuntime.open(path, ...)`` opens one of its own, with the
    options of ``Runtime.open``, off the loop, and closes it with itself.
    """

    def __init__(self, runtime: Runtime, *, owned: bool = False) -> None:
        self.runtime = runtime
        self._owned = owned
        self._pump: JournalPump | None = None
        self._in_flight: dict[str, asyncio.Event] = {}

    @classmethod
    async def open(
        cls, path: Path | str, *, runtime_class: type[Runtime] = Runtime, **options: Any
    ) -> AsyncRuntime:
        """Lock and read the journal and start an incarnation, in a thread (``Runtime.open``)."""
        runtime = await asyncio.to_thread(runtime_class.open, path, **options)
        return cls(runtime, owned=True)

    @property
    def incarnation(self) -> int:
        return self.runtime.incarnation

    @property
    def ops(self) -> Mapping[str, OpHistory]:
        return self.runtime.ops

    @property
    def journal_writes(self) -> int:
        """How many writes this runtime's appends took so far."""
        return 0 if self._pump is None else self._pump.writes

    def plan(self, not_started: Mapping[str, str] | None = None) -> Sequence[RecoveryDecision]:
        """This start's decisions, from the journal alone (``Runtime.plan``)."""
        return self.runtime.plan(not_started)

    def outcome_of(self, op_id: str) -> CallOutcome:
        """What the journal says of an op it knows (``Runtime.outcome_of``)."""
        return self.runtime.outcome_of(op_id)

    def claim(self, op_ids: Iterable[str]) -> None:
        """Ops the framework holds the answers of: never matched by content (``Runtime.claim``)."""
        self.runtime.claim(op_ids)

    async def recover(
        self, execute: AsyncToolFunction, *, not_started: Mapping[str, str] | None = None
    ) -> RecoveryReport:
        """``Runtime.recover``: the decisions journaled first, the retries one after another."""
        return await self._drive(self.runtime._recover_steps(not_started=not_started), execute)

    async def call(
        self,
        op_id: str,
        tool: str,
        args: Mapping[str, Any],
        execute: AsyncToolFunction,
        *,
        redo_of: str | None = None,
        fresh: bool = False,
    ) -> CallOutcome:
        """``Runtime.call``; calls may run together (``asyncio.gather``), each its own op.

        A call of an op already in flight waits for it, then is answered from the
        journal: an op has one intent in flight at a time.
        """
        while (first := self._in_flight.get(op_id)) is not None:
            await first.wait()
        done = self._in_flight[op_id] = asyncio.Event()
        try:
            steps = self.runtime._call_steps(op_id, tool, args, redo_of=redo_of, fresh=fresh)
            return await self._drive(steps, execute)
        finally:
            del self._in_flight[op_id]
            done.set()

    async def resolve(
        self,
        op_id: str,
        resolution: Resolution,
        *,
        redo_op: str | None = None,
        note: str = "",
    ) -> None:
        """``Runtime.resolve``: the model closes an op it verified, durably."""
        steps = self.runtime._resolve_steps(op_id, resolution, redo_op=redo_op, note=note)
        await self._drive(steps, no_tool)

    async def deliver_hints(self) -> tuple[VerifyHint, ...]:
        """``Runtime.deliver_hints``."""
        return await self._drive(self.runtime._hint_steps(), no_tool)

    async def compact(self) -> int:
        """``Runtime.compact``, off the loop: calls may go on meanwhile, their appends wait
        for it and go to the new file."""
        if self._pump is None:
            self._pump = JournalPump(self.runtime.journal, self.runtime._note)
        return await self._pump.alone(self.runtime.compact)

    async def aclose(self) -> None:
        """Wait for the journal's writes; close the runtime if it is ours."""
        if self._pump is not None:
            await self._pump.close()
            self._pump = None
        if self._owned:
            self.runtime.close()

    async def __aenter__(self) -> AsyncRuntime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _drive(self, steps: Steps[T], execute: AsyncToolFunction) -> T:
        """Carry out a run of steps on the loop, its appends through the pump."""
        if self._pump is None:
            self._pump = JournalPump(self.runtime.journal, self.runtime._note)
        unawaited: list[asyncio.Future[None]] = []
        reply: Any = None
        error: BaseException | None = None
        try:
            while True:
                step = advance(steps, reply, error)
                reply, error = None, None
                if isinstance(step, Append):
                    written = self._pump.append(step)
                    if step.wait:
                        try:
                            await asyncio.shield(written)
                        except Exception:
                            raise  # the journal failed: nothing more is written
                        except BaseException as exc:
                            # Cancelled while the records are being written. The write
                            # goes on: wait for it, so that the steps see the journal as
                            # it is, then throw the cancellation in, to be journaled.
                            await _settled(written)
                            error = exc
                    else:
                        unawaited.append(written)
                elif isinstance(step, Invoke):
                    journal = self.runtime.journal
                    if not journal.proven:  # no tool runs on a journal whose bytes do not prove
                        await asyncio.get_running_loop().run_in_executor(
                            _writer_pool(), journal.prove
                        )
                    try:
                        reply = execute(step.tool, step.args, step.ctx)
                        if inspect.isawaitable(reply):
                            reply = await reply
                    except BaseException as exc:  # the protocol decides what it means
                        error = exc
                else:
                    return step
        finally:
            for written in unawaited:  # a write nobody waited for still fails loudly
                await written
