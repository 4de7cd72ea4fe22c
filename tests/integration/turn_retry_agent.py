"""A broken black box for the faults of the model: it retries a failed model request by
running the whole turn again, the tool calls it already ran included.

A plain loop (standard library only, tools over MCP at ``HARNESS_MCP_URL``), correct in
a crash-free run. Its one bug is a retry at the wrong level: when asking the model fails
(an HTTP error, a cut or lost answer), it takes the turn to have failed and runs the last
answer's tool calls again before it asks again, as a retry wrapped around "call the tools,
then ask the model" would. Only a fault of the model's answer after an unsafe call's result
shows it: the world's ledger then holds that call twice.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

ATTEMPTS = 4


def post(url: str, body: object) -> bytes:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        data: bytes = response.read()
    return data


def mcp(method: str, params: dict[str, Any], number: list[int]) -> dict[str, Any]:
    number[0] += 1
    message = {"jsonrpc": "2.0", "id": number[0], "method": method, "params": params}
    answer = json.loads(post(os.environ["HARNESS_MCP_URL"], message))
    if "error" in answer:
        raise RuntimeError(answer["error"].get("message", "error"))
    result: dict[str, Any] = answer["result"]
    return result


def run_tool(call: dict[str, Any], number: list[int]) -> dict[str, Any]:
    function = call["function"]
    arguments = json.loads(function["arguments"] or "{}")
    result = mcp("tools/call", {"name": function["name"], "arguments": arguments}, number)
    text = "".join(part.get("text", "") for part in result.get("content", []))
    return {"role": "tool", "tool_call_id": call["id"], "content": text}


def main() -> int:
    number = [0]
    mcp(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "turn-retry", "version": "1"},
        },
        number,
    )
    listed = mcp("tools/list", {}, number)["tools"]
    schemas = [
        {"type": "function", "function": {"name": t["name"], "parameters": t["inputSchema"]}}
        for t in listed
    ]
    url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Carry out the task with your tools."}
    ]
    while True:
        for _attempt in range(ATTEMPTS):
            try:
                reply = json.loads(
                    post(url, {"model": "any", "messages": messages, "tools": schemas})
                )
                break
            except (OSError, http.client.HTTPException, ValueError) as exc:
                print(
                    f"turn-retry: the model failed ({exc}); running the turn again", file=sys.stderr
                )
                # The bug: the last answer's calls run again, their results replaced.
                asked = next((m for m in reversed(messages) if m.get("tool_calls")), None)
                if asked is not None:
                    at = messages.index(asked)
                    del messages[at + 1 :]
                    messages += [run_tool(call, number) for call in asked["tool_calls"]]
        else:
            return 1
        message = reply["choices"][0]["message"]
        if not message.get("tool_calls"):
            print(message.get("content") or "")
            return 0
        messages.append(
            {
                "role": "assistant",
                "content": message.get("content"),
                "tool_calls": message["tool_calls"],
            }
        )
        messages += [run_tool(call, number) for call in message["tool_calls"]]


if __name__ == "__main__":
    sys.exit(main())
