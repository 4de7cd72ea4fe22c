"""Listing an MCP server's tools and their annotations, over stdio (or HTTP), with the MCP SDK.

``list_mcp_tools(command)`` starts the server ``command`` as a child process
with the SDK's stdio client, initializes a session, follows ``tools/list``'s
pagination cursors to the last page and returns every tool's name and
annotations (as the wire spells them: ``readOnlyHint``, ``idempotentHint``,
...) in a ``McpListing``, with each tool's description and input schema
(``McpListing.details``). ``list_mcp_tools_at(url)`` does the same with a
server that is already running, over streamable HTTP. Turning annotations into
classes is ``ToolTable.from_annotations``; ``ToolTable.from_mcp`` does both.

This module is the edge of the runtime that talks to a process, and the only
part of the runtime that needs a third-party package: the SDK (``mcp``, the
``mcp`` extra) and its ``anyio`` are imported inside ``list_mcp_tools``, never
when the module is imported, and their absence raises
``McpNotInstalledError``. It imports nothing of the project but the
runtime's errors (``harness.runtime.classes`` imports it, lazily, for
``from_mcp``).

The full note: docs/reference/modules.md (``harness/runtime/mcp_table.py``).
"""

from __future__ import annotations

import asyncio
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from harness.runtime.errors import McpNotInstalledError, McpServerError

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "McpListing",
    "McpTool",
    "McpToolDetail",
    "list_mcp_tools",
    "list_mcp_tools_at",
]

DEFAULT_TIMEOUT_S = 30.0
"""How long a server has to start, initialize and list every page of its tools."""

_STDERR_QUOTE_CHARS = 300
"""How much of the last line of the server's stderr an error quotes."""


class McpTool(NamedTuple):
    """One tool as a server listed it: its name and its annotations, or None when the
    server sent none at all (not even an empty object)."""

    name: str
    annotations: Mapping[str, object] | None


class McpToolDetail(NamedTuple):
    """What else a server listed of a tool: its description (empty when it gave none),
    the JSON schema of its arguments, as sent, and its ``_meta`` (empty when none)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    meta: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class McpListing:
    """Every tool an MCP server listed, in its order, and who the server says it is."""

    command: tuple[str, ...]
    server_name: str
    server_version: str
    protocol_version: str
    tools: tuple[McpTool, ...]
    details: tuple[McpToolDetail, ...] = ()
    """The tools' descriptions and input schemas, in the order of ``tools``."""

    @property
    def source(self) -> str:
        """Where a table built from this listing came from: ``mcp: <command>``."""
        return f"mcp: {shlex.join(self.command)}"


def list_mcp_tools(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    cwd: str | Path | None = None,
) -> McpListing:
    """Start the MCP server ``command`` over stdio and list its tools, every page of them.

    ``env`` is laid over the SDK's default environment for a server (``HOME``,
    ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``); pass ``os.environ``
    to hand the server this process's whole environment. ``timeout`` bounds
    the start, the handshake and the listing together; stopping a server that
    ignores its stdin closing and SIGTERM takes up to about 4 s more. ``cwd``: the
    folder the server runs in (default: this process's).
    """
    command = tuple(command)
    if not command or not command[0]:
        raise McpServerError(command, "no command given")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    try:
        import anyio
    except ModuleNotFoundError as exc:
        raise _not_installed(exc) from exc
    _import_sdk()
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as stderr:
        lister = _Lister(command, dict(env or {}), timeout, stderr, cwd)
        try:
            listing: McpListing = anyio.run(lister.run)
        except McpServerError:
            raise
        except Exception as exc:  # from the SDK or the process: named, with the server's stderr
            raise McpServerError(command, lister.describe(exc)) from exc
    return listing


def list_mcp_tools_at(url: str, *, timeout: float = DEFAULT_TIMEOUT_S) -> McpListing:
    """List the tools of the MCP server running at ``url`` (streamable HTTP), every page of
    them, as ``list_mcp_tools`` does; errors name the URL as the server's command."""
    if not url:
        raise McpServerError((url,), "no URL given")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    try:
        import anyio
    except ModuleNotFoundError as exc:
        raise _not_installed(exc) from exc
    _import_sdk()
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as stderr:
        lister = _Lister((url,), {}, timeout, stderr, url=url)
        try:
            listing: McpListing = anyio.run(lister.run)
        except McpServerError:
            raise
        except Exception as exc:  # from the SDK or the connection: named, in one line
            raise McpServerError((url,), lister.describe(exc)) from exc
    return listing


def _not_installed(exc: ModuleNotFoundError) -> McpNotInstalledError:
    return McpNotInstalledError(
        f"reading a tool table from an MCP server needs the MCP SDK (missing: {exc.name}); "
        "install it with: pip install 'agent-crash-harness[mcp]'"
    )


def _import_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ModuleNotFoundError as exc:
        raise _not_installed(exc) from exc


class _Lister:
    """One listing: the session's steps, and what they were doing when one failed."""

    def __init__(
        self,
        command: tuple[str, ...],
        env: dict[str, str],
        timeout: float,
        stderr: TextIO,
        cwd: str | Path | None = None,
        *,
        url: str | None = None,
    ) -> None:
        self.command = command
        self.url = url
        self.cwd = cwd
        self.env = env
        self.timeout = timeout
        self.stderr = stderr
        self.stage = "start"
        self.garbage: Exception | None = None

    async def run(self) -> McpListing:
        import anyio
        from mcp import ClientSession

        listing: McpListing | None = None
        with anyio.move_on_after(self.timeout) as scope:

            async def on_message(message: object) -> None:
                # A line of stdout that is not JSON-RPC: no answer will come after it.
                if isinstance(message, Exception) and self.garbage is None:
                    self.garbage = message
                    scope.cancel()

            async with (
                self._transport() as (read, write),
                ClientSession(read, write, message_handler=on_message) as session,
            ):
                listing = await self._list(session)
        # The server's process is gone here: stdio_client waited for it or killed it.
        if self.garbage is not None:
            raise McpServerError(
                self.command,
                f"printed a line on stdout that is not JSON-RPC during {self.stage}: "
                f"{_offending_line(self.garbage)}{self._stderr_tail()}",
            )
        if listing is None:
            raise McpServerError(
                self.command,
                f"no answer to {self.stage} within {self.timeout:g} s{self._stderr_tail()}",
            )
        return listing

    def _transport(self) -> Any:
        """The SDK's client transport: over HTTP to ``url``, else the server's stdio."""
        if self.url is not None:
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(self.url)
        from mcp import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=self.command[0], args=list(self.command[1:]), env=self.env, cwd=self.cwd
        )
        return stdio_client(params, errlog=self.stderr)

    async def _list(self, session: ClientSession) -> McpListing:
        from mcp.types import PaginatedRequestParams

        self.stage = "initialize"
        initialized = await session.initialize()
        tools: list[McpTool] = []
        details: list[McpToolDetail] = []
        cursor: str | None = None
        cursors: set[str] = set()
        page = 1
        while True:
            self.stage = "tools/list" if page == 1 else f"tools/list page {page}"
            params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
            result = await session.list_tools(params=params)
            for tool in result.tools:
                tools.append(McpTool(tool.name, _wire_annotations(tool.annotations)))
                schema = MappingProxyType(dict(tool.input_schema or {}))
                meta = MappingProxyType(dict(tool.meta or {}))
                details.append(McpToolDetail(tool.name, tool.description or "", schema, meta))
            cursor = result.next_cursor
            if cursor is None:
                break
            if cursor in cursors:
                raise McpServerError(
                    self.command,
                    f"{self.stage} gave the cursor {cursor!r} again: its pages go in a circle",
                )
            cursors.add(cursor)
            page += 1
        info = initialized.server_info
        return McpListing(
            self.command,
            info.name,
            info.version,
            initialized.protocol_version,
            tuple(tools),
            tuple(details),
        )

    def describe(self, exc: BaseException) -> str:
        """What went wrong, in one line, for an exception out of the SDK or the spawn."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        leaf = _first_leaf(exc)
        if isinstance(leaf, McpServerError):
            return leaf.problem
        if isinstance(leaf, OSError) and self.stage == "start":
            return f"cannot start it: {leaf.strerror or leaf}"
        if isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED:
            problem = f"closed its stdout (exited?) before it answered {self.stage}"
        elif isinstance(leaf, MCPError):
            problem = f"answered {self.stage} with error {leaf.code}: {_one_line(leaf.message)}"
        else:
            problem = f"failed during {self.stage}: {type(leaf).__name__}: {_one_line(str(leaf))}"
        return problem + self._stderr_tail()

    def _stderr_tail(self) -> str:
        self.stderr.flush()
        self.stderr.seek(0)
        lines = [line.strip() for line in self.stderr.read().splitlines() if line.strip()]
        if not lines:
            return ""
        return f" (the last line of its stderr: {_one_line(lines[-1])[:_STDERR_QUOTE_CHARS]})"


def _wire_annotations(annotations: Any) -> Mapping[str, object] | None:
    """A tool's annotations as the wire spells them (``readOnlyHint``), without unset fields."""
    if annotations is None:
        return None
    return MappingProxyType(annotations.model_dump(by_alias=True, exclude_none=True))


def _first_leaf(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups that is not a cancellation."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [_first_leaf(e) for e in exc.exceptions]
        real = [e for e in leaves if not isinstance(e, asyncio.CancelledError)]
        return (real or leaves)[0]
    return exc


def _offending_line(exc: Exception) -> str:
    """The line a parse error was about (pydantic keeps it as the error's input), quoted."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            line = errors()[0]["input"]
        except (TypeError, LookupError):
            line = None
        if isinstance(line, str):
            return repr(line[:_STDERR_QUOTE_CHARS])
    return _one_line(str(exc))[:_STDERR_QUOTE_CHARS]


def _one_line(text: str) -> str:
    return " ".join(text.split())
