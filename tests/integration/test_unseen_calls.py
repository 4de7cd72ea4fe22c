"""Every way a program may change a watched file, each without an fsync, then a power cut.

Each program makes ``j`` durable (written, fsynced, its folder fsynced), then changes it
through one call only and exits without syncing. The cut must lose the change (the file
comes back as it was durable), or refuse to judge the trial because the observer did not
see the change: never keep it. A few calls that do make data durable (``O_DSYNC``,
``RWF_DSYNC``, an fsync after C stdio) show that the cut keeps what was synced.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.chaos import observer
from harness.chaos.faults import apply_after_death
from harness.chaos.observer import TRACE_FOLDER, Refused, build_library, power_cut, start_trace
from tests.conftest import subprocess_env

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the observer interposes Linux's C library"
)

DURABLE = b"durable"
CHANGE = b"unsynced" * 128

_PRELUDE = """
import ctypes, os, subprocess, sys
root, outside = sys.argv[1], sys.argv[2]
path = f"{root}/j"
CHANGE = b"unsynced" * 128
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
os.write(fd, b"durable")
os.fsync(fd)
folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
os.fsync(folder)
libc = ctypes.CDLL(None, use_errno=True)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.fwrite.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
libc.fflush.argtypes = [ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
libc.fputs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
libc.fprintf.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
libc.ftruncate64.argtypes = [ctypes.c_int, ctypes.c_long]
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_uint]
libc.syscall.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_char_p, ctypes.c_size_t]
libc.mkstemp.argtypes = [ctypes.c_char_p]
def source():
    return os.open(outside, os.O_RDONLY)
def appending():
    os.lseek(fd, 0, os.SEEK_END)
_SYS_OPENAT = {_SYS_OPENAT}
"""

_SYS_WRITE, _SYS_OPENAT = {"x86_64": (1, 257), "aarch64": (64, 56)}[os.uname().machine]

# name: (the change, what the cut must leave: bytes, or "unknown")
CALLS: dict[str, tuple[str, bytes | str]] = {
    "write": ("appending(); os.write(fd, CHANGE)", DURABLE),
    "pwritev": ("os.pwritev(fd, [CHANGE[:500], CHANGE[500:]], 7)", DURABLE),
    "pwritev2": ("os.pwritev(fd, [CHANGE], 0, os.RWF_APPEND)", DURABLE),
    "pwritev2-at-position": ("appending(); os.pwritev(fd, [CHANGE], -1, os.RWF_HIPRI)", DURABLE),
    "copy_file_range": ("appending(); os.copy_file_range(source(), fd, len(CHANGE))", DURABLE),
    "sendfile": ("appending(); os.sendfile(fd, source(), 0, len(CHANGE))", DURABLE),
    "splice": (
        "r, w = os.pipe(); os.write(w, CHANGE); appending(); os.splice(r, fd, len(CHANGE))",
        DURABLE,
    ),
    "posix_fallocate": ("os.posix_fallocate(fd, 7, 4096)", DURABLE),
    "fallocate": ("assert libc.fallocate(fd, 0, 7, 4096) == 0", DURABLE),
    "ftruncate": ("os.ftruncate(fd, 3)", DURABLE),
    "ftruncate64": ("assert libc.ftruncate64(fd, 3) == 0", DURABLE),
    "O_TRUNC": ("t = os.open(path, os.O_WRONLY | os.O_TRUNC); os.write(t, b'new')", DURABLE),
    "sync_file_range": (
        "appending(); os.write(fd, CHANGE); assert libc.sync_file_range(fd, 0, 0, 7) == 0",
        DURABLE,
    ),
    "fwrite": (
        "f = libc.fopen(path.encode(), b'ab'); libc.fwrite(CHANGE, 1, len(CHANGE), f);"
        " libc.fflush(f)",
        DURABLE,
    ),
    "fwrite-fclose": (
        "f = libc.fopen(path.encode(), b'ab'); libc.fwrite(CHANGE, 1, len(CHANGE), f);"
        " libc.fclose(f)",
        DURABLE,
    ),
    "fwrite-large": (
        "f = libc.fopen(path.encode(), b'ab'); big = CHANGE * 20 + b'tail';"
        " libc.fwrite(big, 1, len(big), f)",
        "unknown",  # glibc writes most of it at once (seen), its tail at exit (not seen)
    ),
    "fputs": (
        "f = libc.fopen(path.encode(), b'ab'); libc.fputs(CHANGE, f); libc.fflush(f)",
        DURABLE,
    ),
    "fprintf": (
        "f = libc.fopen(path.encode(), b'ab'); libc.fprintf(f, b'%s', CHANGE); libc.fflush(f)",
        DURABLE,
    ),
    "stdio-flushed-at-exit": (
        "f = libc.fopen(path.encode(), b'ab'); libc.fwrite(CHANGE[:100], 1, 100, f)",
        "unknown",
    ),
    "exec-child": (
        "appending(); subprocess.run([sys.executable, '-c', "
        "f'import os; os.write({fd}, b\"unsynced\" * 128)'], pass_fds=(fd,), check=True)",
        DURABLE,
    ),
    "symlink": (
        "os.symlink(root, outside + '.link');"
        " t = os.open(outside + '.link/j', os.O_WRONLY | os.O_APPEND); os.write(t, CHANGE)",
        DURABLE,
    ),
    "proc-self-cwd": (
        "os.chdir(root); t = os.open('/proc/self/cwd/j', os.O_WRONLY | os.O_APPEND);"
        " os.write(t, CHANGE)",
        DURABLE,
    ),
    "mkstemp-rename": (
        "name = ctypes.create_string_buffer(f'{root}/tmpXXXXXX'.encode());"
        " t = libc.mkstemp(name); os.write(t, CHANGE); os.rename(name.value.decode(), path);"
        " os.fsync(folder)",
        b"",  # the name is durable, the content never was
    ),
    "system-call": (f"appending(); libc.syscall({_SYS_WRITE}, fd, CHANGE, len(CHANGE))", "unknown"),
    "made-by-a-system-call": (
        "libc.syscall.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_char_p, ctypes.c_long,"
        " ctypes.c_long]; t = libc.syscall(_SYS_OPENAT, -100, (root + '/other').encode(),"
        " os.O_WRONLY | os.O_CREAT, 0o600); os.write(t, CHANGE)",
        "unknown",
    ),
}

SYNCED: dict[str, str] = {
    "fdatasync": "appending(); os.write(fd, CHANGE); os.fdatasync(fd)",
    "O_DSYNC": "t = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_DSYNC); os.write(t, CHANGE)",
    "RWF_DSYNC": "os.pwritev(fd, [CHANGE], 7, os.RWF_DSYNC)",
    "fwrite-then-fsync": (
        "f = libc.fopen(path.encode(), b'ab'); libc.fwrite(CHANGE, 1, len(CHANGE), f);"
        " libc.fflush(f); os.fsync(fd)"
    ),
}


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory.mktemp("fsobserve"))


def _run(lib: Path, tmp_path: Path, change: str) -> Path:
    """Run the prelude and ``change`` under the library in a fresh trial folder; its path."""
    root = Path(os.path.realpath(tmp_path)) / "trial"
    root.mkdir()
    outside = Path(os.path.realpath(tmp_path)) / "outside"
    outside.write_bytes(CHANGE)
    start_trace(root)
    program = textwrap.dedent(_PRELUDE).replace("{_SYS_OPENAT}", str(_SYS_OPENAT)) + change + "\n"
    env = subprocess_env(**observer.observer_env(root, lib))
    subprocess.run(
        [sys.executable, "-I", "-c", program, str(root), str(outside)], env=env, check=True
    )
    return root


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_change_through_one_call_is_lost_or_unjudged_never_kept(
    lib: Path, tmp_path: Path, call: str
) -> None:
    """The change made through ``call``, never synced: the cut loses it, or says the trial
    cannot be judged (naming the file), as the table says for that call."""
    change, expected = CALLS[call]
    root = _run(lib, tmp_path, change)
    # The program did change the folder (a cut of an unchanged folder loses nothing).
    assert (root / "j").read_bytes() != DURABLE or (root / "other").exists()
    if expected == "unknown":
        with pytest.raises(Refused, match=r"did not see: [a-z]"):
            power_cut(root, ["drop"], "power-loss:drop")
        return
    power_cut(root, ["drop"], "power-loss:drop")
    assert (root / "j").read_bytes() == expected


@pytest.mark.parametrize("call", sorted(SYNCED))
def test_a_synced_change_is_kept(lib: Path, tmp_path: Path, call: str) -> None:
    """A write followed by fdatasync, through an O_DSYNC descriptor, by pwritev2 with
    RWF_DSYNC, or by C stdio followed by an fsync is durable: the cut keeps it."""
    root = _run(lib, tmp_path, SYNCED[call])
    power_cut(root, ["drop"], "power-loss:drop")
    assert (root / "j").read_bytes() == DURABLE + CHANGE


def test_an_unseen_change_makes_the_power_loss_not_land_in_one_line(
    lib: Path, tmp_path: Path
) -> None:
    """Through the fault: it did not land (so F leaves the trial unjudged), the reason
    names the file in one line, and nothing in the folder was changed."""
    root = _run(lib, tmp_path, CALLS["system-call"][0])
    before = (root / "j").read_bytes()
    done = apply_after_death(root, "power-loss:drop")
    assert done["landed"] is False
    assert "did not see: j: " in done["why"] and "\n" not in done["why"]
    assert (root / "j").read_bytes() == before
    assert not any(line.startswith("rebuilt") for line in (root / TRACE_FOLDER / "trace").open())


@pytest.mark.parametrize("sync", ["os.fsync", "os.fdatasync"])
def test_a_files_own_sync_never_makes_its_new_name_durable(
    lib: Path, tmp_path: Path, sync: str
) -> None:
    """A new file written and synced, its folder never fsynced: gone after the cut."""
    change = (
        "t = os.open(f'{root}/new', os.O_WRONLY | os.O_CREAT, 0o600); os.write(t, CHANGE);"
        f" {sync}(t)"
    )
    root = _run(lib, tmp_path, change)
    done = power_cut(root, ["drop"], "power-loss:drop")
    assert not (root / "new").exists() and done["removed"] == ["new"]
    assert (root / "j").read_bytes() == DURABLE


_KILLED_WRITING = """
import os, random, signal, sys
root = sys.argv[1]
fd = os.open(f"{root}/j", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
os.write(fd, b"durable")
os.fsync(fd)
folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
os.fsync(folder)
signal.signal(signal.SIGALRM, signal.SIG_DFL)  # as the harness's timed kill: it ends the process
signal.setitimer(signal.ITIMER_REAL, random.uniform(0.002, 0.02))
while True:
    os.write(fd, b"x")
"""


def test_a_timed_kill_never_lands_between_a_write_and_its_line(lib: Path, tmp_path: Path) -> None:
    """Killed by a timer at a random moment of a loop of writes, twenty times: each time the
    trace holds every write, so the cut's check finds nothing it did not see."""
    for attempt in range(20):
        root = Path(os.path.realpath(tmp_path)) / f"trial-{attempt}"
        root.mkdir()
        start_trace(root)
        env = subprocess_env(**observer.observer_env(root, lib))
        done = subprocess.run([sys.executable, "-I", "-c", _KILLED_WRITING, str(root)], env=env)
        assert done.returncode == -14  # SIGALRM
        assert len((root / "j").read_bytes()) > len(DURABLE)
        power_cut(root, ["drop"], "power-loss:drop")
        assert (root / "j").read_bytes() == DURABLE
