"""Starting an agent incarnation: exec a fresh interpreter, or fork a warm one.

Both give a real process in a session (and process group) of its own, with
the hand-shake pipe as its only extra file descriptor, stderr to a file, and
its environment set from scratch; both are killed by a real SIGKILL sent by
the supervisor, and reaped before the supervisor goes on.

- ``exec``: ``python -I -c EXEC_BOOTSTRAP PATH MODULE TRIAL_DIR``, which runs
  the agent program with the supervisor's import path (as ``-m`` would, but a
  user's module on ``PYTHONPATH`` stays importable under ``-I``). Pays the interpreter's
  start-up and the agent's imports every time; works for any agent program.
- ``warm``: ``fork``, and a black box's Python agent forked from a zygote of its own
  interpreter that the fork server keeps (``harness.blackbox.warm``).
- ``fork``: a fork server (``harness.chaos.forkserver``, one per supervising
  process, exec'd once) has imported the agent's modules; each incarnation is
  a ``fork`` of it that runs the agent's ``main`` (the child's side, and the
  protocol's constants, live in ``harness.chaos.forkserver``; this module is
  the client's side). The server never runs agent
  code, so every child starts from the same state, and nothing passes from one
  incarnation to the next but what is on disk. The server is small, so its
  forks are cheap; it reaps a child only when the supervisor asks.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Protocol

from harness.chaos.forkserver import FORK_SERVER_MODULE, MAX_PACKET

__all__ = [
    "LAUNCHERS",
    "AgentProcess",
    "ForkServer",
    "launch",
]

LAUNCHERS = ("fork", "exec", "warm")


class AgentProcess(Protocol):
    pid: int

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...


class ForkedAgent:
    """An incarnation forked by the fork server, with ``Popen``'s ``poll``/``wait``/``returncode``.

    The server is its parent and reaps it only when this asks, so its pid
    cannot be reused while the supervisor may still SIGKILL it.
    """

    def __init__(self, pid: int, server: ForkServer) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._server = server

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.wait(self.pid, block=False)
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            self.returncode = self._server.wait(self.pid, block=True)
        return self.returncode


class ForkServer:
    """The client's end of ``harness.chaos.forkserver``: one server per process, started lazily."""

    _mine: ForkServer | None = None

    def __init__(self, python: str, preload: str | None = None) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = None if preload is None else {**os.environ, "LD_PRELOAD": preload}
        try:
            self.process = subprocess.Popen(
                # The owner and its parent name it for sweep_agents after a crash.
                [
                    python,
                    "-I",
                    "-m",
                    FORK_SERVER_MODULE,
                    str(theirs.fileno()),
                    str(os.getpid()),
                    str(os.getppid()),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # a Ctrl-C at the terminal is the harness's to handle
                env=env,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.python = python
        self.ld_preload = preload
        self.owner = os.getpid()
        self._sock = ours

    @classmethod
    def get(cls, python: str, preload: str | None = None) -> ForkServer:
        """This process's server (a forked pool worker starts its own, not its parent's).

        ``preload``: the ``LD_PRELOAD`` its children need (an observed life's: the library
        must be in the server before it forks them). A server started with it serves lives
        without it too (the observer stays idle without its variables); one started
        without it is replaced.
        """
        server = cls._mine
        if (
            server is None
            or server.owner != os.getpid()
            or server.python != python
            or (preload is not None and server.ld_preload != preload)
            or server.process.poll() is not None  # killed (a sweep, an OOM kill): start anew
        ):
            if server is not None and server.owner == os.getpid():
                server.close()  # another interpreter, or a dead server: let it go first
            server = cls._mine = cls(python, preload)
            atexit.register(server.close)
        return server

    def spawn(
        self,
        module: str,
        trial_dir: Path,
        env: dict[str, str],
        channel_fd: int,
        stderr_fd: int,
        warm: dict[str, Any] | None = None,
    ) -> ForkedAgent:
        """``warm``: the black box's zygote (``harness.blackbox.warm``) its host forks from."""
        request = {
            "op": "spawn",
            "module": module,
            "trial_dir": str(trial_dir),
            "env": env,
            "path": sys.path,
            "warm": warm,
        }
        socket.send_fds(self._sock, [json.dumps(request).encode()], [channel_fd, stderr_fd])
        reply = self._reply("spawn", None)
        if "error" in reply:
            raise OSError(f"fork server could not start {module}: {reply['error']}")
        if reply.get("warm_refused"):
            _say_once(f"harness: warm start refused: {reply['warm_refused']}; plain start")
        return ForkedAgent(int(reply["pid"]), self)

    def preload(self, module: str) -> None:
        """Have the server import ``module`` now rather than at its first spawn."""
        request = {"op": "preload", "module": module, "path": sys.path}
        self._sock.send(json.dumps(request).encode())
        reply = self._reply("preload", None)
        if "error" in reply:
            raise OSError(f"fork server could not import {module}: {reply['error']}")

    def wait(self, pid: int, *, block: bool) -> int | None:
        self._sock.send(json.dumps({"op": "wait", "pid": pid, "block": block}).encode())
        status = self._reply("wait", pid)["status"]
        return None if status is None else int(status)

    def _reply(self, op: str, pid: int | None) -> dict[str, Any]:
        # A reply whose request was cut short by an interrupt may still be queued:
        # skip anything that does not answer this request.
        while True:
            data = self._sock.recv(MAX_PACKET)
            if not data:
                raise OSError(f"fork server (pid {self.process.pid}) exited")
            reply: dict[str, Any] = json.loads(data)
            if reply.get("op") == op and (pid is None or reply.get("pid") == pid):
                return reply

    def close(self) -> None:
        """Close the socket: the server kills what it still runs, reaps it, and exits."""
        self._sock.close()
        if ForkServer._mine is self:
            ForkServer._mine = None
        if self.owner != os.getpid():
            return  # a forked child's copy (atexit is inherited): the server is not its own
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _forget_the_parents_server() -> None:
    # A forked child (a pool worker) must not talk on its parent's socket, nor
    # keep it open: the parent's server would then never see it close.
    server = ForkServer._mine
    if server is not None:
        ForkServer._mine = None
        server._sock.close()


os.register_at_fork(after_in_child=_forget_the_parents_server)


EXEC_BOOTSTRAP = (
    "import json, runpy, sys; sys.path[:] = json.loads(sys.argv.pop(1))\n"
    "try:\n"
    "    runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)\n"
    "except SystemExit as exc:\n"
    "    if exc.code not in (0, None):\n"
    "        raise\n"
    "from harness.failpoints import report_hit_counts_once\n"
    "report_hit_counts_once()"
)
"""``python -I -c`` this, the import path and the module: isolated from the environment
(``-I``), yet importing from the supervisor's own path, as a forked incarnation does (a
user's ``module:`` adapter on ``PYTHONPATH`` included). Once the module is done, a counted
run's hit counts are written if the agent program did not write them itself."""


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
                [python, "-I", "-c", EXEC_BOOTSTRAP, json.dumps(sys.path), module, str(trial_dir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                pass_fds=(channel_fd,),
                start_new_session=True,
            )
    if how not in LAUNCHERS:
        raise ValueError(f"unknown launcher {how!r} (known: {', '.join(LAUNCHERS)})")
    # "warm" forks a black box's Python agent from a zygote too; our own agent programs
    # are already forked warm.
    warm = _zygote_spec(env) if how == "warm" and module == BLACK_BOX_HOST else None
    stderr_fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        server = ForkServer.get(python, env.get("LD_PRELOAD"))
        return server.spawn(module, trial_dir, env, channel_fd, stderr_fd, warm)
    finally:
        os.close(stderr_fd)


BLACK_BOX_HOST = "harness.blackbox.host"
_said: set[str] = set()


def _say_once(line: str) -> None:
    if line not in _said:
        _said.add(line)
        print(line, file=sys.stderr)


def _zygote_spec(env: dict[str, str]) -> dict[str, Any] | None:
    """What the fork server needs to start the black box's zygote, if the campaign adopted a
    warm plan for its command (``harness.blackbox.warm.adopt``)."""
    from harness.blackbox import AGENT_COMMAND_ENV
    from harness.blackbox.warm import plan_for, zygote_env

    plan = plan_for(env.get(AGENT_COMMAND_ENV, ""))
    if plan is None:
        return None
    # Its servers' address and temporary folder are placeholders: each life sets its own.
    return {"plan": plan.encode(), "env": zygote_env(env, Path("/"), base="http://127.0.0.1:9")}
