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

The full note: docs/reference/modules.md (``harness/chaos/forkserver.py``).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.exits import PYTHON_UNCAUGHT

__all__ = ["FORK_SERVER_MODULE", "MAX_PACKET", "fork_agent", "main", "preload", "serve"]

FORK_SERVER_MODULE = "harness.chaos.forkserver"
"""What the launcher execs (``python -I -m``) to start a server."""
MAX_PACKET = 1 << 20
"""Largest request or reply (an agent's environment is a few KiB)."""


def serve(sock: socket.socket) -> None:
    """Answer requests on ``sock`` until it closes; then kill and reap what is left."""
    from harness.failpoints import CHANNEL_ENV

    running: set[int] = set()
    finished: dict[int, int] = {}  # reaped for a waiter that was interrupted
    preloaded: set[str] = set()
    zygotes = _Zygotes()

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
                    reply: dict[str, Any] = {"op": "spawn"}
                    warm = None
                    if request.get("warm") is not None:
                        warm, reply["warm_refused"] = zygotes.connect(request["warm"])
                    try:
                        pid = fork_agent(
                            module, request["trial_dir"], env, channel_fd, stderr_fd, warm
                        )
                    finally:
                        if warm is not None:
                            warm.close()
                    running.add(pid)
                    reply["pid"] = pid
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
        zygotes.close()


class _Zygotes:
    """The warm start's zygote of a black box (``harness.blackbox.warm``), at most one: a
    request for another plan, or for the observer it was started without, replaces it."""

    def __init__(self) -> None:
        self._zygote: Any = None
        self._plan: Any = None

    def connect(self, spec: dict[str, Any]) -> tuple[socket.socket | None, str | None]:
        """A connection to the zygote for one life's host, or None and why it refused."""
        from harness.blackbox.warm import WarmPlan, ZygoteProcess

        preload = spec["env"].get("LD_PRELOAD")
        zygote = self._zygote
        # One started with the observer serves lives without it too (idle without its
        # variables), as this server does.
        keeps = (
            zygote is not None
            and (zygote.alive() or zygote.refused is not None)  # a refusal is not retried
            and spec["plan"] == self._plan
            and (preload == zygote.preload or (not preload and zygote.preload))
        )
        if not keeps:
            self.close()
            names = (FORK_SERVER_MODULE, *sys.argv[-2:])  # for sweep_agents, as ours
            zygote = ZygoteProcess(WarmPlan.decode(spec["plan"]), spec["env"], names)
            self._zygote, self._plan = zygote, spec["plan"]
        if zygote.refused is not None:
            return None, str(zygote.refused)
        return zygote.connect(), None

    def close(self) -> None:
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None


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


# -- the child's side: preloading the agent program, forking an incarnation --------------


def preload(module: str) -> None:
    """Import the agent program's modules in this (parent) process, once.

    Also parse the default tool table (immutable, cached), and for our agent import
    what runs a batch of calls (asyncio, which an exec'd agent imports only for a plan
    with batches): every child then starts with them. Nothing an incarnation writes
    can reach the next one, and no loop or thread runs in this process.
    """
    _program(module)
    if module == "harness.agent":
        importlib.import_module("harness.agent.batch")
    from harness.runtime.classes import ToolTable

    ToolTable.shipped()


def _program(module: str) -> Callable[[list[str]], int]:
    """The agent program's ``main`` (``harness.agent`` keeps it in its ``__main__``)."""
    target = importlib.import_module(
        module if module != "harness.agent" else "harness.agent.__main__"
    )
    main: Callable[[list[str]], int] = target.main
    return main


def fork_agent(
    module: str,
    trial_dir: Path | str,
    env: dict[str, str],
    channel_fd: int,
    stderr_fd: int,
    warm: socket.socket | None = None,
) -> int:
    """Fork one incarnation of ``module`` from this (preloaded) process; the child's pid.

    ``warm``: its connection to a zygote (``WARM_FD_ENV``). The zygote's forks join the
    incarnation's process group, which needs them in one session: such an incarnation
    leads a group of its own in this server's session instead of a session of its own.
    """
    sys.stdout.flush()  # or the child would write the parent's pending output again
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child never returns from here
        _run_child(module, Path(trial_dir), env, channel_fd, stderr_fd, warm)
    if warm is not None:
        with contextlib.suppress(OSError):  # either side may come first: no kill misses it
            os.setpgid(pid, pid)
    return pid


def _run_child(
    module: str,
    trial_dir: Path,
    env: dict[str, str],
    channel_fd: int,
    stderr_fd: int,
    warm: socket.socket | None,
) -> None:
    code = PYTHON_UNCAUGHT  # what Python gives if the program raises
    try:
        if warm is None:
            os.setsid()
        else:
            os.setpgid(0, 0)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())  # the parent held interrupts
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.dup2(stderr_fd, 2)
        # Only the channel (and a zygote's connection) survive: no file of the parent's
        # may reach the agent.
        keep = sorted({channel_fd} | ({warm.fileno()} if warm is not None else set()))
        for low, high in zip([2, *keep], [*keep, _max_fd()], strict=True):
            os.closerange(low + 1, high)
        os.environ.clear()
        os.environ.update(env)
        if warm is not None:
            from harness.blackbox.warm import WARM_FD_ENV

            os.environ[WARM_FD_ENV] = str(warm.detach())
        sys.argv = [module, str(trial_dir)]
        # The parent's stdio objects may be anything (pytest captures them, rich
        # wraps them): the agent writes to its own descriptors 1 and 2.
        sys.stdout = open(1, "w", buffering=1, closefd=False, errors="backslashreplace")  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")  # noqa: SIM115
        from harness.failpoints import disarm, report_hit_counts_once

        disarm()  # a parent that armed failpoints (a test) must not arm its children
        code = _program(module)([str(trial_dir)])
        report_hit_counts_once()  # a counted run of an agent program that does not say them
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


def _max_fd() -> int:
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        return 4096


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
