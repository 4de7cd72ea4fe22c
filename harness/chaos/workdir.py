"""Where trials run: a scratch folder in RAM, from which each finished trial moves to
the run folder.

Power loss is rebuilt from the calls the agent made (``harness.chaos.observer``
traces them), not from what a disk kept, so inside a trial folder a real fsync
only costs time and proves nothing more: on a tmpfs it returns at once. A
campaign given a work folder (``--workdir ram``, the commands' default, for
``/dev/shm`` when it is a tmpfs, or ``--workdir DIR``) makes one scratch folder
under it, runs every trial in a subfolder of it, moves the trial to the run
folder once it is checked (or removes it, when ``harness.chaos.keep`` does not
keep it), and removes the scratch folder when the campaign ends, however it
ends (a harness killed with SIGKILL cannot: the next campaign under the same folder
removes a scratch folder whose owner is dead). Without one (``--workdir disk``),
trials run in the run folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["RAM_FOLDERS", "SCRATCH_PREFIX", "ram_folder", "scratch_folder", "sweep_orphans"]

RAM_FOLDERS = (Path("/dev/shm"),)
"""Where a RAM-backed folder is looked for, in order."""

SCRATCH_PREFIX = "agent-crash-scratch-"
"""The name of every campaign's scratch folder starts so, then the owner's pid and a dash."""

_RAM_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})


def ram_folder() -> Path | None:
    """The first of ``RAM_FOLDERS`` that is a writable tmpfs, or None."""
    import psutil  # supervisor side only

    mounts = {Path(p.mountpoint): p.fstype for p in psutil.disk_partitions(all=True)}
    for folder in RAM_FOLDERS:
        if mounts.get(folder) in _RAM_FILESYSTEMS and os.access(folder, os.W_OK | os.X_OK):
            return folder
    return None


@contextmanager
def scratch_folder(base: Path) -> Iterator[Path]:
    """A fresh folder under ``base``, removed with everything in it when the block ends."""
    base.mkdir(parents=True, exist_ok=True)
    sweep_orphans(base)
    # Named by the process that owns it, so that what it leaves is known to be its own.
    path = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=base))
    try:
        yield path
    finally:
        _remove(path)


def sweep_orphans(base: Path) -> list[Path]:
    """Remove the scratch folders under ``base`` whose owner is dead (a harness killed
    with SIGKILL removes nothing, and a RAM folder holds the machine's memory); the
    folders removed. A folder of a live process is kept, whoever it is (a pid reused since
    keeps an orphan until that process ends too), and so is another user's."""
    removed = []
    for folder in base.glob(f"{SCRATCH_PREFIX}*"):
        owner = folder.name[len(SCRATCH_PREFIX) :].split("-", 1)[0]
        try:
            if not owner.isdigit() or folder.stat().st_uid != os.getuid():
                continue
            os.kill(int(owner), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        except OSError:  # alive under another user, or gone meanwhile
            continue
    return removed


_REMOVE_TRIES = 50


def _remove(path: Path) -> None:
    """Remove ``path``; again while it comes back: after an interrupt, an agent whose
    worker was just stopped may write a last file before its fork server kills it."""
    for _ in range(_REMOVE_TRIES):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
        time.sleep(0.1)  # the poll's pace: the agent is being killed
    shutil.rmtree(path)  # still there after 5 s: say why, with the error
