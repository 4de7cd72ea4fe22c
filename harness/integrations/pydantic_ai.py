"""The guard for Pydantic AI: this project's runtime around an agent's toolset.

A Pydantic AI agent runs its model's tool calls through its toolsets; made
durable (its DBOS, Temporal or Prefect integrations), it replays a run after a
crash and runs again a tool call that was in flight, whatever the tool does.
``GuardedToolset`` wraps the user's toolset so that every call goes through a
``ToolGuard`` (``harness.integrations.guard``) under the call's own id,
``RunContext.tool_call_id``: write-ahead journal, class snapshot, and on restart
SKIP, RETRY or VERIFY::

    guarded = GuardedToolset(toolset, "agent.journal", table=ToolTable.load("tools.toml"))
    agent = Agent(model, toolsets=[guarded])
    result = await agent.run("...")
    await guarded.aclose()

The full note: docs/reference/modules.md (``harness/integrations/pydantic_ai.py``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import TypeAdapter
from pydantic_ai import ModelRetry, RunContext, ToolFailed
from pydantic_ai.exceptions import UserError
from pydantic_ai.tools import AgentDepsT, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset
from pydantic_core import SchemaValidator, to_jsonable_python
from typing_extensions import TypedDict  # pydantic needs it for a TypedDict before 3.12

from harness.integrations.guard import (
    VERIFY_TOOL,
    VERIFY_TOOL_DOC,
    GuardReply,
    ToolGuard,
    reply_lost,
    tool_failure,
)
from harness.runtime import CallContext, ToolError, ToolTable, VerifyHint
from harness.runtime.journal import JournalListener

__all__ = ["HINT_OP", "GuardedToolset", "current_call", "hinted_op"]

HINT_OP = re.compile(rf'call {VERIFY_TOOL} with op_id "(?P<op>[^"]+)"')
"""Where a hint's text names the op to report on (``guard.hint_message``)."""


def hinted_op(text: str) -> str | None:
    """The op a tool return's text asks the model to verify, or None when it is no hint."""
    found = HINT_OP.search(text)
    return None if found is None else found.group("op")


class _VerifyArgs(TypedDict):
    op_id: str
    found: Literal["present", "absent", "unknown"]


_VERIFY_ARGS: TypeAdapter[_VerifyArgs] = TypeAdapter(_VerifyArgs)
_VERIFY_VALIDATOR = SchemaValidator(_VERIFY_ARGS.core_schema)

_CALL: ContextVar[CallContext | None] = ContextVar("harness_guarded_call", default=None)


def current_call() -> CallContext | None:
    """The guarded call a tool is serving (op id, attempt, ``idempotency_key``), or None
    outside one."""
    return _CALL.get()


@dataclass(frozen=True)
class _Calling:
    """The framework's own call in progress: what running its op needs."""

    op_id: str
    wrapped: AbstractToolset[Any]
    ctx: RunContext[Any]
    tool: ToolsetTool[Any]
    retried: list[ModelRetry] = field(default_factory=list)
    """A ``ModelRetry`` the tool raised in this call, to raise again to the model."""


_CALLING: ContextVar[_Calling | None] = ContextVar("harness_guard_calling", default=None)


class _Shared:
    """What every copy of one ``GuardedToolset`` shares: the open guard, and the run's
    latest context and tools (for calls the guard makes itself: retries, redoes)."""

    def __init__(self) -> None:
        self.guard: ToolGuard | None = None
        self.lock: asyncio.Lock | None = None
        self.wrapped: AbstractToolset[Any] | None = None
        self.ctx: RunContext[Any] | None = None
        self.tools: dict[str, ToolsetTool[Any]] = {}


@dataclass
class GuardedToolset(WrapperToolset[AgentDepsT]):
    """``wrapped``'s tools, each call through this project's runtime on ``journal``,
    and ``report_verification``. ``table``, ``identity``, ``max_attempts`` and
    ``listener`` are ``Runtime.open``'s (no table: every tool UNKNOWN; knowing calls
    by id; 3 attempts; no journal listener)."""

    journal: Path | str
    table: ToolTable | None = None
    identity: str = "id"
    max_attempts: int = 3
    listener: JournalListener | None = None
    verify_retries: int = 3
    """How often the model may get a report wrong (an op nobody asked about) in a row."""
    shared: _Shared = field(default_factory=_Shared, repr=False, compare=False)

    @property
    def recovered(self) -> tuple[VerifyHint, ...]:
        """The VERIFY hints of this start's recovery (empty until the journal is open)."""
        guard = self.shared.guard
        return () if guard is None else guard.recovered

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        tools = await self.wrapped.get_tools(ctx)
        if VERIFY_TOOL in tools:
            raise UserError(f"the guarded toolset has a tool of its own named {VERIFY_TOOL!r}")
        self.shared.wrapped, self.shared.ctx, self.shared.tools = self.wrapped, ctx, dict(tools)
        await self._guard()
        report = ToolsetTool(
            toolset=self,
            tool_def=ToolDefinition(
                name=VERIFY_TOOL,
                description=VERIFY_TOOL_DOC,
                parameters_json_schema=_VERIFY_ARGS.json_schema(),
            ),
            max_retries=self.verify_retries,
            args_validator=_VERIFY_VALIDATOR,
        )
        return {**tools, VERIFY_TOOL: report}

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],
    ) -> Any:
        guard = await self._guard()
        if name == VERIFY_TOOL:
            try:
                reply = await guard.verified(tool_args["op_id"], tool_args["found"])
            except ValueError as exc:
                raise ModelRetry(str(exc)) from exc
            return _answer(reply, None)
        if ctx.tool_call_id is None:
            raise UserError(f"{name}: a guarded call needs its tool_call_id, and this one has none")
        calling = _Calling(ctx.tool_call_id, self.wrapped, ctx, tool)
        token = _CALLING.set(calling)
        try:
            reply = await guard.call(ctx.tool_call_id, name, tool_args)
        finally:
            _CALLING.reset(token)
        return _answer(reply, calling.retried[-1] if calling.retried else None)

    async def aclose(self) -> None:
        """Close the journal (waiting for its writes), if this life opened it."""
        guard, self.shared.guard = self.shared.guard, None
        if guard is not None:
            await guard.aclose()

    async def _guard(self) -> ToolGuard:
        shared = self.shared
        if shared.guard is None:
            if shared.lock is None:
                shared.lock = asyncio.Lock()
            async with shared.lock:
                if shared.guard is None:
                    shared.guard = await ToolGuard.open(
                        self.journal,
                        self._execute,
                        table=self.table,
                        identity=self.identity,
                        max_attempts=self.max_attempts,
                        listener=self.listener,
                    )
        return shared.guard

    async def _execute(self, tool: str, args: Mapping[str, Any], call: CallContext) -> Any:
        """Run one op through the wrapped toolset: the ``ToolGuard``'s tool function."""
        calling = _CALLING.get()
        if calling is not None and calling.op_id == call.op_id:
            wrapped, ctx, found = calling.wrapped, calling.ctx, calling.tool
        else:  # the guard's own call (a retry at recovery, a redo): the run's context
            shared = self.shared
            if shared.wrapped is None or shared.ctx is None:
                raise ToolError(f"{tool}: no run is under way to run it in")
            wrapped, ctx, found_tool = shared.wrapped, shared.ctx, shared.tools.get(tool)
            if found_tool is None:
                raise ToolError(f"{tool}: the guarded toolset has no such tool")
            found = found_tool
            ctx = replace(ctx, tool_call_id=call.op_id, tool_name=tool, retry=call.attempt - 1)
        with _serving(call):
            try:
                result = await wrapped.call_tool(tool, dict(args), ctx, found)
            except ToolFailed as exc:
                raise ToolError(exc.message) from exc
            except Exception as exc:
                if reply_lost(exc):  # it may have run: an unknown outcome, not a failure
                    raise tool_failure(tool, exc) from exc
                if not isinstance(exc, ModelRetry):
                    raise  # a bug's: an unknown outcome too, and the run stops
                # Pydantic AI's MCP toolset raises a lost connection as ModelRetry too.
                if calling is not None and calling.op_id == call.op_id:
                    calling.retried.append(exc)
                raise ToolError(exc.message) from exc
        return to_jsonable_python(result)


@contextmanager
def _serving(call: CallContext) -> Iterator[None]:
    token = _CALL.set(call)
    try:
        yield
    finally:
        _CALL.reset(token)


def _answer(reply: GuardReply, retried: ModelRetry | None) -> str:
    """What the model gets: the reply's text, or its failure raised."""
    if reply.status != "fail":
        return reply.text
    if retried is not None:
        raise ModelRetry(retried.message)
    raise ToolFailed(reply.text)
