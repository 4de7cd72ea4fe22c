"""An MCP server run as a child process, its pipes as a client session's streams.

The SDK's ``stdio_client`` starts its server in a session of its own, out of reach of a
kill of the caller's process group; a crash-tested agent needs its server in its own
group, so that whatever kills the agent kills the server with it. This starts the server
in the caller's group and speaks the stdio transport's framing (one JSON-RPC message a
line) over its pipes. The wire guard (``harness.integrations.wire``) and the harness's MCP
agent adapter (``harness.adapters.mcp_agent``) both start their servers this way.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["STOP_S", "server_streams"]

STOP_S = 5.0
"""How long the server has to exit once its stdin closed, before it is killed."""


@asynccontextmanager
async def server_streams(
    command: list[str],
    *,
    env: Mapping[str, str] | None = None,
    pass_fds: tuple[int, ...] = (),
) -> AsyncIterator[tuple[Any, Any]]:
    """The server's process, started in this process's group, and its pipes as a session's
    read and write streams. On leaving, the server's stdin is closed; it has ``STOP_S`` to
    exit after the call under way, and is then killed (its own pid only)."""
    import anyio
    import anyio.abc
    from mcp.shared.message import SessionMessage
    from mcp.types import jsonrpc_message_adapter

    process = await anyio.open_process(
        command, stdin=-1, stdout=-1, stderr=None, env=env, pass_fds=pass_fds
    )
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    def parse(line: bytes) -> SessionMessage | Exception:
        try:
            return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as exc:  # the session reports a line that is not JSON-RPC
            return exc

    async def from_server(stdout: anyio.abc.ByteReceiveStream) -> None:
        buffer = b""
        async with to_session:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for chunk in stdout:
                    *lines, buffer = (buffer + chunk).split(b"\n")
                    for line in lines:
                        if line.strip():
                            await to_session.send(parse(line))

    async def to_server(stdin: anyio.abc.ByteSendStream) -> None:
        async with from_session:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for message in from_session:
                    wire = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send(wire.encode() + b"\n")
        with contextlib.suppress(OSError, anyio.BrokenResourceError):
            await stdin.aclose()  # the server's stdin ends: it exits after the call under way

    assert process.stdin is not None and process.stdout is not None
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(from_server, process.stdout)
        tasks.start_soon(to_server, process.stdin)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await write_stream.aclose()
                with anyio.move_on_after(STOP_S):
                    await process.wait()
                if process.returncode is None:
                    process.kill()  # its own pid: the group is the caller's
                    await process.wait()
            tasks.cancel_scope.cancel()
