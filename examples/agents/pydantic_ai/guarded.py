"""The Pydantic AI agent of agent.py with this project's guard in front of its MCP tools.

The same agent, DBOS workflow id and restart as agent.py; its MCP toolset is wrapped in
``harness.integrations.pydantic_ai.GuardedToolset``, journaled in ``agent.journal`` in
the working folder, with the tool table the MCP server's tool annotations give. As the
guard's docstring asks under DBOS, each tool call is one DBOS step with the guard inside
it (``StepToolset``), and no DBOS step under the guard: ``StepToolset`` is the leaf DBOS
sees (``visit_and_replace``), so DBOS does not make each MCP call a step of its own. A
guard over DBOS's MCP steps breaks replay (``DBOSUnexpectedStepError``): a call it
answers from its journal skips a recorded step, and the retry of a retry-safe call at
recovery adds one. The journal is closed at the end of the workflow's run.

A reply lost on the way (a dropped connection) ends the life at once (exit 1, as a crash:
a failed workflow would stay failed), for the MCP session is closed then; the supervisor
restarts the agent, and its next life retries the call or has the model verify it, as after
a kill.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from typing import Any

import agent as bare
from dbos import DBOS
from pydantic_ai import RunContext
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset

from harness.integrations.guard import reply_lost
from harness.integrations.pydantic_ai import GuardedToolset
from harness.runtime.classes import ToolTable

guarded: GuardedToolset[None]


@DBOS.step()
async def tool_call(
    toolset: AbstractToolset[None],
    name: str,
    args: dict[str, Any],
    ctx: RunContext[None],
    tool: ToolsetTool[None],
) -> Any:
    return await toolset.call_tool(name, args, ctx, tool)


@dataclass
class EndLifeOnLostReply(WrapperToolset[None]):
    """Ends the life, as a crash would, when an MCP call's reply is lost on the way: the
    session is closed then, and every later call on it would fail unsent. The journal holds
    the call's intent and no outcome, so the next life (the supervisor restarts the agent)
    retries it if its class allows, else has the model verify it."""

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[None], tool: ToolsetTool[None]
    ) -> Any:
        try:
            return await super().call_tool(name, tool_args, ctx, tool)
        except Exception as exc:
            if reply_lost(exc):
                os._exit(1)  # not SystemExit: DBOS would record the workflow as failed
            raise


@dataclass
class StepToolset(WrapperToolset[None]):
    """Each call of the wrapped (guarded) toolset as one DBOS step."""

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[None], tool: ToolsetTool[None]
    ) -> Any:
        return await tool_call(self.wrapped, name, tool_args, ctx, tool)

    def visit_and_replace(self, visitor: Any) -> AbstractToolset[None]:
        return self  # DBOS steps each call here: no step of its own for the MCP calls inside


@DBOS.workflow()
async def run_guarded() -> str:
    try:
        result = await bare.agent.run(bare.TASK)
    finally:
        await guarded.aclose()
    return result.output


async def main() -> int:
    global guarded
    tools = bare.mcp_toolset()
    listed = await tools.list_tools()
    hints = [(t.name, t.annotations and t.annotations.model_dump(by_alias=True)) for t in listed]
    table = ToolTable.from_annotations(hints)
    guarded = GuardedToolset(EndLifeOnLostReply(tools), "agent.journal", table=table)
    bare.agent = bare.make_agent(StepToolset(guarded))
    return await bare.serve(run_guarded)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
