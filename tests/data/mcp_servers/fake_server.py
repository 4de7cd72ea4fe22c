"""An MCP server over stdio in plain Python (no SDK), well-behaved or broken on purpose.

    python fake_server.py MODE [MARKER]

MARKER is ignored: a test puts its own folder there to find the process by its
command line. Modes:

- ``paged``: answers like a server, its tools on three pages (``next-2``,
  ``next-3``), with every shape of annotations the mapping distinguishes.
- ``loop``: like ``paged``, but page 2 hands out the cursor ``next-2`` again.
- ``duplicate``: page 2 lists a tool of page 1 again.
- ``error``: answers ``tools/list`` with a JSON-RPC error.
- ``crash``: writes a line to stderr and exits 3 before reading anything.
- ``crash-after-init``: answers ``initialize``, then exits 4 when asked for tools.
- ``garbage``: prints a line that is not JSON-RPC instead of an answer, then waits.
- ``hang``: never answers, ignores SIGTERM and the end of its stdin (only SIGKILL ends it).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import Any

PAGES: dict[str | None, tuple[list[dict[str, Any]], str | None]] = {
    None: (
        [
            {"name": "read_thing", "annotations": {"readOnlyHint": True}},
            {"name": "put_thing", "annotations": {"idempotentHint": True}},
            {"name": "bare_thing"},
        ],
        "next-2",
    ),
    "next-2": (
        [
            {"name": "destroy_thing", "annotations": {"destructiveHint": True}},
            {"name": "open_thing", "annotations": {"openWorldHint": True}},
            {"name": "empty_thing", "annotations": {}},
        ],
        "next-3",
    ),
    "next-3": (
        [
            {"name": "titled_thing", "annotations": {"title": "A title, no hints"}},
            {"name": "ro_and_idem", "annotations": {"readOnlyHint": True, "idempotentHint": True}},
            {
                "name": "write_not_idem",
                "annotations": {"readOnlyHint": False, "idempotentHint": False},
            },
        ],
        None,
    ),
}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def tools_page(mode: str, cursor: str | None) -> dict[str, Any]:
    tools, next_cursor = PAGES[cursor]
    if mode == "loop" and cursor == "next-2":
        next_cursor = "next-2"
    if mode == "duplicate" and cursor == "next-2":
        tools = [*tools, {"name": "read_thing"}]
    result: dict[str, Any] = {
        "tools": [{"inputSchema": {"type": "object"}, **tool} for tool in tools]
    }
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def main(mode: str) -> int:
    if mode == "crash":
        print("fake_server: cannot open its configuration", file=sys.stderr)
        return 3
    if mode == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        threading.Event().wait()  # stdin is never read: its end changes nothing
    if mode == "garbage":
        print("fake_server starting up...", flush=True)  # a log line on stdout
        sys.stdin.read()
        return 0
    for line in sys.stdin:
        request = json.loads(line)
        method, request_id = request.get("method"), request.get("id")
        if request_id is None:
            continue  # a notification (initialized)
        if method == "initialize":
            version = request["params"]["protocolVersion"]
            info = {"name": "fake", "version": "0.1"}
            send(
                {
                    "id": request_id,
                    "result": {
                        "protocolVersion": version,
                        "capabilities": {"tools": {}},
                        "serverInfo": info,
                    },
                }
            )
        elif method == "tools/list" and mode == "crash-after-init":
            print("fake_server: lost its tools", file=sys.stderr)
            return 4
        elif method == "tools/list" and mode == "error":
            send({"id": request_id, "error": {"code": -32603, "message": "tools are\nbroken"}})
        elif method == "tools/list":
            cursor = (request.get("params") or {}).get("cursor")
            send({"id": request_id, "result": tools_page(mode, cursor)})
        else:
            send({"id": request_id, "error": {"code": -32601, "message": f"no {method}"}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
