"""The OpenAI Agents SDK agent of ``agent.py`` with this project's guard in front of its tools.

The same agent, session and restart (``agent.py``'s pieces, imported); its MCP tools made
function tools as the SDK makes them (``MCPUtil.to_function_tool``) and given to
``OpenAIAgentsGuard`` (``harness.integrations.openai_agents``), which journals every call
in ``agent.journal`` in the working folder, with the tool table the server's MCP
annotations give. It knows a call by content (``identity="content"``, docs/reissue.md): a
model asked again after a restart gives the calls the session had not saved new ids. A
restart opens the journal first (recovery) and runs the agent again on its session: a call
the journal knows is answered from it, one whose outcome is unknown with a VERIFY hint.
"""

from __future__ import annotations

import asyncio

from agent import make_agent, mcp_server, run
from agents import set_tracing_disabled
from agents.mcp import MCPUtil

from harness.integrations.openai_agents import OpenAIAgentsGuard
from harness.runtime.classes import ToolTable


async def main() -> None:
    set_tracing_disabled(True)
    async with mcp_server() as server:
        listed = await server.list_tools()
        table = ToolTable.from_annotations(
            (
                t.name,
                t.annotations.model_dump(by_alias=True, exclude_none=True)
                if t.annotations
                else None,
            )
            for t in listed
        )
        tools = [MCPUtil.to_function_tool(t, server, False) for t in listed]
        async with await OpenAIAgentsGuard.open(
            "agent.journal", tools, table=table, identity="content"
        ) as guard:
            print(await run(make_agent(tools=guard.tools)))  # was: mcp_servers=[server]


if __name__ == "__main__":
    asyncio.run(main())
