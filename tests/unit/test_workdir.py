"""Scratch folders: a campaign's own, removed when it ends, and an orphan (its owner killed
with SIGKILL) removed by the next campaign under the same folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.chaos.workdir import SCRATCH_PREFIX, scratch_folder


def _dead_pid() -> int:
    """A pid no process has now: a child's, once it has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_an_orphan_is_removed_and_a_live_owners_folder_kept(tmp_path: Path) -> None:
    orphan = tmp_path / f"{SCRATCH_PREFIX}{_dead_pid()}-abc"
    (orphan / "trial").mkdir(parents=True)
    alive = tmp_path / f"{SCRATCH_PREFIX}{os.getppid()}-def"
    alive.mkdir()
    other = tmp_path / "not-a-scratch-folder"
    other.mkdir()
    with scratch_folder(tmp_path) as mine:
        assert mine.exists()
        assert not orphan.exists()
        assert alive.exists() and other.exists()
    assert not mine.exists()
