"""Starting an agent incarnation: exec a fresh interpreter, or fork a warm one.

Both give a real process in a session (and process group) of its own, with
the hand-shake pipe as its only extra file descriptor, stderr to a file, and
its environment set from scratch; both are killed by a real SIGKILL and
reaped by the supervisor.

- ``exec``: ``python -I -m harness.agent TRIAL_DIR``. Pays the interpreter's
  start-up and the agent's imports every time; works for any agent program.
- ``fork``: the supervisor's process has imported the agent's modules once;
  each incarnation is a ``fork`` of it that runs the agent's ``main``. The
  parent never runs agent code, so every child starts from the same state,
  and nothing passes from one incarnation to the next but what is on disk.
  It needs a single-threaded parent (the harness's workers are).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

__all__ = ["LAUNCHERS", "AgentProcess", "launch"]

LAUNCHERS = ("fork", "exec")


class AgentProcess(Protocol):
    pid: int

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...


class ForkedAgent:
    """A forked incarnation, with ``Popen``'s ``poll``/``wait``/``returncode`` meaning."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def _reaped(self, status: int) -> int:
        self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._reaped(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self._reaped(status)
        assert self.returncode is not None
        return self.returncode


def preload(module: str) -> None:
    """Import the agent program's modules in this (parent) process, once.

    Also parse the default tool table (immutable, cached): every child then
    starts with it. Nothing an incarnation writes can reach the next one.
    """
    importlib.import_module(module if module != "harness.agent" else "harness.agent.__main__")
    from harness.runtime.classes import ToolTable

    ToolTable.default()


def _program(module: str) -> Callable[[list[str]], int]:
    target = importlib.import_module(
        module if module != "harness.agent" else "harness.agent.__main__"
    )
    main: Callable[[list[str]], int] = target.main
    return main


def launch(
    how: str,
    python: str,
    trial_dir: Path,
    env: dict[str, str],
    channel_fd: int,
    stderr_path: Path,
    *,
    module: str = "harness.agent",
) -> AgentProcess:
    """Start one incarnation of the agent program ``module`` (see ``harness.adapters``)."""
    if how == "exec":
        with open(stderr_path, "wb") as stderr:
            return subprocess.Popen(
                [python, "-I", "-m", module, str(trial_dir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                pass_fds=(channel_fd,),
                start_new_session=True,
            )
    if how != "fork":
        raise ValueError(f"unknown launcher {how!r} (known: {', '.join(LAUNCHERS)})")
    preload(module)
    sys.stdout.flush()  # or the child would write the parent's pending output again
    sys.stderr.flush()
    stderr_fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        pid = os.fork()
        if pid == 0:  # the child never returns from here
            _run_child(module, trial_dir, env, channel_fd, stderr_fd)
    finally:
        os.close(stderr_fd)
    return ForkedAgent(pid)


def _run_child(
    module: str, trial_dir: Path, env: dict[str, str], channel_fd: int, stderr_fd: int
) -> None:
    code = 1
    try:
        os.setsid()
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())  # the parent held interrupts
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.dup2(stderr_fd, 2)
        # Only the channel survives: no file of the parent's may reach the agent.
        keep = channel_fd
        os.closerange(3, keep)
        os.closerange(keep + 1, _max_fd())
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [module, str(trial_dir)]
        # The parent's stdio objects may be anything (pytest captures them, rich
        # wraps them): the agent writes to its own descriptors 1 and 2.
        sys.stdout = open(1, "w", buffering=1, closefd=False, errors="backslashreplace")  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")  # noqa: SIM115
        from harness.runtime.failpoints import disarm

        disarm()  # a parent that armed failpoints (a test) must not arm its children
        code = _program(module)([str(trial_dir)])
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
