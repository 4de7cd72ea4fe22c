"""The Google ADK agent of ``agent.py``, its MCP tools behind this project's guard.

The same app, session and resume (``agent.py``); the guard
(``harness.integrations.adk.AdkGuard``) is the agent's ``before_tool_callback``: it
runs each call of an MCP tool through its journal, ``agent.journal`` in the working
folder, under ADK's function call id, which the session keeps across a restart. The
tool table comes from the MCP server's tool annotations. ADK's graceful MCP error
handling is off, so that a lost reply reaches the guard as the exception it is.
"""

from __future__ import annotations

import asyncio
import os
import sys

# ADK's MCP tools answer their own exceptions, a lost connection too, with an {"error"}
# result; the guard must see the exception to journal a lost reply as an unknown outcome.
os.environ["ADK_DISABLE_MCP_GRACEFUL_ERROR_HANDLING"] = "1"

from agent import build_app, mcp_tools, run
from google.adk.tools.mcp_tool import McpTool

from harness.integrations.adk import AdkGuard
from harness.runtime.classes import ToolTable


def hints(tool: McpTool) -> dict[str, object] | None:
    """The MCP annotations the server listed the tool with (wire names)."""
    annotations = tool.raw_mcp_tool.annotations
    return annotations.model_dump(by_alias=True, exclude_none=True) if annotations else None


async def main() -> int:
    toolset = mcp_tools()
    tools = await toolset.get_tools()
    table = ToolTable.from_annotations((tool.name, hints(tool)) for tool in tools)
    async with await AdkGuard.open("agent.journal", tools, table=table) as guard:
        app = build_app(guard.tools, before_tool_callback=guard.before_tool_callback)
        code = await run(app)
    await toolset.close()
    return code


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
