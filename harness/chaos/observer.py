"""Power loss rebuilt from what the agent process asked the kernel, not from what it says.

Every life of a power-loss trial runs with ``fsobserve.c`` preloaded (``LD_PRELOAD``):
it appends to ``fs-trace/trace`` in the trial folder one line per call that creates,
truncates, renames, links or removes a name under the trial folder, per write, and per
fsync or fdatasync (with an image of the file's content taken just before it) or fsync
of a folder. A statically linked program runs under ``fstrace.c`` instead, a tracer
(ptrace) that writes the same lines. After a kill, ``power_cut`` checks the folder
against the trace (a change the observer did not see refuses the cut), then replays the
trace over a model:

- each folder's names as they are (volatile) and as its last fsync left them (durable);
- each file's durable content: its image at its last fsync; a file created since (or
  first met by a rename, link or write) has none, it comes back empty; a file that was
  there before the first life is durable as the harness made it (a ``baseline`` line).

The full note: docs/reference/modules.md (``harness/chaos/observer.py``).
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
import random
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.chaos import crashstates

__all__ = [
    "ENV_ROOT",
    "ENV_SWITCH",
    "ENV_TRACE",
    "ENV_TRACER_SWITCH",
    "HARNESS_FILES",
    "SOURCE",
    "TRACER_SOURCE",
    "TRACE_FOLDER",
    "Refused",
    "build_library",
    "build_tracer",
    "common_prefix",
    "harness_wrote",
    "library",
    "observed_command",
    "observer_env",
    "power_cut",
    "read_trace",
    "start_trace",
    "tracer",
    "tracer_unavailable",
    "unavailable",
    "unobservable",
    "unseen_change",
]

SOURCE = Path(__file__).with_name("fsobserve.c")
TRACER_SOURCE = Path(__file__).with_name("fstrace.c")
"""The tracer that writes the library's lines for a statically linked program (ptrace)."""
ENV_TRACE = "HARNESS_FS_TRACE"
ENV_ROOT = "HARNESS_FS_ROOT"
ENV_LIBRARY_DIR = "HARNESS_FS_LIBRARY_DIR"
ENV_SWITCH = "HARNESS_FS_OBSERVER"
"""Set to ``off``: no observer, so no power-loss trial (each is not applicable, saying so)."""
"""Where the built library is kept (default: ``build/fsobserve`` of the checkout, which
git ignores); read by the supervisor's process only."""
ENV_TRACER_SWITCH = "HARNESS_FS_TRACER"
"""Set to ``off``: no tracer, so a statically linked program cannot be observed."""
TRACE_FOLDER = "fs-trace"
SECTOR = 512
_CFLAGS = ("-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror")
_TRACER_CFLAGS = ("-O2", "-Wall", "-Wextra", "-Werror")


class Refused(Exception):
    """The trace holds something the replay cannot rebuild a power cut from."""


# -- the library ---------------------------------------------------------------------------


def _library_dir() -> Path:
    configured = os.environ.get(ENV_LIBRARY_DIR)
    if configured:
        return Path(configured)
    return _default_library_dir()


@functools.cache
def _default_library_dir() -> Path:
    # Resolved once: a campaign asks for every power-loss trial it lists.
    return Path(__file__).resolve().parents[2] / "build" / "fsobserve"


def build_library(folder: Path, compiler: str | None = None) -> Path:
    """Build the library from ``SOURCE`` into ``folder`` (named by the source's hash) unless
    it is there; its path. ``OSError`` says why it cannot be built."""
    return _build(SOURCE, folder, "fsobserve", ".so", [*_CFLAGS], ["-ldl"], compiler)


def build_tracer(
    folder: Path, compiler: str | None = None, *, source: Path = TRACER_SOURCE
) -> Path:
    """Build the tracer from ``source`` into ``folder`` (named by the source's hash) unless it
    is there; its path. ``OSError`` says why it cannot be built."""
    return _build(source, folder, "fstrace", "", [*_TRACER_CFLAGS], [], compiler)


def _build(
    source_path: Path,
    folder: Path,
    name: str,
    suffix: str,
    flags: list[str],
    libraries: list[str],
    compiler: str | None,
) -> Path:
    if not sys.platform.startswith("linux"):
        raise OSError(f"the observer interposes the C library of Linux, not {sys.platform}")
    source = source_path.read_bytes()
    target = folder / f"{name}-{hashlib.sha256(source).hexdigest()[:16]}{suffix}"
    if target.exists():
        return target
    cc = compiler or shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise OSError(f"no C compiler (cc) on PATH to build the observer's {name}")
    folder.mkdir(parents=True, exist_ok=True)
    # Built under a temporary name and renamed: workers building at once never see half.
    fd, partial = tempfile.mkstemp(prefix=f".{name}-", suffix=suffix, dir=folder)
    os.close(fd)
    try:
        done = subprocess.run(
            [cc, *flags, "-o", partial, str(source_path), *libraries],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            # One line, the reason a refusal gives: the compiler's first error.
            lines = done.stderr.strip().splitlines() or ["no message"]
            said = next((line for line in lines if "error" in line), lines[-1])
            raise OSError(f"building the observer's {name} failed: {said.strip()[-300:]}")
        os.replace(partial, target)
    finally:
        Path(partial).unlink(missing_ok=True)
    return target


@functools.cache
def _located(folder: Path, path_var: str) -> Path | str:
    del path_var  # a key only: another PATH may find another compiler
    try:
        return build_library(folder)
    except OSError as exc:
        return str(exc)


def _found() -> Path | str:
    if os.environ.get(ENV_SWITCH) == "off":
        return f"the observer is turned off ({ENV_SWITCH}=off)"
    return _located(_library_dir(), os.environ.get("PATH", ""))


@functools.cache
def _tracer_located(folder: Path, path_var: str) -> Path | str:
    del path_var
    try:
        program = build_tracer(folder)
    except OSError as exc:
        return str(exc)
    return _probe(program)


def _probe(program: Path) -> Path | str:
    """The tracer when it can trace here (ptrace and seccomp permitted), else why not."""
    try:
        done = subprocess.run(
            [str(program), "--probe"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the tracer cannot run here: {exc}"
    if done.returncode != 0:
        said = (done.stdout.strip() or done.stderr.strip() or "no reason").splitlines()[-1]
        return f"the tracer cannot run here: {said}"
    return program


def _tracer_found() -> Path | str:
    if os.environ.get(ENV_TRACER_SWITCH) == "off":
        return f"the tracer is turned off ({ENV_TRACER_SWITCH}=off)"
    return _tracer_located(_library_dir(), os.environ.get("PATH", ""))


def tracer() -> Path | None:
    """The built tracer (built and tried now when missing), or None when it cannot trace."""
    found = _tracer_found()
    return found if isinstance(found, Path) else None


def tracer_unavailable() -> str | None:
    """Why a statically linked program cannot be traced here, or None when it can."""
    found = _tracer_found()
    return found if isinstance(found, str) else None


def library() -> Path | None:
    """The built library (built now when missing), or None when it cannot be had."""
    found = _found()
    return found if isinstance(found, Path) else None


def unavailable() -> str | None:
    """Why power loss cannot be observed here, or None when it can."""
    found = _found()
    return found if isinstance(found, str) else None


_PT_INTERP = 3
"""The program header that names a program's dynamic loader: a program without one is
statically linked, and no loader reads ``LD_PRELOAD`` for it."""
_HOPS = 8
"""How many interpreters (``#!``) and ``env`` runs are followed before giving up."""


def unobservable(words: Sequence[str]) -> str | None:
    """Why neither the library nor the tracer can observe the program a command line
    starts, or None.

    The dynamic loader preloads the library into a dynamically linked program of the
    library's own kind (ELF class and machine), unless the program is set-user-ID or
    set-group-ID to someone else (the loader then ignores ``LD_PRELOAD``). A statically
    linked program runs under the tracer instead (``observed_command``), where ptrace is
    permitted. A script is its interpreter (``#!``), and ``env`` the program it runs. A
    program not found, or not ELF, is left to whoever starts it; what the program itself
    starts is checked at the cut.
    """
    found = _refusal(words)
    if found is None:
        return None
    if not found.static:
        return found.why
    untraced = tracer_unavailable()
    return None if untraced is None else f"{found.why}; {untraced}"


def observed_command(
    words: Sequence[str], env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that observe ``words`` started with ``env`` (a
    life's or a service's, ``observer_env`` in it): as given, the library preloaded; or,
    when its program is statically linked and the tracer can run here, under the tracer,
    with the library taken out of ``LD_PRELOAD`` (the tracer sees what the program starts
    too, and a line seen twice would be a change made twice)."""
    if not env.get(ENV_TRACE):
        return list(words), dict(env)  # not observed: its program is not read
    found = _refusal(words)
    program = tracer() if found is not None and found.static else None
    if program is None:
        return list(words), dict(env)
    preload = [
        word
        for word in env.get("LD_PRELOAD", "").split()
        if not os.path.basename(word).startswith("fsobserve-")
    ]
    traced = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    if preload:
        traced["LD_PRELOAD"] = " ".join(preload)
    return [str(program), "--", *words], traced


@dataclass(frozen=True, slots=True)
class _Refusal:
    """Why the library cannot load into a program, and whether only because the program is
    statically linked (the tracer's case)."""

    why: str
    static: bool


def _refusal(words: Sequence[str]) -> _Refusal | None:
    """Why the library cannot load into the program ``words`` start; None when it can."""
    words = list(words)
    for _ in range(_HOPS):
        if not words:
            return None
        found = words[0] if "/" in words[0] else shutil.which(words[0])
        if found is None or not os.path.isfile(found):
            return None
        try:
            with open(found, "rb") as program:
                head = program.read(256)
                if head.startswith(b"#!"):
                    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
                    words = [*line, found, *words[1:]]
                    continue
                why = _elf_why(program, head, found)
        except OSError:
            return None
        if why is not None:
            return why
        if os.path.basename(found) != "env":
            return None
        # env [-option...] [NAME=value...] program ...: the program it runs next.
        rest = words[1:]
        while rest and (rest[0].startswith("-") or "=" in rest[0]):
            rest = rest[1:]
        words = rest
    return None


def _elf_why(program: Any, head: bytes, path: str) -> _Refusal | None:
    """Why an ELF program will not take the library (static, of another kind, set-ID)."""
    if not head.startswith(b"\x7fELF") or len(head) < 64:
        return None
    lib = library()
    if lib is not None:
        with open(lib, "rb") as ours:
            own = ours.read(64)
        if own.startswith(b"\x7fELF") and len(own) == 64 and _elf_kind(own) != _elf_kind(head):
            why = f"{path} is an ELF program of another kind than the observer's library"
            return _Refusal(why, static=False)
    order = "<" if head[5] == 1 else ">"
    if head[4] == 2:  # 64 bits: where the program headers are, their size and number
        (at,) = struct.unpack_from(f"{order}Q", head, 32)
        size, count = struct.unpack_from(f"{order}HH", head, 54)
    else:
        (at,) = struct.unpack_from(f"{order}I", head, 28)
        size, count = struct.unpack_from(f"{order}HH", head, 42)
    program.seek(at)
    table = program.read(size * count)
    types = [
        struct.unpack_from(f"{order}I", table, n * size)[0]
        for n in range(len(table) // max(size, 1))
    ]
    if _PT_INTERP not in types:
        static = "is statically linked: no loader preloads the observer's library into it"
        return _Refusal(f"{path} {static}", static=True)
    mode = os.stat(path)
    if (mode.st_mode & stat.S_ISUID and mode.st_uid != os.getuid()) or (
        mode.st_mode & stat.S_ISGID and mode.st_gid != os.getgid()
    ):
        why = f"{path} is set-user-ID or set-group-ID: the loader ignores LD_PRELOAD there"
        return _Refusal(why, static=False)
    return None


def _elf_kind(head: bytes) -> tuple[int, int, int]:
    """An ELF file's class (32 or 64 bits), byte order and machine."""
    order = "<" if head[5] == 1 else ">"
    return head[4], head[5], struct.unpack_from(f"{order}H", head, 18)[0]


def observer_env(trial_dir: Path, lib: Path) -> dict[str, str]:
    """What a life's environment needs to be observed."""
    preload = os.environ.get("LD_PRELOAD", "")
    return {
        "LD_PRELOAD": f"{lib} {preload}".strip(),
        ENV_TRACE: str(Path(os.path.realpath(trial_dir)) / TRACE_FOLDER),
        ENV_ROOT: os.path.realpath(trial_dir),
    }


# -- the trace -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceLine:
    """One line of the trace: its kind, the process, its numbers, its paths."""

    kind: str
    pid: int
    numbers: tuple[str, ...]
    paths: tuple[str, ...]

    def left(self) -> tuple[int, int] | None:
        """The file's size and modification time (ns) just after the call, for the lines
        that carry them (the library writes them on every change of a file's content)."""
        at = _STAT_AT.get(self.kind)
        if at is None or len(self.numbers) != at + 2:
            return None
        return int(self.numbers[at]), int(self.numbers[at + 1])


_STAT_AT = {"create": 0, "trunc": 0, "write": 2, "ftruncate": 1, "fsync": 1}
"""Where a line's size and modification time start among its numbers."""


def read_trace(folder: Path) -> list[TraceLine]:
    """The trace's whole lines, in order (a line cut by a kill mid-write is left out)."""
    try:
        data = (folder / "trace").read_bytes()
    except FileNotFoundError:
        return []
    lines = []
    for raw in data.split(b"\n")[:-1]:  # the last piece has no newline: not a whole line
        head, *paths = raw.decode("utf-8", "surrogateescape").split("\t")
        kind, pid, *numbers = head.split(" ")
        lines.append(TraceLine(kind, int(pid), tuple(numbers), tuple(paths)))
    return lines


def _append(folder: Path, lines: list[str]) -> None:
    with open(folder / "trace", "a", encoding="utf-8", errors="surrogateescape") as out:
        out.write("".join(line + "\n" for line in lines))


def image_bytes(folder: Path, image: str) -> bytes:
    """A durable content: image ``name`` whole, or ``name:size``, its first ``size`` bytes."""
    name, _, size = image.partition(":")
    data = (folder / name).read_bytes()
    return data if not size else data[: int(size)]


def _image(folder: Path, source: Path, name: str) -> str:
    shutil.copyfile(source, folder / name)
    return name


def start_trace(trial_dir: Path) -> Path:
    """Make the trial's trace folder, with a baseline: each file already in the trial folder
    (the harness made it) durable as it is now. Its path."""
    root = Path(os.path.realpath(trial_dir))
    folder = root / TRACE_FOLDER
    folder.mkdir(exist_ok=True)
    if (folder / "trace").exists():
        return folder  # a trial run again in place keeps its history
    lines = []
    for n, path in enumerate(sorted(_files(root)), 1):
        lines.append(f"baseline 0 {_image(folder, path, f'base-0-{n}')}\t{path}")
    _append(folder, lines)
    return folder


def harness_wrote(trial_dir: Path, names: list[str]) -> None:
    """Tell the trace (if the trial has one) that the harness rewrote these files between two
    lives (damage at rest, on disk): durable as they are now, and no unseen change."""
    root = Path(os.path.realpath(trial_dir))
    folder = root / TRACE_FOLDER
    if not (folder / "trace").exists():
        return
    cut = len(read_trace(folder))
    lines = [
        _baseline_line(folder, str(root / name), (root / name).read_bytes(), cut, n)
        for n, name in enumerate(names, 1)
        if (root / name).is_file()
    ]
    _append(folder, lines)


def _files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if Path(dirpath, d) != root / TRACE_FOLDER]
        for name in filenames:
            path = Path(dirpath, name)
            if not name.startswith("world.db") and path.is_file() and not path.is_symlink():
                yield path


# -- the replay ----------------------------------------------------------------------------

_EMPTY = ""
"""A node's durable image when it has none (created since, or first met by a rename, a link
or a write, and never fsynced): it comes back empty, or not at all."""


@dataclass(eq=False, slots=True)
class _Node:
    image: str
    directory: bool = False
    mapped: bool = False
    unsynced_writes: int = 0
    left: tuple[int, int] | None = None
    """Size and modification time after the last traced change of its content."""
    holds: str | None = None
    """The image of its whole content, when its last traced change was an fsync (or the
    harness made it so): what the file must hold now."""
    pending: list[tuple[int, int]] = field(default_factory=list)
    """Its writes since its last fsync, as (offset, length), in order."""
    cut_to: int | None = None
    """The shortest length it was truncated to since its last fsync."""


@dataclass(slots=True)
class _Model:
    root: str
    volatile: dict[str, _Node] = field(default_factory=dict)
    durable: dict[str, _Node] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)
    """Paths a line other than a baseline named: the cut acts on these only."""

    def inside(self, path: str) -> bool:
        return path.startswith(self.root + "/") and not os.path.basename(path).startswith(
            "world.db"
        )

    def known(self, path: str, *, directory: bool = False) -> _Node:
        """The node at ``path``. One the trace first names here was made by no call it saw
        (every file of the first life's start has a baseline): its name is taken as
        durable, its content not until an fsync, like any other file's."""
        node = self.volatile.get(path)
        if node is None:
            node = self.volatile[path] = _Node(_EMPTY, directory)
            if path not in self.seen:
                self.durable[path] = node
            self.seen.add(path)
        return node

    def apply(self, line: TraceLine) -> None:
        kind, paths = line.kind, line.paths
        if kind not in ("baseline", "rebuilt") and paths and all(map(_harness_file, paths)):
            # The harness's own files (the agent's stderr, which a life inherits as a
            # descriptor the library re-learns): the supervisor's record, not the agent's.
            return
        if kind not in ("baseline", "rebuilt"):
            self.touched.update(p for p in paths if self.inside(p))
        if kind in ("create", "mkdir"):
            # A name the call made: not there before, so not durable until its folder's fsync.
            self.volatile[paths[0]] = _Node(_EMPTY, directory=kind == "mkdir", left=line.left())
            self.seen.add(paths[0])
        elif kind in ("unlink", "rmdir"):
            self.known(paths[0], directory=kind == "rmdir")
            self._forget(paths[0])
        elif kind == "rename":
            self._rename(paths[0], paths[1])
        elif kind == "link":
            node = self.known(paths[0]) if self.inside(paths[0]) else _Node(_EMPTY)
            self.volatile[paths[1]] = node
            self.seen.add(paths[1])
        elif kind == "fsync":
            # fsync and fdatasync alike: the data and the size, never a name (the folder's
            # fsync makes names durable).
            synced = self.volatile.get(paths[0])
            if synced is not None:  # else the file was removed since: its image matters no more
                # The image's first SIZE bytes: later fsyncs may have extended the file.
                synced.image = synced.holds = ":".join(line.numbers[:2])
                synced.unsynced_writes = 0
                synced.left = line.left()
                synced.pending, synced.cut_to = [], None
        elif kind == "dirfsync":
            self._dir_synced(paths[0])
        elif kind == "write":
            node = self.known(paths[0])
            node.unsynced_writes += 1
            node.left, node.holds = line.left(), None
            if len(line.numbers) >= 2:
                node.pending.append((int(line.numbers[0]), int(line.numbers[1])))
        elif kind in ("trunc", "ftruncate"):
            # Not durable either until an fsync: a cut may undo it.
            node = self.known(paths[0])
            node.left, node.holds = line.left(), None
            length = int(line.numbers[0]) if kind == "ftruncate" and line.numbers else 0
            node.cut_to = length if node.cut_to is None else min(node.cut_to, length)
        elif kind == "rangesync":
            self.known(paths[0])  # sync_file_range: nothing made durable
        elif kind == "mmap":
            self.known(paths[0]).mapped = True
        elif kind == "baseline":
            node = _Node(line.numbers[0], holds=line.numbers[0])
            self.volatile[paths[0]] = self.durable[paths[0]] = node
            self.seen.add(paths[0])
        elif kind == "rebuilt":
            self.volatile.clear()
            self.durable.clear()
            self.seen.clear()
            self.touched.clear()
        elif kind == "sync":
            raise Refused(f"pid {line.pid} called sync(): no image of every file was taken")
        elif kind == "exchange":
            raise Refused(f"pid {line.pid} exchanged two names (RENAME_EXCHANGE)")
        elif kind == "overflow":
            raise Refused(f"pid {line.pid}: {paths[0]} was not tracked to its fsync")

    def _forget(self, path: str) -> None:
        for name in [p for p in self.volatile if p == path or p.startswith(path + "/")]:
            del self.volatile[name]

    def _rename(self, old: str, new: str) -> None:
        # From outside the root: a name made here, as a create makes it.
        node = self.known(old) if self.inside(old) else _Node(_EMPTY)
        moved = {p: n for p, n in self.volatile.items() if p.startswith(old + "/")}
        self._forget(old)
        if self.inside(new):
            self._forget(new)
            self.volatile[new] = node
            self.seen.add(new)
            for p, n in moved.items():
                self.volatile[new + p[len(old) :]] = n
                self.touched.update((p, new + p[len(old) :]))

    def _dir_synced(self, folder: str) -> None:
        names = {p for p in (*self.volatile, *self.durable) if os.path.dirname(p) == folder}
        for path in names:
            if path in self.volatile:
                self.durable[path] = self.volatile[path]
            else:
                self.durable.pop(path, None)


def power_cut(
    trial_dir: Path, args: list[str], spec: str, trial_seed: int | None = None
) -> dict[str, Any]:
    """Rebuild the trial folder as a power cut leaves it (``args``: the fault's mode);
    what it did, by file (paths relative to the trial folder). A crash state's random
    choices are drawn from ``trial_seed`` and the cut's number in the trial (``spec``
    when no trial seed is given)."""
    root = Path(os.path.realpath(trial_dir))
    folder = root / TRACE_FOLDER
    lines = read_trace(folder)
    cut = 1 + sum(line.kind == "rebuilt" for line in lines)
    seed = spec if trial_seed is None else f"trial {trial_seed}, cut {cut}"
    model = _Model(str(root))
    for line in lines:
        model.apply(line)
    unseen = unseen_change(model, folder)
    if unseen is not None:
        raise Refused(f"a change the observer did not see: {unseen}")
    # Names no line but a baseline named (the supervisor's own files, made before the first
    # life and rewritten by it since) are left alone, and so is the trace's own folder.
    untouched = [
        f"baseline 0 {n.image}\t{p}"
        for p, n in sorted(model.durable.items())
        if p not in model.touched and n.image != _EMPTY
    ]
    model.volatile = {p: n for p, n in model.volatile.items() if p in model.touched}
    model.durable = {p: n for p, n in model.durable.items() if p in model.touched}
    # What each node holds now, read through the name it has now (before anything moves).
    current: dict[int, bytes | None] = {}
    for path, node in model.volatile.items():
        if id(node) not in current and not node.directory:
            current[id(node)] = _read(Path(path))
    files: dict[str, dict[str, Any]] = {}
    contents: dict[int, bytes | None] = {}
    state: dict[str, Any] = {}
    if args[0] == "state":
        model.durable, contents, files, state = _crash_state(model, current, folder, args, seed)
    elif args == ["drop"]:
        # How many crash states this cut has in each model: a campaign judges the others
        # (power-loss:state:<k>) only where there are some.
        state["crash_states"] = {
            name: _crash_state(model, current, folder, ["state", "0", name], seed)[3]["states"]
            for name in crashstates.MODELS
        }
    for path, node in sorted(model.durable.items()):
        if node.directory or id(node) in contents:
            continue
        rel = os.path.relpath(path, root)
        result, figures = _rebuilt(node, current.get(id(node)), folder, args, f"{spec}:{rel}")
        contents[id(node)] = result
        if figures is not None:
            files[rel] = figures
    removed, restored = [], []
    for path, node in model.volatile.items():
        if not node.directory and model.durable.get(path) is not node:
            Path(path).unlink(missing_ok=True)
            if path not in model.durable:
                rel = os.path.relpath(path, root)
                removed.append(rel)
                size = len(current.get(id(node)) or b"")
                files.setdefault(rel, {"synced": 0, "size": size, "kept": 0, "lost": size})
                files[rel]["removed"] = True
    for path, node in model.volatile.items():
        if node.directory and path not in model.durable:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(os.path.relpath(path, root))
    written: dict[int, str] = {}
    baseline = ["rebuilt 0", *untouched]
    for n, (path, node) in enumerate(sorted(model.durable.items()), 1):
        target = Path(path)
        if node.directory:
            target.mkdir(parents=True, exist_ok=True)
            continue
        data = contents.get(id(node))
        if data is None or not _folder_survives(path, model):
            continue
        if model.volatile.get(path) is not node:
            restored.append(os.path.relpath(path, root))
        elif data == current.get(id(node)) and id(node) not in written:
            written[id(node)] = path  # as it is: left alone
            baseline.append(_baseline_line(folder, path, data, len(lines), n))
            continue
        target.unlink(missing_ok=True)
        if id(node) in written:
            os.link(written[id(node)], target)  # one file under two names, as before
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            written[id(node)] = path
        baseline.append(_baseline_line(folder, path, data, len(lines), n))
    _append(folder, baseline)
    return {
        "landed": True,
        **state,
        "files": files,
        "removed": sorted(removed),
        "restored": sorted(restored),
        "mapped": sorted(os.path.relpath(p, root) for p, n in model.volatile.items() if n.mapped),
    }


HARNESS_FILES = (
    "events.jsonl",
    "history.jsonl",
    "lives.json",
    "verdicts.json",
    "failpoint-hits.json",
    "model.jsonl",
    "tools.jsonl",
    "agent.stdout",
    "journal.before-corruption",
    "agent-*.stderr",
    "service-*.log",
    "world.db*",
)
"""The trial folder's files the harness writes itself, unobserved (the agent's lives are
the observed processes): a cut neither checks nor rebuilds them. The files it makes
before the first life (the plan, the trial's spec) have a baseline instead."""


def _harness_file(path: str) -> bool:
    name = os.path.basename(path)
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in HARNESS_FILES)


def unseen_change(model: _Model, folder: Path) -> str | None:
    """The first file of the trial folder that differs from what the trace says is there,
    as ``name: reason``; None when every one agrees.

    A file whose last traced change was an fsync (or that the harness made) must hold that
    fsync's image byte for byte; one written since must have the size and modification
    time its last traced change left. A file no line names, that the harness did not make,
    was made by a call the library did not see.
    """
    root = model.root
    checked: set[int] = set()
    for path, node in sorted(model.volatile.items()):
        if path not in model.touched or node.directory or node.mapped or id(node) in checked:
            continue
        checked.add(id(node))
        rel = os.path.relpath(path, root)
        try:
            now = os.lstat(path)
        except FileNotFoundError:
            return f"{rel}: gone, though no traced call removed it"
        if node.holds is not None:
            image = image_bytes(folder, node.holds)
            data = _read(Path(path))
            if data != image:
                return (
                    f"{rel}: holds {len(data or b'')} bytes unlike the {len(image)} its "
                    "last traced fsync saw, and no traced call wrote to it since"
                )
        elif node.left is not None:
            size, mtime = node.left
            if now.st_size != size:
                return f"{rel}: {now.st_size} bytes, where its last traced change left {size}"
            if now.st_mtime_ns != mtime:
                return f"{rel}: modified after its last traced change (size {size} unchanged)"
    for found in _files(Path(root)):
        if str(found) not in model.seen and not _harness_file(str(found)):
            return f"{os.path.relpath(found, root)}: made by a call the observer did not see"
    return None


def common_prefix(a: bytes, b: bytes) -> int:
    """How many leading bytes ``a`` and ``b`` share: halved by slices, compared in C (a
    byte-by-byte loop in Python cost milliseconds a power cut on a long journal)."""
    low, high = 0, min(len(a), len(b))  # a[:low] == b[:low]; the first difference <= high
    if a[:high] == b[:high]:
        return high
    view_a, view_b = memoryview(a), memoryview(b)
    while high - low > 1:
        middle = (low + high) // 2
        if view_a[low:middle] == view_b[low:middle]:
            low = middle
        else:
            high = middle
    return low


def _crash_state(
    model: _Model, current: dict[int, bytes | None], folder: Path, args: list[str], spec: str
) -> tuple[dict[str, _Node], dict[int, bytes | None], dict[str, dict[str, Any]], dict[str, Any]]:
    """Crash state ``args[1]`` of the cut (``harness.chaos.crashstates``): the names that
    survive, each file's content, the figures by file, and which state it was."""
    root = model.root
    paths = sorted(set(model.volatile) | set(model.durable))
    nodes: dict[int, tuple[str, _Node]] = {}
    for path in paths:
        for node in (model.durable.get(path), model.volatile.get(path)):
            if node is not None and id(node) not in nodes:
                nodes[id(node)] = (path, node)
    weak = args[2:] == ["weak"]  # "ordered" (the default) is named only here
    units: list[tuple[str, list[str]]] = []  # (what, its options' labels)
    # Each unit's own key: a file replaced by a rename has two nodes at one path, each with
    # options of its own (keyed by path, one's choice indexed the other's options).
    unit_keys: list[tuple[str, object]] = []
    options: dict[int, list[tuple[str, bytes]]] = {}
    durables: dict[int, bytes] = {}
    tears: dict[int, tuple[list[int], list[frozenset[int]]]] = {}  # sectors, ways to tear
    for key, (path, node) in nodes.items():
        if node.directory:
            continue
        durable = b"" if node.image == _EMPTY else image_bytes(folder, node.image)
        durables[key] = durable
        now = current.get(key)
        rel = os.path.relpath(path, root)
        if node.mapped or now is None:  # an -shm index: empty; a file unlinked: as synced
            options[key] = [("lost", b"" if node.mapped else durable)]
        else:
            options[key] = crashstates.file_options(durable, now, node.pending, node.cut_to)
        if len(options[key]) > 1:
            units.append((rel, [label for label, _ in options[key]]))
            unit_keys.append(("file", key))
        if weak and now is not None and not node.mapped:
            sectors = crashstates.changed_sectors(durable, now)
            masks = crashstates.tear_masks(len(sectors), f"{spec}:{rel}")
            if masks:
                tears[key] = (sectors, masks)
                labels = [_torn_label([sectors[i] for i in sorted(m)], len(sectors)) for m in masks]
                units.append((f"sectors of {rel}", ["as written", *labels]))
                unit_keys.append(("sectors", key))
    groups = _name_groups(model, paths)
    for group in groups:
        units.append((f"names of {os.path.relpath(group[0], root)}", ["undone", "kept"]))
        unit_keys.append(("names", group[0]))
    number = int(args[1])
    choices, total, enumerated = crashstates.pick([len(u[1]) for u in units], number, spec)
    chosen = dict(zip(unit_keys, choices, strict=True))
    final = dict(model.durable)
    for group in groups:
        if chosen[("names", group[0])]:
            for path in group:
                if path in model.volatile:
                    final[path] = model.volatile[path]
                else:
                    final.pop(path, None)
    contents: dict[int, bytes | None] = {}
    files: dict[str, dict[str, Any]] = {}
    for key, (path, node) in nodes.items():
        if node.directory:
            continue
        rel = os.path.relpath(path, root)
        data = options[key][chosen.get(("file", key), 0)][1]
        torn = chosen.get(("sectors", key), 0)
        lost_sectors: list[int] = []
        if torn:
            sectors, masks = tears[key]
            lost_sectors = [sectors[i] for i in sorted(masks[torn - 1])]
            data = crashstates.tear(durables[key], data, lost_sectors)
        contents[key] = data
        now = current.get(key) or b""
        kept = common_prefix(data, now)
        files[rel] = {
            "synced": len(options[key][0][1]),
            "size": len(now),
            "kept": kept,
            "lost": len(now) - kept,
            "garbage": 0,
            "unsynced_writes": node.unsynced_writes,
            **({"torn_sectors": lost_sectors} if lost_sectors else {}),
        }
    told = [f"{what}: {labels[c]}" for (what, labels), c in zip(units, choices, strict=True) if c]
    state = {
        "state": number,
        "states": total,
        "enumerated": enumerated,
        "model": "weak" if weak else "ordered",
        "choices": told or ["every unsynced change lost"],
    }
    return final, contents, files, state


def _torn_label(lost: list[int], of: int) -> str:
    numbers = ", ".join(str(n) for n in lost)
    return (
        f"{len(lost)} of {of} changed sectors lost (sector {numbers}: "
        f"as synced, zeros past the synced end)"
    )


def _name_groups(model: _Model, paths: list[str]) -> list[list[str]]:
    """The names not yet durable, grouped by the files and folders they name: a rename's
    two names, a link's, are kept or undone together."""
    changed = [p for p in paths if model.volatile.get(p) is not model.durable.get(p)]
    group_of: dict[int, int] = {}
    groups: list[list[str]] = []
    for path in changed:
        ids = [id(n) for n in (model.durable.get(path), model.volatile.get(path)) if n]
        found = sorted({group_of[i] for i in ids if i in group_of})
        if not found:
            groups.append([path])
            target = len(groups) - 1
        else:
            target = found[0]
            groups[target].append(path)
            for other in found[1:]:  # two groups joined by this name: one from now on
                groups[target] += groups[other]
                groups[other] = []
                for key, value in list(group_of.items()):
                    if value == other:
                        group_of[key] = target
        for i in ids:
            group_of[i] = target
    return [sorted(g) for g in groups if g]


def _baseline_line(folder: Path, path: str, data: bytes, cut: int, n: int) -> str:
    """The line saying ``path`` is durable as rebuilt, with its image (``cut``: where in the
    trace the rebuild happened, which names its images)."""
    image = f"base-{cut}-{n}"
    (folder / image).write_bytes(data)
    return f"baseline 0 {image}\t{path}"


def _folder_survives(path: str, model: _Model) -> bool:
    parent = os.path.dirname(path)
    node = model.volatile.get(parent)
    return node is None or not node.directory or model.durable.get(parent) is node


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def _rebuilt(
    node: _Node, now: bytes | None, folder: Path, args: list[str], seed: str
) -> tuple[bytes | None, dict[str, Any] | None]:
    """A file's content after the cut, and the figures of what it kept and lost."""
    durable = b"" if node.image == _EMPTY else image_bytes(folder, node.image)
    data = durable if now is None else now
    figures: dict[str, Any] = {"synced": len(durable), "size": len(data)}
    if node.mapped:
        return b"", {**figures, "kept": 0, "lost": len(data), "garbage": 0, "mapped": True}
    if args == ["drop"] or data == durable:
        kept, result = len(durable), durable
        figures.update(kept=kept, lost=len(data) - kept, garbage=0)
    elif data.startswith(durable):
        result, kept, garbage = _tear_tail(data, len(durable), args)
        figures.update(kept=kept, lost=len(data) - kept, garbage=garbage)
    else:
        result, new_sectors, old_sectors = _tear_sectors(durable, data, random.Random(seed))
        figures.update(
            kept=len(result), lost=0, garbage=0, sectors_new=new_sectors, sectors_old=old_sectors
        )
    figures["unsynced_writes"] = node.unsynced_writes
    return result, figures


def _tear_tail(data: bytes, synced: int, args: list[str]) -> tuple[bytes, int, int]:
    """An append-only file past its durable prefix: what ``tear`` and ``tear-sector`` keep."""
    unsynced = len(data) - synced
    if args == ["tear-sector"]:
        # The write reached the disk up to the first sector boundary past the synced end.
        boundary = (synced // SECTOR + 1) * SECTOR
        kept, garbage = (boundary if boundary < len(data) else synced), b""
    else:
        keep_fraction, garbage_len = float(args[1]), int(args[2])
        kept = synced + int(unsynced * keep_fraction)
        garbage = random.Random(f"{kept}:{garbage_len}").randbytes(garbage_len) if unsynced else b""
    return data[:kept] + garbage, kept, len(garbage)


def _tear_sectors(old: bytes, new: bytes, rng: random.Random) -> tuple[bytes, int, int]:
    """A file rewritten in place: each sector that differs is old or new, by ``rng``; a
    file that grew keeps the new sectors up to the first one lost."""
    result = bytearray()
    new_sectors = old_sectors = 0
    for start in range(0, max(len(old), len(new)), SECTOR):
        before, after = old[start : start + SECTOR], new[start : start + SECTOR]
        if before == after:
            result += before
            continue
        take_new = rng.random() < 0.5
        new_sectors += take_new
        old_sectors += not take_new
        if start >= len(old) and not take_new:
            break  # past the durable end: the file ends where the writes stopped landing
        result += after if take_new else before
    if len(new) < len(old) and rng.random() < 0.5:
        del result[len(new) :]  # the cut to a shorter length reached the disk
    return bytes(result), new_sectors, old_sectors


def main() -> int:
    """``python -m harness.chaos.observer``: build the library and the tracer now (``make``
    does). A tracer that cannot run here is said, and is no failure: static programs are
    then refused power loss, saying why."""
    lib = library()
    if lib is None:
        print(f"harness.chaos.observer: {unavailable()}", file=sys.stderr)
        return 1
    print(lib)
    traced = tracer()
    print(traced if traced is not None else f"no tracer: {tracer_unavailable()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
