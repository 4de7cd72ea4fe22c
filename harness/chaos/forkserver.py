"""The fork server: a small warm process that forks agent incarnations on request.

A fork costs what the parent's memory costs: its page tables are copied at
the fork and torn down at the child's exit. A pool worker holds pydantic,
faker, rich and the campaign (about 40 MiB); this server holds only the
agent program's modules (about 20 MiB), so each incarnation it forks starts
and dies faster. Each incarnation is still a real process in a session of its
own, killed by a real SIGKILL from the supervisor; the server never runs agent
code itself, so every child starts from the same state and nothing passes from
one incarnation to the next but what is on disk.

One server serves one supervising process, over a ``SOCK_SEQPACKET`` socket
pair, a JSON object per packet:

- ``{"op": "spawn", "module", "trial_dir", "env", "path"}`` with two file
  descriptors (SCM_RIGHTS): the hand-shake channel's write end and the stderr
  file. Reply ``{"op": "spawn", "pid": N}`` or ``{"op": "spawn", "error": "..."}``.
- ``{"op": "preload", "module", "path"}``: import the program now, not at its
  first spawn (a benchmark keeps that out of its timing). Reply ``{"op":
  "preload"}`` or with an ``"error"``.
- ``{"op": "wait", "pid": N, "block": bool}``: reply ``{"op": "wait", "pid": N,
  "status": code}`` (``null`` while it runs, with ``block`` false).

The server reaps a child only when asked, so until the supervisor has waited
for it a pid stays taken (a zombie at worst) and a SIGKILL sent to it cannot
reach another process. When the socket closes (the supervising process exited
or died) the server SIGKILLs every child it still has, reaps them, and exits:
a dead worker leaves no agent behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
from typing import Any

__all__ = ["MAX_PACKET", "main", "serve"]

MAX_PACKET = 1 << 20
"""Largest request or reply (an agent's environment is a few KiB)."""


def serve(sock: socket.socket) -> None:
    """Answer requests on ``sock`` until it closes; then kill and reap what is left."""
    from harness.chaos.launch import fork_agent, preload
    from harness.runtime.failpoints import CHANNEL_ENV

    running: set[int] = set()
    finished: dict[int, int] = {}  # reaped for a waiter that was interrupted
    preloaded: set[str] = set()

    def ready(request: dict[str, Any]) -> str:
        """The request's agent program, imported here (with the client's path) once."""
        module: str = request["module"]
        if module not in preloaded:
            sys.path[:] = request["path"]
            preload(module)
            preloaded.add(module)
        return module

    try:
        while True:
            data, fds, _, _ = socket.recv_fds(sock, MAX_PACKET, 2)
            if not data:
                return
            request: dict[str, Any] = json.loads(data)
            if request["op"] == "spawn":
                try:
                    if len(fds) != 2:
                        raise ValueError(f"spawn needs 2 file descriptors, got {len(fds)}")
                    module = ready(request)
                    channel_fd, stderr_fd = fds
                    # The channel arrived under a number of this process's own.
                    env = {**request["env"], CHANNEL_ENV: str(channel_fd)}
                    pid = fork_agent(module, request["trial_dir"], env, channel_fd, stderr_fd)
                    running.add(pid)
                    reply: dict[str, Any] = {"op": "spawn", "pid": pid}
                except Exception as exc:  # the supervisor reports it; the server goes on
                    reply = {"op": "spawn", "error": f"{type(exc).__name__}: {exc}"}
                finally:
                    for fd in fds:
                        os.close(fd)
            elif request["op"] == "preload":
                try:
                    ready(request)
                    reply = {"op": "preload"}
                except Exception as exc:
                    reply = {"op": "preload", "error": f"{type(exc).__name__}: {exc}"}
            elif request["op"] == "wait":
                pid = int(request["pid"])
                reply = {"op": "wait", "pid": pid, "status": _wait(pid, request, running, finished)}
            else:
                reply = {"op": request["op"], "error": "unknown request"}
            sock.send(json.dumps(reply).encode())
    finally:
        for pid in running:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _wait(
    pid: int, request: dict[str, Any], running: set[int], finished: dict[int, int]
) -> int | None:
    if pid in finished:
        return finished[pid]
    if pid not in running:
        return -1  # not a child of this server: nothing to wait for
    got, status = os.waitpid(pid, 0 if request.get("block") else os.WNOHANG)
    if not got:
        return None
    running.discard(pid)
    code = os.waitstatus_to_exitcode(status)
    finished[pid] = code
    if len(finished) > 1024:  # answers kept for a retried wait only; the oldest go first
        del finished[next(iter(finished))]
    return code


def main(argv: list[str]) -> int:
    """``python -m harness.chaos.forkserver FD OWNER PARENT``: serve on the socket ``FD``.

    ``OWNER`` and ``PARENT`` (pids) are read only by ``sweep_agents``.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervising process handles Ctrl-C
    with socket.socket(fileno=int(argv[0])) as sock:
        serve(sock)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
