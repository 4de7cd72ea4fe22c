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
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from typing import Any

import agent as bare
from dbos import DBOS
from pydantic_ai import RunContext
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset

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
    guarded = GuardedToolset(tools, "agent.journal", table=ToolTable.from_annotations(hints))
    bare.agent = bare.make_agent(StepToolset(guarded))
    return await bare.serve(run_guarded)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
