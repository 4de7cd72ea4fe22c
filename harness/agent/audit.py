"""Containment: an audit hook that stops the agent before it reaches outside its trial.

The simulated tools promise to act only on the world database in the trial
directory, whatever their arguments say (``rm -rf /``, a POST to a real host).
``install_containment`` turns that promise into a checked one: a
``sys.addaudithook`` hook looks at every audit event of the agent process and
stops the process on any that would reach outside the trial:

- a socket of any kind but a Unix one, a name lookup, and any connect, bind or
  send to an address (an asyncio loop, which the agent runs for a batch of
  calls, wakes itself through a Unix socket pair, which reaches nothing);
- a new process: ``subprocess.Popen``, ``os.system``, ``os.exec*``,
  ``os.spawn*``, ``os.posix_spawn``, ``os.fork``;
- a signal to any process but itself (the failpoint ``kill`` SIGKILLs its own
  pid, which stays allowed);
- a change to a path outside the trial directory: opening for writing, removing,
  renaming, making or removing a directory, ``shutil.rmtree``, and the like;
  a SQLite database opened outside it (SQLite opens its files in C, unaudited,
  so the database path is checked where Python hands it over).

The full note: docs/reference/modules.md (``harness/agent/audit.py``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness.exits import AGENT_CONTAINED

__all__ = ["CONTAINMENT_ENV", "install_containment"]

CONTAINMENT_ENV = "HARNESS_CONTAINMENT"
"""Set to ``1`` to make the agent install containment before anything else."""

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_ALLOWED_PATHS = frozenset({Path("/dev/null")})

ReachesOutside = Callable[["_Boundary", tuple[Any, ...]], bool]
"""Given the trial's boundary and an event's arguments: does the event reach outside?"""


class _Boundary:
    """The trial directory, resolved once, and the test of whether a path is inside it."""

    def __init__(self, trial_dir: Path) -> None:
        self.root = Path(trial_dir).resolve()

    def outside(self, path: Any, dir_fd: Any = None) -> bool:
        if isinstance(path, int):
            return False  # a descriptor: its opening was checked already
        name = Path(os.fsdecode(path))
        if not name.is_absolute() and isinstance(dir_fd, int) and dir_fd >= 0:
            try:
                name = Path(os.readlink(f"/proc/self/fd/{dir_fd}")) / name
            except OSError:
                return True  # cannot tell where it is: not provably inside
        resolved = name.resolve()
        return resolved not in _ALLOWED_PATHS and not resolved.is_relative_to(self.root)


def _always(boundary: _Boundary, args: tuple[Any, ...]) -> bool:
    return True


def _path_at(position: int, dir_fd_at: int | None = None) -> ReachesOutside:
    """The event changes the path at ``position`` (relative to the dir fd at ``dir_fd_at``)."""

    def reaches(boundary: _Boundary, args: tuple[Any, ...]) -> bool:
        dir_fd = None if dir_fd_at is None else args[dir_fd_at]
        return boundary.outside(args[position], dir_fd)

    return reaches


def _two_paths(boundary: _Boundary, args: tuple[Any, ...]) -> bool:
    # os.rename and os.link: (src, dst, src_dir_fd, dst_dir_fd)
    return boundary.outside(args[0], args[2]) or boundary.outside(args[1], args[3])


def _opens_for_writing(boundary: _Boundary, args: tuple[Any, ...]) -> bool:
    path, mode, flags = args
    writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
        isinstance(flags, int) and flags & _WRITE_FLAGS
    )
    return writing and boundary.outside(path)


def _not_a_unix_socket(boundary: _Boundary, args: tuple[Any, ...]) -> bool:
    # socket.__new__: (socket, family, type, proto). Imported here, not at the top: the
    # agent imports this module at every start, and whoever makes a socket has socket.
    import socket

    return bool(args[1] != socket.AF_UNIX)


def _signals_another_process(boundary: _Boundary, args: tuple[Any, ...]) -> bool:
    return bool(args[0] != os.getpid())


def _database_outside(boundary: _Boundary, args: tuple[Any, ...]) -> bool:
    database = os.fsdecode(args[0])
    if database in ("", ":memory:"):
        return False  # private to the connection, never a file of its own name
    if database.startswith("file:"):
        database = urlsplit(database).path
    return boundary.outside(database)


# Argument layouts are those of the CPython audit events table.
_EVENTS: Mapping[str, ReachesOutside] = {
    "socket.__new__": _not_a_unix_socket,
    "socket.bind": _always,
    "socket.connect": _always,
    "socket.getaddrinfo": _always,
    "socket.gethostbyaddr": _always,
    "socket.gethostbyname": _always,
    "socket.sendmsg": _always,
    "socket.sendto": _always,
    "subprocess.Popen": _always,
    "os.system": _always,
    "os.exec": _always,
    "os.spawn": _always,
    "os.posix_spawn": _always,
    "os.fork": _always,
    "os.forkpty": _always,
    "os.killpg": _always,
    "os.kill": _signals_another_process,
    "open": _opens_for_writing,
    "os.remove": _path_at(0, 1),  # also os.unlink
    "os.rmdir": _path_at(0, 1),
    "os.mkdir": _path_at(0, 2),
    "os.rename": _two_paths,  # also os.replace
    "os.link": _two_paths,
    "os.symlink": _path_at(1, 2),
    "os.truncate": _path_at(0),
    "os.chmod": _path_at(0, 2),
    "os.chown": _path_at(0, 3),
    "os.utime": _path_at(0, 3),
    "shutil.rmtree": _path_at(0, 1),
    "sqlite3.connect": _database_outside,
}


def install_containment(trial_dir: Path) -> None:
    """Stop this process (``AGENT_CONTAINED``) at its first event that reaches outside
    ``trial_dir``."""
    boundary = _Boundary(trial_dir)
    sys.dont_write_bytecode = True  # a cache write next to an imported module is outside

    def hook(event: str, args: tuple[Any, ...]) -> None:
        reaches_outside = _EVENTS.get(event)
        if reaches_outside is not None and reaches_outside(boundary, args):
            _stop(event, args)

    sys.addaudithook(hook)


def _stop(event: str, args: tuple[Any, ...]) -> None:
    message = f"harness.agent: containment: {event} {args!r}\n"
    try:
        os.write(2, message.encode("utf-8", "backslashreplace"))
    finally:
        os._exit(AGENT_CONTAINED)
