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

from harness.runtime.errors import JournalError, RuntimeUsageError
from harness.runtime.executor import CallOutcome
from harness.runtime.matrix import RecoveryDecision
from harness.runtime.records import Record, Resolution
from harness.runtime.recovery import OpHistory
from harness.runtime.runtime import CLOSE_TIMEOUT, RecoveryReport, Runtime, VerifyHint
from harness.runtime.steps import (
    Append,
    Blocking,
    CallContext,
    Invoke,
    Steps,
    advance,
    is_async_function,
    no_tool,
)
from harness.runtime.store import Journal

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

    def __init__(self, journal: Journal, note: Callable[[Record], None]) -> None:
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
    options of ``Runtime.open``, off the loop, and closes it with itself. While
    it is open, the runtime's synchronous API refuses (``RuntimeUsageError``):
    one API at a time. ``tools_in_threads``: a plain (not ``async``) tool
    function runs in a thread, so a tool that blocks does not stop the loop.
    """

    def __init__(
        self, runtime: Runtime, *, owned: bool = False, tools_in_threads: bool = False
    ) -> None:
        runtime._attach(self)
        self.runtime = runtime
        self._owned = owned
        self._tools_in_threads = tools_in_threads
        self._pump: JournalPump | None = None
        self._in_flight: dict[str, asyncio.Event] = {}
        self._recovering: asyncio.Event | None = None
        self._closing = False

    @classmethod
    async def open(
        cls,
        path: Path | str | Journal,
        *,
        runtime_class: type[Runtime] = Runtime,
        tools_in_threads: bool = False,
        **options: Any,
    ) -> AsyncRuntime:
        """Lock and read the journal and start an incarnation, in a thread (``Runtime.open``)."""
        runtime = await asyncio.to_thread(runtime_class.open, path, **options)
        return cls(runtime, owned=True, tools_in_threads=tools_in_threads)

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
        """``Runtime.recover``: the decisions journaled first, the retries one after another.

        Refused while a call is in flight (``RuntimeUsageError``); calls made while it
        runs wait for it.
        """
        self.runtime._refuse_recovery_in_flight(len(self._in_flight))
        if self._recovering is not None:
            raise RuntimeUsageError("recover() while another recover() runs")
        self._recovering = asyncio.Event()
        try:
            steps = self.runtime._recover_steps(not_started=not_started)
            return await self._drive(steps, execute)
        finally:
            self._recovering.set()
            self._recovering = None

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
        journal: an op has one intent in flight at a time. A call made while
        ``recover`` runs waits for it; one made after ``aclose`` began is refused.
        """
        while True:
            if self._closing:
                raise RuntimeUsageError(f"call({op_id!r}) after aclose(): the runtime is closed")
            if self._recovering is not None:
                await self._recovering.wait()
            elif (first := self._in_flight.get(op_id)) is not None:
                await first.wait()
            else:
                break
        done = self._in_flight[op_id] = asyncio.Event()
        try:
            steps = self.runtime._call_steps(op_id, tool, args, redo_of=redo_of, fresh=fresh)
            return await self._drive(steps, execute)
        except JournalError as exc:
            told = self.runtime._told(op_id, exc)
            if told is exc:
                raise
            raise told from exc.__cause__ or exc
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
        self.runtime._check_recovered("deliver_hints()", None)
        return await self._drive(self.runtime._hint_steps(), no_tool)

    async def compact(self) -> int:
        """``Runtime.compact``, off the loop: calls may go on meanwhile, their appends wait
        for it and go to the new file."""
        if self._pump is None:
            self._pump = JournalPump(self.runtime.journal, self.runtime._note)
        return await self._pump.alone(self.runtime._compact_locked)

    async def aclose(self, *, timeout: float = CLOSE_TIMEOUT) -> None:
        """Refuse new calls, wait up to ``timeout`` seconds for those in flight and for the
        journal's writes, then hand the runtime back (or close it, if it is ours).

        A call still in flight then goes on running its tool. If the runtime was
        ours, the call ends with ``JournalClosedError`` when it next writes: its
        outcome is unknown, and its op stays RUNNING for the next start to decide
        by its class. A borrowed runtime stays open, and the call goes on writing
        to it.
        """
        self._closing = True
        in_flight = [asyncio.ensure_future(e.wait()) for e in self._in_flight.values()]
        if in_flight:
            _, late = await asyncio.wait(in_flight, timeout=max(0.0, timeout))
            for waiter in late:
                waiter.cancel()
        if self._pump is not None:
            await self._pump.close()
        self.runtime._detach(self)
        if self._owned:
            self.runtime.close(timeout=0)

    async def __aenter__(self) -> AsyncRuntime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _invoke(self, execute: AsyncToolFunction, step: Invoke) -> Any:
        """Run the tool: awaited if it is async, in a thread if asked, else on the loop."""
        if self._tools_in_threads and not is_async_function(execute):
            reply = await asyncio.to_thread(execute, step.tool, step.args, step.ctx)
        else:
            reply = execute(step.tool, step.args, step.ctx)
        if inspect.isawaitable(reply):
            reply = await reply
        return reply

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
                        reply = await self._invoke(execute, step)
                    except BaseException as exc:  # the protocol decides what it means
                        error = exc
                elif isinstance(step, Blocking):
                    try:
                        reply = await asyncio.to_thread(step.work)
                    except BaseException as exc:
                        error = exc
                else:
                    return step
        finally:
            for written in unawaited:  # a write nobody waited for still fails loudly
                await written
