"""Bad input through the real command line: refused with exit 2 before any process starts.

Each file of the malformed corpus is copied alone into an empty folder and
given to ``python -m harness chaos`` and ``python -m harness trial`` as real
subprocesses. The refusal must name the file (and the step and field, where
the case has them, as the unit corpus table says), and nothing may run: no
process is started (an audit hook loaded through ``sitecustomize`` reports
every process the command starts) and the reports folder is never created.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_harness
from tests.unit.test_scenario import BAD, BAD_CASES

ROOT = Path(__file__).resolve().parents[2]
BAD_FILES = sorted(BAD.glob("*.toml"))
SPAWNED = "observer: process started:"

# Loaded at start-up of every interpreter run with this folder on PYTHONPATH.
OBSERVER = f"""
import os, sys

def _observe(event, args):
    if event in ("subprocess.Popen", "os.posix_spawn", "os.fork", "os.exec", "os.system"):
        os.write(2, ("{SPAWNED} " + event + "\\n").encode())

sys.addaudithook(_observe)
"""


@pytest.fixture(scope="module")
def observer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose ``sitecustomize`` reports every process its interpreter starts."""
    folder = tmp_path_factory.mktemp("observer")
    (folder / "sitecustomize.py").write_text(OBSERVER)
    return folder


def alone_in_a_folder(bad_file: Path, tmp_path: Path) -> Path:
    """A copy of ``bad_file`` as the only scenario of a fresh scenario folder (with the
    tools files the corpus keeps in ``tools/``, which some of its files name)."""
    folder = tmp_path / "scenarios"
    folder.mkdir()
    if (bad_file.parent / "tools").is_dir():
        shutil.copytree(bad_file.parent / "tools", folder / "tools")
    return Path(shutil.copyfile(bad_file, folder / bad_file.name))


def assert_names_the_case(stderr: str, copy: Path) -> None:
    """The refusal names the file, and the step, field and problem its case expects."""
    step, field, fragment = BAD_CASES[copy.name]
    assert f"harness: {copy}: " in stderr, stderr
    assert fragment in stderr, stderr
    if step is not None:
        assert f"step {step}" in stderr, stderr
    if field is not None:
        assert f"field {field!r}" in stderr, stderr


class TestObserver:
    def test_reports_a_started_process(self, observer: Path) -> None:
        """The observer does report a process started by a watched interpreter."""
        env = {**os.environ, "PYTHONPATH": str(observer)}
        done = subprocess.run(
            [sys.executable, "-c", "import subprocess; subprocess.run(['true'])"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert f"{SPAWNED} subprocess.Popen" in done.stderr


class TestBadScenarioFiles:
    def test_every_file_has_an_expectation(self) -> None:
        """Each file of the corpus has its expected step, field and problem in the unit table."""
        assert {p.name for p in BAD_FILES} == set(BAD_CASES)

    @pytest.mark.parametrize("bad_file", BAD_FILES, ids=lambda p: p.stem)
    def test_chaos_refuses_before_anything_runs(
        self, bad_file: Path, tmp_path: Path, observer: Path
    ) -> None:
        """``chaos`` on a folder holding one bad file exits 2 naming it, and starts nothing."""
        copy = alone_in_a_folder(bad_file, tmp_path)
        reports = tmp_path / "r"
        done = run_harness(
            "chaos", "--scenarios", str(copy.parent), "--reports", str(reports), pythonpath=observer
        )
        assert done.returncode == 2, done.stderr
        assert_names_the_case(done.stderr, copy)
        assert SPAWNED not in done.stderr
        assert not reports.exists()

    @pytest.mark.long
    @pytest.mark.parametrize("bad_file", BAD_FILES, ids=lambda p: p.stem)
    def test_trial_refuses_before_anything_runs(
        self, bad_file: Path, tmp_path: Path, observer: Path
    ) -> None:
        """``trial`` on one bad file exits 2 naming it, and starts nothing."""
        copy = alone_in_a_folder(bad_file, tmp_path)
        reports = tmp_path / "r"
        done = run_harness(
            "trial", str(copy), "--seed", "1", "--reports", str(reports), pythonpath=observer
        )
        assert done.returncode == 2, done.stderr
        assert_names_the_case(done.stderr, copy)
        assert SPAWNED not in done.stderr
        assert not reports.exists()


class TestUnknownRuntime:
    @pytest.mark.parametrize("command", ["chaos", "trial"])
    def test_refused_before_anything_runs(
        self, command: str, tmp_path: Path, observer: Path
    ) -> None:
        """``--runtime nope`` on a good scenario exits 2 naming the option, and starts nothing."""
        mini = ROOT / "tests" / "data" / "scenarios" / "mini.toml"
        reports = tmp_path / "r"
        target = (
            ["--scenarios", str(mini.parent)] if command == "chaos" else [str(mini), "--seed=1"]
        )
        done = run_harness(
            command, *target, "--runtime", "nope", "--reports", str(reports), pythonpath=observer
        )
        assert done.returncode == 2, done.stderr
        assert "unknown runtime 'nope'" in done.stderr and "real" in done.stderr
        assert SPAWNED not in done.stderr
        assert not reports.exists()
