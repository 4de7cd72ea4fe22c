"""A PostgreSQL server of the harness's own: in a RAM folder, a database per trial, removed after.

    with PostgresServer.start() as server:
        url = server.create_database("trial_1")  # postgresql://harness@127.0.0.1:PORT/trial_1

The machine's ``initdb`` and ``postgres`` are used (found on ``PATH``, else in
``/usr/lib/postgresql/*/bin``); where there are none, ``PostgresUnavailable`` says
so in one line, and nothing is installed. The cluster lives in a folder of its own
(under ``/dev/shm`` when it is there), listens on 127.0.0.1 on a free port and on a
Unix socket in that folder, and trusts local connections. ``initdb`` refuses to run
as root, so a harness running as root runs the server as an unprivileged user:
``HARNESS_POSTGRES_USER``, else Debian's ``postgres``. ``stop`` (also on leaving the
``with`` block, on Ctrl-C too) ends the server's whole process group and removes
the folder; a watchdog process does the same if the harness dies without stopping it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from harness.chaos.watchdog import release, watch
from harness.errors import HarnessError

__all__ = [
    "SERVER_USER_VARIABLE",
    "PostgresServer",
    "PostgresUnavailable",
    "find_binaries",
    "server_user",
]

SERVER_USER_VARIABLE = "HARNESS_POSTGRES_USER"
"""The unprivileged user a harness running as root runs the server as (else ``postgres``)."""
DEBIAN_FOLDERS = "/usr/lib/postgresql/*/bin"
START_SECONDS = 30.0
STOP_SECONDS = 10.0
SUPERUSER = "harness"
_DATABASE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}\Z")


class PostgresUnavailable(HarnessError):
    """No PostgreSQL server can be started here.

    Cause: ``initdb`` and ``postgres`` are on neither ``PATH`` nor in Debian's folder,
    or the harness runs as root and has no unprivileged user to run them as. Remedy:
    install PostgreSQL (Debian: ``apt-get install postgresql``), or name a user in
    ``HARNESS_POSTGRES_USER``.
    """


@dataclass(frozen=True, slots=True)
class ServerUser:
    """Who the server runs as (None fields: as this process)."""

    name: str
    uid: int | None
    gid: int | None


def find_binaries() -> Path:
    """The folder holding ``initdb`` and ``postgres``: ``PATH`` first, then the newest of
    Debian's versions; ``PostgresUnavailable`` if neither has them."""
    found = shutil.which("initdb")
    if found is not None and Path(found).with_name("postgres").exists():
        return Path(found).parent
    for folder in sorted(glob.glob(DEBIAN_FOLDERS), key=_version, reverse=True):
        if (Path(folder) / "initdb").exists() and (Path(folder) / "postgres").exists():
            return Path(folder)
    raise PostgresUnavailable(
        "PostgreSQL is not installed: no initdb on PATH or in "
        f"{DEBIAN_FOLDERS}; install it (Debian: apt-get install postgresql)"
    )


def _version(folder: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", folder))


def server_user(name: str | None = None) -> ServerUser:
    """Who runs the server: this process, unless it is root; then ``name``, else
    ``$HARNESS_POSTGRES_USER``, else ``postgres`` (refused if no such user exists)."""
    if os.geteuid() != 0:
        return ServerUser(pwd.getpwuid(os.geteuid()).pw_name, None, None)
    wanted = name or os.environ.get(SERVER_USER_VARIABLE) or "postgres"
    try:
        entry = pwd.getpwnam(wanted)
    except KeyError:
        raise PostgresUnavailable(
            f"running as root, and PostgreSQL refuses root: no user {wanted!r} to run the "
            f"server as; create one or name one in {SERVER_USER_VARIABLE}"
        ) from None
    if entry.pw_uid == 0:
        raise PostgresUnavailable(f"{SERVER_USER_VARIABLE}={wanted!r} is root: name another user")
    return ServerUser(wanted, entry.pw_uid, entry.pw_gid)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class PostgresServer:
    """A running server of the harness's own (see the module docstring)."""

    def __init__(self, folder: Path, port: int, process: subprocess.Popen[bytes]) -> None:
        self.folder = folder
        self.port = port
        self.process = process
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._owner = ServerUser("", None, None)
        self.crashes = 0

    @classmethod
    def start(cls, *, base: Path | None = None, user: str | None = None) -> PostgresServer:
        """Make a cluster in a new folder under ``base`` (``/dev/shm`` when there is one,
        else the system's temporary folder) and start its server; everything made is
        removed if the start fails or is interrupted."""
        binaries = find_binaries()
        owner = server_user(user)
        if base is None and Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK):
            base = Path("/dev/shm")
        folder = Path(tempfile.mkdtemp(prefix="harness-postgres-", dir=base)).resolve()
        process: subprocess.Popen[bytes] | None = None
        try:
            folder.chmod(0o700)
            if owner.uid is not None and owner.gid is not None:
                os.chown(folder, owner.uid, owner.gid)
            data = folder / "data"
            _run(
                [
                    str(binaries / "initdb"),
                    "--pgdata",
                    str(data),
                    "--username",
                    SUPERUSER,
                    "--auth",
                    "trust",
                    "--encoding",
                    "UTF8",
                    "--locale",
                    "C",
                    "--no-sync",
                    "--no-instructions",
                ],
                owner,
                folder,
            )
            for _ in range(3):  # a port taken between the probe and the bind: another one
                port = _free_port()
                process = _spawn(binaries, folder, port, owner)
                server = cls(folder, port, process)
                server._owner = owner
                if server._wait_ready():
                    server._watchdog = watch(process.pid, folder)
                    return server
                _end(process)
                process = None
            raise PostgresUnavailable(
                f"the PostgreSQL server in {folder} did not start: {_log_tail(folder)}"
            )
        except BaseException:
            if process is not None:
                _end(process)
            shutil.rmtree(folder, ignore_errors=True)
            raise

    def _wait_ready(self) -> bool:
        """Whether the server accepts connections within ``START_SECONDS`` (False: it exited,
        as when its port was taken)."""
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            with contextlib.suppress(OSError):
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
                if (self.folder / "data" / "postmaster.pid").read_text().rstrip().endswith("ready"):
                    return True
            time.sleep(0.05)
        return False

    def crash_and_restart(self) -> None:
        """``kill -9`` the postmaster and every backend (its process group), as a crash of
        the database's machine, then start it again on the same folder and port: it
        recovers from its WAL before it accepts connections."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(STOP_SECONDS)
        if self._watchdog is not None:  # it watched the old group: the folder stays
            release(self._watchdog, forget=True)
            self._watchdog = None
        deadline = time.monotonic() + START_SECONDS
        while True:  # the old backends may take a moment to let go of the port
            self.process = _spawn(find_binaries(), self.folder, self.port, self._owner)
            if self._wait_ready():
                break
            _end(self.process)
            if time.monotonic() > deadline:
                raise PostgresUnavailable(
                    f"the PostgreSQL server in {self.folder} did not start again after its "
                    f"crash: {_log_tail(self.folder)}"
                )
            time.sleep(0.1)
        self._watchdog = watch(self.process.pid, self.folder)
        self.crashes += 1

    def url(self, database: str = "postgres") -> str:
        """A URL of ``database`` on this server (no password: local connections are trusted)."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}?sslmode=disable"

    def create_database(self, name: str) -> str:
        """Create the database ``name`` (lower-case letters, digits, ``_``); its URL."""
        if not _DATABASE_NAME.match(name):
            raise ValueError(
                f"database name {name!r}: lower-case letters, digits and '_' only, "
                "at most 63, not starting with a digit"
            )
        self._admin(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop the database ``name``, ending its connections first."""
        if not _DATABASE_NAME.match(name):
            raise ValueError(f"database name {name!r}: not one this server made")
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _admin(self, statement: str) -> None:
        import psycopg  # the harness's postgres extra

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(statement.encode())

    def stop(self) -> None:
        """End the server (a fast shutdown, then SIGKILL to its process group) and remove
        its folder."""
        try:
            _end(self.process)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
            if self._watchdog is not None:  # the group is gone: its id may be another's now
                release(self._watchdog, forget=True)

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _spawn(binaries: Path, folder: Path, port: int, owner: ServerUser) -> subprocess.Popen[bytes]:
    """Start the server of the cluster in ``folder`` on ``port``, its log in the folder."""
    log = open(folder / "server.log", "ab")  # noqa: SIM115  (the server's own)
    try:
        return subprocess.Popen(
            [
                str(binaries / "postgres"),
                "-D",
                str(folder / "data"),
                "-p",
                str(port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                f"unix_socket_directories={folder}",
                "-c",
                "max_connections=200",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # its own group: a Ctrl-C here is ours to pass on
            cwd=folder,
            user=owner.uid,
            group=owner.gid,
            extra_groups=_groups(owner),
        )
    finally:
        log.close()


def _groups(owner: ServerUser) -> list[int] | None:
    """The supplementary groups of a child run as ``owner``: none (None: this process's)."""
    return None if owner.uid is None else []


def _run(command: list[str], owner: ServerUser, folder: Path) -> None:
    done = subprocess.run(
        command,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        cwd=folder,
        timeout=120,
        check=False,
        user=owner.uid,
        group=owner.gid,
        extra_groups=_groups(owner),
    )
    if done.returncode != 0:
        said = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
        raise PostgresUnavailable(
            f"{command[0]} failed in {folder} (exit {done.returncode}): "
            f"{said[-1] if said else 'no output'}"
        )


def _end(process: subprocess.Popen[bytes]) -> None:
    """A fast shutdown (SIGINT), then SIGKILL to the server's whole process group."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_SECONDS)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # backends the postmaster left, if any
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(STOP_SECONDS)


def _log_tail(folder: Path) -> str:
    try:
        lines = (folder / "server.log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "an empty log"
