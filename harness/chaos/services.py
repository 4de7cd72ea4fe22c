"""Services of the system under test: servers the harness runs beside the agent in a trial.

A scenario's ``[agent.services.NAME]`` names a server the agent needs (an engine's
server, a database). For each trial (and each crash-free run) the harness starts it
once, before the first life, and keeps it across the agent's lives:

- its port on 127.0.0.1 is chosen free, put in its command and ``env`` (``{port}``) and
  handed to every life in the variable ``port_env``; a server that needs more ports names
  them (``ports``), each chosen free too, put in as ``{port.NAME}`` and handed in
  ``SERVICE_NAME_PORT`` (``named_port_env``), a port no process holds included (the port of
  the agent's own endpoint that an engine calls back, the same in every life);
- its files live in the trial folder (``service-NAME/``, ``{data}`` in its command), so
  a power cut's observer sees them (a static program's through ``fstrace.c``); its
  output goes to ``service-NAME.log``, kept with the trial;
- it is ready when its port answers (``ready = "tcp"``) or an HTTP GET of a path answers
  2xx (``ready = "http:/health"``);
- it leads a process group of its own: a kill of the agent's group never reaches it;
- a power loss (``power_cut``) SIGKILLs it with the agent, before the cut, and
  ``start`` starts it again on the files the cut rebuilt, on the same port;
- ``stop`` ends it and removes its data folder, at the trial's end and on Ctrl-C (the
  interrupt path calls ``stop_all``); a watchdog process does the same if the harness
  dies outright (``harness.chaos.watchdog``).

Every start and stop is an event of the trial (``service``), with the pid and port.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.blackbox import resolve_command
from harness.chaos.observer import observed_command
from harness.chaos.watchdog import release, watch
from harness.errors import SupervisorError

__all__ = [
    "SERVICES_FILE",
    "SERVICE_FOLDER",
    "RunningServices",
    "ServiceError",
    "ServiceSpec",
    "named_port_env",
    "read_services",
    "stop_all",
    "write_services",
]

SERVICES_FILE = "services.json"
"""In the trial folder: the services its scenario declares, as the supervisor starts them."""
SERVICE_FOLDER = "service-{name}"
"""In the trial folder: each service's folder of files."""
STOP_SECONDS = 5.0
"""How long a service is given to exit after SIGTERM at the trial's end, before SIGKILL."""
_POLL_SECONDS = 0.05


class ServiceError(SupervisorError):
    """A service of the scenario would not start or become ready.

    Cause: its command failed, exited, or did not answer its readiness check in time.
    Remedy: the message names the service and the last line of its log
    (``service-NAME.log`` in the trial folder); run its command by hand.
    """


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """One declared service, as the supervisor starts it (see the module docstring)."""

    name: str
    command: str
    """Its command line; ``{port}`` and ``{data}`` are filled in at each start."""
    home: str
    """The folder it runs in, where the relative paths of its command are found."""
    ready: str = "tcp"
    """``tcp`` or ``http:/PATH``."""
    port_env: str = ""
    """The variable each life of the agent finds its port in."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Added to its environment; ``{port}``, ``{port.NAME}`` and ``{data}`` filled in."""
    ready_seconds: float = 30.0
    ports: tuple[str, ...] = ()
    """The names of its further ports (``{port.NAME}``), each handed to every life in
    ``named_port_env(name, NAME)``; the readiness check asks ``{port}``."""

    def variables(self) -> dict[str, str]:
        """Port name (``""``: ``{port}``) -> the variable each life finds it in."""
        named = {port: named_port_env(self.name, port) for port in self.ports}
        return {"": self.port_env, **named}

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "env": dict(self.env), "ports": list(self.ports)}

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> ServiceSpec:
        return cls(
            **{**item, "env": dict(item.get("env", {})), "ports": tuple(item.get("ports", ()))}
        )


def named_port_env(service: str, port: str) -> str:
    """The variable a service's named port is handed in: ``SERVICE_PORT_PORT`` in capitals,
    every other character ``_`` (``restate``'s ``ingress``: ``RESTATE_INGRESS_PORT``)."""
    return re.sub(r"[^A-Z0-9_]", "_", f"{service}_{port}_PORT".upper())


class _Port(str):
    """A service's main port as ``{port}`` fills it, its named ports as its attributes
    (``{port.NAME}``)."""

    def __new__(cls, port: int, named: Mapping[str, int]) -> _Port:
        made = super().__new__(cls, str(port))
        for name, number in named.items():
            setattr(made, name, str(number))
        return made


def write_services(directory: Path, specs: Sequence[ServiceSpec]) -> None:
    """Put the scenario's services in the trial folder (nothing when it declares none)."""
    if specs:
        text = json.dumps([spec.to_json() for spec in specs], indent=1)
        (directory / SERVICES_FILE).write_text(text, "utf-8")


def read_services(directory: Path) -> tuple[ServiceSpec, ...]:
    """The services of the trial folder (none without ``services.json``)."""
    try:
        data = json.loads((directory / SERVICES_FILE).read_text("utf-8"))
    except FileNotFoundError:
        return ()
    return tuple(ServiceSpec.from_json(item) for item in data)


@dataclass(slots=True)
class _Running:
    spec: ServiceSpec
    port: int
    process: subprocess.Popen[bytes]
    dog: subprocess.Popen[bytes]


_ALL: list[RunningServices] = []
"""Every trial's services running in this process: what ``stop_all`` ends."""


def stop_all() -> None:
    """End every service still running in this process and remove its files (interrupt
    path, beside ``harness.chaos.supervisor.kill_all``)."""
    for services in list(_ALL):
        services.stop()


class RunningServices:
    """A trial's services: ``start`` them, hand their ports (``env``), cut and ``stop``."""

    def __init__(
        self,
        trial_dir: Path,
        specs: Sequence[ServiceSpec],
        *,
        observed: Mapping[str, str] | None = None,
        event: Callable[..., None] | None = None,
    ) -> None:
        self.trial_dir = trial_dir
        self.specs = tuple(specs)
        self._observed = dict(observed or {})
        self._event = event or (lambda kind, **fields: None)
        self._running: dict[str, _Running] = {}
        self._ports: dict[str, dict[str, int]] = {}
        """Service -> port name (``""``: its main port) -> its port, kept across restarts."""

    def env(self) -> dict[str, str]:
        """What each life is handed: every port of every service in its variable."""
        return {
            variable: str(self._ports[s.name][port])
            for s in self.specs
            if s.name in self._ports
            for port, variable in s.variables().items()
        }

    def pids(self) -> dict[str, int]:
        return {name: running.process.pid for name, running in self._running.items()}

    def start(self) -> float:
        """Start every service not running, in order, each ready before the next; a
        restarted one keeps its port (and gets a new one only if that is taken). The
        seconds it took (not the agent's: the trial's time is extended by them)."""
        if self not in _ALL:
            _ALL.append(self)
        began = time.monotonic()
        for spec in self.specs:
            if spec.name not in self._running:
                self._start(spec)
        return time.monotonic() - began

    def _start(self, spec: ServiceSpec) -> None:
        data = self.trial_dir / SERVICE_FOLDER.format(name=spec.name)
        data.mkdir(parents=True, exist_ok=True)
        log_path = self.trial_dir / f"service-{spec.name}.log"
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
        why = "no attempt"
        for attempt in range(3):
            ports = self._ports.get(spec.name) if attempt == 0 else None
            ports = ports or _free_ports(["", *spec.ports])
            port = ports[""]
            fill = {
                "port": _Port(port, {n: p for n, p in ports.items() if n}),
                "data": os.path.realpath(data),
            }
            words = [w.format(**fill) for w in resolve_command(spec.command, spec.home)]
            env = {**inherited, **{k: v.format(**fill) for k, v in spec.env.items()}}
            if self._observed:
                # A statically linked server runs under the tracer instead of the library.
                env.update(self._observed)
                words, env = observed_command(words, env)
            started = time.monotonic()
            process: subprocess.Popen[bytes] | None = None
            try:
                with open(log_path, "ab") as log:
                    process = subprocess.Popen(
                        words,
                        cwd=spec.home,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=log,
                        env=env,
                        start_new_session=True,  # its own group: the agent's kills miss it
                    )
                self._running[spec.name] = _Running(spec, port, process, watch(process.pid, data))
            except OSError as exc:
                raise ServiceError(
                    f"{self.trial_dir}: service {spec.name}: cannot start {words[0]}: "
                    f"{exc.strerror or exc}"
                ) from None
            except BaseException:
                # Interrupted between its start and its registration (signals are not held
                # around the start: a child inherits a blocked SIGTERM, and would ignore it).
                if process is not None and spec.name not in self._running:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                raise
            ready = _wait_ready(process, port, spec)
            if ready is None:
                self._ports[spec.name] = ports
                self._event(
                    "service",
                    name=spec.name,
                    action="start",
                    pid=process.pid,
                    port=port,
                    **({"ports": {n: p for n, p in ports.items() if n}} if spec.ports else {}),
                    ms=round((time.monotonic() - started) * 1000, 3),
                )
                return
            why = ready
            exited = process.poll() is not None
            self._end(spec.name, kill=True)
            if not exited:
                break  # it hung: another port would not help
            # It exited: perhaps its port was taken since it was chosen; another one.
        self.stop()
        raise ServiceError(
            f"{self.trial_dir}: service {spec.name} did not become ready ({spec.ready}): "
            f"{why}; its log: {_log_tail(log_path)}"
        )

    def power_cut(self) -> None:
        """The machine loses power: every service dies at once (SIGKILL to its group), its
        files left for the cut; ``start`` brings it back on what the cut rebuilt."""
        for name in list(self._running):
            pid = self._running[name].process.pid
            self._end(name, kill=True)
            self._event("service", name=name, action="power-cut", pid=pid)

    def stop(self) -> None:
        """End every service (SIGTERM, then SIGKILL to its group) and remove its files; the
        logs stay with the trial."""
        try:
            for name in list(self._running):
                pid = self._running[name].process.pid
                returncode = self._end(name, kill=False)
                self._event("service", name=name, action="stop", pid=pid, returncode=returncode)
            for spec in self.specs:
                folder = self.trial_dir / SERVICE_FOLDER.format(name=spec.name)
                shutil.rmtree(folder, ignore_errors=True)
        finally:
            if self in _ALL:
                _ALL.remove(self)

    def _end(self, name: str, *, kill: bool) -> int | None:
        """End one service's process group and let its watchdog go, leaving the files to
        the caller (a power cut keeps them, ``stop`` removes them). The service's exit
        status."""
        running = self._running.pop(name)
        process = running.process
        if not kill and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(STOP_SECONDS)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # what it started, too
        process.wait()
        _wait_group_gone(process.pid)
        # The group is gone, and its id free for a new group: a watchdog that ended "it" now
        # could end another program's (a campaign's agent leads a group of its own).
        release(running.dog, forget=True)
        return process.returncode


def _wait_group_gone(group: int) -> None:
    """Wait (a few seconds at most) until no process of ``group`` is left."""
    deadline = time.monotonic() + STOP_SECONDS
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(_POLL_SECONDS)


def _free_ports(names: Sequence[str]) -> dict[str, int]:
    """A free port on 127.0.0.1 for each name, all different, below the kernel's range of
    ephemeral ports: a port kept free between two lives (an agent's own endpoint) is then
    never taken meanwhile as the source port of some outgoing connection."""
    low = _ephemeral_low()
    pick = random.SystemRandom()
    with contextlib.ExitStack() as probes:
        ports: dict[str, int] = {}
        for name in names:
            for _ in range(200):
                probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    probe.bind(
                        (
                            "127.0.0.1",
                            pick.randrange(_LOWEST_PORT, low) if low > _LOWEST_PORT else 0,
                        )
                    )
                except OSError:
                    probe.close()
                    continue
                probes.enter_context(probe)  # held until every name has its own
                ports[name] = int(probe.getsockname()[1])
                break
            else:
                raise ServiceError(f"no free port on 127.0.0.1 below {low}")
        return ports


_LOWEST_PORT = 10000
"""Service ports are chosen at or above this and below the ephemeral range."""


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out as a source port (32768 when it cannot say)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _wait_ready(process: subprocess.Popen[bytes], port: int, spec: ServiceSpec) -> str | None:
    """None once the service answers its check; else why not (it exited, or time ran out)."""
    deadline = time.monotonic() + spec.ready_seconds
    path = spec.ready.removeprefix("http:") if spec.ready.startswith("http:") else None
    last = "it never answered"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return f"it exited with status {process.returncode}"
        try:
            if path is None:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return None
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            try:
                connection.request("GET", path)
                status = connection.getresponse().status
            finally:
                connection.close()
            if 200 <= status < 300:
                return None
            last = f"GET {path} answered {status}"
        except OSError as exc:
            last = f"127.0.0.1:{port}: {exc.strerror or exc}"
        time.sleep(_POLL_SECONDS)
    return f"not ready within {spec.ready_seconds:g} s ({last})"


def _log_tail(path: Path) -> str:
    try:
        lines = path.read_text("utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1][-300:] if lines else "an empty log"
