"""The guard for the OpenAI Agents SDK: an agent's function tools through this runtime.

The SDK's ``Runner`` runs its model's function calls through each ``FunctionTool``'s
``on_invoke_tool``; a run resumed after a crash (from a saved ``RunState`` or the
session's history) runs again a call whose output had not been saved, whatever the
tool. ``OpenAIAgentsGuard`` gives every tool an ``on_invoke_tool`` that sends the
call through a ``ToolGuard`` (``harness.integrations.guard``) under the call's own
id, ``ToolContext.tool_call_id``::

    async with await OpenAIAgentsGuard.open("agent.journal", [pay]) as guard:
        agent = Agent(name="payer", model=model, tools=guard.tools)  # was: tools=[pay]
        result = await Runner.run(agent, "Pay A-17")

``guard.tools`` are the user's tools, each a copy with the guard in front (same name,
description and schema), and ``report_verification`` (``VERIFY_TOOL``). What the
model reads for a call: the tool's output when it ran or the journal knows it, the
VERIFY hint when its outcome is unknown after a crash, ``error: ...`` when it failed.
An MCP server's tools are guarded the same way, as the SDK converts them:
``MCPUtil.to_function_tool(tool, server, ...)`` for each of ``server.list_tools()``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from agents import FunctionTool, Session, Tool
from agents.tool import ValidToolOutputPydanticModelsTypeAdapter
from agents.tool_context import ToolContext
from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from harness.integrations.guard import (
    VERIFY_TOOL,
    VERIFY_TOOL_DOC,
    GuardReply,
    ToolGuard,
    tool_failure,
)
from harness.runtime import CallContext, ToolError
from harness.runtime.aio import AsyncToolFunction

__all__ = ["OpenAIAgentsGuard", "current_call", "guard_tools", "tool_function"]

_CURRENT: ContextVar[CallContext | None] = ContextVar("harness_agents_call", default=None)
_INVOKING: ContextVar[ToolContext[Any] | None] = ContextVar("harness_agents_ctx", default=None)
"""The SDK's context of the call in progress (a redo runs in its report's context)."""

_VERIFY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "op_id": {"type": "string", "description": "the operation named in the hint"},
        "found": {"type": "string", "enum": ["present", "absent", "unknown"]},
    },
    "required": ["op_id", "found"],
    "additionalProperties": False,
}


def current_call() -> CallContext | None:
    """The call a wrapped tool serves, while the guard runs it (``None`` outside the guard):
    op id, tool, attempt, life, and ``idempotency_key`` for an API that deduplicates."""
    return _CURRENT.get()


def _sdk_context(op_id: str, tool: str, arguments: str) -> ToolContext[Any]:
    """The ``ToolContext`` to run op ``op_id`` in: the SDK's own for the call in progress,
    a copy of it for a redo, a bare one for a retry at recovery (no run is under way)."""
    calling = _INVOKING.get()
    if calling is not None and calling.tool_call_id == op_id:
        return calling
    if calling is None:
        return ToolContext(None, tool_name=tool, tool_call_id=op_id, tool_arguments=arguments)
    return ToolContext(
        calling.context,
        calling.usage,
        tool_name=tool,
        tool_call_id=op_id,
        tool_arguments=arguments,
        agent=calling.agent,
        run_config=calling.run_config,
    )


def tool_function(tools: Sequence[FunctionTool]) -> AsyncToolFunction:
    """The runtime's ``execute(tool, args, ctx)`` over function tools, by name.

    Each tool's own ``on_invoke_tool`` runs, with ``current_call()`` set to ``ctx``. Its
    output is the op's result. An exception it lets out (make the tool with
    ``failure_error_function=None``: the SDK's default turns any exception, a lost
    connection too, into an error text, which would be journaled as the result) becomes
    a ``ToolError``, journaled as FAILED, or, when the reply was lost on the way
    (``reply_lost``: a dropped connection or MCP session, a timeout), a
    ``TransientToolError``: an unknown outcome, verified unless the class makes a retry
    safe.
    """
    by_name = {tool.name: tool for tool in tools}

    async def execute(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        inner = by_name.get(tool)
        if inner is None:
            raise ToolError(f"unknown tool {tool!r}; the guard has {', '.join(by_name)}")
        arguments = json.dumps(dict(args), ensure_ascii=False)
        token = _CURRENT.set(ctx)
        try:
            output = await inner.on_invoke_tool(_sdk_context(ctx.op_id, tool, arguments), arguments)
        except ToolError:
            raise
        except Exception as exc:
            raise tool_failure(tool, exc) from exc
        finally:
            _CURRENT.reset(token)
        return to_jsonable_python(output, fallback=str)

    return execute


def _structured(result: Any) -> bool:
    """Whether a tool's output, as journaled, is one the SDK shows its model as content
    parts: a ``ToolOutputText``, ``ToolOutputImage`` or ``ToolOutputFileContent`` (a dict
    with its ``type``), or a list of them. An MCP tool's output always is one."""
    parts = result if isinstance(result, list) and result else [result]
    for part in parts:
        if not isinstance(part, dict) or "type" not in part:
            return False
        try:
            ValidToolOutputPydanticModelsTypeAdapter.validate_python(part)
        except ValidationError:
            return False
    return True


def _answer(reply: GuardReply) -> Any:
    """What the tool returns to the SDK: a text result, or a structured output (which the
    SDK converts for its model as it converts the tool's own), as it is; anything else as
    the reply's text."""
    result = reply.outcome.result
    if reply.status == "ok" and (isinstance(result, str) or _structured(result)):
        return result
    return reply.text


def _guarded(guard: ToolGuard, tool: FunctionTool) -> FunctionTool:
    name = tool.name

    async def invoke(ctx: ToolContext[Any], arguments: str) -> Any:
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:  # the model's mistake: it reads why, nothing is journaled
            return f"error: {name}: the arguments are not JSON: {exc}"
        if not isinstance(args, dict):
            return f"error: {name}: the arguments must be a JSON object"
        token = _INVOKING.set(ctx)
        try:
            reply = await guard.call(ctx.tool_call_id, name, args)
        finally:
            _INVOKING.reset(token)
        return _answer(reply)

    return replace(tool, on_invoke_tool=invoke)


def _verify_tool(guard: ToolGuard) -> FunctionTool:
    async def report(ctx: ToolContext[Any], arguments: str) -> Any:
        token = _INVOKING.set(ctx)
        try:
            args = json.loads(arguments)
            reply = await guard.verified(str(args["op_id"]), cast(Any, args["found"]))
        except (ValueError, KeyError, TypeError) as exc:  # the model's mistake: it reads why
            return f"error: {exc}"
        finally:
            _INVOKING.reset(token)
        return _answer(reply)

    return FunctionTool(
        name=VERIFY_TOOL,
        description=VERIFY_TOOL_DOC,
        params_json_schema=_VERIFY_SCHEMA,
        on_invoke_tool=report,
    )


def _answered_calls(items: Sequence[Any]) -> list[str]:
    """The call ids of the function call outputs among a session's items."""
    return [
        str(item["call_id"])
        for item in items
        if isinstance(item, dict)
        and item.get("type") == "function_call_output"
        and item.get("call_id")
    ]


def _check_names(tools: Sequence[FunctionTool]) -> None:
    names = [tool.name for tool in tools]
    if VERIFY_TOOL in names or len(set(names)) != len(names):
        raise ValueError(
            f"tool names must be unique and not {VERIFY_TOOL!r} (the guard's): {names}"
        )


def guard_tools(guard: ToolGuard, tools: Sequence[FunctionTool]) -> list[FunctionTool]:
    """``tools`` wrapped by ``guard``, and ``report_verification`` after them."""
    _check_names(tools)
    return [*(_guarded(guard, tool) for tool in tools), _verify_tool(guard)]


class OpenAIAgentsGuard:
    """A journal, and the user's function tools guarded by it, for one process life."""

    def __init__(self, guard: ToolGuard, tools: Sequence[FunctionTool]) -> None:
        self.guard = guard
        self.tools: list[Tool] = [*guard_tools(guard, tools)]
        """What to give the ``Agent`` (``tools=``) instead of the tools."""

    @classmethod
    async def open(
        cls,
        journal: Path | str,
        tools: Sequence[FunctionTool],
        *,
        session: Session | None = None,
        **options: Any,
    ) -> OpenAIAgentsGuard:
        """Open the journal (``ToolGuard.open``'s options: ``table``, ``max_attempts``,
        ``identity``, ...) and recover, running again what is retry-safe, before the run
        resumes. ``session``, the agent's: the calls it saved with their outputs are ones
        its model will not issue again, so under identity by content none of them answers
        a new call of the same tool and arguments (a check that must read the world now)."""
        _check_names(tools)  # before the journal is opened and anything recovered
        guard = await ToolGuard.open(journal, tool_function(tools), **options)
        if session is not None:
            guard.runtime.claim(_answered_calls(await session.get_items()))
        return cls(guard, tools)

    async def aclose(self) -> None:
        await self.guard.aclose()

    async def __aenter__(self) -> OpenAIAgentsGuard:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
