"""A plain MCP agent (the MCP SDK's client, no import of this project): pays one invoice.

Its "model" is a few lines of code that act as a careful LLM would on what the tools
answer: it pays the invoice with a fresh request id (a new one every time it runs, as a
model that re-synthesizes the call makes), and when a tool answers with a VERIFY hint
(the guard's result for a call that may have run) it lists the payments, reports what it
found with ``report_verification``, and pays only if the payment is absent. It keeps no
state: started again, it starts the task over. With ``AGENT_STATE`` (a file) it first
checks whether the invoice is paid, and keeps each finished step in that file, as a
framework that checkpoints tool results does: started again, it goes on from there.

The MCP server is the command in ``AGENT_MCP_COMMAND`` (stdio) or the URL in
``AGENT_MCP_URL`` (streamable HTTP). What it was told goes to stdout, one JSON line each.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import uuid
from contextlib import AsyncExitStack
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

INVOICE = {
    "to": "ACME GmbH",
    "amount": 12900,
    "invoice": os.environ.get("AGENT_INVOICE", "INV-2041"),
}


def say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


async def call(session: ClientSession, tool: str, args: dict[str, Any]) -> Any:
    result = await session.call_tool(tool, args)
    data = result.structured_content
    text = " ".join(getattr(part, "text", "") for part in result.content)
    say("result", tool=tool, args=args, error=result.is_error, data=data, text=text)
    return result


async def paid(session: ClientSession) -> bool:
    listed = (await call(session, "list_payments", {})).structured_content or {}
    return any(p.get("invoice") == INVOICE["invoice"] for p in listed.get("payments", []))


async def run(session: ClientSession) -> None:
    await session.initialize()
    tools = [tool.name for tool in (await session.list_tools()).tools]
    say("tools", names=tools)
    state = os.environ.get("AGENT_STATE")
    if state is not None and not os.path.exists(state):
        if await paid(session):
            say("done")
            return
        with open(state, "w", encoding="utf-8") as kept:  # checked: not asked again
            kept.write("checked\n")
            kept.flush()
            os.fsync(kept.fileno())
    result = await call(session, "pay", {**INVOICE, "request_id": str(uuid.uuid4())})
    verify = (result.structured_content or {}).get("verify") if result.is_error else None
    if verify is not None:
        say("verify", op=verify)
        found = "present" if await paid(session) else "absent"
        await call(session, "report_verification", {"op_id": verify, "found": found})
    say("done")


async def main() -> int:
    async with AsyncExitStack() as stack:
        url = os.environ.get("AGENT_MCP_URL")
        if url:
            from mcp.client.streamable_http import streamable_http_client

            read, write, *_ = await stack.enter_async_context(streamable_http_client(url))
        else:
            command = shlex.split(os.environ["AGENT_MCP_COMMAND"])
            params = StdioServerParameters(
                command=command[0], args=command[1:], env=dict(os.environ)
            )
            read, write = await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
        session = await stack.enter_async_context(ClientSession(read, write))
        await run(session)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
