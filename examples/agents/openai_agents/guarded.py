"""The OpenAI Agents SDK agent of ``agent.py`` with this project's guard in front of its tools.

The same agent, session and restart (``agent.py``'s pieces, imported); its MCP tools made
function tools as the SDK makes them (``MCPUtil.to_function_tool``) and given to
``OpenAIAgentsGuard`` (``harness.integrations.openai_agents``), which journals every call
in ``agent.journal`` in the working folder, with the tool table the server's MCP
annotations give. It knows a call by content (``identity="content"``, docs/reissue.md): a
model asked again after a restart gives the calls the session had not saved new ids; the
calls the session did save are handed to the guard (``session=``), so that none of them
answers a new call of the same content (a check that must read the world now). A restart
opens the journal first (recovery) and runs the agent again on its session: a call the
journal knows is answered from it, one whose outcome is unknown with a VERIFY hint.

Two changes to the SDK's defaults make a lost reply an unknown outcome rather than a
result: the tools let their exceptions out (``failure_error_function=None``; the default
turns them into an error text, which the guard would journal as the call's result), and a
lost connection is reopened before the next call (the SDK leaves the MCP session closed,
and every later call would fail without being sent).
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent import SESSION_DB, SESSION_ID, make_agent, mcp_server, run
from agents import FunctionTool, SQLiteSession, set_tracing_disabled
from agents.mcp import MCPServer, MCPUtil
from agents.tool_context import ToolContext

from harness.integrations.guard import reply_lost
from harness.integrations.openai_agents import OpenAIAgentsGuard
from harness.runtime.classes import ToolTable


class Reconnecting:
    """Reopens ``server``'s MCP session before the first call after one lost its reply."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.lost = False
        self._lock = asyncio.Lock()

    def wrap(self, tool: FunctionTool) -> FunctionTool:
        inner = tool.on_invoke_tool

        async def invoke(ctx: ToolContext[Any], arguments: str) -> Any:
            async with self._lock:
                if self.lost:
                    await self.server.cleanup()
                    await self.server.connect()
                    self.lost = False
            try:
                return await inner(ctx, arguments)
            except Exception as exc:
                self.lost = self.lost or reply_lost(exc)
                raise

        tool.on_invoke_tool = invoke
        return tool


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
        connection = Reconnecting(server)
        tools = [
            connection.wrap(MCPUtil.to_function_tool(t, server, False, failure_error_function=None))
            for t in listed
        ]
        session = SQLiteSession(SESSION_ID, SESSION_DB)  # the one agent.py's run() reads
        try:
            guard = await OpenAIAgentsGuard.open(
                "agent.journal", tools, table=table, identity="content", session=session
            )
        finally:
            session.close()
        async with guard:
            print(await run(make_agent(tools=guard.tools)))  # was: mcp_servers=[server]


if __name__ == "__main__":
    asyncio.run(main())
