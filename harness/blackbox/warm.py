"""The warm start of a Python black box: its lives forked from a zygote of its own interpreter.

A ``cmd:`` agent that is a Python program (``python script.py ...``, ``python -m pkg ...``)
pays its interpreter's start-up and its framework's imports in every life. With
``--launch warm`` the crash-free run that checks the agent before any trial records the
modules it imported (``RECORD_ENV``: the host runs it through ``zygote.py --record``, which
runs the program as ``python PROGRAM`` would). Each campaign worker's fork server then
starts the agent's interpreter once as a zygote (``harness/blackbox/zygote.py``) that
imports them, and each life's host asks it for a fork that runs the program in the life's
folder, environment, standard streams and process group.

Contract: a life forked from the zygote is a new process in the life's process group,
killed with it, whose exit status reaches the host as a child's would; where the zygote
finds a fork would not start like a fresh interpreter it refuses, with the reason in one
line, and the lives start plain.

The full note: docs/guides/agents.md (the warm start).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "PLAN_ENV",
    "RECORD_ENV",
    "WARM_FD_ENV",
    "ZYGOTE",
    "WarmAgent",
    "WarmPlan",
    "ZygoteProcess",
    "adopt",
    "plan_for",
    "python_program",
    "recording_command",
    "start_warm",
]

ZYGOTE = Path(__file__).with_name("zygote.py")
RECORD_ENV = "HARNESS_WARM_RECORD"
"""In a crash-free run's environment: the file the host has the agent's imports written to."""
PLAN_ENV = "HARNESS_WARM_PLAN"
"""In the campaign's environment (its workers inherit it): the warm plans it adopted."""
WARM_FD_ENV = "HARNESS_WARM_FD"
"""In a host's environment: its connection to the zygote, a descriptor it inherited."""
MAX_PACKET = 1 << 20
IMPORTS_PER_PACKET = 500
"""Module names a packet to the zygote carries (500 long names fit a default send buffer)."""
_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?$")


def python_program(words: Sequence[str], path: str | None) -> tuple[str, list[str]] | str:
    """The interpreter (found on ``path``) and the program's words (``script.py ARGS`` or
    ``-m pkg ARGS``) of a command that runs a Python program, or why it is not one."""
    if not words or not _PYTHON_NAME.match(Path(words[0]).name):
        return f"{words[0] if words else 'an empty command'} is not a Python interpreter"
    found = shutil.which(words[0], path=path) if "/" not in words[0] else words[0]
    if found is None:
        return f"{words[0]} is not found"
    rest = list(words[1:])
    if rest[:1] == ["-m"] and len(rest) > 1:
        return os.path.abspath(found), rest
    if rest and not rest[0].startswith("-"):
        return os.path.abspath(found), rest
    return f"interpreter options ({' '.join(rest[:1])}) are not taken by the warm start"


def recording_command(words: Sequence[str], out: str) -> list[str]:
    """The crash-free run's command: the program run by ``zygote.py``, its imports to ``out``."""
    program = python_program(words, os.environ.get("PATH"))
    if isinstance(program, str):
        return list(words)
    return [words[0], str(ZYGOTE), "--record", out, "--", *program[1]]


@dataclass(frozen=True, slots=True)
class WarmPlan:
    """What a zygote of one command imports: the crash-free run's modules, in their order."""

    command: str
    python: str
    program: tuple[str, ...]
    imports: tuple[str, ...]
    skip_under: tuple[str, ...]
    """The program's own folder: what it imports from there is left out of ``imports``, for
    each life to import fresh (the zygote starts there)."""

    @classmethod
    def from_record(cls, command: str, words: Sequence[str], record: Path) -> WarmPlan | str:
        program = python_program(words, os.environ.get("PATH"))
        if isinstance(program, str):
            return program
        if not record.exists():
            return "the crash-free run left no list of its imports (did it end by os._exit?)"
        recorded: dict[str, Any] = json.loads(record.read_text("utf-8"))
        skip = [str(Path(w).resolve().parent) + os.sep for w in program[1][:1] if w != "-m"]
        # The interpreter's own trees (a venv may sit in the program's folder) are not its.
        installed = [os.path.realpath(p) + os.sep for p in recorded["prefixes"]]

        def own(file: str | None) -> bool:
            where = os.path.realpath(file or "")
            return where.startswith(tuple(skip)) and not where.startswith(tuple(installed))

        imports = [
            name
            for name, file in recorded["modules"]
            if name not in ("__main__", "__mp_main__") and not own(file)
        ]
        return cls(command, program[0], tuple(program[1]), tuple(imports), tuple(skip))

    def encode(self) -> dict[str, Any]:
        """As JSON, its imports compressed: each life's spawn request to the fork server
        carries it in one packet, which a socket's send buffer bounds."""
        fields = asdict(self)
        names = json.dumps(fields.pop("imports")).encode()
        return {**fields, "imports_z": base64.b64encode(zlib.compress(names)).decode()}

    @classmethod
    def decode(cls, fields: dict[str, Any]) -> WarmPlan:
        imports = json.loads(zlib.decompress(base64.b64decode(fields["imports_z"])))
        return cls(
            str(fields["command"]),
            str(fields["python"]),
            tuple(fields["program"]),
            tuple(imports),
            tuple(fields["skip_under"]),
        )


def plan_for(command: str) -> WarmPlan | None:
    """The campaign's warm plan for ``command``, if it adopted one (``adopt``)."""
    return _adopted().get(command)


def _adopted() -> dict[str, WarmPlan]:
    text = os.environ.get(PLAN_ENV)
    plans = json.loads(zlib.decompress(base64.b64decode(text))) if text else []
    return {p["command"]: WarmPlan.decode(p) for p in plans}


def _keep(plan: WarmPlan) -> None:
    plans = {**_adopted(), plan.command: plan}
    encoded = json.dumps([p.encode() for p in plans.values()]).encode()
    os.environ[PLAN_ENV] = base64.b64encode(zlib.compress(encoded)).decode()


# -- the fork server's side: one zygote ------------------------------------------------------


class ZygoteProcess:
    """A zygote of one plan, started with ``env``; ``ready`` is what it said once imported.

    It lives in its starter's session (a life's host and the forks it asks for share a
    process group, which needs one session) and exits when ``close`` closes its socket.
    """

    def __init__(self, plan: WarmPlan, env: Mapping[str, str], names: Sequence[str] = ()) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [plan.python, str(ZYGOTE), str(theirs.fileno()), *names],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # not a terminal, as a life's: buffered alike
                pass_fds=(theirs.fileno(),),
                env=dict(env),
                cwd=plan.skip_under[0] if plan.skip_under else None,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.plan = plan
        self.preload = env.get("LD_PRELOAD")
        self._sock = ours
        # The imports go in packets of their own: a socket's send buffer (212992 bytes by
        # default) bounds one packet, and a framework may import thousands of modules.
        names = list(plan.imports)
        packets = [
            names[at : at + IMPORTS_PER_PACKET] for at in range(0, len(names), IMPORTS_PER_PACKET)
        ]
        spec = {
            "program": list(plan.program),
            "imports": [],
            "packets": len(packets),
            "preload": self.preload,
        }
        try:
            ours.send(json.dumps(spec).encode())
            for packet in packets:
                ours.send(json.dumps(packet).encode())
            data = ours.recv(MAX_PACKET)
        except BaseException:  # an interrupt while it imports: it goes too
            self.process.kill()
            self.close()
            raise
        self.ready: dict[str, Any] = (
            json.loads(data) if data else {"refused": "the zygote exited while importing"}
        )

    @property
    def refused(self) -> str | None:
        why = self.ready.get("refused")
        return None if why is None else str(why)

    def connect(self) -> socket.socket:
        """A new connection for one life's host (the zygote keeps the other end)."""
        host, zygote = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            socket.send_fds(self._sock, [b"connect"], [zygote.fileno()])
        except BaseException:
            host.close()
            raise
        finally:
            zygote.close()
        return host

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        """The zygote kills and reaps the lives it still runs, then exits."""
        self._sock.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# -- the host's side: one life ---------------------------------------------------------------


class WarmAgent:
    """A life forked by the zygote, with ``Popen``'s ``pid`` and ``wait``."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.pid = pid
        self._sock = sock
        self.returncode: int | None = None

    def wait(self) -> int:
        while self.returncode is None:
            data = self._sock.recv(MAX_PACKET)
            if not data:
                raise OSError("the zygote exited while the agent ran")
            reply = json.loads(data)
            if reply.get("op") == "exit":
                self.returncode = int(reply["status"])
        return self.returncode


def start_warm(
    sock: socket.socket,
    words: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    stdout: int,
    *,
    pgid: int | None = None,
) -> WarmAgent | str:
    """Ask the zygote on ``sock`` for a life of ``words`` (standard input /dev/null, output to
    ``stdout``, errors to this process's) in process group ``pgid`` (default: this process's,
    which must be in the zygote's session); the life, or why the zygote refused it."""
    program = python_program(words, env.get("PATH"))
    if isinstance(program, str):
        return program
    group = os.getpgrp() if pgid is None else pgid
    # A program this process starts inherits an ignored SIGINT (exec keeps SIG_IGN); the
    # forked life must start with the same.
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    request = {
        "argv": program[1],
        "cwd": str(cwd),
        "env": dict(env),
        "pgid": group,
        "sigint_ignored": ignored,
    }
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        socket.send_fds(sock, [json.dumps(request).encode()], [devnull, stdout, 2])
    finally:
        os.close(devnull)
    data = sock.recv(MAX_PACKET)
    if not data:
        return "the zygote exited"
    reply = json.loads(data)
    if reply.get("op") != "started":
        return str(reply.get("why", reply))
    return WarmAgent(sock, int(reply["pid"]))


# -- the campaign's side: adopting a plan once -----------------------------------------------


def zygote_env(life_env: Mapping[str, str], trial_dir: Path, *, base: str) -> dict[str, str]:
    """The environment a zygote starts with: a life's agent's, with ``base`` as its servers'
    address and none of the observer's per-life variables (the library stays loaded)."""
    from harness.blackbox.handed import agent_env
    from harness.chaos.observer import ENV_ROOT, ENV_TRACE

    env = agent_env(base, life_env, trial_dir / "tmp")
    for key in (ENV_TRACE, ENV_ROOT):
        env.pop(key, None)
    return env


def per_life_variables(life_env: Mapping[str, str]) -> set[str]:
    """The agent's variables whose values differ from one life to the next (its servers'
    address, its temporary folder, the observer's trace)."""
    from harness.chaos.observer import ENV_ROOT, ENV_TRACE

    one = zygote_env(life_env, Path("/one"), base="http://127.0.0.1:1")
    two = zygote_env(life_env, Path("/two"), base="http://127.0.0.1:2")
    return {k for k in one.keys() | two.keys() if one.get(k) != two.get(k)} | {
        ENV_TRACE,
        ENV_ROOT,
    }


@dataclass(frozen=True, slots=True)
class Adopted:
    """What ``adopt`` found: the plan (None: refused) and the line that says so."""

    plan: WarmPlan | None
    line: str
    import_s: float = 0.0
    """How long the zygote's imports took (0 when refused)."""


def adopt(command: str, words: Sequence[str], record: Path) -> Adopted:
    """Try the crash-free run's imports in a zygote of the agent's interpreter, here, once:
    on success the plan goes into this process's environment for the campaign's workers;
    on a refusal the line says why, and the lives start plain. Behind the wire guard's
    launcher, the plan is the agent's own command's (its host wires the guard)."""
    from harness.blackbox.wired import read_launcher

    wiring = read_launcher(words)
    plan = WarmPlan.from_record(command, wiring.agent if wiring else words, record)
    if isinstance(plan, str):
        return Adopted(None, f"warm start refused: {plan}; plain start")
    life_env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    zygote = ZygoteProcess(plan, zygote_env(life_env, Path("/"), base="http://127.0.0.1:9"))
    try:
        ready, why = zygote.ready, zygote.refused
    finally:
        zygote.close()
    if why is None:
        read = ready.get("read_env", {})
        frozen = sorted((set(read) & per_life_variables(life_env)) | ({"*"} & set(read)))
        if frozen:
            key = frozen[0]
            who = ", ".join(read[key])
            what = "the whole environment" if key == "*" else key
            why = f"{who} read {what} at import, which differs in each life"
    if why is not None:
        return Adopted(None, f"warm start refused: {why}; plain start")
    _keep(plan)
    return Adopted(
        plan,
        import_s=float(ready["import_s"]),
        line=f"warm start: each life forks from a zygote that imported {ready['imported']} "
        f"modules ({ready['import_s']:.2f} s, once per worker)",
    )
