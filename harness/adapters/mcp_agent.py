"""``python -m harness.adapters.mcp_agent TRIAL_DIR``: this project's agent, its tools over MCP.

The same agent as ``python -m harness.agent`` (the runtime, its journal and
recovery, the scripted model), whose ``ToolFunction`` sends every call as a
``tools/call`` request over an MCP client session (the SDK's ``ClientSession``)
to a tool server it starts as its child process, once per life, after saying
``ready`` and opening its journal: ``python -m harness.adapters.mcp_tools_server``,
which runs the simulated tools on the trial's world (``harness.adapters.mcp_wire``
says what crosses the wire). A kill of this agent is then a kill of a client
with a call in flight to a real server process: the server may have committed
the call's effect and its reply be lost with the agent, which is the lost
reply of a real deployment, judged like any other trial.

The server is started here, not with the SDK's ``stdio_client``, for two
reasons the harness needs: ``stdio_client`` puts the server in a session (and
process group) of its own, where the supervisor's SIGKILL of the agent's group
would not reach it, and it closes every inherited descriptor, the
supervisor's channel included, on which the server's failpoints must hand-shake.
So the server stays in the agent's process group with the channel passed
down, and the pipes are bridged to the session as ``stdio_client`` does
(one JSON-RPC message a line).

The full note: docs/reference/modules.md (``harness/adapters/mcp_agent.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, MCPError

from harness.adapters.mcp_wire import ToolServerError, call_meta, raise_error
from harness.agent.__main__ import main as agent_main
from harness.agent.audit import CONTAINMENT_ENV
from harness.exits import AGENT_ERROR, AGENT_REFUSED
from harness.failpoints import CHANNEL_ENV, COUNTS_ENV, absorb_hits
from harness.integrations.mcp_stdio import server_streams
from harness.runtime.executor import CallContext, ToolFunction

__all__ = ["SERVER_MODULE", "McpTools", "main", "mcp_tools", "server_command"]

SERVER_MODULE = "harness.adapters.mcp_tools_server"
HITS_FILE = "mcp-server-hits.json"
"""Where the server of a counted run leaves its failpoint hits, in the trial directory."""

_BOOTSTRAP = (
    "import json, runpy, sys; sys.path[:] = json.loads(sys.argv.pop(1)); "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)"
)
"""``python -I -c`` this, the import path and the module: the server imports from this
agent's own path, as the supervisor's exec launcher does for the agent."""


def server_command(trial: Path, *, hits: Path | None = None) -> list[str]:
    """The command line of this agent's tool server for ``trial``."""
    command = [sys.executable, "-I", "-c", _BOOTSTRAP, json.dumps(sys.path), SERVER_MODULE]
    command += [str(trial), "--agent-pid", str(os.getpid())]
    return command + (["--hits", str(hits)] if hits is not None else [])


class McpTools:
    """The agent's ``ToolFunction``: each call one ``tools/call`` over the session."""

    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self._portal = portal
        self._session = session

    def __call__(self, tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        call = partial(self._session.call_tool, tool, dict(args), meta=call_meta(ctx))
        try:
            result = self._portal.call(call)
        except MCPError as exc:  # no tool's answer: the server failed inside, or is gone
            raise ToolServerError(f"{ctx.op_id} ({tool}): {exc}") from exc
        if result.is_error:
            raise_error(tool, result.structured_content)
        return result.structured_content


@asynccontextmanager
async def _session(command: list[str], env: Mapping[str, str]) -> AsyncIterator[ClientSession]:
    channel = env.get(CHANNEL_ENV, "")
    pass_fds = (int(channel),) if channel.isdigit() else ()
    async with (
        server_streams(command, env=env, pass_fds=pass_fds) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.list_tools()  # once: the session checks results against what it lists
        yield session


@contextmanager
def mcp_tools(trial: Path) -> Iterator[ToolFunction]:
    """Start this life's tool server for ``trial``; its ``ToolFunction`` until the block ends."""
    env = dict(os.environ)
    hits = None
    if env.pop(COUNTS_ENV, None):  # a counted run: the server's hits come back in a file
        hits = trial / HITS_FILE
        hits.unlink(missing_ok=True)
    command = server_command(trial, hits=hits)
    try:
        with (
            start_blocking_portal() as portal,
            portal.wrap_async_context_manager(_session(command, env)) as session,
        ):
            yield McpTools(portal, session)
    except BaseExceptionGroup as group:
        # The session's task groups wrap what the block raised (a full disk's
        # JournalWriteError, a kill's failpoint): the agent handles it as itself.
        raise _sole_error(group) from None
    except MCPError as exc:
        raise ToolServerError(f"tool server {SERVER_MODULE}: {exc}") from exc
    if hits is not None and hits.exists():
        absorb_hits(json.loads(hits.read_text("utf-8")))
        hits.unlink()


def _sole_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception inside ``group`` that is not a cancellation (or the group itself)."""
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        error = stack.pop()
        if isinstance(error, BaseExceptionGroup):
            stack.extend(error.exceptions)
        elif not isinstance(error, asyncio.CancelledError):
            leaves.append(error)
    if len(leaves) != 1:
        return group
    if isinstance(leaves[0], MCPError):
        return ToolServerError(f"tool server {SERVER_MODULE}: {leaves[0]}")
    return leaves[0]


def main(argv: list[str]) -> int:
    if os.environ.get(CONTAINMENT_ENV) == "1":
        print(
            "harness.adapters.mcp_agent: refused: containment forbids starting the tool server",
            file=sys.stderr,
        )
        return AGENT_REFUSED
    try:
        return agent_main(argv, tools=mcp_tools, program="harness.adapters.mcp_agent")
    except ToolServerError as exc:
        print(f"harness.adapters.mcp_agent: stopped: {exc}", file=sys.stderr)
        return AGENT_ERROR


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
