"""The guard for Google ADK: an ``LlmAgent``'s tool calls through this runtime.

ADK runs its model's function calls through each tool's ``run_async``, after the
agent's ``before_tool_callback``; a callback that returns a dict answers the call
and the tool is not run. The guard is that callback: it runs the call itself
through a ``ToolGuard`` (``harness.integrations.guard``) under the call's own id,
``ToolContext.function_call_id``, and answers with the outcome, so that a call the
journal knows is answered from it and one of unknown outcome with the VERIFY hint::

    async with await AdkGuard.open("agent.journal", [pay]) as guard:
        agent = LlmAgent(name="payer", model=model, tools=guard.tools,
                         before_tool_callback=guard.before_tool_callback)

``guard.tools`` are the user's tools (functions become ``FunctionTool``) and
``report_verification`` (``VERIFY_TOOL``). A call's answer, the function response the
model reads: the tool's own dict, ``{"result": ...}`` for any other result or a
VERIFY hint, ``{"error": ...}`` when it failed. ADK keeps the function call ids in
its session's events, so a resumed session's calls keep their op ids.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal, cast

from google.adk.agents.llm_agent import ToolUnion
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext
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

__all__ = ["AdkGuard", "current_call", "tool_function"]

_CURRENT: ContextVar[CallContext | None] = ContextVar("harness_adk_call", default=None)
_INVOKING: ContextVar[ToolContext | None] = ContextVar("harness_adk_ctx", default=None)
"""ADK's context of the call in progress (a redo runs in its report's context)."""


def current_call() -> CallContext | None:
    """The call a guarded tool serves, while the guard runs it (``None`` outside the guard):
    op id, tool, attempt, life, and ``idempotency_key`` for an API that deduplicates."""
    return _CURRENT.get()


def _as_tools(tools: Sequence[BaseTool | Callable[..., Any]]) -> list[BaseTool]:
    return [tool if isinstance(tool, BaseTool) else FunctionTool(tool) for tool in tools]


def tool_function(tools: Sequence[BaseTool]) -> AsyncToolFunction:
    """The runtime's ``execute(tool, args, ctx)`` over ADK tools, by name.

    Each tool's ``run_async`` runs in ADK's ``ToolContext`` of the call (none for a retry
    at recovery, before any run: a tool that needs one fails then), with
    ``current_call()`` set to ``ctx``; what it returns is the op's result. Its exception
    becomes a ``ToolError``, journaled as FAILED, or, when the reply was lost on the way
    (``reply_lost``: a dropped connection or MCP session, a timeout), a
    ``TransientToolError``: an unknown outcome, verified unless the class makes a retry
    safe. (ADK's MCP tools turn their exceptions into ``{"error"}`` results unless
    ``ADK_DISABLE_MCP_GRACEFUL_ERROR_HANDLING=1``; ``AdkGuard.open`` warns.)
    """
    by_name = {tool.name: tool for tool in tools}

    async def execute(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        inner = by_name.get(tool)
        if inner is None:
            raise ToolError(f"unknown tool {tool!r}; the guard has {', '.join(by_name)}")
        token = _CURRENT.set(ctx)
        try:
            tool_context = cast(ToolContext, _INVOKING.get())
            result = await inner.run_async(args=dict(args), tool_context=tool_context)
        except ToolError:
            raise
        except Exception as exc:
            raise tool_failure(tool, exc) from exc
        finally:
            _CURRENT.reset(token)
        return to_jsonable_python(result, fallback=str)

    return execute


def _mcp_errors_become_results(tools: Sequence[BaseTool]) -> bool:
    """Whether an MCP tool among ``tools`` turns its exceptions into ``{"error"}`` results
    (ADK's graceful MCP error handling, on by default): the guard never sees them raised."""
    from google.adk.features import FeatureName, is_feature_enabled

    module = sys.modules.get("google.adk.tools.mcp_tool.mcp_tool")  # not loaded: no MCP tool
    mcp_tool = getattr(module, "McpTool", None)
    graceful = getattr(FeatureName, "_MCP_GRACEFUL_ERROR_HANDLING", None)
    return (
        mcp_tool is not None
        and graceful is not None
        and any(isinstance(tool, mcp_tool) for tool in tools)
        and is_feature_enabled(graceful)
    )


def _answer(reply: GuardReply) -> dict[str, Any]:
    """The function response the model reads."""
    result = reply.outcome.result
    if reply.status == "ok":
        return result if isinstance(result, dict) else {"result": result}
    if reply.status == "fail":
        return {"error": reply.text}
    return {"result": reply.text}


class AdkGuard:
    """A journal, the user's tools and the callback that guards them, for one process life."""

    def __init__(self, guard: ToolGuard, tools: Sequence[BaseTool]) -> None:
        self.guard = guard
        self._guarded = frozenset(tool.name for tool in tools)
        self.tools: list[ToolUnion] = [*tools, FunctionTool(self._verify_tool())]
        """What to give the ``LlmAgent`` (``tools=``): the tools, and ``report_verification``."""

    @classmethod
    async def open(
        cls, journal: Path | str, tools: Sequence[BaseTool | Callable[..., Any]], **options: Any
    ) -> AdkGuard:
        """Open the journal (``ToolGuard.open``'s options: ``table``, ``max_attempts``,
        ...) and recover, running again what is retry-safe, before the agent runs."""
        adk_tools = _as_tools(tools)
        names = [tool.name for tool in adk_tools]
        if VERIFY_TOOL in names or len(set(names)) != len(names):
            raise ValueError(
                f"tool names must be unique and not {VERIFY_TOOL!r} (the guard's): {names}"
            )
        if _mcp_errors_become_results(adk_tools):
            warnings.warn(
                'ADK\'s MCP tools answer a lost connection with an {"error"} result, which '
                "the guard would journal as the call's result, not as an unknown outcome: "
                "set ADK_DISABLE_MCP_GRACEFUL_ERROR_HANDLING=1",
                stacklevel=2,
            )
        guard = await ToolGuard.open(journal, tool_function(adk_tools), **options)
        return cls(guard, adk_tools)

    async def before_tool_callback(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """The ``LlmAgent``'s ``before_tool_callback``: a guarded tool's call runs here,
        through the journal, and its answer stands for the tool's (ADK runs it no more);
        any other tool, and ``report_verification``, ADK runs as usual."""
        if tool.name not in self._guarded:
            return None
        op_id = tool_context.function_call_id
        if not op_id:
            return {"error": f"{tool.name}: a guarded call needs its function call id"}
        token = _INVOKING.set(tool_context)
        try:
            reply = await self.guard.call(op_id, tool.name, args)
        finally:
            _INVOKING.reset(token)
        return _answer(reply)

    def _verify_tool(self) -> Callable[..., Any]:
        guard = self.guard

        async def report_verification(
            op_id: str, found: Literal["present", "absent", "unknown"], tool_context: ToolContext
        ) -> dict[str, Any]:
            token = _INVOKING.set(tool_context)
            try:
                reply = await guard.verified(op_id, found)
            except ValueError as exc:  # the model's mistake: it reads why
                return {"error": str(exc)}
            finally:
                _INVOKING.reset(token)
            if reply.outcome.op_id == op_id:  # recorded, not redone: the record is the answer
                return {"result": reply.text}
            return _answer(reply)

        report_verification.__doc__ = VERIFY_TOOL_DOC
        return report_verification

    async def aclose(self) -> None:
        await self.guard.aclose()

    async def __aenter__(self) -> AdkGuard:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
