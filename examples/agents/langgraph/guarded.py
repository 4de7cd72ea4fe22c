"""The LangGraph agent of agent.py with this project's guard in front of its MCP tools.

The same graph, checkpointer and restart as agent.py; each tool call goes through
``harness.integrations.langgraph.LangGraphGuard``, journaled in ``agent.journal`` in the
working folder, with the tool table the MCP server's tool annotations give
(langchain-mcp-adapters keeps them in each tool's ``metadata``).
"""

from __future__ import annotations

import asyncio
import sys

from agent import mcp_tools, run

from harness.integrations.langgraph import LangGraphGuard
from harness.runtime.classes import ToolTable


async def main() -> int:
    tools = await mcp_tools()
    table = ToolTable.from_annotations((tool.name, tool.metadata) for tool in tools)
    async with await LangGraphGuard.open("agent.journal", tools, table=table) as guard:
        return await run(guard.tools)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
