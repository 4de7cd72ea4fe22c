"""How a tool call of the ``mcp`` adapter goes over MCP, and comes back: both ends' contract.

The agent (``harness.adapters.mcp_agent``) sends each call as one ``tools/call``
request to its tool server (``harness.adapters.mcp_tools_server``):

- ``name``: the tool; ``arguments``: its arguments, as the plan has them;
- ``_meta[CALL_META_KEY]``: the call's ``CallContext`` (``call_meta``): op id,
  attempt, incarnation and the op whose idempotency key it carries.

The server answers with a ``CallToolResult``:

- the tool's JSON result as ``structuredContent`` (and, as the protocol asks,
  the same JSON as a text block);
- a ``ToolError``, a ``TransientToolError`` or a failpoint's ``FailpointTriggered``
  as a result with ``isError`` whose ``structuredContent`` is
  ``{"error": <class name>, "message": <text>}`` (``error_payload``), raised again
  on the agent's side as the same class (``raise_error``), so that the runtime
  retries, fails or leaves the outcome unknown exactly as with tools in-process.

Anything else (an exception inside the server, a server gone) is not a tool's
answer: the agent raises ``ToolServerError``, which the runtime treats as a bug
of unknown outcome. This module imports no MCP SDK: both ends share it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from harness.runtime.errors import FailpointTriggered, HarnessError, ToolError, TransientToolError
from harness.runtime.executor import CallContext
from harness.world.catalog import ToolSpec

__all__ = [
    "CALL_META_KEY",
    "ERROR_CLASSES",
    "ToolServerError",
    "call_meta",
    "context_of",
    "error_payload",
    "input_schema",
    "raise_error",
]

CALL_META_KEY = "agent-crash-harness/call"
"""The key of the ``_meta`` object of a ``tools/call`` request that carries the call's context."""

ERROR_CLASSES: Mapping[str, type[HarnessError]] = MappingProxyType(
    {
        "ToolError": ToolError,
        "TransientToolError": TransientToolError,
        "FailpointTriggered": FailpointTriggered,
    }
)
"""The errors a tool call may end in that cross the wire, by class name."""


class ToolServerError(RuntimeError):
    """The tool server did not answer a call as a tool would: it failed inside, or is gone.

    Not a ``ToolError``: nobody knows whether the call had its effect, so the
    runtime journals the op's outcome as unknown and the agent stops. Remedy: read
    the server's traceback in the agent's stderr.
    """


def call_meta(ctx: CallContext) -> dict[str, Any]:
    """The ``_meta`` of a ``tools/call`` request for the call ``ctx``."""
    call = {"op_id": ctx.op_id, "attempt": ctx.attempt, "incarnation": ctx.incarnation}
    if ctx.key_op is not None:
        call["key_op"] = ctx.key_op
    return {CALL_META_KEY: call}


def context_of(tool: str, meta: Mapping[str, Any] | None) -> CallContext:
    """The ``CallContext`` a request's ``_meta`` carries; ``ToolError`` when it carries none."""
    call = (meta or {}).get(CALL_META_KEY)
    if not isinstance(call, Mapping):
        raise ToolError(f"{tool}: the request has no _meta[{CALL_META_KEY!r}] (op id, attempt)")
    try:
        op_id, attempt, incarnation = call["op_id"], call["attempt"], call["incarnation"]
    except KeyError as exc:
        raise ToolError(f"{tool}: _meta[{CALL_META_KEY!r}] lacks {exc}") from None
    key_op = call.get("key_op")
    return CallContext(
        str(op_id), tool, int(attempt), int(incarnation), None if key_op is None else str(key_op)
    )


def error_payload(error: HarnessError) -> dict[str, str]:
    """The ``structuredContent`` of an error result for ``error`` (one of ``ERROR_CLASSES``)."""
    return {"error": type(error).__name__, "message": str(error)}


def raise_error(tool: str, payload: Any) -> None:
    """Raise what an error result's ``structuredContent`` names; ``ToolServerError`` if none."""
    if isinstance(payload, Mapping):
        error = ERROR_CLASSES.get(str(payload.get("error")))
        if error is not None:
            raise error(str(payload.get("message", "")))
    raise ToolServerError(f"{tool}: the tool server answered with an error it did not name")


_JSON_TYPES = {"str": "string", "int": "integer", "bool": "boolean", "list": "array"}


def input_schema(spec: ToolSpec) -> dict[str, Any]:
    """A catalog tool's arguments as a JSON schema (the world's gate still checks each call)."""
    properties = {a.name: {"type": _JSON_TYPES.get(a.type, a.type)} for a in spec.args}
    properties["fail_attempts"] = {"type": "integer"}
    required = [a.name for a in spec.args if not a.optional]
    return {"type": "object", "properties": properties, "required": required}
