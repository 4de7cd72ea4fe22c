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

Run as a program, it then execs the command. A black box's host that is handed this
command line (``read_launcher``) wires the guard itself and starts the agent's own
command, so that a warm start forks the agent, not this launcher. A guard that does not
come up is one line on stderr, exit 2.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.blackbox import MCP_COMMAND_ENV, MCP_URL_ENV
from harness.exits import EXIT_BAD_INPUT

__all__ = ["GUARD_JOURNAL", "WIRED_MODULE", "Wiring", "main", "read_launcher", "wire_env"]

WIRED_MODULE = "harness.blackbox.wired"
GUARD_JOURNAL = "guard.journal"
"""The guard's journal, in the agent's working folder."""
GUARD_LOG = "guard.log"
"""A sidecar guard's stderr, in the agent's working folder: where it says its address."""
START_S = 60.0
"""How long a sidecar guard may take to serve (it lists the real server's tools first)."""
SERVING = "guard: serving "


@dataclass(frozen=True, slots=True)
class Wiring:
    """How the guard stands in front of an agent's tools, and the agent's own command."""

    python: str
    """The interpreter the guard runs on (this project's, with the ``mcp`` extra)."""
    http: bool
    agent: tuple[str, ...]


def _parse(python: str, argv: Sequence[str]) -> Wiring:
    http = bool(argv) and argv[0] == "--http"
    words = list(argv[1:] if http else argv)
    if words[:1] == ["--"]:
        words = words[1:]
    return Wiring(python, http, tuple(words))


def read_launcher(words: Sequence[str]) -> Wiring | None:
    """The wiring a command line of this launcher asks for (``PYTHON -m
    harness.blackbox.wired [--http] -- COMMAND...``), or None for any other command."""
    if len(words) < 3 or list(words[1:3]) != ["-m", WIRED_MODULE]:
        return None
    wiring = _parse(words[0], words[3:])
    return wiring if wiring.agent else None


def guard_command(upstream: str, folder: Path, *, python: str, http: bool) -> list[str]:
    """The guard's command line in front of ``upstream`` (the real server's stdio command)."""
    journal = str((folder / GUARD_JOURNAL).resolve())
    words = [python, "-m", "harness", "guard", "--quiet", "--journal", journal]
    return [*words, "--upstream-cmd", upstream, *(["--http", "0"] if http else [])]


def start_sidecar(
    upstream: str, folder: Path, *, python: str, env: Mapping[str, str], stdout: int | None
) -> str:
    """Start the guard over HTTP beside the agent, in ``folder`` and the caller's process
    group; its URL once it serves."""
    log = folder / GUARD_LOG
    with log.open("ab") as out:
        start = out.tell()
        guard = subprocess.Popen(
            guard_command(upstream, folder, python=python, http=True),
            cwd=folder,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=out,
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


def wire_env(
    wiring: Wiring, env: Mapping[str, str], folder: Path, stdout: int | None = None
) -> dict[str, str]:
    """The agent's environment with its MCP address pointed at the guard: a sidecar started
    now (``--http``), or the guard as its MCP server's command. RuntimeError: the guard
    did not come up, or ``env`` names no real server (``HARNESS_MCP_COMMAND``)."""
    upstream = env.get(MCP_COMMAND_ENV)
    if not upstream:
        raise RuntimeError(f"no {MCP_COMMAND_ENV}: the real MCP server is not known")
    wired = dict(env)
    if wiring.http:
        wired[MCP_URL_ENV] = start_sidecar(
            upstream, folder, python=wiring.python, env=env, stdout=stdout
        )
    else:
        command = guard_command(upstream, folder, python=wiring.python, http=False)
        wired[MCP_COMMAND_ENV] = shlex.join(command)
    return wired


def main(argv: list[str]) -> int:
    wiring = _parse(sys.executable, argv)
    if not wiring.agent or not os.environ.get(MCP_COMMAND_ENV):
        print(
            "harness.blackbox.wired: usage: wired [--http] -- COMMAND..., "
            f"run as a black box's agent (with {MCP_COMMAND_ENV})",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    try:
        os.environ.update(wire_env(wiring, os.environ, Path.cwd()))
    except (OSError, RuntimeError) as exc:
        print(f"harness.blackbox.wired: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stdout.flush()
    os.execvp(wiring.agent[0], wiring.agent)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
