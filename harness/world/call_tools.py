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
from collections.abc import Callable, Mapping
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


Reply = Callable[[str], dict[str, Any]]
"""Given the short hash of a call, its fake result."""


def _record_call(
    world: WorldStore, args: Mapping[str, Any], ctx: CallContext, kind: str, reply: Reply
) -> dict[str, Any]:
    """Record the call; returns its fake result, made from a short hash of it."""
    call = {k: v for k, v in args.items() if k != "fail_attempts"}
    payload = json.dumps(call, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    h = hashlib.sha256(f"{kind}:{payload}".encode()).hexdigest()[:12]
    with world.execution(ctx) as db:
        db.execute(
            "INSERT INTO calls (kind, payload, op_id) VALUES (?, ?, ?)", (kind, payload, ctx.op_id)
        )
        return world.answer(db, ctx, reply(h))


def shell_execute(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    out = {"exit_code": 0, "stdout": f"simulated: {args['command']}\n", "stderr": ""}
    return _record_call(world, args, ctx, "shell", lambda h: out)


def terminal_exec(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    out = {"exit_code": 0, "stdout": f"simulated: {args['command']}\n", "stderr": ""}
    return _record_call(world, args, ctx, "terminal_exec", lambda h: out)


def code_runner(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    def reply(h: str) -> dict[str, Any]:
        return {"exit_code": 0, "stdout": f"simulated {args['language']} run {h}\n", "stderr": ""}

    return _record_call(world, args, ctx, "code", reply)


def http_request(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    return _record_call(
        world,
        args,
        ctx,
        "http",
        lambda h: {"status": 200, "body": f"simulated {args['method']} {args['url']} ({h})"},
    )


def mcp_call(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    def reply(h: str) -> dict[str, Any]:
        text = f"simulated {args['server']}/{args['tool']} ({h})"
        return {"content": [{"type": "text", "text": text}], "isError": False}

    return _record_call(world, args, ctx, "mcp", reply)


def _ask(
    world: WorldStore, args: Mapping[str, Any], ctx: CallContext, reply: Callable[[int], Any]
) -> dict[str, Any]:
    """Record the question once per op; returns the answer, made from the question's hash."""
    question: str = args["question"]
    h = int.from_bytes(hashlib.sha256(question.encode()).digest()[:8], "big")
    with world.execution(ctx) as db:
        db.execute(
            "INSERT OR IGNORE INTO questions (tool, question, op_id) VALUES (?, ?, ?)",
            (ctx.tool, question, ctx.op_id),
        )
        return world.answer(db, ctx, reply(h))


def ask_user(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    return _ask(world, args, ctx, lambda h: {"answer": f"scripted answer {h:016x}"})


def ask_user_confirm(
    world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    return _ask(world, args, ctx, lambda h: {"confirmed": True})


def ask_user_choice(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    options: list[Any] = args["options"]
    if not options:
        # Checked before asking: nobody can pick from nothing.
        raise ToolError("ask_user_choice: options must not be empty")
    return _ask(world, args, ctx, lambda h: {"choice": options[h % len(options)]})
