"""``python stdio_bridge.py URL``: the black box's tools over MCP's stdio transport.

The command handed to a black box as ``HARNESS_MCP_COMMAND``: the agent starts it
(in its own process group, so the life's kill takes it too) and speaks MCP to it on
its stdin and stdout, one JSON-RPC message a line. Each message is posted to the
life's streamable-HTTP MCP endpoint (``URL``) and its answer written back, so the
tools run, and their failpoints fire, in one place. A reply the server dropped (a
lost reply or request) comes back as the error a client sees when its request times
out: the outcome of the call is unknown.

Standard library only, and no import of the harness: it starts fast.
"""

from __future__ import annotations

import json
import sys
import urllib.request

NO_REPLY = -32001


def _post(url: str, line: str) -> str | None:
    request = urllib.request.Request(
        url,
        data=line.encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        body = response.read().decode()
    return body or None


def main(argv: list[str]) -> int:
    url = argv[0]
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        rid = message.get("id") if isinstance(message, dict) else None
        try:
            body = _post(url, line)
        except OSError as exc:  # refused, reset, or closed with no answer
            if rid is None:
                continue
            error = {
                "code": NO_REPLY,
                "message": f"no reply from the tool server (timed out: outcome unknown): {exc}",
            }
            body = json.dumps({"jsonrpc": "2.0", "id": rid, "error": error})
        if body is not None:
            sys.stdout.write(body.strip() + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
