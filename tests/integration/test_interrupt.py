"""Interrupting the harness: Ctrl-C or SIGTERM at any moment leaves nothing behind."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from harness.chaos.launch import FORK_SERVER_MODULE

ROOT = Path(__file__).parent.parent.parent
MOMENTS = 20


def _start(reports: Path, seed: int, tmpdir: Path | None = None) -> subprocess.Popen[bytes]:
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
    # Its temporary files go to a folder of the test's own, where leftovers are its alone.
    env = {**os.environ, **({"TMPDIR": str(tmpdir)} if tmpdir is not None else {})}
    # A session of its own, so that a signal to its group is what Ctrl-C in a terminal does.
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _survivors(reports: Path, harness: int) -> list[psutil.Process]:
    """Processes naming the run's folder, and fork servers (with their agents) of its workers."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        with_reports = any(str(reports) in arg for arg in cmdline)
        # A fork server's command line ends with its owner (a worker) and the owner's parent.
        forked = FORK_SERVER_MODULE in cmdline and str(harness) in cmdline[-2:]
        if (with_reports or forked) and proc.pid != os.getpid():
            found.append(proc)
    return found


class TestInterrupt:
    def test_sigint_at_random_moments_leaves_nothing(self, tmp_path: Path) -> None:
        """Ctrl-C at 20 random moments of a small campaign kills everything and keeps a report."""
        rng = random.Random(20261203)
        tmpdir = tmp_path / "tmp"
        tmpdir.mkdir()
        for moment in range(MOMENTS):
            reports = tmp_path / f"run{moment}"
            delay = rng.uniform(0.2, 4.0)
            harness = _start(reports, seed=moment, tmpdir=tmpdir)
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
            survivors = _survivors(reports, harness.pid)
            assert survivors == [], f"survivors after SIGINT at {delay:.2f}s: {survivors}"
            runs = list(reports.glob("*/summary.json"))
            if harness.returncode == 130 and runs:
                summary = json.loads(runs[0].read_text())
                assert summary["interrupted"] is True and summary["passed"] is False
                trials = list((runs[0].parent / "trials").glob("*"))
                assert all((t / "verdicts.json").exists() for t in trials)
                assert summary["trials"] == len(trials)
        stray = sorted(os.listdir(tmpdir))
        assert stray == [], f"temporary entries left behind: {stray}"

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
        assert _survivors(tmp_path, harness.pid) == []
        summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
        assert summary["interrupted"] is True
