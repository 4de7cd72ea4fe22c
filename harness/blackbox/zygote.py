"""A Python black box's interpreter, started once, that forks each life of the agent.

Run by the agent's own interpreter, standard library only (the agent's environment does not
hold the harness), in one of two ways:

- ``python zygote.py --record OUT -- PROGRAM...``: run the program as ``python PROGRAM...``
  would, and at its exit write to ``OUT`` the modules it imported (the crash-free run).
- ``python zygote.py FD MARKER OWNER PARENT``: a zygote serving on the ``SOCK_SEQPACKET``
  socket ``FD``. Its first packets name the program and the modules to import; it imports
  them, checks that nothing would make a fork unlike a fresh start (a thread, an open file,
  an environment variable read that a life sets otherwise, the observer not loaded) and
  answers ``ready``. Then each connection it is handed (one per life, from the harness's
  fork server) asks it to ``run`` the program with the life's working folder, environment,
  standard streams and process group: it forks, and the child runs the program as a fresh
  ``python PROGRAM...`` would. Its exit status goes back on the connection.

The zygote never runs the program itself, starts no thread and opens nothing of a trial.
It kills its children and exits when its socket closes. ``MARKER OWNER PARENT`` name it
for the harness's sweep of stray processes.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import select
import signal
import socket
import sys
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_PACKET = 1 << 20
PROBED_ENV_WILDCARD = "*"
"""What ``read_env`` names when a module read the whole environment (iterated or copied)."""
TEMP_VARIABLES = ("TMPDIR", "TEMP", "TMP")
UNCAUGHT = 1
"""The interpreter's status for an uncaught exception (``harness.exits.PYTHON_UNCAUGHT``)."""


@dataclass
class Program:
    """``python script.py ARGS`` (``module`` None) or ``python -m module ARGS``."""

    script: str | None
    module: str | None
    args: list[str]

    @classmethod
    def parse(cls, words: list[str]) -> Program:
        if words[:1] == ["-m"] and len(words) > 1:
            return cls(None, words[1], words[2:])
        if words and not words[0].startswith("-"):
            return cls(words[0], None, words[1:])
        raise ValueError(f"not a script or -m module: {words!r}")

    def path0(self, cwd: str) -> str:
        """``sys.path[0]`` as the interpreter sets it: the script's real folder, or the
        working folder for ``-m``."""
        if self.script is not None:
            return os.path.dirname(os.path.realpath(self.script))
        return cwd


# -- running the program as a fresh interpreter would ---------------------------------------


def run_program(program: Program) -> None:
    """Run ``program`` in this process as ``__main__``; an uncaught exception is printed as
    the interpreter prints it (from the program's own frames) and exits 1."""
    sys.path[0] = program.path0(os.getcwd())
    try:
        if program.module is not None:
            import runpy

            sys.argv = ["-m", *program.args]
            runpy._run_module_as_main(program.module, True)  # type: ignore[attr-defined]
            return
        assert program.script is not None
        sys.argv = [program.script, *program.args]
        path = os.path.abspath(program.script)
        main = types.ModuleType("__main__")
        from importlib.machinery import SourceFileLoader

        main.__dict__.update(
            __file__=path,
            __builtins__=builtins,
            __loader__=SourceFileLoader("__main__", path),
            __spec__=None,
            __cached__=None,
            __annotations__={},
        )
        sys.modules["__main__"] = main
        with open(path, "rb") as source:
            code = compile(source.read(), path, "exec", dont_inherit=True)
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next  # the interpreter shows the program's frames only
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)  # the hook prints the exception's
        raise SystemExit(UNCAUGHT) from None


def record(out: str, words: list[str]) -> None:
    """The crash-free run: the program, then the modules it imported written to ``out``."""
    import atexit

    program = Program.parse(words)

    def write() -> None:  # registered first, so it runs after the program's own handlers
        names = [[n, getattr(m, "__file__", None)] for n, m in list(sys.modules.items())]
        prefixes = sorted({sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix})
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"modules": names, "prefixes": prefixes}, f)

    atexit.register(write)
    run_program(program)


# -- the zygote ------------------------------------------------------------------------------


@dataclass
class Job:
    """What a forked child runs: the program, in the life's folder and environment."""

    program: Program
    cwd: str
    env: dict[str, str]
    reset_tempdir: bool
    sigint_ignored: bool = False
    """As a program the life's host started would find SIGINT: ignored if the host ignores it."""


@dataclass
class Life:
    """One life's host's connection, and the child forked for it (pid 0: none yet, or reaped)."""

    conn: socket.socket
    pid: int = 0
    pidfd: int = -1


@dataclass
class Zygote:
    """The zygote's state: its socket, its program, what its imports read of the environment
    (and which modules read it), and the lives it serves."""

    control: socket.socket
    program: Program
    env_read: dict[str, str | None] = field(default_factory=dict)
    readers: dict[str, set[str]] = field(default_factory=dict)
    reset_tempdir: bool = False
    lives: dict[int, Life] = field(default_factory=dict)
    at_start: dict[str, str] = field(default_factory=dict)
    """The variables the interpreter read as it started (``_read_at_start``), as they were."""


def _read_at_start(key: str) -> bool:
    """Whether the interpreter reads ``key`` as it starts (its import path, its flags, its
    streams' encoding): a fork keeps what the zygote's start made of it."""
    return key.startswith("PYTHON") or key in ("LANG", "LANGUAGE") or key.startswith("LC_")


_watching: Zygote | None = None


def _reader() -> str:
    """The module that read the environment: the first frame outside os and the ABCs."""
    frame = sys._getframe(2)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", "?"))
        if name not in ("os", "_collections_abc", "collections.abc", __name__):
            return name
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


def _note(key: str, value: str | None) -> None:
    zygote = _watching
    if zygote is None:
        return
    if key != PROBED_ENV_WILDCARD:
        zygote.env_read.setdefault(key, value)
    zygote.readers.setdefault(key, set()).add(_reader())


class _WatchedEnviron(type(os.environ)):  # type: ignore[misc]
    """``os.environ``'s own class, noting every read: swapped in during the imports only, so
    that ``from os import environ`` keeps the very object a fresh interpreter has."""

    def __getitem__(self, key: str) -> str:
        try:
            value: str = super().__getitem__(key)
        except KeyError:
            _note(key, None)
            raise
        _note(key, value)
        return value

    def __iter__(self) -> Iterator[str]:
        _note(PROBED_ENV_WILDCARD, None)
        return super().__iter__()  # type: ignore[no-any-return]


@contextlib.contextmanager
def _watching_environ(zygote: Zygote) -> Iterator[None]:
    global _watching
    plain = type(os.environ)
    _watching = zygote
    os.environ.__class__ = _WatchedEnviron
    try:
        yield
    finally:
        os.environ.__class__ = plain
        _watching = None


def _import_all(zygote: Zygote, names: list[str]) -> dict[str, Any]:
    import importlib

    failed = []
    started = time.monotonic()
    with _watching_environ(zygote):
        for name in names:
            if name in sys.modules:
                continue
            try:
                importlib.import_module(name)
            except BaseException as exc:
                failed.append(f"{name}: {type(exc).__name__}")
    took = time.monotonic() - started
    tempfile = sys.modules.get("tempfile")
    zygote.reset_tempdir = tempfile is not None and tempfile.tempdir is not None
    return {"imported": len(sys.modules), "failed": failed, "import_s": took}


def _refusal(zygote: Zygote, preload: str | None) -> str | None:
    """Why a fork of this process would not start like a fresh interpreter, if it would not."""
    tasks = os.listdir("/proc/self/task")
    if len(tasks) != 1:
        names = []
        for task in tasks:
            with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/comm") as f:
                names.append(f.read().strip())
        return (
            f"{len(tasks) - 1} thread(s) run after the imports ({', '.join(sorted(names))}): "
            "a fork keeps only one"
        )
    mine = {0, 1, 2, zygote.control.fileno()}
    opened = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if int(fd) not in mine and not target.startswith("/proc/"):
                opened.append(target)
    if opened:
        return f"the imports left open {', '.join(sorted(opened))}: every life would share it"
    if preload:
        with open("/proc/self/maps") as f:
            maps = f.read()
        missing = [lib for lib in preload.split() if lib not in maps]
        if missing:
            return f"the observer {missing[0]} is not loaded in the agent's interpreter"
    return None


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # a host killed meanwhile: nobody to tell
        sock.send(json.dumps(message).encode())


def _start(zygote: Zygote, life: Life, request: dict[str, Any], fds: list[int]) -> Job | None:
    """Fork a child for ``request``; in the child, the ``Job`` it runs (None in the zygote)."""
    why = None
    program = Program.parse(request["argv"])
    mine = (zygote.program.script, zygote.program.module)
    if (program.script, program.module) != mine:
        why = f"this zygote is of {' '.join(filter(None, mine))}, not {request['argv'][0]}"
    env: dict[str, str] = request["env"]
    for key, started in zygote.at_start.items():
        if env.get(key) != started and why is None:
            why = f"{key} is read by the interpreter as it starts and this life sets it otherwise"
    for key in env.keys() - zygote.at_start.keys():
        if _read_at_start(key) and why is None:
            why = f"{key} is read by the interpreter as it starts and this life sets it otherwise"
    for key, value in zygote.env_read.items():
        if key in TEMP_VARIABLES and zygote.readers[key] == {"tempfile"}:
            continue  # tempfile's cached folder is dropped in the child (become)
        if env.get(key) != value and why is None:
            readers = ", ".join(sorted(zygote.readers[key]))
            why = f"{key} was read at import ({readers}) and this life sets it otherwise"
    if PROBED_ENV_WILDCARD in zygote.readers and why is None:
        readers = ", ".join(sorted(zygote.readers[PROBED_ENV_WILDCARD]))
        why = f"the whole environment was read at import ({readers})"
    if why is not None:
        for fd in fds:
            os.close(fd)
        _send(life.conn, {"op": "refused", "why": why})
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    pgid = int(request["pgid"])
    pid = os.fork()
    if pid == 0:
        with contextlib.suppress(OSError):
            os.setpgid(0, pgid)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        for n, fd in enumerate(fds):
            os.dup2(fd, n)
            os.close(fd)
        _let_go(zygote)
        ignored = bool(request.get("sigint_ignored", False))
        return Job(program, request["cwd"], env, zygote.reset_tempdir, ignored)
    for fd in fds:
        os.close(fd)
    # Both sides move the child into the life's group, so that no kill of the group can
    # come before it is in it (whoever runs first).
    with contextlib.suppress(OSError):
        os.setpgid(pid, pgid)
    life.pid = pid
    life.pidfd = os.pidfd_open(pid)
    _send(life.conn, {"op": "started", "pid": pid})
    return None


def _let_go(zygote: Zygote) -> None:
    """In a child: close every descriptor of the zygote's, through the objects that own them."""
    for life in zygote.lives.values():
        life.conn.close()
        if life.pidfd >= 0:
            os.close(life.pidfd)
    zygote.lives.clear()
    zygote.control.close()


def _reap(zygote: Zygote, life: Life) -> None:
    _, status = os.waitpid(life.pid, 0)
    os.close(life.pidfd)
    life.pidfd, life.pid = -1, 0
    _send(life.conn, {"op": "exit", "status": os.waitstatus_to_exitcode(status)})


def serve(zygote: Zygote) -> Job | None:
    """Answer the fork server and each life's host until the control socket closes; in a
    forked child, return what it runs."""
    try:
        while True:
            watched: list[Any] = [zygote.control]
            for life in zygote.lives.values():
                watched.append(life.conn)
                if life.pidfd >= 0:
                    watched.append(life.pidfd)
            readable, _, _ = select.select(watched, [], [])
            for ready in readable:
                if ready is zygote.control:
                    data, fds, _, _ = socket.recv_fds(zygote.control, MAX_PACKET, 1)
                    if not data:
                        return None
                    conn = socket.socket(fileno=fds[0])
                    zygote.lives[conn.fileno()] = Life(conn)
                    continue
                if isinstance(ready, int):
                    # A child exited (unless its host's end was handled first this round).
                    for life in zygote.lives.values():
                        if life.pidfd == ready:
                            _reap(zygote, life)
                    continue
                life = zygote.lives[ready.fileno()]
                try:
                    data, fds, _, _ = socket.recv_fds(life.conn, MAX_PACKET, 3)
                except ConnectionResetError:  # it died with a reply of ours unread
                    data, fds = b"", []
                if not data:  # the host is gone (killed): its life goes with it
                    if life.pid:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(life.pid, signal.SIGKILL)
                        _reap(zygote, life)
                    del zygote.lives[ready.fileno()]
                    life.conn.close()
                    continue
                job = _start(zygote, life, json.loads(data), fds)
                if job is not None:
                    return job
    finally:
        if zygote.lives:  # in the zygote only: a child cleared them
            for life in zygote.lives.values():
                if life.pid:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(life.pid, signal.SIGKILL)
                    os.waitpid(life.pid, 0)


def become(job: Job) -> None:
    """In the forked child: be the program's fresh process, then run it."""
    if job.sigint_ignored:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.chdir(job.cwd)
    os.environ.clear()
    os.environ.update(job.env)
    if job.reset_tempdir:
        tempfile: Any = sys.modules["tempfile"]
        tempfile.tempdir = None  # it is found again from this life's TMPDIR
    logging = sys.modules.get("logging")
    if logging is not None:  # records' relativeCreated count from the process's start
        logging._startTime = type(logging._startTime)(  # type: ignore[attr-defined]
            time.time_ns() if isinstance(logging._startTime, int) else time.time()
        )
    run_program(job.program)


def zygote_main(argv: list[str]) -> int:
    control = socket.socket(fileno=int(argv[0]))
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Inherited from the fork server; a fresh interpreter started by a life's host
        # finds SIGINT at its default and raises KeyboardInterrupt on it.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    spec: dict[str, Any] = json.loads(control.recv(MAX_PACKET))
    program = Program.parse(spec["program"])
    sys.path[0] = program.path0(os.getcwd())  # not this file's folder: the program's
    zygote = Zygote(control, program)
    zygote.at_start = {k: v for k, v in os.environ.items() if _read_at_start(k)}
    imports = list(spec["imports"])
    for _ in range(int(spec.get("packets", 0))):  # the rest of the names, a packet each
        imports += json.loads(control.recv(MAX_PACKET))
    try:
        stats = _import_all(zygote, imports)
        refused = _refusal(zygote, spec.get("preload"))
    except BaseException as exc:
        stats, refused = {}, f"the imports failed: {type(exc).__name__}: {exc}"
    readers = {k: sorted(v) for k, v in zygote.readers.items()}
    _send(control, {"op": "ready", "refused": refused, "read_env": readers, **stats})
    if refused is not None:
        return 0
    job = serve(zygote)
    if job is None:
        return 0
    del zygote, control, spec, stats, readers
    become(job)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--record"] and argv[2:3] == ["--"]:
        record(argv[1], argv[3:])
        return 0
    return zygote_main(argv)


if __name__ == "__main__":
    # The program's exit status is the interpreter's, as in a fresh ``python PROGRAM``.
    sys.exit(main(sys.argv[1:]))
