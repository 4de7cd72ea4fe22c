"""One writer per journal, enforced by an OS lock that dies with its holder (real processes)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runtime import JournalLockedError
from harness.runtime.journal import JournalWriter, scan_journal
from harness.runtime.records import IncarnationRecord
from tests.conftest import subprocess_env

# Opens the journal named by argv[1]; any error escapes (its traceback names it).
OPEN_JOURNAL = """
import sys
from harness.runtime.journal import JournalWriter
JournalWriter(sys.argv[1])
print("opened", flush=True)
"""

# Opens the journal, appends a record, says so, then holds the lock until killed. It
# waits on its stdin, which the test never writes: should the test die instead of
# killing it, the pipe closes and the holder exits rather than outliving it.
HOLD_JOURNAL = """
import os, sys
from harness.runtime.journal import JournalWriter
from harness.runtime.records import IncarnationRecord
writer = JournalWriter(sys.argv[1])
writer.append(IncarnationRecord(1, os.getpid()))
print("ready", flush=True)
sys.stdin.read()
"""


def _start_holder(path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", HOLD_JOURNAL, str(path)],
        env=subprocess_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    assert ready, "the holder never said it was ready"
    line = proc.stdout.readline()
    assert line == "ready\n", (line, proc.poll())


def _kill_and_reap(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=30)


class TestJournalLock:
    def test_second_writer_in_another_process_is_refused_at_once(self, journal_path: Path) -> None:
        """While this process holds the journal, another process is refused instead of waiting."""
        with JournalWriter(journal_path) as holder:
            # The hand-shake: this process keeps the lock until the child has answered,
            # so the refusal came while the lock was held; a child that waited for the
            # lock to be free could never get it, and would run into the deadline.
            try:
                proc = subprocess.run(
                    [sys.executable, "-c", OPEN_JOURNAL, str(journal_path)],
                    env=subprocess_env(),
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
            except subprocess.TimeoutExpired:
                pytest.fail("the second writer waited for the held journal instead of a refusal")
            holder.append(IncarnationRecord(1, os.getpid()))  # still held, and unaffected
        assert proc.returncode == 1
        assert "opened" not in proc.stdout
        assert "harness.runtime.errors.JournalLockedError" in proc.stderr
        assert str(journal_path) in proc.stderr
        assert f"pid {os.getpid()}" in proc.stderr  # names the holder
        assert [s.record for s in scan_journal(journal_path).records] == [
            IncarnationRecord(1, os.getpid())
        ], "the refused writer must leave the journal as the holder wrote it"

    def test_writer_succeeds_in_another_process_when_free(self, journal_path: Path) -> None:
        """The same child opens the journal when nobody holds it (the refusal's control)."""
        proc = subprocess.run(
            [sys.executable, "-c", OPEN_JOURNAL, str(journal_path)],
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "opened\n"

    def test_lock_is_free_after_holder_is_sigkilled(self, journal_path: Path) -> None:
        """A SIGKILLed holder never blocks its successor: the kernel frees its lock."""
        proc = _start_holder(journal_path)
        try:
            _wait_ready(proc)
            with pytest.raises(JournalLockedError, match=f"pid {proc.pid}"):
                JournalWriter(journal_path)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            assert proc.returncode == -signal.SIGKILL
        finally:
            _kill_and_reap(proc)
        with JournalWriter(journal_path) as writer:
            assert [s.record for s in writer.scan.records] == [IncarnationRecord(1, proc.pid)]
            writer.append(IncarnationRecord(2, os.getpid()))
        assert len(scan_journal(journal_path).records) == 2

    def test_same_process_opening_twice_is_refused(self, journal_path: Path) -> None:
        """A second writer in the same process is refused too (flock is per open file)."""
        with JournalWriter(journal_path) as first:
            with pytest.raises(JournalLockedError, match=str(journal_path)):
                JournalWriter(journal_path)
            first.append(IncarnationRecord(1, os.getpid()))  # the holder is unaffected
        with JournalWriter(journal_path) as again:  # and closing frees it
            assert len(again.scan.records) == 1
