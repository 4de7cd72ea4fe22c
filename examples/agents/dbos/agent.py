"""A plain agent loop made durable by DBOS: each model request and each tool call a DBOS step.

Framework: DBOS 3.4.0 (``dbos``), nothing else: the loop asks the model at
``OPENAI_BASE_URL`` (Chat Completions, over ``urllib``) and calls its tools on the MCP
server at ``HARNESS_MCP_URL`` (streamable HTTP, JSON-RPC by hand), as a user of DBOS
would write it without an agent framework.

State: DBOS's system database, SQLite, ``dbos.sqlite`` in the working folder. The run is
the workflow ``run_task`` of fixed id ``WORKFLOW_ID``; ``ask_model`` and ``call_tool`` are
its steps, each one's output checkpointed when it returns. Steps keep DBOS's default: no
retry (``retries_allowed=False``).

A restart: ``DBOS.launch()`` recovers the workflow left pending and replays it: a step
that returned hands back its checkpointed output, a step that had not returned (a tool
call in flight at the kill) runs again. Starting the workflow again under the same id
only hands back that run. The final answer is printed, exit 0.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from typing import Any

from dbos import DBOS, DBOSConfig, SetWorkflowID

WORKFLOW_ID = "phone-task"
TASK = "Carry out the task step by step with the tools you have, then say you are done."
CONFIG: DBOSConfig = {
    "name": "dbos-agent",
    "system_database_url": "sqlite:///dbos.sqlite",
    "enable_otlp": False,
}


def post(url: str, body: object, timeout: float = 120) -> Any:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        data = response.read()
    return json.loads(data) if data else None


def mcp(method: str, params: dict[str, Any]) -> Any:
    """One JSON-RPC request to the MCP server (its answer's result)."""
    answer = post(
        os.environ["HARNESS_MCP_URL"],
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
    )
    if "error" in answer:
        raise RuntimeError(answer["error"].get("message", "error"))
    return answer["result"]


@DBOS.step()
def list_tools() -> list[dict[str, Any]]:
    mcp(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "dbos-agent", "version": "1"},
        },
    )
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


@DBOS.step()
def ask_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
    reply = post(url, {"model": "any", "messages": messages, "tools": tools})
    message: dict[str, Any] = reply["choices"][0]["message"]
    return {
        "role": "assistant",
        "content": message.get("content"),
        **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {}),
    }


@DBOS.step()
def call_tool(name: str, arguments: str) -> str:
    """The text to show the model for one tool call."""
    try:
        result = mcp("tools/call", {"name": name, "arguments": json.loads(arguments or "{}")})
    except Exception as exc:  # the server went away or never answered
        return f"the tool call was interrupted, its outcome unknown: {exc}"
    return "".join(part.get("text", "") for part in result.get("content", []))


@DBOS.workflow()
def run_task() -> str:
    tools = list_tools()
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    while True:
        message = ask_model(messages, tools)
        messages.append(message)
        if not message.get("tool_calls"):
            return str(message.get("content") or "")
        for call in message["tool_calls"]:
            function = call["function"]
            text = call_tool(function["name"], function["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})


def main() -> int:
    """Launch DBOS (which recovers the workflow a killed life left pending), start the
    workflow under its fixed id (an existing one is only handed back), print its answer."""
    DBOS(config=CONFIG)
    DBOS.launch()
    try:
        with SetWorkflowID(WORKFLOW_ID):
            handle = DBOS.start_workflow(run_task)
        print(handle.get_result())
    finally:
        DBOS.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
