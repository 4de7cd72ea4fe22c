"""A plain agent loop made durable by Restate: each model request and each tool call a ``ctx.run``.

Framework: Restate 1.7 (the server, ``@restatedev/restate-server`` from npm, run beside the
agent) and its Python SDK 1.2 (``restate-sdk``, the handler served by ``hypercorn``). The loop
asks the model at ``OPENAI_BASE_URL`` (Chat Completions, over ``urllib``) and calls its tools
on the MCP server at ``HARNESS_MCP_URL`` (streamable HTTP, JSON-RPC by hand, in a session of
its own per process when the server gives one), as a user of Restate would write it without
an agent framework.

State: Restate's server keeps the journal of the invocation (its RocksDB files in its own
data folder). The run is the handler ``PhoneAgent/run``, invoked under the idempotency key
``IDEMPOTENCY_KEY``; ``list_tools``, ``ask_model`` and ``call_tool`` are its ``ctx.run``
actions, each one's result journaled when it returns.

A life of the agent is this process: it serves the handler on ``RESTATE_ENDPOINT_PORT``,
registers that endpoint with the server's admin API (``RESTATE_ADMIN_PORT``), sends the
invocation to the ingress (``RESTATE_INGRESS_PORT``) and waits for its answer. A restart: the
server retries the invocation a killed life left (its retry policy), on the same endpoint,
and replays its journal: an action that returned hands back its journaled result, an action
that had not (a tool call in flight at the kill) runs again. The same idempotency key only
attaches to that invocation. The final answer is printed, exit 0.

Restate's own settings, for trying them (unset: Restate's defaults): ``AGENT_RUN_MAX_ATTEMPTS``
(a ``ctx.run``'s attempts when its action raises), ``AGENT_INVOCATION_MAX_ATTEMPTS`` (the
handler's invocation retry policy, with ``AGENT_ON_MAX_ATTEMPTS`` ``pause`` or ``kill``), and
``AGENT_INACTIVITY_TIMEOUT_MS`` and ``AGENT_ABORT_TIMEOUT_MS`` (how long the server waits on a
silent handler before it asks it to suspend, then before it aborts the attempt and retries).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any, Literal, cast

import restate
from hypercorn.asyncio import serve
from hypercorn.config import Config

IDEMPOTENCY_KEY = "phone-task"
TASK = "Carry out the task step by step with the tools you have, then say you are done."
HOST = "127.0.0.1"


def _attempts(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value else None


RUN_OPTIONS: restate.RunOptions[Any] = restate.RunOptions(
    max_attempts=_attempts("AGENT_RUN_MAX_ATTEMPTS")
)
_INVOCATION_ATTEMPTS = _attempts("AGENT_INVOCATION_MAX_ATTEMPTS")
RETRY_POLICY = (
    None
    if _INVOCATION_ATTEMPTS is None
    else restate.InvocationRetryPolicy(
        max_attempts=_INVOCATION_ATTEMPTS,
        on_max_attempts=cast(
            Literal["pause", "kill"], os.environ.get("AGENT_ON_MAX_ATTEMPTS", "pause")
        ),
        initial_interval=timedelta(milliseconds=500),
    )
)


def _millis(name: str) -> timedelta | None:
    value = os.environ.get(name)
    return timedelta(milliseconds=int(value)) if value else None


agent = restate.Service("PhoneAgent")


def post(
    url: str, body: object, headers: dict[str, str] | None = None, timeout: float = 120
) -> Any:
    return json.loads(_post(url, body, headers, timeout)[0] or b"null")


def _post(
    url: str, body: object, headers: dict[str, str] | None, timeout: float
) -> tuple[bytes, dict[str, str]]:
    """The body of the answer to a JSON POST, and its headers."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}",
            **(headers or {}),
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read(), {k.lower(): v for k, v in response.headers.items()}


SESSION: dict[str, str] = {}
"""This process's MCP session (streamable HTTP): the ``mcp-session-id`` header the server
gave at ``initialize``, sent with every later request; none when the server gives none."""


def mcp(method: str, params: dict[str, Any]) -> Any:
    """One JSON-RPC request to the MCP server (its answer's result), in this process's
    session (opened first when there is none)."""
    url = os.environ["HARNESS_MCP_URL"]
    if method != "initialize" and "opened" not in SESSION:
        mcp(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "restate-agent", "version": "1"},
            },
        )
    session = {"mcp-session-id": SESSION["id"]} if "id" in SESSION else {}
    body, headers = _post(
        url, {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, session, 120
    )
    if method == "initialize":
        SESSION.clear()
        SESSION["opened"] = "yes"
        if "mcp-session-id" in headers:
            SESSION["id"] = headers["mcp-session-id"]
        notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        _post(url, notice, {"mcp-session-id": SESSION["id"]} if "id" in SESSION else {}, 120)
    answer = json.loads(body)
    if "error" in answer:
        raise RuntimeError(answer["error"].get("message", "error"))
    return answer["result"]


def list_tools() -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t["inputSchema"],
            },
        }
        for t in mcp("tools/list", {})["tools"]
    ]


def ask_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
    reply = post(url, {"model": "any", "messages": messages, "tools": tools})
    message: dict[str, Any] = reply["choices"][0]["message"]
    return {
        "role": "assistant",
        "content": message.get("content"),
        **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {}),
    }


def call_tool(name: str, arguments: str) -> str:
    """The text to show the model for one tool call."""
    try:
        result = mcp("tools/call", {"name": name, "arguments": json.loads(arguments or "{}")})
    except Exception as exc:  # the server went away or never answered
        return f"the tool call was interrupted, its outcome unknown: {exc}"
    return "".join(part.get("text", "") for part in result.get("content", []))


@agent.handler(
    invocation_retry_policy=RETRY_POLICY,
    inactivity_timeout=_millis("AGENT_INACTIVITY_TIMEOUT_MS"),
    abort_timeout=_millis("AGENT_ABORT_TIMEOUT_MS"),
)
async def run(ctx: restate.Context, task: str) -> str:
    tools = await ctx.run_typed("list_tools", list_tools, RUN_OPTIONS)
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    while True:
        message = await ctx.run_typed("ask_model", ask_model, RUN_OPTIONS, messages, tools)
        messages.append(message)
        if not message.get("tool_calls"):
            return str(message.get("content") or "")
        for call in message["tool_calls"]:
            function = call["function"]
            text = await ctx.run_typed(
                f"call_tool {function['name']}",
                call_tool,
                RUN_OPTIONS,
                function["name"],
                function["arguments"],
            )
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})


def register(endpoint: str) -> None:
    """Register the endpoint with the server (the same endpoint again: no change). Retried
    while the server is still coming up."""
    admin = f"http://{HOST}:{os.environ['RESTATE_ADMIN_PORT']}/deployments"
    deadline = time.monotonic() + 60
    while True:
        try:
            post(admin, {"uri": endpoint})
            return
        except (urllib.error.URLError, ConnectionError) as exc:
            if time.monotonic() > deadline:
                raise SystemExit(f"restate agent: cannot register {endpoint}: {exc}") from None
            time.sleep(0.2)


def invoke() -> str:
    """Send the invocation under its idempotency key and wait for its answer: the first
    life starts it, a later one attaches to it. Retried while the ingress is coming up."""
    url = f"http://{HOST}:{os.environ['RESTATE_INGRESS_PORT']}/PhoneAgent/run"
    deadline = time.monotonic() + 60
    while True:
        try:
            return str(post(url, TASK, {"idempotency-key": IDEMPOTENCY_KEY}, timeout=3600))
        except urllib.error.HTTPError as exc:
            if exc.code != 503 or time.monotonic() > deadline:
                raise SystemExit(f"restate agent: the invocation failed: {exc.read()!r}") from None
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


async def main() -> int:
    """Serve the handler, register it, invoke it (or attach), print its answer."""
    # Bound here, so that a port another life still holds stops this one at once.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((HOST, int(os.environ["RESTATE_ENDPOINT_PORT"])))
    config = Config()
    config.bind = [f"fd://{listener.fileno()}"]
    stopping = asyncio.Event()
    app = restate.app([agent])
    server = asyncio.create_task(serve(app, config, shutdown_trigger=stopping.wait))  # type: ignore[arg-type]
    try:
        await asyncio.to_thread(register, f"http://{HOST}:{listener.getsockname()[1]}")
        print(await asyncio.to_thread(invoke))
    finally:
        stopping.set()
        await server
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
