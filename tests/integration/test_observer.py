"""The file-system observer for real: built from its C source, preloaded into programs that
write, fsync, rename and create files (exec'd, and forked as the fork server forks), SQLite
under it, and power-loss trials of the runtimes its broken runtimes break."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.chaos import observer
from harness.chaos.observer import (
    TRACE_FOLDER,
    build_library,
    image_bytes,
    power_cut,
    read_trace,
    start_trace,
)
from harness.chaos.trial import TrialResult
from tests.conftest import subprocess_env
from tests.integration.conftest import TrialRunner

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the observer interposes Linux's C library"
)


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The library built afresh from its source, as on a fresh clone."""
    return build_library(tmp_path_factory.mktemp("fsobserve"))


_FILES = """
import os, sys
root = sys.argv[1]
def files():
    fd = os.open(f"{root}/a.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"durable")
    os.fsync(fd)
    os.close(fd)
    os.link(f"{root}/a.tmp", f"{root}/a")
    d = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(d)
    os.unlink(f"{root}/a.tmp")
    fd = os.open(f"{root}/a", os.O_WRONLY | os.O_APPEND)
    os.write(fd, b" lost")
    os.close(fd)
    os.rename(f"{root}/a", f"{root}/b")
    fd = os.open(f"{root}/new", os.O_WRONLY | os.O_CREAT, 0o600)  # no fsync of its folder
    os.write(fd, b"synced, yet its name is not")
    os.fsync(fd)
    os.close(fd)
if sys.argv[2] == "fork":  # as the fork server: preloaded, its settings set after the fork
    settings = {k: os.environ.pop(k) for k in ("HARNESS_FS_TRACE", "HARNESS_FS_ROOT")}
    pid = os.fork()
    if pid == 0:
        os.environ.update(settings)
        files()
        os._exit(0)
    os.waitpid(pid, 0)
else:
    files()
"""


def _run(lib: Path, root: Path, program: str, *args: str) -> None:
    start_trace(root)
    env = subprocess_env(**observer.observer_env(root, lib))
    subprocess.run(
        [sys.executable, "-I", "-c", textwrap.dedent(program), str(root), *args],
        env=env,
        check=True,
    )


@pytest.mark.parametrize("how", ["exec", "fork"])
def test_a_program_under_the_library_is_rebuilt_as_a_cut_leaves_it(
    lib: Path, tmp_path: Path, how: str
) -> None:
    root = Path(os.path.realpath(tmp_path))
    _run(lib, root, _FILES, how)
    kinds = [line.kind for line in read_trace(root / TRACE_FOLDER)]
    assert kinds == [
        *["create", "write", "fsync", "link", "dirfsync", "unlink", "write", "rename"],
        *["create", "write", "fsync"],
    ]
    done = power_cut(root, ["drop"], "power-loss:drop")
    # The folder as its one fsync left it: a.tmp and a (one file, its fsynced content);
    # the rename undone, the file made after it gone though its content was fsynced.
    assert sorted(p.name for p in root.iterdir() if p.name != TRACE_FOLDER) == ["a", "a.tmp"]
    assert (root / "a").read_bytes() == (root / "a.tmp").read_bytes() == b"durable"
    assert done["removed"] == ["b", "new"] and done["restored"] == ["a", "a.tmp"]


_SPAWNS = """
import os, subprocess, sys
root = sys.argv[1]
fd = os.open(f"{root}/log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
os.fsync(folder)
os.write(fd, b"before ")
# Python starts a program by vfork: the child shares this process's memory, and closes
# the pipes' other ends before its exec (as an agent starts its MCP tool server).
child = subprocess.Popen(["/bin/cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
child.communicate(b"tool call")
os.write(fd, b"after")
os.fsync(fd)
"""


def test_a_child_started_by_vfork_leaves_its_parents_descriptors_observed(
    lib: Path, tmp_path: Path
) -> None:
    """A vfork child's close() before its exec must not untrack the parent's descriptors: the
    parent's later write and fsync are in the trace, with an image of both writes."""
    root = Path(os.path.realpath(tmp_path))
    _run(lib, root, _SPAWNS)
    lines = read_trace(root / TRACE_FOLDER)
    assert [line.kind for line in lines] == ["create", "dirfsync", "write", "write", "fsync"]
    power_cut(root, ["drop"], "power-loss:drop")
    assert (root / "log").read_bytes() == b"before after"


_GROWS = """
import os, sys
root = sys.argv[1]
fd = os.open(f"{root}/j", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
os.fsync(folder)
for piece in (b"one ", b"two "):
    os.write(fd, piece)
    os.fsync(fd)
other = os.open(f"{root}/j", os.O_WRONLY)
os.pwrite(other, b"ONE", 0)  # in place, below the end of the image
os.fsync(other)
os.write(fd, b"lost")
"""


def test_a_file_that_only_grew_has_its_image_extended_one_rewritten_gets_a_new_one(
    lib: Path, tmp_path: Path
) -> None:
    """An append-only file's fsyncs extend one image (each line names its own prefix); a
    write below the image's end makes the next fsync copy the file anew."""
    root = Path(os.path.realpath(tmp_path))
    _run(lib, root, _GROWS)
    folder = root / TRACE_FOLDER
    fsyncs = [line for line in read_trace(folder) if line.kind == "fsync"]
    images = [line.numbers for line in fsyncs]
    first, second, third = images
    assert first[0] == second[0] != third[0]
    assert [image_bytes(folder, ":".join(n[:2])) for n in images] == [
        b"one ",
        b"one two ",
        b"ONE two ",
    ]
    power_cut(root, ["drop"], "power-loss:drop")
    assert (root / "j").read_bytes() == b"ONE two "


_SQLITE = """
import os, signal, sqlite3, sys
root, mode = sys.argv[1], sys.argv[2]
db = sqlite3.connect(f"{root}/x.db", isolation_level=None)
db.execute(f"PRAGMA journal_mode={mode}")
# A rollback journal's commit is its deletion: EXTRA fsyncs the folder after it.
db.execute("PRAGMA synchronous=" + ("FULL" if mode == "wal" else "EXTRA"))
db.execute("PRAGMA cache_size=1")  # the open transaction spills pages to disk
db.execute("CREATE TABLE t (x TEXT)")
db.execute("BEGIN")
db.executemany("INSERT INTO t VALUES (?)", [("committed" * 50,)] * 100)
db.execute("COMMIT")
db.execute("BEGIN")
db.executemany("INSERT INTO t VALUES (?)", [("open" * 100,)] * 400)
os.kill(os.getpid(), signal.SIGKILL)  # dies in the open transaction
"""


@pytest.mark.parametrize("mode", ["wal", "delete"])
def test_sqlite_keeps_what_it_committed_and_opens_cleanly_after_a_cut(
    lib: Path, tmp_path: Path, mode: str
) -> None:
    root = Path(os.path.realpath(tmp_path))
    start_trace(root)
    env = subprocess_env(**observer.observer_env(root, lib))
    done = subprocess.run([sys.executable, "-I", "-c", _SQLITE, str(root), mode], env=env)
    assert done.returncode == -9
    power_cut(root, ["drop"], "power-loss:drop")
    db = sqlite3.connect(root / "x.db")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert db.execute("SELECT x, count(*) FROM t GROUP BY x").fetchall() == [
        ("committed" * 50, 100)
    ]


def _failed(result: TrialResult) -> set[str]:
    return {v.invariant for v in result.verdicts if v.status == "fail"}


_KILL = {"failpoints": "op.after_effect@2=kill"}


@pytest.mark.parametrize("runtime", ["fsync-wrong-fd", "no-dir-fsync"])
def test_a_runtime_whose_fsyncs_miss_is_caught_under_power_loss_only(
    run_mini: TrialRunner, runtime: str
) -> None:
    """Under a power cut the journal loses what no fsync of its own covered (its records,
    or its very name): the ops run again, and I1 and I6 say so. The same kill without the
    cut passes every invariant (as did the cut rebuilt from the runtime's own word)."""
    cut = run_mini(json.dumps([{**_KILL, "after_death": "power-loss:drop"}]), runtime)
    assert {"I1", "I6"} <= _failed(cut), cut.verdicts
    assert run_mini(json.dumps([_KILL]), runtime).status == "pass"


def test_the_real_runtime_passes_a_power_cut_rebuilt_from_its_calls(
    run_mini: TrialRunner,
) -> None:
    result = run_mini(json.dumps([{**_KILL, "after_death": "power-loss:drop"}]))
    assert result.status == "pass", result.verdicts
    lines = read_trace(result.directory / TRACE_FOLDER)
    assert {"create", "link", "dirfsync", "fsync", "rebuilt"} <= {line.kind for line in lines}


def test_without_the_library_power_loss_is_refused(
    run_mini: TrialRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No library in its folder and no compiler: the power cut is not run, and the trial
    cannot be judged (F says why); nothing falls back to the runtime's word."""
    monkeypatch.setenv(observer.ENV_LIBRARY_DIR, str(tmp_path / "nothing"))
    monkeypatch.setenv("PATH", str(tmp_path / "no-compiler"))
    monkeypatch.delenv("CC", raising=False)
    observer._located.cache_clear()
    try:
        result = run_mini(json.dumps([{**_KILL, "after_death": "power-loss:drop"}]))
    finally:
        observer._located.cache_clear()
    verdict = next(v for v in result.verdicts if v.invariant == "F")
    assert verdict.status == "unknown" and "compiler" in " ".join(verdict.evidence)
    assert not (result.directory / TRACE_FOLDER).exists()
