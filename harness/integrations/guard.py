"""The guard: this project's runtime around the tools of an agent framework.

A framework (LangGraph, Pydantic AI) runs its model's tool calls, and after a
crash resumes from its own checkpoint, running again a call that was in flight:
at-least-once, whatever the tool does. A guard puts every call through an
``AsyncRuntime`` under the framework's own tool-call id, so that the journal,
the class snapshot and the recovery table's decisions stand between the framework and
the tool::

    guard = await ToolGuard.open("agent.journal", execute, table=table)
    reply = await guard.call(tool_call_id, "ui_tap", {"element": "pay"})
    reply.text       # what the model reads: the result, the error, or a VERIFY hint
    reply = await guard.verified(op_id, "absent")   # the model's report after its check

What the model sees. A call the journal knows is answered from it, never run
again: a durable success with its result. A call whose outcome is unknown (it
was in flight at the crash and its class is not retry-safe, or its reply was
lost) is not run: it answers with ``hint_message``, the runtime's VERIFY hint and
how to report back, which a framework hands its model as the tool's result::

The full note: docs/reference/modules.md (``harness/integrations/guard.py``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness.runtime import (
    CallOutcome,
    IdempotencyClass,
    Resolution,
    Runtime,
    ToolError,
    VerifyHint,
)
from harness.runtime.aio import AsyncRuntime, AsyncToolFunction
from harness.runtime.errors import TransientToolError
from harness.runtime.matrix import verify_hint

__all__ = [
    "REDO_SUFFIX",
    "VERIFY_TOOL",
    "VERIFY_TOOL_DOC",
    "Found",
    "GuardReply",
    "ToolGuard",
    "hint_message",
    "reply_lost",
    "tool_failure",
]

VERIFY_TOOL = "report_verification"
"""The tool a guarded model calls to say what its check of an unknown outcome found."""
VERIFY_TOOL_DOC = (
    "Report what you found when you checked whether an interrupted operation took "
    'effect. op_id: the operation named in the hint. found: "present" if its effect '
    'is there, "absent" if it is not (it is then redone once), "unknown" if nothing '
    "can tell (it is left undone)."
)
REDO_SUFFIX = ".redo"

Found = Literal["present", "absent", "unknown"]
_RESOLUTIONS: Mapping[str, Resolution] = {
    "present": Resolution.EFFECT_PRESENT,
    "absent": Resolution.REDONE,
    "unknown": Resolution.UNVERIFIABLE,
}


def hint_message(hint: VerifyHint) -> str:
    """The text a model reads for an op of unknown outcome: the hint, and how to report."""
    return (
        f"{hint.text} When you have checked, call {VERIFY_TOOL} with op_id "
        f'"{hint.op_id}" and found "present" (the effect is there: it is done), "absent" '
        f'(it is not: it is redone once, as {hint.op_id}{REDO_SUFFIX}) or "unknown" '
        "(nothing can tell: it is left undone)."
    )


_MCP_LOST_CODES = frozenset({-32000, -32001, 408})
"""An MCP client's own errors for a request whose reply never came: the connection closed
(-32000) or the wait timed out (-32001; 408 in MCP's 1.x Python SDK)."""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, what it was raised from or during, and the members of exception groups."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        cur = todo.pop()
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        todo.extend(e for e in (cur.__cause__, cur.__context__) if e is not None)
        if isinstance(cur, BaseExceptionGroup):
            todo.extend(cur.exceptions)


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The exception types of a lost connection or reply, from the libraries loaded (an
    exception of a library that is not loaded cannot have been raised)."""
    kinds: list[type[BaseException]] = [ConnectionError, TimeoutError, EOFError]
    for module, names in (
        ("httpx", ("TransportError",)),
        ("httpx2", ("TransportError",)),  # the HTTP client of MCP's 2.x Python SDK
        ("anyio", ("ClosedResourceError", "BrokenResourceError", "EndOfStream")),
    ):
        loaded = sys.modules.get(module)
        kinds.extend(getattr(loaded, name) for name in names if hasattr(loaded, name))
    return tuple(kinds)


def reply_lost(exc: BaseException) -> bool:
    """Whether a tool's exception says its reply was lost on the way (a dropped connection,
    a timeout, an MCP session closed under the call), here or in what it was raised from.
    The call may have reached its server and taken effect: its outcome is unknown, not a
    failure. A connection refused before anything was sent counts too: never knowing
    which is safe, as the model then checks before anything is redone."""
    kinds = _transport_errors()
    for cur in _chain(exc):
        if isinstance(cur, kinds):
            return True
        error = getattr(cur, "error", None)
        if type(cur).__module__.startswith("mcp") and getattr(error, "code", None) in (
            _MCP_LOST_CODES
        ):
            return True
    return False


def tool_failure(tool: str, exc: Exception) -> ToolError:
    """The runtime's error for a tool's exception: a ``TransientToolError`` (an unknown
    outcome, unless the tool's class makes a retry safe) when its reply was lost
    (``reply_lost``), else a ``ToolError`` (the call failed). Raise it ``from exc``."""
    if isinstance(exc, ToolError):
        return exc
    if reply_lost(exc):
        return TransientToolError(f"{tool}: its reply was lost: {exc}")
    return ToolError(f"{tool}: {exc}")


@dataclass(frozen=True, slots=True)
class GuardReply:
    """A guarded call's answer: its outcome, and the text the model reads."""

    outcome: CallOutcome
    text: str
    hint: VerifyHint | None = None
    """Set when the outcome is unknown and the model must verify it (``text`` says so)."""

    @property
    def status(self) -> Literal["ok", "fail", "info"]:
        return self.outcome.status


class ToolGuard:
    """The runtime between a framework and its tools, for one process life."""

    def __init__(self, runtime: AsyncRuntime, execute: AsyncToolFunction) -> None:
        self.runtime = runtime
        self._execute = execute
        self.recovered: tuple[VerifyHint, ...] = ()
        """The VERIFY hints of this start's recovery: ops the framework may run again
        (each then answers with its hint) or not (deliver these to its model)."""
        self.hinted = False
        """Whether a VERIFY hint was answered in this life: from then on a read-only call
        is a check of the world now (``fresh``), never answered from an older read."""

    @classmethod
    async def open(
        cls,
        path: Path | str,
        execute: AsyncToolFunction,
        *,
        runtime_class: type[Runtime] = Runtime,
        **options: Any,
    ) -> ToolGuard:
        """Open the journal (``Runtime.open``'s options) and recover: retry what is safe."""
        runtime = await AsyncRuntime.open(path, runtime_class=runtime_class, **options)
        guard = cls(runtime, execute)
        report = await runtime.recover(execute)
        guard.recovered = report.hints
        return guard

    async def call(self, op_id: str, tool: str, args: Mapping[str, Any]) -> GuardReply:
        """Run a tool call write-ahead under ``op_id`` (the framework's tool-call id).

        Once this life was answered a VERIFY hint, a read-only call runs ``fresh``: a model
        that was told an op may have run checks the world, and a read journaled before
        that op (an earlier life's, of the same content: the framework kept its reply and
        did not ask again) would show the world from before it."""
        fresh = self.hinted and self.runtime.runtime.table.classify(tool).idempotency is (
            IdempotencyClass.READ_ONLY
        )
        outcome = await self.runtime.call(op_id, tool, args, self._execute, fresh=fresh)
        return self._reply(outcome, tool, args)

    async def verified(self, op_id: str, found: Found) -> GuardReply:
        """The model's report on an op of unknown outcome: resolve it, and redo it once
        when its effect is absent (answering with the redo's outcome).

        A report on an op the journal holds a report for (a framework ran the report
        call again after a restart) is answered from the journal, whatever it says:
        nothing is journaled or run again."""
        resolution = _RESOLUTIONS.get(found)
        op = self.runtime.ops.get(op_id)
        if resolution is None or op is None:
            problem = (
                f"found must be one of {', '.join(_RESOLUTIONS)}"
                if resolution is None
                else f"no operation {op_id!r} is known"
            )
            raise ValueError(f"{VERIFY_TOOL}({op_id!r}, {found!r}): {problem}")
        if op.resolution is not None:
            # The framework ran the report again: a restart came before it checkpointed
            # the reply. The journal holds the report: answer from it, journal nothing.
            return self._reported(op_id, op.resolution.resolution, op.resolution.redo_op)
        if resolution is not Resolution.REDONE:
            await self.runtime.resolve(op_id, resolution, note=f"the model found it {found}")
            outcome = self.runtime.outcome_of(op_id)
            return GuardReply(outcome, f"recorded: {op_id} is {found}; it is not run again")
        redo_op = op_id + REDO_SUFFIX
        redo = await self.runtime.call(redo_op, op.tool, op.args, self._execute, redo_of=op_id)
        await self.runtime.resolve(
            op_id, Resolution.REDONE, redo_op=redo_op, note="the model found it absent"
        )
        return self._reply(redo, op.tool, op.args)

    def _reported(self, op_id: str, resolution: Resolution, redo_op: str | None) -> GuardReply:
        """The answer to a report the journal already holds: the redo's outcome (its hint,
        if the redo's own outcome is unknown now), or what was found."""
        redo = None if redo_op is None else self.runtime.ops.get(redo_op)
        if resolution is Resolution.REDONE and redo is not None:
            return self._reply(self.runtime.outcome_of(redo.op_id), redo.tool, redo.args)
        found = next(name for name, known in _RESOLUTIONS.items() if known is resolution)
        outcome = self.runtime.outcome_of(op_id)
        return GuardReply(outcome, f"recorded: {op_id} is {found}; it is not run again")

    def _reply(self, outcome: CallOutcome, tool: str, args: Mapping[str, Any]) -> GuardReply:
        if outcome.status == "info" and outcome.resolution is not None:
            return GuardReply(
                outcome, f"{outcome.op_id}: its effect could not be verified; not run again"
            )
        if outcome.status == "info":
            op_id = outcome.matched or outcome.op_id
            text = outcome.hint or verify_hint(op_id, tool, args)
            hint = VerifyHint(op_id, tool, args, text)
            self.hinted = True
            return GuardReply(outcome, hint_message(hint), hint)
        if outcome.status == "fail":
            return GuardReply(outcome, f"error: {outcome.error}")
        return GuardReply(outcome, json.dumps(outcome.result, ensure_ascii=False))

    async def aclose(self) -> None:
        await self.runtime.aclose()

    async def __aenter__(self) -> ToolGuard:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
