"""Disk full: an append that cannot be made durable stops the call before its tool runs.

The contract under test (``JournalWriteError``): the failed record is not in
the journal, a partial frame is cut off, every earlier record is intact, and
an intent that could not be journaled means the tool did not run. After space
is freed, a new runtime recovers from the intact records as from any crash.

The failpoint ``journal.append@N=enospc`` stands for a full disk anywhere and
always runs. The other tests fill a real disk: as root they mount a tmpfs of a
few pages and fill it with a filler file, so that the journal's next page
cannot be allocated and the write that needs it lands short (ENOSPC). A record
larger than a page can never fit the space left, which makes the failing
append deterministic. Where mounting is not possible, those tests are skipped
with the reason. Every mount is lazily unmounted in ``finally``.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from harness.chaos.scenario import compile_plan, load_scenario, write_plan
from harness.exits import AGENT_WRITE_FAILED
from harness.failpoints import arm, disarm, parse_failpoints
from harness.runtime import CallContext, Decision, JournalWriteError, OpState, Runtime
from harness.runtime.journal import FILE_HEADER, encode_frame, scan_journal
from harness.runtime.records import (
    DecisionRecord,
    FinishRecord,
    IntentRecord,
    RecoveredRecord,
    TailDroppedRecord,
)
from harness.world.store import read_ledger
from tests.conftest import FakeTool, journal_records, open_runtime, subprocess_env

PAGE = os.sysconf("SC_PAGE_SIZE")
MINI = Path(__file__).parent.parent / "data" / "scenarios" / "mini.toml"
MINI_SEED = 3
SMALL_CALLS = 3


# -- a tiny real filesystem ---------------------------------------------------------------------


@contextmanager
def tiny_tmpfs(where: Path, *, pages: int) -> Iterator[Path]:
    """A tmpfs of ``pages`` pages mounted at ``where``; skips the test when mounting fails."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs to fill a real disk needs root")
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("mount/umount are not installed")
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={pages * PAGE // 1024}k", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)
        where.rmdir()


def free_bytes(mount: Path) -> int:
    stats = os.statvfs(mount)
    return stats.f_bavail * stats.f_frsize


def fill_leaving(mount: Path, free_pages: int) -> Path:
    """Fill the filesystem with a filler file until ENOSPC, then give ``free_pages`` back."""
    filler = mount / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        block = b"\xff" * PAGE
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
        size = os.fstat(fd).st_size
        assert size >= free_pages * PAGE, "the tmpfs is too small to leave that much"
        os.ftruncate(fd, size - free_pages * PAGE)
    finally:
        os.close(fd)
    assert free_bytes(mount) == free_pages * PAGE
    return filler


def small_args(i: int) -> dict[str, Any]:
    return {"element": f"button-{i}"}


def big_args() -> dict[str, Any]:
    """Arguments whose intent record is larger than two pages: it cannot fit what is left."""
    return {"element": "button-big", "note": "n" * (2 * PAGE)}


def assert_clean_journal(path: Path) -> int:
    """The journal holds only whole records (no partial frame); returns its length."""
    scan = scan_journal(path)
    assert scan.torn is None
    assert scan.valid_end == path.stat().st_size
    return scan.valid_end


# -- failpoint-injected ENOSPC --------------------------------------------------------------------


class TestInjectedEnospc:
    def test_failed_intent_runs_nothing_and_the_op_runs_once_after_restart(
        self, journal_path: Path, fake_tool: FakeTool
    ) -> None:
        """ENOSPC on an intent raises JournalWriteError before the tool; a restart runs it once."""
        # Appends: 1 the incarnation with op-1's intent, 2 op-1's finish, 3 op-2's intent.
        arm(parse_failpoints("journal.append@3=enospc", source="test"))
        try:
            with open_runtime(journal_path) as rt:
                rt.call("op-1", "ui_tap", small_args(1), fake_tool)
                before = journal_path.read_bytes()
                with pytest.raises(JournalWriteError) as info:
                    rt.call("op-2", "ui_tap", small_args(2), fake_tool)
                assert isinstance(info.value.__cause__, OSError)
                assert info.value.__cause__.errno == errno.ENOSPC
                assert str(journal_path) in str(info.value)
                assert f"byte {len(before)}" in str(info.value)
        finally:
            disarm()
        assert fake_tool.count("op-2") == 0
        assert journal_path.read_bytes() == before
        assert_clean_journal(journal_path)

        not_started = {"op-1": "ui_tap", "op-2": "ui_tap"}
        with open_runtime(journal_path) as rt:
            assert "op-2" not in rt.ops
            plan = {d.op_id: (d.state, d.decision) for d in rt.plan(not_started)}
            assert plan == {
                "op-1": (OpState.SUCCEEDED, Decision.SKIP),
                "op-2": (OpState.NOT_STARTED, Decision.SKIP),
            }
            report = rt.recover(fake_tool, not_started=not_started)
            assert report.retried == () and report.hints == ()
            assert not rt.call("op-1", "ui_tap", small_args(1), fake_tool).executed
            outcome = rt.call("op-2", "ui_tap", small_args(2), fake_tool)
            assert outcome.ok and outcome.executed
        assert fake_tool.counts() == {"op-1": 1, "op-2": 1}
        intents = [r.op_id for r in journal_records(journal_path) if isinstance(r, IntentRecord)]
        assert intents == ["op-1", "op-2"]

    @pytest.mark.parametrize(
        ("tool", "decision", "runs"),
        [("ui_tap", Decision.VERIFY, 1), ("write_file", Decision.RETRY, 2)],
    )
    def test_failed_finish_leaves_the_op_running_for_recovery(
        self, journal_path: Path, fake_tool: FakeTool, tool: str, decision: Decision, runs: int
    ) -> None:
        """ENOSPC on a finish leaves the op RUNNING; recovery decides by its class snapshot."""
        # Appends: 1 the incarnation with the intent, 2 the finish.
        arm(parse_failpoints("journal.append@2=enospc", source="test"))
        try:
            with open_runtime(journal_path) as rt, pytest.raises(JournalWriteError):
                rt.call("op-1", tool, small_args(1), fake_tool)
        finally:
            disarm()
        assert fake_tool.count("op-1") == 1
        assert_clean_journal(journal_path)
        with open_runtime(journal_path) as rt:
            assert rt.ops["op-1"].state is OpState.RUNNING
            report = rt.recover(fake_tool, not_started={"op-1": tool})
            assert [d.decision for d in report.decisions] == [decision]
            assert [h.op_id for h in report.hints] == (
                ["op-1"] if decision is Decision.VERIFY else []
            )
        assert fake_tool.count("op-1") == runs


# -- a real full disk, in process -----------------------------------------------------------------


class TestRealDiskFull:
    def test_intent_that_does_not_fit_is_cut_and_nothing_runs(
        self, tmp_path: Path, fake_tool: FakeTool
    ) -> None:
        """A partly written intent on a full disk is cut off; its tool runs only after a restart."""
        with tiny_tmpfs(tmp_path / "disk", pages=16) as disk:
            journal = disk / "agent.journal"
            rt = open_runtime(journal)
            try:
                for i in range(SMALL_CALLS):
                    assert rt.call(f"op-{i}", "ui_tap", small_args(i), fake_tool).ok
                filler = fill_leaving(disk, free_pages=1)
                before = journal.read_bytes()
                room = (-len(before)) % PAGE + PAGE  # the last page's rest and one free page
                with pytest.raises(JournalWriteError) as info:
                    rt.call("op-big", "ui_tap", big_args(), fake_tool)
            finally:
                rt.close()
            cause = info.value.__cause__
            assert isinstance(cause, OSError) and cause.errno == errno.ENOSPC
            # The frame went in partly, up to the full disk; the failing writer never
            # truncates: the next open cuts it as a torn tail.
            assert f"short write ({room} of" in str(info.value)
            assert fake_tool.count("op-big") == 0
            assert journal.read_bytes()[: len(before)] == before
            left = scan_journal(journal)
            assert left.valid_end == len(before) and left.torn is not None

            filler.unlink()
            not_started = {**{f"op-{i}": "ui_tap" for i in range(SMALL_CALLS)}, "op-big": "ui_tap"}
            with open_runtime(journal) as rt:
                plan = rt.plan(not_started)
                assert {d.op_id: (d.state, d.decision) for d in plan} == {
                    **{f"op-{i}": (OpState.SUCCEEDED, Decision.SKIP) for i in range(SMALL_CALLS)},
                    "op-big": (OpState.NOT_STARTED, Decision.SKIP),
                }
                rt.recover(fake_tool, not_started=not_started)
                cut = [r for r in journal_records(journal) if isinstance(r, TailDroppedRecord)]
                assert [(r.offset, r.incarnation) for r in cut] == [(len(before), 2)]
                for i in range(SMALL_CALLS):
                    assert not rt.call(f"op-{i}", "ui_tap", small_args(i), fake_tool).executed
                outcome = rt.call("op-big", "ui_tap", big_args(), fake_tool)
                assert outcome.ok and outcome.executed
            assert fake_tool.count("op-big") == 1
            assert all(fake_tool.count(f"op-{i}") == 1 for i in range(SMALL_CALLS))
            assert_clean_journal(journal)

    @pytest.mark.parametrize(
        ("tool", "decision", "runs"),
        [("ui_tap", Decision.VERIFY, 1), ("write_file", Decision.RETRY, 2)],
    )
    def test_disk_filling_during_the_tool_leaves_the_op_running(
        self, tmp_path: Path, tool: str, decision: Decision, runs: int
    ) -> None:
        """A disk that fills while the tool runs fails its finish; recovery decides by snapshot."""
        fake_tool = FakeTool()
        with tiny_tmpfs(tmp_path / "disk", pages=16) as disk:
            journal = disk / "agent.journal"
            fills: list[Path] = []

            def fills_the_disk(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
                fake_tool(name, args, ctx)
                if not fills:  # the first run: the disk fills up under it
                    fills.append(fill_leaving(disk, free_pages=0))
                return {"blob": "r" * (2 * PAGE)}  # a finish larger than any space left

            rt = open_runtime(journal)
            try:
                with pytest.raises(JournalWriteError):
                    rt.call("op-1", tool, small_args(1), fills_the_disk)
            finally:
                rt.close()
            assert fake_tool.count("op-1") == 1
            records = journal_records(journal)
            assert isinstance(records[-1], IntentRecord) and records[-1].op_id == "op-1"
            assert not any(isinstance(r, FinishRecord) for r in records)
            # Whatever of the finish went in stays, as a torn tail, until the next open.

            fills[0].unlink()
            with open_runtime(journal) as rt:
                assert rt.ops["op-1"].state is OpState.RUNNING
                report = rt.recover(fills_the_disk, not_started={"op-1": tool})
                assert [d.decision for d in report.decisions] == [decision]
            assert fake_tool.count("op-1") == runs
            assert_clean_journal(journal)

    def test_full_disk_at_start_refuses_the_runtime(
        self, tmp_path: Path, fake_tool: FakeTool
    ) -> None:
        """A disk too full to create the journal refuses Runtime.open; nothing is left behind."""
        with tiny_tmpfs(tmp_path / "disk", pages=4) as disk:
            journal = disk / "agent.journal"
            filler = fill_leaving(disk, free_pages=0)
            with pytest.raises(JournalWriteError, match="creating the journal failed"):
                Runtime.open(journal)
            assert sorted(p.name for p in disk.iterdir()) == [filler.name]
            filler.unlink()
            with open_runtime(journal) as rt:
                assert rt.incarnation == 1
                assert rt.call("op-1", "ui_tap", small_args(1), fake_tool).executed
            assert fake_tool.count("op-1") == 1


# -- a real full disk under the real agent process ---------------------------------------------


def run_agent(trial: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-m", "harness.agent", str(trial)],
        env=subprocess_env(**env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def padded_journal(length: int) -> bytes:
    """A journal of exactly ``length`` bytes: its header and one harmless record (a tail note)."""
    length -= len(FILE_HEADER)
    frame = encode_frame(TailDroppedRecord(0, 0, "", 0))
    assert length >= len(frame)
    return FILE_HEADER + encode_frame(TailDroppedRecord(0, 0, "p" * (length - len(frame)), 0))


class TestAgentOnAFullDisk:
    def test_agent_stops_with_status_3_and_nothing_runs_unjournaled(self, tmp_path: Path) -> None:
        """An agent whose first intent hits a full disk exits 3 naming the journal; nothing ran."""
        plan = compile_plan(load_scenario(MINI), seed=MINI_SEED, source=str(MINI))
        first_op = plan.steps[0].op_id

        # A dry run on an ordinary disk, stopped right after the first intent, shows
        # where that intent lands behind a padding record.
        dry = tmp_path / "dry"
        dry.mkdir()
        write_plan(plan, dry / "plan.json")
        pad = 2 * PAGE
        (dry / "journal").write_bytes(padded_journal(pad))
        stopped = run_agent(dry, HARNESS_FAILPOINTS="op.after_intent@1=exit(9)")
        assert stopped.returncode == 9, stopped.stderr
        (intent,) = [
            s
            for s in scan_journal(dry / "journal").records
            if isinstance(s.record, IntentRecord) and s.record.op_id == first_op
        ]

        # Pad so that a page boundary falls in the middle of that intent (the pid, the
        # only thing that differs between two runs, moves it by a byte or two).
        boundary = pad + PAGE
        pad += boundary - (intent.offset + intent.end) // 2
        trial = tmp_path / "trial"
        trial.mkdir()
        write_plan(plan, trial / "plan.json")
        # Only the journal is on the full disk (a symlink to it): the world
        # database stays on an ordinary one, so that SQLite is not what fails.
        with tiny_tmpfs(tmp_path / "disk", pages=16) as disk:
            (disk / "journal").write_bytes(padded_journal(pad))
            (trial / "journal").symlink_to(disk / "journal")
            filler = fill_leaving(disk, free_pages=0)
            assert (disk / "journal").stat().st_size < boundary
            full = run_agent(trial)

            assert full.returncode == AGENT_WRITE_FAILED, full.stderr
            assert any(
                str(trial / "journal") in line and "failed" in line
                for line in full.stderr.splitlines()
            ), full.stderr
            assert "Traceback" not in full.stderr
            assert read_ledger(trial / "world.db") == []
            left = scan_journal(trial / "journal")  # the part of the intent that went in
            assert left.torn is not None and left.valid_end < boundary
            records = journal_records(trial / "journal")
            assert isinstance(records[-1], RecoveredRecord)
            assert not any(isinstance(r, IntentRecord) for r in records)

            filler.unlink()
            done = run_agent(trial)
            assert done.returncode == 0, done.stderr
            ledger = read_ledger(trial / "world.db")
            ops = [entry.op_id for entry in ledger]
            assert ops.count(first_op) == 1
            assert len(ops) == len(set(ops)), "no op ran twice"
            decided = [
                r for r in journal_records(trial / "journal") if isinstance(r, DecisionRecord)
            ]
            # The first life journaled a SKIP for every step, none started; the second
            # found them all still not started, so it had nothing new to journal.
            assert {r.op_id for r in decided} == {s.op_id for s in plan.steps}
            assert {r.incarnation for r in decided} == {1}
            assert all(
                (r.state, r.decision) == (OpState.NOT_STARTED, Decision.SKIP) for r in decided
            )
            assert_clean_journal(trial / "journal")

    def test_agent_on_a_disk_full_at_start_exits_3_and_recovers(self, tmp_path: Path) -> None:
        """An agent that cannot journal its first records exits 3, no tool run; freed, it runs."""
        plan = compile_plan(load_scenario(MINI), seed=MINI_SEED, source=str(MINI))
        trial = tmp_path / "trial"
        trial.mkdir()
        write_plan(plan, trial / "plan.json")
        with tiny_tmpfs(tmp_path / "disk", pages=16) as disk:
            (disk / "journal").write_bytes(b"")
            (trial / "journal").symlink_to(disk / "journal")
            filler = fill_leaving(disk, free_pages=0)
            full = run_agent(trial)
            assert full.returncode == AGENT_WRITE_FAILED, full.stderr
            assert any(
                str(trial / "journal") in line and "failed" in line
                for line in full.stderr.splitlines()
            ), full.stderr
            assert (disk / "journal").stat().st_size == 0
            assert not (trial / "world.db").exists() or read_ledger(trial / "world.db") == []

            filler.unlink()
            done = run_agent(trial)
            assert done.returncode == 0, done.stderr
            ops = [entry.op_id for entry in read_ledger(trial / "world.db")]
            assert plan.steps[0].op_id in ops
            assert len(ops) == len(set(ops)), "no op ran twice"
            assert_clean_journal(trial / "journal")
