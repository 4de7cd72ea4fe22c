"""Interrupting the harness: Ctrl-C or SIGTERM at any moment leaves nothing behind."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import psutil
import pytest

from harness.chaos.forkserver import FORK_SERVER_MODULE
from harness.chaos.workdir import SCRATCH_PREFIX, ram_folder, sweep_orphans
from harness.report.files import INTERRUPTED_CASE

ROOT = Path(__file__).parent.parent.parent
MOMENTS = 6
"""Ctrl-C moments in ``make test``; ``make test-long`` tries ``LONG_MOMENTS`` more."""
LONG_MOMENTS = 24


def _start(
    reports: Path, seed: int, tmpdir: Path | None = None, stdout: int = subprocess.DEVNULL
) -> subprocess.Popen[bytes]:
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
        "--workdir",
        "ram",  # so that a scratch folder left in RAM would be seen
        "--keep",
        "all",  # every checked trial's folder lands in the run folder, where it is seen
    ]
    # Its temporary files go to a folder of the test's own, where leftovers are its alone.
    env = {**os.environ, **({"TMPDIR": str(tmpdir)} if tmpdir is not None else {})}
    # A session of its own, so that a signal to its group is what Ctrl-C in a terminal does.
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=stdout,
        stderr=subprocess.PIPE,
    )


def _survivors(reports: Path, harness: int) -> list[psutil.Process]:
    """Processes naming the run's folder or its scratch folder (an exec'd agent names its
    trial folder), and fork servers (with their agents) of its workers."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        scratch = f"{SCRATCH_PREFIX}{harness}-"
        with_reports = any(str(reports) in arg or scratch in arg for arg in cmdline)
        # A fork server's command line ends with its owner (a worker) and the owner's parent.
        forked = FORK_SERVER_MODULE in cmdline and str(harness) in cmdline[-2:]
        if (with_reports or forked) and proc.pid != os.getpid():
            found.append(proc)
    return found


def _scratches(harness: int) -> list[str]:
    """The scratch folders the harness of that pid left in the RAM folder trials run in."""
    ram = ram_folder()
    return [] if ram is None else [p.name for p in ram.glob(f"{SCRATCH_PREFIX}{harness}-*")]


def _checked_trials(reports: Path) -> set[str]:
    """The run's trials whose folder holds their verdicts: each has been run and checked."""
    return {path.parent.name for path in reports.glob("*/trials/*/verdicts.json")}


def _await_a_checked_trial(reports: Path, harness: subprocess.Popen[bytes]) -> None:
    """Return once a trial of the run has been checked: the campaign is under way."""
    deadline = time.monotonic() + 120
    while not _checked_trials(reports):
        assert harness.poll() is None, "the harness ended before any trial was checked"
        assert time.monotonic() < deadline, "no trial of the run was checked within 120 s"
        time.sleep(0.01)  # the poll's pace only: the wait ends on the file appearing


def _assert_reports_its_trials(run: Path, summary: dict[str, object]) -> None:
    """The report lists exactly the trials the run kept, and every one was checked; an
    interrupted run says so in junit.xml (an error case of its own) and in index.html."""
    trials = list((run / "trials").glob("*"))
    assert all((t / "verdicts.json").exists() for t in trials)
    assert summary["trials"] == len(trials)
    listed = {
        case.get("name")
        for suite in ET.parse(run / "junit.xml").iter("testsuite")
        if suite.get("name") == "chaos campaign"
        for case in suite.iter("testcase")
    }
    interrupted = summary["interrupted"] is True
    assert (INTERRUPTED_CASE in listed) is interrupted, "junit.xml must say it was interrupted"
    listed.discard(INTERRUPTED_CASE)
    assert listed == {t.name for t in trials}, "junit.xml must list the trials kept"
    badge = '<span class="badge interrupted">INTERRUPTED</span>'
    assert (badge in (run / "index.html").read_text("utf-8")) is interrupted
    lines = (run / "trials.jsonl").read_text("utf-8").splitlines()
    assert {json.loads(line)["trial"] for line in lines} == listed


def _sigint_at_random_moments(tmp_path: Path, moments: int, rng: random.Random) -> None:
    """Ctrl-C at ``moments`` random moments kills everything; once a trial is checked, a
    report stays.

    The moments start at 0.2 s, after Python's own start-up: a signal while the
    interpreter imports ``site`` comes before any line of the harness runs, and
    Python answers it itself ("Fatal Python error: init_import_site", exit 1).
    From the first line of ``python -m harness`` on, the signals wait until
    the handlers are in, so the early moments (cold imports) are covered.
    """
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    for moment in range(moments):
        reports = tmp_path / f"run{moment}"
        delay = rng.uniform(0.2, 4.0)
        harness = _start(reports, seed=moment, tmpdir=tmpdir)
        try:
            time.sleep(delay)  # the random moment itself: what is tested, not a wait
            checked = _checked_trials(reports)  # seen before the signal was sent
            os.killpg(harness.pid, signal.SIGINT)
            _, stderr = harness.communicate(timeout=60)
        finally:
            if harness.poll() is None:
                os.killpg(harness.pid, signal.SIGKILL)
                harness.wait()
        assert harness.returncode in (130, 0), (delay, stderr.decode()[-2000:])
        # No grace period: the harness SIGKILLs and waits for every process of its
        # run before it exits (and a zombie, which has no command line, is not found).
        survivors = _survivors(reports, harness.pid)
        assert survivors == [], f"survivors after SIGINT at {delay:.2f}s: {survivors}"
        assert _scratches(harness.pid) == [], f"left in RAM after SIGINT at {delay:.2f}s"
        runs = list(reports.glob("*/summary.json"))
        if checked or harness.returncode == 0:
            # A trial was checked before the signal: the campaign was under way, so an
            # interrupt must still leave a report (a finished run leaves one anyway).
            assert len(runs) == 1, (
                f"no report after SIGINT at {delay:.2f}s, with {len(checked)} trials "
                f"checked before it: {stderr.decode()[-2000:]}"
            )
        if harness.returncode == 130 and runs:
            summary = json.loads(runs[0].read_text())
            assert summary["interrupted"] is True and summary["passed"] is False
            _assert_reports_its_trials(runs[0].parent, summary)
        elif runs:
            summary = json.loads(runs[0].read_text())
            assert summary["interrupted"] is False, f"finished before SIGINT at {delay:.2f}s"
            _assert_reports_its_trials(runs[0].parent, summary)
    stray = sorted(os.listdir(tmpdir))
    assert stray == [], f"temporary entries left behind: {stray}"


class TestInterrupt:
    @pytest.mark.long
    def test_sigint_at_random_moments_leaves_nothing(self, tmp_path: Path) -> None:
        """Ctrl-C at a few random moments kills everything; a checked trial leaves a report."""
        _sigint_at_random_moments(tmp_path, MOMENTS, random.Random(20261203))

    @pytest.mark.long
    def test_sigint_at_many_more_moments_leaves_nothing(self, tmp_path: Path) -> None:
        """The same at other moments, drawn from another seed."""
        _sigint_at_random_moments(tmp_path, LONG_MOMENTS, random.Random(20261205))

    def test_ctrl_c_marks_every_report_interrupted(self, tmp_path: Path) -> None:
        """Ctrl-C in mid-campaign: exit 130, and summary.json, junit.xml (an error case that
        says INTERRUPTED), index.html (its badge and headline) and the console say so."""
        harness = _start(tmp_path, seed=98, stdout=subprocess.PIPE)
        try:
            _await_a_checked_trial(tmp_path, harness)  # Ctrl-C in mid-campaign
            os.killpg(harness.pid, signal.SIGINT)
            stdout, stderr = harness.communicate(timeout=60)
        finally:
            if harness.poll() is None:
                os.killpg(harness.pid, signal.SIGKILL)
                harness.wait()
        assert harness.returncode == 130, stderr.decode()[-2000:]
        run = next(tmp_path.glob("*/summary.json")).parent
        summary = json.loads((run / "summary.json").read_text())
        assert summary["interrupted"] is True and summary["passed"] is False
        _assert_reports_its_trials(run, summary)
        suite = next(s for s in ET.parse(run / "junit.xml").iter("testsuite"))
        assert int(suite.get("errors", "0")) >= 1
        (error,) = [
            c.find("error") for c in suite.iter("testcase") if c.get("name") == INTERRUPTED_CASE
        ]
        assert error is not None and error.get("message", "").startswith("INTERRUPTED after")
        index = (run / "index.html").read_text("utf-8")
        assert '<h1>chaos run <span class="badge interrupted">INTERRUPTED</span>' in index
        assert "<dt>interrupted</dt>" in index
        assert f"INTERRUPTED: kept {summary['trials']} completed trials" in stdout.decode()

    def test_sigterm_exits_143_and_marks_the_run(self, tmp_path: Path) -> None:
        """SIGTERM to the harness alone in mid-campaign stops everything, exits 143, and reports."""
        harness = _start(tmp_path, seed=99)
        try:
            _await_a_checked_trial(tmp_path, harness)  # SIGTERM in mid-campaign
            harness.send_signal(signal.SIGTERM)
            harness.communicate(timeout=60)
        finally:
            if harness.poll() is None:
                os.killpg(harness.pid, signal.SIGKILL)
                harness.wait()
        assert harness.returncode == 143
        assert _survivors(tmp_path, harness.pid) == []  # no grace period, as above
        assert _scratches(harness.pid) == [], "a scratch folder was left in RAM"
        run = next(tmp_path.glob("*/summary.json"))
        summary = json.loads(run.read_text())
        assert summary["interrupted"] is True
        _assert_reports_its_trials(run.parent, summary)

    def test_sigkill_of_the_harness_alone_ends_its_workers_and_agents(self, tmp_path: Path) -> None:
        """SIGKILL to the harness alone (no group, no handler runs): the kernel tells each
        pool worker its parent died, and each ends with its agents."""
        harness = _start(tmp_path, seed=98)
        try:
            _await_a_checked_trial(tmp_path, harness)
            workers = psutil.Process(harness.pid).children()
            assert workers, "the campaign runs on a pool of workers"
            harness.send_signal(signal.SIGKILL)
            harness.wait(timeout=60)
            deadline = time.monotonic() + 60  # a guard against a hang, not a measure
            while _survivors(tmp_path, harness.pid) or any(w.is_running() for w in workers):
                assert time.monotonic() < deadline, "a worker or agent outlived the harness"
                time.sleep(0.05)
            # Its scratch folder is left (nothing ran to remove it): the next campaign's
            # sweep removes it, its owner being dead.
            ram = ram_folder()
            if ram is not None:
                sweep_orphans(ram)
            assert _scratches(harness.pid) == []
        finally:
            with contextlib.suppress(ProcessLookupError):  # the test's own guard: the group
                os.killpg(harness.pid, signal.SIGKILL)
            if harness.poll() is None:
                harness.wait()
