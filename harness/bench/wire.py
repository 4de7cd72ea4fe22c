"""Figure 11: what the wire guard adds to one MCP tool call.

Two client sessions of the MCP SDK over stdio, open side by side: one to the payments
server of ``examples/wire_guard`` directly, one to ``harness guard`` in front of another
copy of it (its journal on the scratch disk, intent and finish each fsync'd). Each sample
is a batch of ``pay`` calls, every one of another invoice (so the guard forwards each: a
call it had journaled would be answered without reaching the server), timed end to end
from the client; the two subjects take turns (``interleave``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from harness.bench.figures import BenchError

__all__ = ["SERVER", "WireCalls"]

SERVER = Path(__file__).resolve().parents[2] / "examples" / "wire_guard" / "payments_server.py"
"""The real server of the figure (a file of the source tree, not of an installed package)."""


@asynccontextmanager
async def _session(command: list[str], env: dict[str, str]) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    with open(os.devnull, "w", encoding="utf-8") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


class WireCalls:
    """The two sessions, direct and guarded, open for the measurement (``open`` them)."""

    def __init__(self, root: Path) -> None:
        if not SERVER.is_file():
            raise BenchError(f"no payments server at {SERVER}: run from a source tree")
        self.root = root
        self._sessions: dict[str, Any] = {}
        self._counter = 0
        self._portal: Any = None

    @contextlib.contextmanager
    def open(self) -> Iterator[WireCalls]:
        from anyio.from_thread import start_blocking_portal

        server = [sys.executable, str(SERVER)]
        guard = [sys.executable, "-m", "harness", "guard", "--quiet"]
        guard += ["--journal", str(self.root / "guard.journal")]
        guard += ["--upstream-cmd", " ".join(server)]
        base = {k: v for k, v in os.environ.items() if not k.startswith("PAYMENTS_")}
        with start_blocking_portal() as portal, contextlib.ExitStack() as stack:
            self._portal = portal
            for name, command, db in (
                ("direct", server, "direct.db"),
                ("guarded", guard, "guarded.db"),
            ):
                env = {**base, "PAYMENTS_DB": str(self.root / db)}
                self._sessions[name] = stack.enter_context(
                    portal.wrap_async_context_manager(_session(command, env))
                )
            try:
                yield self
            finally:
                self._sessions.clear()

    def batch(self, name: str, calls: int) -> float:
        """µs per call of ``calls`` payments through the session ``name``, each of another
        invoice; ``BenchError`` if one did not succeed."""
        session = self._sessions[name]

        async def run() -> float:
            started = time.perf_counter()
            for _ in range(calls):
                self._counter += 1
                args = {"to": "bench", "amount": 1, "invoice": f"B-{self._counter}"}
                result = await session.call_tool("pay", {**args, "request_id": "r"})
                if result.is_error:
                    raise BenchError(f"{name}: pay failed: {result.content}")
            return (time.perf_counter() - started) * 1e6 / calls

        value: float = self._portal.call(run)
        return value
