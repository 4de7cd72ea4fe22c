"""The runtime's input and output as data: what a call asks of the journal and of the tool.

The write-ahead protocol, recovery and the model's resolutions are written once,
as generators that yield steps and get back what the step came to:

    Append(records)      journal these records in one write (and one fsync when
                         ``sync``); the step returns once they are written
    Invoke(tool, args)   run the tool; the step returns its result, or the
                         tool's exception is thrown back in at the same place
    Blocking(work)       call ``work()``, which may wait long (a reconciler asking
                         a provider): outside the lock, off the loop

A driver carries the steps out. ``run_steps`` does it in the caller's thread:
the synchronous ``Runtime``, which hands it a lock so that threads sharing one
runtime never interleave their steps (tools and fsyncs run outside it).
``AsyncRuntime`` (``harness.runtime.aio``) does it on an event loop, its journal
writes made off the loop and shared by calls issued together. Nothing else differs
between the two APIs: the same journal gets the same decisions from both, and a
broken runtime that changes a step changes both.

An ``Append`` with ``wait=False`` asks the driver to go on before the records are
written: the synchronous driver writes them at once all the same, the asynchronous
one queues them and goes on, which is only ever right for records no later step
depends on (the harness's broken runtimes use it to forget an ``await``).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from harness.runtime.errors import JournalWriteError
from harness.runtime.hooks import failpoint
from harness.runtime.records import Record
from harness.runtime.store import Journal

__all__ = [
    "Append",
    "Blocking",
    "CallContext",
    "Invoke",
    "Step",
    "Steps",
    "advance",
    "idempotency_key",
    "is_async_function",
    "no_tool",
    "run_steps",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a tool may know about the call it serves.

    ``idempotency_key`` is the key to hand an external API that deduplicates
    requests (a payment provider's ``Idempotency-Key`` header): the same for
    every attempt of an op, in every life, and for a redo of an op after a
    VERIFY the key of the op it redoes, so that a provider that did see the
    first request answers the redo from it instead of charging twice. It is
    derived from the journal's random identity and the op id, so two journals
    (two tasks) that both have an op ``step-7`` hand an API different keys.
    """

    op_id: str
    tool: str
    attempt: int
    incarnation: int
    key_op: str | None = None
    """The op whose key this call carries (the first op of a chain of redoes); default op_id."""
    journal_id: str = ""
    """The identity of the journal the call is written in ("" for a call made without one)."""

    @property
    def idempotency_key(self) -> str:
        return idempotency_key(self.journal_id, self.key_op or self.op_id)

    def mid_effect(self) -> None:
        """A multi-step tool calls this between its steps: a crash point inside the effect."""
        failpoint("op.mid_effect", self.op_id)


def idempotency_key(journal_id: str, op_id: str) -> str:
    """A stable key for an op of a journal: 32 hex digits, the same in every process and
    life, different for the same op id in another journal."""
    return hashlib.sha256(f"harness-op:{journal_id}:{op_id}".encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Append:
    """Journal ``records`` in one write, fsynced when ``sync``."""

    records: tuple[Record, ...]
    sync: bool = True
    wait: bool = True
    """Whether the step waits for the write (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class Invoke:
    """Run ``tool`` with ``args``; ``ctx`` is the ``CallContext`` it is handed."""

    tool: str
    args: Mapping[str, Any]
    ctx: CallContext


@dataclass(frozen=True, slots=True)
class Blocking:
    """Call ``work()`` where waiting costs nobody else: outside the runtime's lock (sync),
    in a thread (async). The step returns what it returned."""

    work: Callable[[], Any]


Step = Append | Invoke | Blocking
Steps = Generator[Step, Any, T]
"""A protocol run: yields steps, is sent what each came to, returns its value."""


def no_tool(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
    """The ``execute`` of runs that call no tool (a hint delivered, a resolution)."""
    raise AssertionError(f"{tool}: these steps run no tool")


def advance(steps: Steps[T], reply: Any, error: BaseException | None) -> Step | T:
    """The next step, after the last came to ``reply`` (or raised ``error``); at the end,
    the run's value. A driver tells the two apart by type: a step is ``Append``,
    ``Invoke`` or ``Blocking``, and no run returns any of them."""
    try:
        return steps.throw(error) if error is not None else steps.send(reply)
    except StopIteration as done:
        value: T = done.value
        return value


def run_steps(
    steps: Steps[T],
    journal: Journal,
    note: Callable[[Record], None],
    execute: Callable[[str, Mapping[str, Any], CallContext], Any],
    *,
    lock: contextlib.AbstractContextManager[Any] | None = None,
) -> T:
    """Carry out ``steps`` in this thread: each append durable (when asked) before the
    next step, each record then handed to ``note``; the tool called directly.

    ``lock`` (when given) is held while a step is made and its records written, and
    again while they are noted (with the next step); it is let go while they are
    made durable and while the tool runs: threads that share the runtime's state take
    turns at it, and the appends they make together share one fsync
    (``JournalWriter.write`` and ``settle``). Each run still waits for its own records
    to be durable before its next step: an intent before its tool. Whatever the tool
    raises, a cancellation or
    ``KeyboardInterrupt`` included, is thrown back into the steps, which journal
    what it means and raise it on. A journal error leaves the run where it is and
    goes on to the caller: nothing more is written, as after a crash.
    """
    guard = lock if lock is not None else contextlib.nullcontext()
    reply: Any = None
    error: BaseException | None = None
    durable: tuple[Record, ...] = ()
    while True:
        with guard:
            # The last append's records, durable now, are noted as the lock is taken for
            # the next step: one turn at the lock, not two, per append.
            for record in durable:
                note(record)
            step = advance(steps, reply, error)
            reply, error, durable = None, None, ()
            if isinstance(step, Append):
                written = journal.write(step.records, sync=step.sync)
        if isinstance(step, Append):
            # Durable outside the lock: threads that write while this fsync is under way
            # share the next one (group commit), and the records are noted once durable.
            try:
                journal.settle(written)
            except JournalWriteError as exc:  # written whole: its intents may be on disk
                raise exc.also_written(step.records) from exc.__cause__
            durable = step.records
            continue
        if isinstance(step, Invoke):
            if not journal.proven:
                journal.prove()  # no tool runs on a journal whose bytes do not prove
            try:
                reply = execute(step.tool, step.args, step.ctx)
                if hasattr(type(reply), "__await__"):
                    reply = _refuse_awaitable(step.tool, reply)
            except BaseException as exc:  # the protocol decides what it means
                error = exc
        elif isinstance(step, Blocking):
            try:
                reply = step.work()
            except BaseException as exc:
                error = exc
        else:
            return step


def _refuse_awaitable(tool: str, reply: Any) -> Any:
    """A tool that handed the synchronous driver an awaitable: nothing awaited it, so its
    result is not known. Raised as the tool's own error: the call's outcome is unknown."""
    close = getattr(reply, "close", None)
    if callable(close):  # a coroutine never started: close it, so Python does not warn
        close()
    raise TypeError(
        f"{tool}: the tool returned {type(reply).__name__}, an awaitable the synchronous "
        "runtime cannot await; run async tools through AsyncRuntime"
    )


def is_async_function(function: object) -> bool:
    """Whether calling ``function`` makes a coroutine (``async def``, also bound, wrapped in
    ``functools.partial`` or as a callable object's ``__call__``), read from its code flags
    rather than ``inspect``, which a restarted agent would pay for at every start."""
    for _ in range(8):  # partials of partials, bound methods of callables: a few levels
        code = getattr(function, "__code__", None)
        if code is not None:
            return bool(code.co_flags & (_CO_COROUTINE | _CO_ASYNC_GENERATOR))
        inner = getattr(function, "__func__", None) or getattr(function, "func", None)
        if inner is None:
            if isinstance(function, type):
                return False  # a class: calling it makes an instance
            try:
                inner = type(function).__call__  # a callable object: its method
            except AttributeError:
                return False
        function = inner
    return False


_CO_COROUTINE = 0x80
_CO_ASYNC_GENERATOR = 0x200
