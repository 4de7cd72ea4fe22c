"""A Pydantic AI agent made durable on DBOS: an OpenAI-compatible model, its tools from MCP.

Framework: Pydantic AI 2.78.0 (pydantic-ai-slim) with its DBOS integration
(``pydantic_ai.durable_exec.dbos.DBOSDurability``, the capability 2.78 has in place of
the deprecated ``DBOSAgent``) on DBOS 3.4.0. The model is ``OpenAIChatModel`` at
``OPENAI_BASE_URL``; the tools are an ``MCPToolset`` on the MCP server at
``HARNESS_MCP_URL`` (streamable HTTP).

State: DBOS's system database, SQLite, ``dbos.sqlite`` in the working folder. The run
is ``agent.run`` inside a DBOS workflow of fixed id ``WORKFLOW_ID``; each model request
and each MCP call is a DBOS step, its output checkpointed when it returns.

A restart: ``DBOS.launch()`` recovers the workflow left pending, replaying it from its
checkpointed steps (a step that had not returned, such as a tool call in flight, runs
again); starting the workflow again under the same id only hands back that run. The
final answer is printed, exit 0.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable

from dbos import DBOS, DBOSConfig, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.toolsets import AbstractToolset

WORKFLOW_ID = "phone-task"
TASK = "Carry out the task step by step with the tools you have, then say you are done."
CONFIG: DBOSConfig = {
    "name": "phone-agent",
    "system_database_url": "sqlite:///dbos.sqlite",
    "enable_otlp": False,
}


def mcp_toolset() -> MCPToolset[None]:
    return MCPToolset(os.environ["HARNESS_MCP_URL"], id="harness")


def make_agent(toolset: AbstractToolset[None]) -> Agent[None, str]:
    provider = OpenAIProvider(
        base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ.get("OPENAI_API_KEY", "x")
    )
    return Agent(
        OpenAIChatModel("gpt-4o-mini", provider=provider),
        name="phone_agent",
        toolsets=[toolset],
        capabilities=[DBOSDurability()],
    )


agent: Agent[None, str]  # made by main, before DBOS launches


@DBOS.workflow()
async def run_task() -> str:
    result = await agent.run(TASK)
    return result.output


async def serve(workflow: Callable[[], Awaitable[str]]) -> int:
    """Launch DBOS (which recovers the workflow a killed life left pending), start the
    workflow under its fixed id (an existing one is only handed back), print its answer."""
    DBOS(config=CONFIG)
    DBOS.launch()
    try:
        with SetWorkflowID(WORKFLOW_ID):
            handle = await DBOS.start_workflow_async(workflow)
        print(await handle.get_result())
    finally:
        DBOS.destroy()
    return 0


async def main() -> int:
    global agent
    agent = make_agent(mcp_toolset())
    return await serve(run_task)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
