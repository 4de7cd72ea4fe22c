"""The UNKNOWN tools and the ask-user family: calls recorded, never made.

The UNKNOWN tools (shell, HTTP, MCP, terminal, code) stand for calls whose
effect the runtime cannot judge. Here they are contained: each only inserts a
``calls`` row with its arguments as canonical JSON and returns a deterministic
fake result. Whatever the arguments say, no process is started, no file
outside the world database is touched and no socket is opened.

The ask-user family asks a scripted person: the answer is derived from the
question's hash, and the question is recorded once per op, because asking
again under the same op id changes nothing in the world.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from harness.runtime.errors import ToolError
from harness.runtime.executor import CallContext
from harness.world.store import WorldStore

__all__ = [
    "ask_user",
    "ask_user_choice",
    "ask_user_confirm",
    "code_runner",
    "http_request",
    "mcp_call",
    "shell_execute",
    "terminal_exec",
]


def _record_call(world: WorldStore, args: Mapping[str, Any], ctx: CallContext, kind: str) -> str:
    """Record the call; returns a short hash of it for the fake result."""
    call = {k: v for k, v in args.items() if k != "fail_attempts"}
    payload = json.dumps(call, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    with world.execution(ctx) as db:
        db.execute(
            "INSERT INTO calls (kind, payload, op_id) VALUES (?, ?, ?)", (kind, payload, ctx.op_id)
        )
    return hashlib.sha256(f"{kind}:{payload}".encode()).hexdigest()[:12]


def shell_execute(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    _record_call(world, args, ctx, "shell")
    return {"exit_code": 0, "stdout": f"simulated: {args['command']}\n", "stderr": ""}


def terminal_exec(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    _record_call(world, args, ctx, "terminal_exec")
    return {"exit_code": 0, "stdout": f"simulated: {args['command']}\n", "stderr": ""}


def code_runner(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    h = _record_call(world, args, ctx, "code")
    return {"exit_code": 0, "stdout": f"simulated {args['language']} run {h}\n", "stderr": ""}


def http_request(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    h = _record_call(world, args, ctx, "http")
    return {"status": 200, "body": f"simulated {args['method']} {args['url']} ({h})"}


def mcp_call(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    h = _record_call(world, args, ctx, "mcp")
    text = f"simulated {args['server']}/{args['tool']} ({h})"
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _ask(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> int:
    """Record the question once per op; returns the question's hash as a number."""
    question: str = args["question"]
    with world.execution(ctx) as db:
        db.execute(
            "INSERT OR IGNORE INTO questions (tool, question, op_id) VALUES (?, ?, ?)",
            (ctx.tool, question, ctx.op_id),
        )
    return int.from_bytes(hashlib.sha256(question.encode()).digest()[:8], "big")


def ask_user(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    h = _ask(world, args, ctx)
    return {"answer": f"scripted answer {h:016x}"}


def ask_user_confirm(
    world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    _ask(world, args, ctx)
    return {"confirmed": True}


def ask_user_choice(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    options: list[Any] = args["options"]
    if not options:
        # Checked before asking: nobody can pick from nothing.
        raise ToolError("ask_user_choice: options must not be empty")
    h = _ask(world, args, ctx)
    return {"choice": options[h % len(options)]}
