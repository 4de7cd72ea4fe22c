"""A stateless black box whose tools come over streamable HTTP through the MCP SDK's client.

It asks the model at ``OPENAI_BASE_URL`` (Chat Completions, standard library) and runs
each tool call it asks for on the MCP server at ``HARNESS_MCP_URL`` with the MCP SDK's
``ClientSession``, in one session. It keeps nothing: started again, it starts the task
over, so bare, a restart runs every call again. Behind the wire guard (a sidecar at its
MCP address), each call it re-issues is answered from the guard's journal.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import urllib.request
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def ask(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
    body = json.dumps({"model": "any", "messages": messages, "tools": tools}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        message: dict[str, Any] = json.loads(response.read())["choices"][0]["message"]
    return message


async def main() -> int:
    async with (
        streamable_http_client(os.environ["HARNESS_MCP_URL"]) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = (await session.list_tools()).tools
        tools = [
            {"type": "function", "function": {"name": t.name, "parameters": t.input_schema}}
            for t in listed
        ]
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Do the task."}]
        while True:
            message = ask(messages, tools)
            if not message.get("tool_calls"):
                print(message.get("content") or "")
                return 0
            messages.append({"role": "assistant", "content": None, **message})
            for call in message["tool_calls"]:
                function = call["function"]
                arguments = json.loads(function["arguments"] or "{}")
                result = await session.call_tool(function["name"], arguments)
                text = "".join(getattr(part, "text", "") for part in result.content)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
