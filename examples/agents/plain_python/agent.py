"""A plain agent loop, standard library only: a model over HTTP, tools over MCP.

What a user might write without any framework: it asks the model at
``OPENAI_BASE_URL`` (Chat Completions) what to do, runs each tool call it asks
for on an MCP server, and keeps the conversation in ``progress.jsonl`` in its
working folder, one message a line, appended after each tool result. Started
again, it reads that file back and goes on from there: a call the model asked
for whose result is not in the file is run (again).

The MCP server is the command in ``HARNESS_MCP_COMMAND`` (stdio, JSON-RPC by
hand), or ``HARNESS_MCP_URL`` (streamable HTTP) when ``AGENT_MCP=http``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

PROGRESS = Path("progress.jsonl")
TASK = "Carry out the task step by step with the tools you have, then say you are done."


def post(url: str, body: object, timeout: float = 120) -> bytes:
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
        return response.read()


class StdioTools:
    """An MCP client over a server's stdin and stdout."""

    def __init__(self, command: str) -> None:
        self.server = subprocess.Popen(
            shlex.split(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.next_id = 0

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.server.stdout is not None
        for line in self.server.stdout:
            message = json.loads(line)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(message["error"].get("message", "error"))
                return message["result"]
        raise RuntimeError("the tool server closed its output")

    def send(self, message: dict) -> None:
        assert self.server.stdin is not None
        self.server.stdin.write(json.dumps(message) + "\n")
        self.server.stdin.flush()

    def close(self) -> None:
        assert self.server.stdin is not None
        self.server.stdin.close()
        self.server.wait()


class HttpTools:
    """An MCP client over streamable HTTP (JSON answers)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.next_id = 0

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        answer = json.loads(post(self.url, message))
        if "error" in answer:
            raise RuntimeError(answer["error"].get("message", "error"))
        return answer["result"]

    def send(self, message: dict) -> None:
        post(self.url, message)

    def close(self) -> None:
        pass


def connect() -> StdioTools | HttpTools:
    tools: StdioTools | HttpTools
    if os.environ.get("AGENT_MCP") == "http":
        tools = HttpTools(os.environ["HARNESS_MCP_URL"])
    else:
        tools = StdioTools(os.environ["HARNESS_MCP_COMMAND"])
    tools.request(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "plain-python-agent", "version": "1"},
        },
    )
    tools.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return tools


def run_tool(tools: StdioTools | HttpTools, call: dict) -> str:
    """The text to show the model for one tool call."""
    function = call["function"]
    try:
        arguments = json.loads(function["arguments"] or "{}")
        result = tools.request("tools/call", {"name": function["name"], "arguments": arguments})
    except Exception as exc:  # the server went away or never answered
        return f"the tool call was interrupted, its outcome unknown: {exc}"
    return "".join(part.get("text", "") for part in result.get("content", []))


def save(message: dict) -> None:
    with PROGRESS.open("a", encoding="utf-8") as out:
        out.write(json.dumps(message) + "\n")


def main() -> int:
    if PROGRESS.exists():
        lines = PROGRESS.read_text("utf-8").splitlines()
        messages = [json.loads(line) for line in lines if line]
    else:
        messages = [{"role": "user", "content": TASK}]
        save(messages[0])
    tools = connect()
    listed = tools.request("tools/list", {})["tools"]
    schemas = [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t["inputSchema"],
            },
        }
        for t in listed
    ]
    model_url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
    while True:
        # A call the model asked for whose result the file does not hold: run it (again).
        asked = next((m for m in reversed(messages) if m.get("role") == "assistant"), {})
        answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
        waiting = [c for c in asked.get("tool_calls") or [] if c["id"] not in answered]
        if waiting:
            for call in waiting:
                result = {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": run_tool(tools, call),
                }
                messages.append(result)
                save(result)
            continue
        reply = json.loads(
            post(model_url, {"model": "any", "messages": messages, "tools": schemas})
        )
        message = reply["choices"][0]["message"]
        if not message.get("tool_calls"):
            print(message.get("content") or "")
            tools.close()
            return 0
        message = {
            "role": "assistant",
            "content": message.get("content"),
            "tool_calls": message["tool_calls"],
        }
        messages.append(message)
        for n, call in enumerate(message["tool_calls"]):
            result = {"role": "tool", "tool_call_id": call["id"], "content": run_tool(tools, call)}
            if n == 0:
                save(message)  # the model's message goes to the file with its first result
            messages.append(result)
            save(result)


if __name__ == "__main__":
    sys.exit(main())
