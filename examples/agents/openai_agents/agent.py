"""An OpenAI Agents SDK agent (openai-agents 0.24.0): its tools from MCP, its memory a session.

An ``Agent`` whose tools are an MCP server's: ``MCPServerStreamableHttp`` at
``HARNESS_MCP_URL``, or ``MCPServerStdio`` running ``HARNESS_MCP_COMMAND`` when
``AGENT_MCP=stdio``. Its model is the SDK's default (the Responses API) through the OpenAI
client, which reads ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``. Tracing is disabled.

State: a ``SQLiteSession`` in ``session.db`` in the working folder, which the SDK's
``Runner`` reads before each run and writes each turn's items to (the model's calls and
their outputs) once the turn's tools have run. A restart runs the agent again on the same
session, as the SDK's docs tell a user to continue a conversation, with an input asking it
to carry on; an empty session (no run got as far as saving) starts the task afresh.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from typing import Any

from agents import Agent, Runner, SQLiteSession, set_tracing_disabled
from agents.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHttp

SESSION_DB = "session.db"
SESSION_ID = "phone-task"
TASK = "Carry out the task step by step with the tools you have, then say you are done."
CARRY_ON = "You were interrupted. Carry on with the task from where you left off."
MAX_TURNS = 100  # the SDK's default (10) is fewer model turns than a long task takes


def mcp_server() -> MCPServer:
    """The harness's tools: over stdio when AGENT_MCP=stdio, else over streamable HTTP."""
    if os.environ.get("AGENT_MCP") == "stdio":
        command, *args = shlex.split(os.environ["HARNESS_MCP_COMMAND"])
        return MCPServerStdio({"command": command, "args": args}, name="harness-tools")
    return MCPServerStreamableHttp({"url": os.environ["HARNESS_MCP_URL"]}, name="harness-tools")


def make_agent(**tools: Any) -> Agent:
    """The agent, given its tools (``mcp_servers=[...]`` or ``tools=[...]``)."""
    return Agent(
        name="phone agent",
        instructions="You operate a phone through your tools. Do the user's task.",
        **tools,
    )


async def run(agent: Agent) -> str:
    """Run ``agent`` on the session in the working folder until its final answer."""
    session = SQLiteSession(SESSION_ID, SESSION_DB)
    try:
        started = bool(await session.get_items(limit=1))
        result = await Runner.run(
            agent, CARRY_ON if started else TASK, session=session, max_turns=MAX_TURNS
        )
    finally:
        session.close()
    return str(result.final_output)


async def main() -> None:
    set_tracing_disabled(True)  # the SDK would otherwise export traces to OpenAI
    async with mcp_server() as server:
        print(await run(make_agent(mcp_servers=[server])))


if __name__ == "__main__":
    asyncio.run(main())
