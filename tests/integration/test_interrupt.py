"""Interrupting the harness: Ctrl-C or SIGTERM at any moment leaves nothing behind."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).parent.parent.parent
MOMENTS = 20


def _start(reports: Path, seed: int) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "harness",
        "chaos",
        "--scenarios",
        "tests/data/scenarios",
        "--random",
        "60",
        "--no-self-check",
        "--seed",
        str(seed),
        "--reports",
        str(reports),
    ]
    # A session of its own, so that a signal to its group is what Ctrl-C in a terminal does.
    return subprocess.Popen(
        command, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _survivors(reports: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with_reports = any(str(reports) in arg for arg in (proc.info["cmdline"] or []))
        if with_reports and proc.pid != os.getpid():
            found.append(proc)
    return found


def _temp_entries() -> set[str]:
    return set(os.listdir(tempfile.gettempdir()))


class TestInterrupt:
    def test_sigint_at_random_moments_leaves_nothing(self, tmp_path: Path) -> None:
        """Ctrl-C at 20 random moments of a small campaign kills everything and keeps a report."""
        rng = random.Random(20261203)
        before = _temp_entries()
        for moment in range(MOMENTS):
            reports = tmp_path / f"run{moment}"
            delay = rng.uniform(0.2, 4.0)
            harness = _start(reports, seed=moment)
            try:
                time.sleep(delay)
                os.killpg(harness.pid, signal.SIGINT)
                _, stderr = harness.communicate(timeout=60)
            finally:
                if harness.poll() is None:
                    os.killpg(harness.pid, signal.SIGKILL)
                    harness.wait()
            assert harness.returncode in (130, 0), (delay, stderr.decode()[-2000:])
            time.sleep(0.1)  # let the kernel finish reaping what was just killed
            assert _survivors(reports) == [], f"survivors after SIGINT at {delay:.2f}s"
            runs = list(reports.glob("*/summary.json"))
            if harness.returncode == 130 and runs:
                summary = json.loads(runs[0].read_text())
                assert summary["interrupted"] is True and summary["passed"] is False
                trials = list((runs[0].parent / "trials").glob("*"))
                assert all((t / "verdicts.json").exists() for t in trials)
                assert summary["trials"] == len(trials)
        stray = {e for e in _temp_entries() - before if not e.startswith("pytest")}
        assert stray == set(), f"temporary entries left behind: {stray}"

    def test_sigterm_exits_143_and_marks_the_run(self, tmp_path: Path) -> None:
        """SIGTERM to the harness alone stops every worker and agent and exits 143."""
        harness = _start(tmp_path, seed=99)
        try:
            time.sleep(2.0)
            harness.send_signal(signal.SIGTERM)
            harness.communicate(timeout=60)
        finally:
            if harness.poll() is None:
                os.killpg(harness.pid, signal.SIGKILL)
                harness.wait()
        assert harness.returncode == 143
        time.sleep(0.1)
        assert _survivors(tmp_path) == []
        summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
        assert summary["interrupted"] is True
