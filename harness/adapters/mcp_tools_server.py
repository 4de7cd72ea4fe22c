"""``python -m harness.adapters.mcp_tools_server TRIAL_DIR --agent-pid PID``: tools over MCP.

The tool server of the ``mcp`` adapter: an MCP server over stdio (the SDK's
low-level ``Server``) that serves every simulated tool of
``harness.world.tools`` on the trial's ``world.db``. The agent
(``harness.adapters.mcp_agent``) starts it as its child, once per life, in its
own process group, and sends it every call; ``harness.adapters.mcp_wire`` says
what a call and its answer carry.

What this process promises:

The full note: docs/reference/modules.md (``harness/adapters/mcp_tools_server.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

from harness.adapters.mcp_wire import context_of, error_payload, input_schema
from harness.agent.plan import load_plan
from harness.errors import FailpointSpecError
from harness.exits import AGENT_DONE, AGENT_REFUSED
from harness.failpoints import aim_at_process_group, arm_from_environ, hit_report
from harness.runtime.errors import FailpointTriggered, ToolError
from harness.runtime.executor import ToolFunction
from harness.world.catalog import CATALOG, ToolSpec
from harness.world.store import WorldStore
from harness.world.tools import make_tool_function

__all__ = ["SERVER_NAME", "build_server", "input_schema", "main"]

SERVER_NAME = "agent-crash-harness-world"


def build_server(execute: ToolFunction, declared: Iterable[ToolSpec] = ()) -> Server[Any]:
    """The MCP server of the catalog's tools and a scenario's ``declared`` ones, each call
    run by ``execute``."""
    tools = [
        Tool(name=spec.name, description=spec.summary, input_schema=input_schema(spec))
        for spec in (*CATALOG.values(), *declared)
    ]

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        # Run in the event loop's own thread, one call at a time, as the agent sends them:
        # the failpoints of the call are then hit where a kill's timer can reach them.
        try:
            call = context_of(params.name, params.meta)
            result = execute(params.name, params.arguments or {}, call)
        except (ToolError, FailpointTriggered) as exc:
            payload = error_payload(exc)
            return CallToolResult(
                content=[TextContent(text=json.dumps(payload))],
                structured_content=payload,
                is_error=True,
            )
        return CallToolResult(
            content=[TextContent(text=json.dumps(result))], structured_content=result
        )

    return Server(SERVER_NAME, on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve(server: Server[Any]) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _agent_gone(error: BaseException) -> bool:
    """Whether ``error`` only says the reply had nobody to go to (a broken pipe)."""
    if isinstance(error, BaseExceptionGroup):
        return all(_agent_gone(e) for e in error.exceptions)
    return isinstance(error, BrokenPipeError | ConnectionResetError)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.adapters.mcp_tools_server", description=__doc__.split("\n")[0]
    )
    parser.add_argument("trial", type=Path, help="the trial directory (world.db, journal)")
    parser.add_argument("--agent-pid", type=int, required=True, help="the agent: this parent")
    parser.add_argument("--hits", type=Path, help="write the failpoint hits here on exit")
    args = parser.parse_args(argv)
    if args.agent_pid != os.getppid():
        # Its agent died while it started (it was then handed to another parent), or
        # it was started by something else: either way, no call of that agent comes.
        print(
            f"mcp_tools_server: refused: --agent-pid {args.agent_pid} is not this "
            f"process's parent (now {os.getppid()}): its agent is gone, or never was",
            file=sys.stderr,
        )
        return AGENT_REFUSED
    try:
        arm_from_environ()
    except FailpointSpecError as exc:
        print(f"mcp_tools_server: refused: {exc}", file=sys.stderr)
        return AGENT_REFUSED
    aim_at_process_group()
    trial: Path = args.trial
    with WorldStore.open(
        trial / "world.db", journal_path=trial / "journal", ledger_pid=args.agent_pid
    ) as world:
        try:
            declared = load_plan(trial / "plan.json").tools
            execute = make_tool_function(world, declared)
            specs = [tool.spec for tool in declared.values()]
            anyio.run(_serve, build_server(execute, specs))
        except BaseException as exc:
            if not _agent_gone(exc):
                raise
    if args.hits is not None:
        args.hits.write_text(json.dumps(hit_report()), "utf-8")
    return AGENT_DONE


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
