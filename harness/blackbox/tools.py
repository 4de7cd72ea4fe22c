"""The tools a black box calls: the scenario's tools as an MCP server, on the trial's world.

MCP's JSON-RPC over streamable HTTP (each ``POST`` answered with one JSON body, no
server-sent stream): ``initialize``, ``ping``, ``tools/list`` and ``tools/call``;
notifications are accepted (202); each listed tool has the MCP annotations of its class
(``mcp_annotations``). The stdio transport is a bridge to it
(``harness/blackbox/stdio_bridge.py``). Each call runs through the world's tool
function (``harness.world.tools.make_tool_function``), ledgered under the life's
pid (the host's: the process the supervisor started), with the points of a call
hit here: ``tool.received``, then the world's ``op.request``, ``op.mid_effect``
and ``op.reply``, then ``tool.before_reply``.

A black box's tool calls carry no id of the harness's: a call is known by its
content (tool and arguments) and position. It is the op of the latest call the
model asked for with that content (the model names its calls: ``model.jsonl``
holds every life's), else the first plan step with that content, else an op of
no step (``unplanned-<tool>``). Its attempt is one more than the calls of that op
the server answered before, in any life (``tools.jsonl``), so a call the world
fails transiently on its first attempts (``fail_attempts``) succeeds when asked
again. A lost reply or a lost request (``op.reply=lost-reply``, ``op.request=lost-request``)
drops the response: the connection closes with no answer. A call of a tool the server
does not list, or with arguments that are not an object, is refused with MCP's own error
(-32602) and recorded, never run; an optional argument sent as ``null`` is not given.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.adapters.mcp_wire import error_payload, input_schema
from harness.agent.plan import Plan
from harness.blackbox.model import Reply
from harness.runtime.classes import IdempotencyClass, ToolTable
from harness.runtime.errors import FailpointTriggered, ToolError, TransientToolError
from harness.runtime.executor import CallContext
from harness.world.catalog import CATALOG
from harness.world.store import WorldStore
from harness.world.tools import make_tool_function

__all__ = ["PROTOCOL_VERSION", "SERVER_NAME", "ToolEndpoint", "content_key", "mcp_annotations"]

SERVER_NAME = "agent-crash-harness-world"
PROTOCOL_VERSION = "2025-06-18"


_HINTS: Mapping[IdempotencyClass, dict[str, bool]] = {
    IdempotencyClass.READ_ONLY: {"readOnlyHint": True},
    IdempotencyClass.IDEMPOTENT_WRITE: {"readOnlyHint": False, "idempotentHint": True},
    IdempotencyClass.NON_IDEMPOTENT: {
        "readOnlyHint": False,
        "idempotentHint": False,
        "destructiveHint": True,
    },
}


def mcp_annotations(idempotency: IdempotencyClass) -> dict[str, Any]:
    """A tool's MCP annotations as its class in the trial's table gives them (none for an
    unknown class), so that a client classing tools from annotations gets the table's."""
    hints = _HINTS.get(idempotency)
    return {"annotations": dict(hints)} if hints else {}


def content_key(tool: str, args: Mapping[str, Any]) -> str:
    """A call's content, as one string: tool and arguments, keys sorted."""
    return json.dumps([tool, dict(args)], sort_keys=True, separators=(",", ":"), default=repr)


class ToolEndpoint:
    """The tool server of one life. ``hit`` marks a failpoint; ``issued`` holds every
    (op, content) the model asked for, oldest first (``note_issued`` adds to it)."""

    def __init__(
        self,
        plan: Plan,
        world: WorldStore,
        record: Path,
        hit: Callable[[str, str], None],
        issued: list[tuple[str, str]],
        table: ToolTable,
    ) -> None:
        self.plan = plan
        self.execute = make_tool_function(world, plan.tools)
        self.record = record
        self.hit = hit
        self.issued = issued
        specs = [*CATALOG.values(), *(tool.spec for tool in plan.tools.values())]
        self.tools = [
            {
                "name": s.name,
                "description": s.summary,
                "inputSchema": input_schema(s),
                **mcp_annotations(table.classify(s.name).idempotency),
            }
            for s in specs
        ]
        self.names = frozenset(tool["name"] for tool in self.tools)
        self._required = {t["name"]: set(t["inputSchema"].get("required", ())) for t in self.tools}
        self._attempts: dict[str, int] = {}
        for line in _lines(record):
            op = str(line.get("op"))
            self._attempts[op] = self._attempts.get(op, 0) + 1

    def note_issued(self, op: str, tool: str, args: Mapping[str, Any]) -> None:
        self.issued.append((op, content_key(tool, args)))

    def op_for(self, tool: str, args: Mapping[str, Any]) -> str:
        """The op a call of this content stands for (see the module)."""
        key = content_key(tool, args)
        for op, content in reversed(self.issued):
            if content == key:
                return op
        step = next((s for s in self.plan.steps if content_key(s.tool, s.args) == key), None)
        return step.op_id if step is not None else f"unplanned-{tool}"

    def handle(self, method: str, body: bytes, via: str = "http") -> Reply | None:
        """The reply to one HTTP request on the MCP endpoint; None: drop it (no answer)."""
        if method != "POST":
            return Reply(405, "application/json", (b'{"error": "POST JSON-RPC messages"}',))
        try:
            message = json.loads(body or b"null")
        except ValueError as exc:
            return _rpc_reply(_rpc_error(None, -32700, f"parse error: {exc}"))
        if isinstance(message, list):  # a JSON-RPC batch
            answers = []
            for one in message:
                answer = self._one(one, via)
                if answer is _DROP:
                    return None
                if answer is not None:
                    answers.append(answer)
            return _rpc_reply(answers) if answers else Reply(202, "application/json", ())
        answer = self._one(message, via)
        if answer is _DROP:
            return None
        return Reply(202, "application/json", ()) if answer is None else _rpc_reply(answer)

    def _one(self, message: Any, via: str) -> dict[str, Any] | None:
        if not isinstance(message, dict) or "method" not in message:
            return None  # a response or junk: nothing to answer
        method, params = str(message["method"]), message.get("params") or {}
        if "id" not in message:
            return None  # a notification
        rid = message["id"]
        if method == "initialize":
            version = params.get("protocolVersion") if isinstance(params, dict) else None
            result: dict[str, Any] = {
                "protocolVersion": version or PROTOCOL_VERSION,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": SERVER_NAME, "version": "1"},
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": self.tools}
        elif method == "tools/call" and isinstance(params, dict):
            name, args = params.get("name"), params.get("arguments") or {}
            problem = (
                f"unknown tool: {name!r}"
                if name not in self.names
                else "arguments must be a JSON object"
                if not isinstance(args, dict)
                else None
            )
            if problem is not None:  # MCP's own error, and a line of evidence
                self._write("refused", str(name), args, 0, f"refused: {problem}", via)
                return _rpc_error(rid, -32602, problem)
            # An optional argument sent as null is one not given (an adapter that fills
            # every field of the schema, as crewai-tools' MCPServerAdapter does).
            args = {k: v for k, v in args.items() if v is not None or k in self._required[name]}
            called = self._call(str(name), args, via)
            if called is None:
                return _DROP
            result = called
        else:
            return _rpc_error(rid, -32601, f"method not found: {method}")
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def _call(self, tool: str, args: dict[str, Any], via: str) -> dict[str, Any] | None:
        op = self.op_for(tool, args)
        attempt = self._attempts.get(op, 0) + 1
        self._attempts[op] = attempt
        self.hit("tool.received", op)
        outcome = "ok"
        try:
            result: Any = self.execute(tool, args, CallContext(op, tool, attempt, 0))
            is_error = False
        except TransientToolError as exc:
            if "(failpoint " in str(exc):  # a lost reply or request: nobody gets an answer
                self._write(op, tool, args, attempt, "dropped", via)
                return None
            result, is_error, outcome = error_payload(exc), True, "error"
        except (ToolError, FailpointTriggered) as exc:
            result, is_error, outcome = error_payload(exc), True, "error"
        self._write(op, tool, args, attempt, outcome, via)
        self.hit("tool.before_reply", op)
        text = json.dumps(result, ensure_ascii=False)
        answer: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
        if isinstance(result, dict):
            answer["structuredContent"] = result
        return answer

    def _write(self, op: str, tool: str, args: Any, attempt: int, outcome: str, via: str) -> None:
        line = {
            "t_ns": time.time_ns(),
            "pid": os.getpid(),  # the life's (its host's), as the ledger records it
            "op": op,
            "tool": tool,
            "args": args,
            "attempt": attempt,
            "outcome": outcome,
            "via": via,
        }
        with open(self.record, "a", encoding="utf-8") as out:
            out.write(json.dumps(line, default=repr) + "\n")


_DROP: dict[str, Any] = {}
"""The answer of a call whose response is dropped (compared by identity)."""


def _rpc_error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def _rpc_reply(answer: object) -> Reply:
    return Reply(200, "application/json", (json.dumps(answer).encode(),))


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text("utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a kill
    return out


def issued_calls(model_record: Path) -> list[tuple[str, str]]:
    """Every (op, content) the model asked for in earlier lives, oldest first."""
    return [
        (str(call["op"]), content_key(str(call["tool"]), call.get("args") or {}))
        for line in _lines(model_record)
        for call in line.get("calls", ())
    ]
