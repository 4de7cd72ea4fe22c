"""An agent on the Anthropic Python SDK (anthropic 2.17.0): Claude's Messages API, MCP tools.

The loop a user of Anthropic's SDK writes (its docs' "tool use" pattern): it streams each
turn from ``client.messages.stream`` at ``ANTHROPIC_BASE_URL``, runs every ``tool_use``
block of the turn on the MCP server at ``HARNESS_MCP_URL`` (the MCP SDK's ``Client``,
streamable HTTP), and sends the results back as ``tool_result`` blocks, until a turn asks
for no tool. It prints the model's last text and exits 0.

State: the conversation, ``messages.json`` in the working folder, written whole (to a
temporary file, then renamed) after each assistant turn and after each turn's results.
Started again, it reads the file back: a last turn whose tool calls have no results is
run again, call by call, as the Messages API requires a result for each before the next
turn.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from anthropic import AsyncAnthropic
from mcp.client import Client

MESSAGES = Path("messages.json")
MODEL = "claude-sonnet-4-5"
TASK = "Carry out the task step by step with the tools you have, then say you are done."


def load() -> list[dict[str, Any]]:
    if MESSAGES.exists():
        messages: list[dict[str, Any]] = json.loads(MESSAGES.read_text("utf-8"))
        return messages
    return [{"role": "user", "content": TASK}]


def save(messages: list[dict[str, Any]]) -> None:
    staged = MESSAGES.with_suffix(".tmp")
    staged.write_text(json.dumps(messages), "utf-8")
    os.replace(staged, MESSAGES)


async def run_tools(tools: Client, turn: list[dict[str, Any]]) -> dict[str, Any]:
    """The user turn that answers every ``tool_use`` block of ``turn``."""
    results = []
    for block in turn:
        if block["type"] != "tool_use":
            continue
        called = await tools.call_tool(block["name"], block["input"])
        text = [{"type": "text", "text": p.text} for p in called.content if p.type == "text"]
        result = {"type": "tool_result", "tool_use_id": block["id"], "content": text}
        results.append(result | ({"is_error": True} if called.is_error else {}))
    return {"role": "user", "content": results}


async def main() -> None:
    model = AsyncAnthropic()  # ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY from the environment
    messages = load()
    async with Client(os.environ["HARNESS_MCP_URL"]) as tools:
        listed = (await tools.list_tools()).tools
        offered = [
            {"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
            for t in listed
        ]
        while True:
            last = messages[-1]
            if last["role"] == "assistant" and any(
                block["type"] == "tool_use" for block in last["content"]
            ):
                messages.append(await run_tools(tools, last["content"]))
                save(messages)
                continue
            if last["role"] == "assistant":
                print("".join(b["text"] for b in last["content"] if b["type"] == "text"))
                return
            async with model.messages.stream(
                model=MODEL, max_tokens=1024, tools=offered, messages=messages
            ) as stream:
                reply = await stream.get_final_message()
            messages.append(
                {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}
            )
            save(messages)


if __name__ == "__main__":
    asyncio.run(main())
