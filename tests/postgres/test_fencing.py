"""A worker paused (SIGSTOP) past its lease and woken (SIGCONT) after another worker took
over its task runs no tool, and its next call raises ``JournalFencedError``.

Real processes and real signals: the first worker is stopped between two calls, or
inside a call after its intent committed and before its tool; the lease ends while it
is stopped (the server's clock says so); a second worker claims the task, recovers it
and runs it on; then the first is woken. What ran is read from the ledger the tool
appends to, never from the journal.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.postgres.fencing_worker import FENCED

ROOT = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 60.0


def _worker(url: str, ledger: Path, role: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.postgres.fencing_worker", url, str(ledger), role],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@contextlib.contextmanager
def _reaped(*processes: subprocess.Popen[str]) -> Iterator[None]:
    """No worker outlives the test: stopped ones are woken and killed."""
    try:
        yield
    finally:
        for process in processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
                    os.kill(process.pid, signal.SIGCONT)
                process.wait(10)


def _line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line:  # it ended: what it said on stderr
        said = process.stderr.read() if process.stderr else ""
        raise AssertionError(f"worker {process.pid} said nothing more: {said}")
    return line


def _until_lease_ended(database: str) -> None:
    """Wait until the server's clock says the task's lease has ended (never a fixed sleep)."""
    deadline = time.monotonic() + WAIT_SECONDS
    with psycopg.connect(database, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT lease_until < now() FROM harness_journals WHERE name = 'task'"
            ).fetchone()
            if row is not None and row[0]:
                return
            time.sleep(0.05)
    raise AssertionError("the stopped worker's lease never ended")


def _ledger(ledger: Path) -> list[tuple[int, str]]:
    lines = ledger.read_text().split() if ledger.exists() else []
    return [(int(pid), op) for pid, op in zip(lines[::2], lines[1::2], strict=True)]


@pytest.mark.parametrize("where", ["between", "inside"])
def test_a_paused_worker_woken_after_a_takeover_runs_no_tool(
    database: str, tmp_path: Path, where: str
) -> None:
    """Stopped past its lease, the first worker runs nothing once woken: its next step
    (the next call's intent, or the tool of the call it was inside) is fenced."""
    ledger = tmp_path / "ledger"
    task = f"{database}&journal=task&lease=1&renew=0.25"
    first = _worker(f"{task}&holder=first", ledger, f"first-{where}")
    with _reaped(first):
        assert _line(first) == "hints"
        assert _line(first) == "s1 ok"
        waits = "waiting between" if where == "between" else "waiting op.after_intent"
        assert _line(first) == waits
        os.kill(first.pid, signal.SIGSTOP)
        assert first.stdin is not None
        first.stdin.write("go\n")  # read only once it runs again
        first.stdin.flush()
        _until_lease_ended(database)
        second = _worker(f"{task}&holder=second", ledger, "next")
        with _reaped(second):
            out, err = second.communicate(timeout=WAIT_SECONDS)
            assert second.returncode == 0, err
        os.kill(first.pid, signal.SIGCONT)
        out_first, err_first = first.communicate(timeout=WAIT_SECONDS)
    assert first.returncode == FENCED, err_first
    fenced = out_first.strip().splitlines()[-1]
    assert fenced.startswith("fenced: ") and "journal=task" in fenced
    assert "claim (token 1)" in fenced and "second (token 2)" in fenced
    ran = _ledger(ledger)
    by_first = [op for pid, op in ran if pid == first.pid]
    by_second = [op for pid, op in ran if pid == second.pid]
    assert by_first == ["s1"]  # nothing after the pause
    said = out.split("\n")
    if where == "between":
        assert by_second == ["s2", "s3"]  # s1 answered from the journal, never run again
        assert said[:4] == ["hints ", "s1 ok", "s2 ok", "s3 ok"]
    else:
        # s2's intent committed before the pause: the successor hands it to the model
        # (an unsafe call left running), and the stopped worker never runs its tool.
        assert by_second == ["s3"]
        assert said[:4] == ["hints s2", "s1 ok", "s2 info", "s3 ok"]
