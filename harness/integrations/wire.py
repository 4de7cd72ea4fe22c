"""The guard at the wire: an MCP server in front of the real one. ``WireGuard`` serves the
real server's tools (listing, annotations and schemas as they are) and puts each
``tools/call`` through a ``ToolGuard`` (write-ahead journal, class snapshot, recovery):

- classes from the server's annotations, a table file, or both (the file wins per tool);
  what makes two calls the same action from the table's ``[content.TOOL]`` or the tool's
  ``_meta`` (``harness.runtime.classes.MCP_CONTENT_META``);
- every call gets an op id of its own (``w<life>.<n>``) and the runtime knows it by
  content: a re-issued call is answered from the op it stands for;
- each MCP ``initialize`` begins a new life (a new incarnation of the runtime: recovery
  decides what the last one left open; content identity's claims start afresh);
- a durable result is answered from the journal; a call in doubt gets a VERIFY result
  (``isError``, the hint, how to report: the listing gains ``report_verification``);
- a file journal another live process holds (the guard of an earlier life, stopped or
  still running) is not waited for: each call gets a ``not run`` result at once, until
  that process lets the journal go (``WireGuard.not_run``); listing needs no journal;
- over HTTP, a client that never sends ``Mcp-Session-Id`` back is served each request
  alone (stateless) in the life its ``initialize`` began;
- a tool whose schema takes an idempotency key (``KEY_ARGUMENTS``) gets the op's stable
  key in it, whatever the model sent; the call's context goes in ``_meta`` too.

The full note: docs/guides/wire-guard.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shlex
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
from mcp import ClientSession
from mcp.server.lowlevel import Server
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

from harness.integrations.guard import (
    VERIFY_TOOL,
    VERIFY_TOOL_DOC,
    GuardReply,
    ToolGuard,
    tool_failure,
)
from harness.integrations.mcp_stdio import server_streams
from harness.runtime.classes import ToolTable
from harness.runtime.errors import JournalLockedError, ToolError
from harness.runtime.executor import CallContext
from harness.runtime.identity import ContentRule
from harness.runtime.postgres import without_password
from harness.runtime.store import is_database_url

if TYPE_CHECKING:
    from mcp.types import RequestParamsMeta

__all__ = [
    "CALL_META_KEY",
    "KEY_ARGUMENTS",
    "SERVER_NAME",
    "Upstream",
    "WireGuard",
    "build_server",
    "call_meta",
    "guard_table",
    "http_app",
    "list_upstream",
    "upstream_session",
]

log = logging.getLogger("harness.wire")

SERVER_NAME = "agent-crash-harness-guard"
KEY_ARGUMENTS = ("idempotency_key", "idempotencyKey")
"""Arguments by which a tool's schema says it takes an idempotency key: the guard fills the
first it finds with the op's stable key (a re-issue or a redo carries the same one)."""

CALL_META_KEY = "agent-crash-harness/call"
"""The key of a forwarded call's ``_meta`` that carries its context (as the harness's own
tool server reads it)."""
LAST_LIFE_S = 1.0
"""How long a new session waits for the calls of the last one still in flight."""

CLAIM_WAIT_S = 120.0
"""How long a new life waits for a PostgreSQL journal another guard still holds: the lease
of a guard killed with its agent (30 s by default) ends by itself, and the new life then
takes the journal over. Past it, calls get the ``not run`` result."""
CLAIM_FILE_WAIT_S = 1.0
"""How long a new life waits for a file journal another process holds. Its lock is held by
a live process only (the kernel lets it go when the holder dies), so a longer wait helps
only a guard still closing; one stopped with its paused agent may hold it for any time."""
CLAIM_POLL_S = 0.25

VERIFY_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "op_id": {"type": "string", "description": "the operation the hint named"},
        "found": {"type": "string", "enum": ["present", "absent", "unknown"]},
    },
    "required": ["op_id", "found"],
}


@dataclass(frozen=True, slots=True)
class Upstream:
    """The real MCP server: a command the guard starts (over stdio), or a URL."""

    command: tuple[str, ...] = ()
    url: str | None = None

    def __str__(self) -> str:
        return self.url if self.url is not None else shlex.join(self.command)


@asynccontextmanager
async def upstream_session(upstream: Upstream) -> AsyncIterator[ClientSession]:
    """An initialized client session with the real server, for the guard's whole life. A
    command runs in the guard's own process group, so that whatever kills the agent's
    group (the guard as its child) kills the server with it."""
    if upstream.url is not None:
        from mcp.client.streamable_http import streamable_http_client

        async with (
            streamable_http_client(upstream.url) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
        return
    async with (
        server_streams(list(upstream.command)) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def call_meta(ctx: CallContext) -> dict[str, Any]:
    """The ``_meta`` of a forwarded call: its op, attempt, life and idempotency key, for a
    server that keys its effects (``CALL_META_KEY``)."""
    call = {
        "op_id": ctx.op_id,
        "attempt": ctx.attempt,
        "incarnation": ctx.incarnation,
        "idempotency_key": ctx.idempotency_key,
    }
    return {CALL_META_KEY: call}


async def list_upstream(session: ClientSession) -> list[Tool]:
    """Every tool the real server lists, following its pages."""
    tools: list[Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None or cursor in seen:
            return tools
        seen.add(cursor)


def guard_table(tools: list[Tool], source: str, table: ToolTable | None = None) -> ToolTable:
    """The guard's table: classes and content rules from the server's listing, each tool the
    file ``table`` lists (and each of its content rules) overriding it. A tool that takes an
    idempotency key has that argument volatile (the model may send a new one each time)."""
    from harness.runtime.mcp_table import McpListing, McpTool, McpToolDetail

    listing = McpListing(
        (source,),
        "",
        "",
        "",
        tuple(
            McpTool(
                t.name,
                None
                if t.annotations is None
                else t.annotations.model_dump(by_alias=True, exclude_none=True),
            )
            for t in tools
        ),
        tuple(
            McpToolDetail(t.name, t.description or "", dict(t.input_schema), dict(t.meta or {}))
            for t in tools
        ),
    )
    found = ToolTable.from_listing(listing)
    if table is not None:
        table.check_arguments({t.name: list(_properties(t)) for t in tools})
        found = found.with_overrides(dict(table.entries)).with_content(table.content)
    keyed: dict[str, ContentRule] = {}
    for tool in tools:
        key = _key_argument(tool)
        rule = found.content_rule(tool.name)
        if key is None or (rule is not None and rule.identity is not None):
            continue
        volatile = () if rule is None else rule.volatile
        if key not in volatile:
            keyed[tool.name] = ContentRule(None, (*volatile, key))
    return found.with_content(keyed) if keyed else found


def _properties(tool: Tool) -> Mapping[str, Any]:
    properties = (tool.input_schema or {}).get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _key_argument(tool: Tool) -> str | None:
    return next((name for name in KEY_ARGUMENTS if name in _properties(tool)), None)


class WireGuard:
    """The guard's state: the upstream session and its tools, the table, and the runtime
    of the agent's current life (reopened at each ``initialize``)."""

    def __init__(
        self,
        session: ClientSession,
        tools: list[Tool],
        table: ToolTable,
        journal: Path | str,
    ) -> None:
        self.session = session
        self.tools = tools
        self.table = table
        self.journal = journal
        self._keys = {t.name: k for t in tools if (k := _key_argument(t)) is not None}
        self._names = {t.name for t in tools}
        self._guard: ToolGuard | None = None
        self._held: JournalLockedError | None = None
        self._life = anyio.Lock()
        self._calls = 0
        self.lives = 0
        self.hinted = False
        """Whether a VERIFY hint was answered by this guard process: a framework that opens a
        session per call (a life per call here) checks in a session of its own, and that
        check must still see the world now (``ToolGuard.hinted``)."""

    async def begin_life(self) -> None:
        """A new MCP session: a new life of the agent. The runtime of the last one is closed
        (a call still in flight keeps its op RUNNING) and the journal opened again. A
        journal another process holds leaves the life without one: its calls try again."""
        async with self._life:
            if self._guard is not None:
                # A call of the last life still in flight (its session is gone) keeps its
                # op RUNNING: recovery decides it, by its class, as after a kill.
                await self._guard.runtime.aclose(timeout=LAST_LIFE_S)
                self._guard = None
            self._calls = 0
            self.lives += 1
            leased = is_database_url(self.journal)
            await self._claim(CLAIM_WAIT_S if leased else CLAIM_FILE_WAIT_S)

    @property
    def shown(self) -> str:
        """The journal as logs name it: a database URL without its password."""
        journal = self.journal
        return without_password(journal) if isinstance(journal, str) else str(journal)

    async def _claim(self, wait_s: float) -> None:
        """Open the journal for this life, waiting up to ``wait_s`` for one another process
        holds (a takeover once a lease ends is what a lease is for). Still held: the life
        has no runtime yet, and ``_held`` says who holds the journal."""
        deadline = anyio.current_time() + wait_s
        while True:
            try:
                self._guard = await ToolGuard.open(
                    self.journal, self._execute, table=self.table, identity="content"
                )
            except JournalLockedError as exc:
                self._held = exc
                if anyio.current_time() >= deadline:
                    # Said once a life; a call that finds it still held says nothing more.
                    if wait_s > 0:
                        log.warning("life %d: %s; its calls are not run", self.lives, exc)
                    return
                log.info("%s; waiting", exc)
                await anyio.sleep(CLAIM_POLL_S)
                continue
            self._held = None
            hints = len(self._guard.recovered)
            log.info("life %d: journal %s opened (%d ops in doubt)", self.lives, self.shown, hints)
            return

    async def current(self) -> ToolGuard | None:
        """The runtime of this life (a client that calls without ``initialize`` gets one), or
        None while another process holds the journal (tried again at each call)."""
        if self.lives == 0:
            await self.begin_life()
        elif self._guard is None:
            async with self._life:
                if self._guard is None:
                    await self._claim(0.0)
        return self._guard

    async def aclose(self) -> None:
        async with self._life:
            if self._guard is not None:
                await self._guard.aclose()
                self._guard = None

    def listing(self) -> ListToolsResult:
        """The real server's tools as it lists them, and the tool to report a check."""
        verify = Tool(
            name=VERIFY_TOOL, description=VERIFY_TOOL_DOC, input_schema=dict(VERIFY_SCHEMA)
        )
        return ListToolsResult(tools=[*self.tools, verify])

    async def call(self, name: str, arguments: Mapping[str, Any]) -> CallToolResult:
        """One ``tools/call`` of the agent, through the runtime."""
        guard = await self.current()
        if guard is None:
            return self.not_run(name)
        guard.hinted |= self.hinted
        try:
            if name == VERIFY_TOOL:
                found = arguments.get("found")
                try:
                    reply = await guard.verified(str(arguments.get("op_id")), found)  # type: ignore[arg-type]
                except ValueError as exc:
                    return _error(str(exc))
                return _result(reply)
            if name not in self._names:
                return _error(f"unknown tool: {name!r}")
            self._calls += 1
            op_id = f"w{guard.runtime.incarnation}.{self._calls}"
            try:
                reply = await guard.call(op_id, name, dict(arguments))
            except ToolError as exc:
                return _error(str(exc))
            return _result(reply)
        finally:
            self.hinted |= guard.hinted

    def not_run(self, name: str) -> CallToolResult:
        """The answer to a call made while another process holds the journal: it was not run
        (nothing was forwarded, nothing journaled), and what the holder, another life of
        this agent, did with the same action is not known here."""
        held = self._held
        who = "another process" if held is None else (held.holder or str(held))
        text = (
            f"{name}: not run. The guard cannot open its journal ({self.shown}): the guard of "
            f"another life of this agent still holds it ({who}), a process that is stopped "
            "or still running. This call was not sent to the tool, and what that life did "
            "with it is not known here. Call it again once that life has ended: the guard "
            "then answers it from the journal, or runs it. Until then, do not take it as done "
            "or as failed."
        )
        held_by = {"not_run": name, "journal_held_by": who, "hint": text}
        return CallToolResult(
            content=[TextContent(text=text)], structured_content=held_by, is_error=True
        )

    async def _execute(self, tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        """Forward one execution to the real server: its result, as JSON, is what the journal
        keeps; an error result is the call's failure; a lost reply is an unknown outcome."""
        sent = dict(args)
        key = self._keys.get(tool)
        if key is not None:
            sent[key] = ctx.idempotency_key
        try:
            meta = cast("RequestParamsMeta", call_meta(ctx))
            result = await self.session.call_tool(tool, sent, meta=meta)
        except Exception as exc:
            raise tool_failure(tool, exc) from exc
        if result.is_error:
            raise ToolError(_text(result) or f"{tool}: the server answered with an error")
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")


def _text(result: CallToolResult) -> str:
    return " ".join(part.text for part in result.content if isinstance(part, TextContent))


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], is_error=True)


def _result(reply: GuardReply) -> CallToolResult:
    """What the agent gets: the journaled result as the server sent it, the error, or the
    VERIFY text (an error result with the hint, so the model reads it and never takes it
    for the tool's answer)."""
    outcome = reply.outcome
    if reply.hint is not None:
        verify = {"verify": reply.hint.op_id, "tool": reply.hint.tool, "hint": reply.text}
        return CallToolResult(
            content=[TextContent(text=reply.text)], structured_content=verify, is_error=True
        )
    if (
        outcome.status == "ok"
        and isinstance(outcome.result, Mapping)
        and "content" in outcome.result
    ):
        with contextlib.suppress(ValueError):
            return CallToolResult.model_validate(outcome.result)
    if outcome.status == "ok" and outcome.result is None and outcome.resolution is not None:
        text = f"{outcome.op_id}: done (its effect was found when checked); not run again"
        return CallToolResult(content=[TextContent(text=text)])
    if outcome.status == "ok":
        return CallToolResult(content=[TextContent(text=reply.text)])
    return _error(reply.text)


def build_server(guard: WireGuard) -> Server[Any]:
    """The MCP server the agent talks to; ``initialize`` begins a new life."""

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return guard.listing()

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        return await guard.call(params.name, params.arguments or {})

    server: Server[Any] = Server(SERVER_NAME, on_list_tools=list_tools, on_call_tool=call_tool)

    async def new_life(ctx: Any, call_next: Any) -> Any:
        if getattr(ctx, "method", None) == "initialize":
            await guard.begin_life()
        return await call_next(ctx)

    server.middleware.append(new_life)
    return server


SESSION_HEADER = b"mcp-session-id"


def http_app(server: Server[Any], *, host: str = "127.0.0.1") -> Any:
    """The guard's app over streamable HTTP (JSON answers): a request with a session id, a
    GET or DELETE, and every ``initialize`` go to a session as MCP's server keeps them;
    any other request without a session id is served alone (stateless), where the SDK's
    server would answer 400 to a client that never sends the id it was given."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route

    server.streamable_http_app(host=host, json_response=True)  # its host checks, as kept
    security = server.session_manager.security_settings
    kept, alone = (
        StreamableHTTPSessionManager(
            app=server, json_response=True, stateless=stateless, security_settings=security
        )
        for stateless in (False, True)
    )

    async def route(scope: Any, receive: Any, send: Any) -> None:
        if scope["method"] != "POST" or any(k == SESSION_HEADER for k, _ in scope["headers"]):
            await kept.handle_request(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        sent = False

        async def again() -> Any:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        manager = kept if _opens_session(body) else alone
        await manager.handle_request(scope, again, send)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with kept.run(), alone.run():
            yield

    class Endpoint:  # an ASGI app as a route's endpoint (a plain function is a view)
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await route(scope, receive, send)

    return Starlette(routes=[Route("/mcp", endpoint=Endpoint())], lifespan=lifespan)


def _opens_session(body: bytes) -> bool:
    """Whether a POST's body is (or holds) an ``initialize``; unreadable: the kept path
    answers it as the SDK does."""
    try:
        message = json.loads(body)
    except ValueError:
        return True
    messages = message if isinstance(message, list) else [message]
    if not all(isinstance(m, dict) for m in messages):
        return True
    return any(m.get("method") == "initialize" for m in messages)


def describe(result: CallToolResult) -> str:
    """A result in one line, for logs."""
    return json.dumps(result.model_dump(by_alias=True, exclude_none=True, mode="json"))[:200]
