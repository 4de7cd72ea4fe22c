"""The guard for LangGraph: a user's tools, each call through this project's runtime.

A LangGraph agent's ``ToolNode`` runs the tool calls of its model's last message;
after a crash, the graph resumes from its checkpointer's last checkpoint and runs
again every call whose ``ToolMessage`` had not been checkpointed: at-least-once,
whatever the tool. ``LangGraphGuard`` wraps the user's tools so that each call goes
through a ``ToolGuard`` (``harness.integrations.guard``) under its tool-call id::

    async with await LangGraphGuard.open("agent.journal", tools) as guard:
        graph = builder.compile(checkpointer=saver)   # with ToolNode(guard.tools)
        await graph.ainvoke(None if resuming else inputs, config)

``guard.tools`` are the user's tools, each wrapped (same name, description and
arguments schema, so the model binds them as before), and one more,
``report_verification`` (``VERIFY_TOOL``, described by ``VERIFY_TOOL_DOC``), through
which the model reports what its check of an interrupted call found.

What the model reads. Each call answers with a ``ToolMessage`` for its tool-call id:

The full note: docs/reference/modules.md (``harness/integrations/langgraph.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, cast

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError
from pydantic import Field as PydanticField

from harness.integrations.guard import VERIFY_TOOL, VERIFY_TOOL_DOC, GuardReply, ToolGuard
from harness.runtime import CallContext, ToolError
from harness.runtime.aio import AsyncToolFunction

__all__ = ["LangGraphGuard", "current_call", "guard_tools", "tool_function"]

_CURRENT: ContextVar[CallContext | None] = ContextVar("harness_langgraph_call", default=None)


def current_call() -> CallContext | None:
    """The call a wrapped tool serves, while the guard runs it (``None`` outside the guard):
    op id, tool, attempt, life, and ``idempotency_key`` for an API that deduplicates."""
    return _CURRENT.get()


def tool_function(tools: Sequence[BaseTool]) -> AsyncToolFunction:
    """The runtime's ``execute(tool, args, ctx)`` over LangChain tools, by name.

    Each tool is invoked as the tool call ``ctx.op_id`` with ``current_call()`` set to
    ``ctx``; what it returns is the content of the ``ToolMessage`` it makes. A tool's
    failure (``ToolError``, ``ToolException``, an error ``ToolMessage``, arguments its
    schema refuses) becomes a ``ToolError``, which the runtime journals as FAILED; a
    ``TransientToolError`` passes as it is, for the runtime to retry or verify.
    """
    by_name = {tool.name: tool for tool in tools}

    async def execute(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        inner = by_name.get(tool)
        if inner is None:
            raise ToolError(f"unknown tool {tool!r}; the guard has {', '.join(by_name)}")
        token = _CURRENT.set(ctx)
        try:
            call = {"type": "tool_call", "id": ctx.op_id, "name": tool, "args": dict(args)}
            message = await inner.ainvoke(call)
        except ToolException as exc:
            raise ToolError(str(exc)) from exc
        except ValidationError as exc:  # refused before the tool ran
            raise ToolError(f"{tool}: invalid arguments: {exc}") from exc
        finally:
            _CURRENT.reset(token)
        if not isinstance(message, ToolMessage):
            raise TypeError(f"{tool} returned {type(message).__name__}, not a ToolMessage")
        if message.status == "error":
            raise ToolError(str(message.content))
        return message.content

    return execute


def _tool_message(reply: GuardReply, call_id: str, name: str) -> ToolMessage:
    result = reply.outcome.result
    content = result if reply.status == "ok" and isinstance(result, str) else reply.text
    hint = None if reply.hint is None else reply.hint.op_id
    return ToolMessage(
        content=content,
        tool_call_id=call_id,
        name=name,
        status="error" if reply.status == "fail" else "success",
        artifact={"status": reply.status, "op_id": reply.outcome.op_id, "hint": hint},
    )


def _call_of(tool: str, value: Any) -> tuple[str, dict[str, Any]]:
    """The id and arguments of a tool call handed to a wrapped tool; ``ValueError`` for
    anything else (the guard journals each call under its id, so it needs one)."""
    if isinstance(value, Mapping) and value.get("type") == "tool_call" and value.get("id"):
        return str(value["id"]), dict(value.get("args") or {})
    raise ValueError(
        f"{tool} is guarded: run it as a tool call ({{'type': 'tool_call', 'id': ..., "
        f"'name': {tool!r}, 'args': ...}}, as ToolNode does), not with {type(value).__name__}"
    )


class _GuardedTool(BaseTool):
    """A user's tool with the guard in front: same name, description and schema."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    _guard: ToolGuard = PrivateAttr()

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{self.name} is guarded: the guard is async (use ainvoke)")

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{self.name} is guarded: the guard is async (use ainvoke)")

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> ToolMessage:
        call_id, args = _call_of(self.name, input)
        reply = await self._guard.call(call_id, self.name, args)
        return _tool_message(reply, call_id, self.name)


class _Verification(BaseModel):
    op_id: str = PydanticField(description="the operation named in the hint")
    found: str = PydanticField(description='"present", "absent" or "unknown"')


class _VerifyTool(BaseTool):
    """``report_verification``: the model's report on a call of unknown outcome."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    name: str = VERIFY_TOOL
    description: str = VERIFY_TOOL_DOC
    args_schema: type[BaseModel] = _Verification
    _guard: ToolGuard = PrivateAttr()

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{VERIFY_TOOL} is the guard's: it is async (use ainvoke)")

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{VERIFY_TOOL} is the guard's: it is async (use ainvoke)")

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> ToolMessage:
        call_id, args = _call_of(self.name, input)
        try:
            report = _Verification.model_validate(args)
            reply = await self._guard.verified(report.op_id, cast(Any, report.found))
        except (ValidationError, ValueError) as exc:  # the model's mistake: it reads why
            return ToolMessage(
                content=f"error: {exc}",
                tool_call_id=call_id,
                name=self.name,
                status="error",
                artifact={"status": "fail", "op_id": args.get("op_id"), "hint": None},
            )
        return _tool_message(reply, call_id, self.name)


def _check_names(tools: Sequence[BaseTool]) -> None:
    names = [tool.name for tool in tools]
    if VERIFY_TOOL in names or len(set(names)) != len(names):
        raise ValueError(
            f"tool names must be unique and not {VERIFY_TOOL!r} (the guard's): {names}"
        )


def guard_tools(guard: ToolGuard, tools: Sequence[BaseTool]) -> list[BaseTool]:
    """``tools`` wrapped by ``guard``, and ``report_verification`` after them."""
    _check_names(tools)
    wrapped: list[BaseTool] = []
    for tool in tools:
        guarded = _GuardedTool(
            name=tool.name,
            description=tool.description,
            args_schema=tool.args_schema,
            return_direct=tool.return_direct,
        )
        guarded._guard = guard
        wrapped.append(guarded)
    verify = _VerifyTool()
    verify._guard = guard
    return [*wrapped, verify]


class LangGraphGuard:
    """A journal, and the user's tools guarded by it, for one process life."""

    def __init__(self, guard: ToolGuard, tools: Sequence[BaseTool]) -> None:
        self.guard = guard
        self.tools = guard_tools(guard, tools)
        """What to hand ``ToolNode`` (and the model's ``bind_tools``) instead of the tools."""

    @classmethod
    async def open(
        cls, journal: Path | str, tools: Sequence[BaseTool], **options: Any
    ) -> LangGraphGuard:
        """Open the journal (``ToolGuard.open``'s options: ``table``, ``max_attempts``,
        ...) and recover, running again what is retry-safe, before the graph resumes."""
        _check_names(tools)  # before the journal is opened and anything recovered
        guard = await ToolGuard.open(journal, tool_function(tools), **options)
        return cls(guard, tools)

    async def aclose(self) -> None:
        await self.guard.aclose()

    async def __aenter__(self) -> LangGraphGuard:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
