"""``python -m harness.blackbox.wired [--http] -- COMMAND...``: an agent guarded at the wire.

The scoreboard's proxy-guarded run: the agent's own command, unchanged, with its MCP
address pointed at the wire guard (``python -m harness guard``) in front of the life's
tools. The guard reaches them through the stdio bridge (``HARNESS_MCP_COMMAND``), which
turns a reply the tool server dropped into a timeout's error: the guard journals an
unknown outcome. (Over ``--upstream-url``, the MCP SDK's HTTP client loses its session
when a reply is dropped, and the guard waits for ever.) The guard's journal is
``guard.journal`` in the agent's working folder (the trial folder), so it lives as long
as the trial's other files.

- Over stdio (the default), the guard is the MCP server's command the agent starts
  (``HARNESS_MCP_COMMAND``): it lives and dies with the agent.
- With ``--http``, the guard is a sidecar started first, on a free port of 127.0.0.1,
  and ``HARNESS_MCP_URL`` names it; it dies with the life's process group.

Then it execs the command. A guard that does not come up is one line on stderr, exit 2.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from harness.blackbox import MCP_COMMAND_ENV, MCP_URL_ENV
from harness.exits import EXIT_BAD_INPUT

__all__ = ["GUARD_JOURNAL", "main"]

GUARD_JOURNAL = "guard.journal"
"""The guard's journal, in the agent's working folder."""
GUARD_LOG = "guard.log"
"""A sidecar guard's stderr, in the agent's working folder: where it says its address."""
START_S = 60.0
"""How long a sidecar guard may take to serve (it lists the real server's tools first)."""
SERVING = "guard: serving "


def guard_command(upstream: str, *, http: bool) -> list[str]:
    """The guard's command line in front of ``upstream`` (the real server's stdio command)."""
    journal = str(Path(GUARD_JOURNAL).resolve())
    words = [sys.executable, "-m", "harness", "guard", "--quiet", "--journal", journal]
    return [*words, "--upstream-cmd", upstream, *(["--http", "0"] if http else [])]


def start_sidecar(upstream: str) -> str:
    """Start the guard over HTTP beside the agent; its URL once it serves."""
    log = Path(GUARD_LOG)
    with log.open("ab") as out:
        start = out.tell()
        guard = subprocess.Popen(
            guard_command(upstream, http=True), stdin=subprocess.DEVNULL, stderr=out
        )
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        said = log.read_bytes()[start:].decode("utf-8", "replace")
        for line in said.splitlines():
            if line.startswith(SERVING):
                return line.removeprefix(SERVING).strip()
        if guard.poll() is not None:
            raise RuntimeError(f"the guard exited with status {guard.returncode}: {said.strip()}")
        time.sleep(0.01)
    guard.kill()
    raise RuntimeError(f"the guard did not serve within {START_S:.0f} s")


def main(argv: list[str]) -> int:
    http = bool(argv) and argv[0] == "--http"
    words = argv[1:] if http else argv
    if words[:1] == ["--"]:
        words = words[1:]
    upstream = os.environ.get(MCP_COMMAND_ENV)
    if not words or not upstream:
        print(
            "harness.blackbox.wired: usage: wired [--http] -- COMMAND..., "
            f"run as a black box's agent (with {MCP_COMMAND_ENV})",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if http:
        try:
            os.environ[MCP_URL_ENV] = start_sidecar(upstream)
        except (OSError, RuntimeError) as exc:
            print(f"harness.blackbox.wired: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    else:
        os.environ[MCP_COMMAND_ENV] = shlex.join(guard_command(upstream, http=False))
    sys.stdout.flush()
    os.execvp(words[0], words)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
