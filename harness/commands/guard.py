"""``python -m harness guard --upstream-cmd CMD | --upstream-url URL --journal PATH``: the guard.

Serves MCP in front of the real server and runs every tool call through the runtime
(``harness.integrations.wire``): over stdio by default (the agent starts it as its MCP
server's command and it dies with the agent), or over streamable HTTP on 127.0.0.1 with
``--http PORT`` (a sidecar that outlives the agent; port 0 picks a free one). The URL it
serves is printed on stderr as ``guard: serving http://127.0.0.1:PORT/mcp``.

Bad input (a table that does not load, a content rule naming an argument the server's tool
does not take, a real server that will not start or list its tools) is one line on stderr,
exit 2, before anything is served.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import socket
import sys
from pathlib import Path
from typing import Any

from harness.exits import EXIT_BAD_INPUT
from harness.runtime.errors import HarnessError, ToolTableError

__all__ = ["add_parser", "run"]


class GuardError(HarnessError):
    """The guard cannot start: its real server would not start or list its tools.

    Remedy: run the upstream command (or open the URL) by hand and fix what it says.
    """


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        "guard",
        help="serve an MCP server's tools through the runtime (a crash-safe MCP proxy)",
        description="An MCP server in front of the real one: every tools/call goes through "
        "the runtime's write-ahead journal, a re-issued call after a restart is answered "
        "from it, and a call in doubt gets a VERIFY result. Over stdio by default; over "
        "streamable HTTP on 127.0.0.1 with --http.",
    )
    upstream = parser.add_mutually_exclusive_group(required=True)
    upstream.add_argument(
        "--upstream-cmd", metavar="CMD", help="the real MCP server's command (stdio), one string"
    )
    upstream.add_argument(
        "--upstream-url", metavar="URL", help="the real MCP server's streamable HTTP URL"
    )
    parser.add_argument(
        "--journal",
        type=_journal,
        required=True,
        metavar="PATH|URL",
        help="the journal file (made when missing), or a PostgreSQL journal's URL "
        "(postgresql://user@host/db?journal=NAME&lease=SECONDS)",
    )
    parser.add_argument(
        "--table",
        type=Path,
        default=None,
        help="a tool table (tools.toml) whose classes and content rules override the "
        "server's annotations, tool by tool",
    )
    parser.add_argument(
        "--http",
        type=int,
        default=None,
        metavar="PORT",
        help="serve streamable HTTP on 127.0.0.1:PORT (0: a free port) instead of stdio",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="log only warnings (default: each life on stderr)"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    import anyio

    from harness.integrations.wire import Upstream

    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING if args.quiet else logging.INFO,
        format="guard: %(message)s",
    )
    if args.upstream_cmd is not None:
        try:
            command = tuple(shlex.split(args.upstream_cmd))
        except ValueError as exc:
            print(f"harness guard: --upstream-cmd: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if not command:
            print("harness guard: --upstream-cmd: empty command", file=sys.stderr)
            return EXIT_BAD_INPUT
        upstream = Upstream(command=command)
    else:
        upstream = Upstream(url=args.upstream_url)
    if args.http is not None and not 0 <= args.http <= 65535:
        print(f"harness guard: --http: {args.http} is not a port (0 to 65535)", file=sys.stderr)
        return EXIT_BAD_INPUT
    table = None
    if args.table is not None:
        from harness.runtime.classes import ToolTable

        table = ToolTable.load(args.table)  # ToolTableError: one line, exit 2
    try:
        anyio.run(_serve, upstream, args.journal, table, args.http)
    except BaseExceptionGroup as group:
        # What the server's task groups wrap: Ctrl-C (or SIGTERM), or bad input found once
        # the real server answered (one line, exit 2, as everywhere).
        leaves = _leaves(group)
        told = next((e for e in leaves if isinstance(e, HarnessError)), None)
        if told is not None:
            raise told from None
        if any(isinstance(e, KeyboardInterrupt) for e in leaves):
            raise KeyboardInterrupt from None
        raise
    return 0


def _journal(text: str) -> Path | str:
    """A journal's file, or a database's URL as it was given (a path would fold its //)."""
    from harness.runtime.store import is_database_url

    return text if is_database_url(text) else Path(text)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            found += _leaves(error)
        else:
            found.append(error)
    return found


async def _serve(upstream: Any, journal: Path | str, table: Any, port: int | None) -> None:
    from harness.integrations.wire import upstream_session

    try:
        opened = upstream_session(upstream)
        session = await opened.__aenter__()
    except Exception as exc:  # it would not start, or did not answer initialize
        raise GuardError(f"upstream {upstream}: cannot start a session: {_one_line(exc)}") from exc
    try:
        await _guard_session(session, upstream, journal, table, port)
    except BaseException as exc:
        if not await opened.__aexit__(type(exc), exc, exc.__traceback__):
            raise
    else:
        await opened.__aexit__(None, None, None)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return _one_line(_leaves(exc)[0])
    return " ".join(f"{type(exc).__name__}: {exc}".split())


async def _guard_session(
    session: Any, upstream: Any, journal: Path | str, table: Any, port: int | None
) -> None:
    from harness.integrations.wire import WireGuard, build_server, guard_table, list_upstream

    try:
        tools = await list_upstream(session)
        found = guard_table(tools, str(upstream), table)
    except ToolTableError:
        raise
    except Exception as exc:  # from the SDK or the server: one line
        raise GuardError(f"upstream {upstream}: cannot list its tools: {exc}") from exc
    guard = WireGuard(session, tools, found, journal)
    server = build_server(guard)
    try:
        if port is None:
            from mcp.server.stdio import stdio_server

            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        else:
            await _serve_http(server, port)
    finally:
        await guard.aclose()


async def _serve_http(server: Any, port: int) -> None:
    import uvicorn

    from harness.integrations.wire import http_app

    app = http_app(server)
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", port))
    bound = listening.getsockname()[1]
    listening.listen(128)  # before the address is told: a client may connect at once
    # A request stuck on the real server (its agent gone) must not hold the exit.
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    print(f"guard: serving http://127.0.0.1:{bound}/mcp", file=sys.stderr, flush=True)
    try:
        await uvicorn.Server(config).serve(sockets=[listening])
    finally:
        listening.close()
