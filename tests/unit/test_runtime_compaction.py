"""Compaction's file protocol, its policy at open, retention, and retiring a task's journal."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.check.journal import read_journal_bytes
from harness.check.stitch import checkpoint_of
from harness.runtime import (
    AsyncRuntime,
    Compaction,
    Decision,
    JournalLockedError,
    JournalRetiredError,
    JournalVersionError,
    OpState,
    Resolution,
    Retention,
    Runtime,
    ToolError,
    ToolTable,
)
from harness.runtime import records as records_module
from harness.runtime.compaction import Compacting
from harness.runtime.errors import JournalCorruptError
from harness.runtime.hooks import CRASH_POINTS
from harness.runtime.journal import (
    HEADER_SIZE,
    JournalScan,
    JournalWriter,
    encode_frame,
    scan_journal,
)
from harness.runtime.records import (
    CheckpointRecord,
    DecisionRecord,
    IncarnationRecord,
    Record,
    SettledIndexRecord,
    SettledRecord,
)
from harness.runtime.recovery import fold_scan
from tests.conftest import FakeTool, journal_records

SKIP = Decision.SKIP

TABLE = ToolTable.shipped()
NEVER = Compaction.never()
COMPACTION_POINTS = [p for p in CRASH_POINTS if p.startswith("compact.")]


class Crash(Exception):
    pass


def _history(path: Path) -> None:
    """Three lives: settled ops of each kind, an op left RUNNING, one awaiting verification,
    one resolved, one redone."""
    tool = FakeTool({"s3": [Crash()], "s4": [Crash()], "s5": [Crash()], "s2": [ToolError("no")]})
    with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
        rt.recover(tool)
        rt.call("s1", "write_file", {"path": "a"}, tool)
        rt.call("s2", "send_email", {"to": "b"}, tool)
        for op in ("s3", "s4", "s5"):
            with pytest.raises(Crash):
                rt.call(op, "send_email", {"to": op}, tool)
    with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
        rt.recover(tool)
        rt.resolve("s4", Resolution.EFFECT_PRESENT, note="found it")
        rt.call("s5.redo", "send_email", {"to": "s5"}, tool, redo_of="s5")
        rt.resolve("s5", Resolution.REDONE, redo_op="s5.redo")
        rt.call("s6", "read_file", {"path": "c"}, tool)


def _answers(path: Path) -> list[object]:
    """Everything a restart answers, without running anything."""
    with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
        ids = ["s1", "s2", "s3", "s4", "s5", "s5.redo", "s6"]
        return [rt.incarnation, rt.plan(), [rt.outcome_of(i) for i in ids], rt.journal.journal_id]


def _key(path: Path, op_id: str) -> str:
    keys: list[str] = []

    def tool(name: str, args: object, ctx: object) -> None:
        keys.append(ctx.idempotency_key)  # type: ignore[attr-defined]

    with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
        rt.recover(tool)
        rt.call(op_id, "send_email", {}, tool)
    return keys[0]


COMPACT_IN_A_CHILD = """
import sys
from harness.failpoints import arm_from_environ
from harness.runtime import Compaction, Runtime, ToolTable
arm_from_environ()
rt = Runtime.open(sys.argv[1], table=ToolTable.shipped(), compaction=Compaction.never())
rt.compact()
"""


class TestCrashInsideCompaction:
    @pytest.mark.parametrize("point", COMPACTION_POINTS)
    def test_a_kill_at_each_point_leaves_the_old_journal_or_the_new(
        self, tmp_path: Path, point: str
    ) -> None:
        """SIGKILLed at each compaction point, the journal is the old file (before the
        rename) or the new one (after it), and either answers as the journal did."""
        path = tmp_path / "agent.journal"
        _history(path)
        old = path.read_bytes()
        reference = tmp_path / "reference.journal"
        reference.write_bytes(old)
        expected = _answers(reference)
        env = {**os.environ, "HARNESS_FAILPOINTS": f"{point}@1=kill"}
        env.pop("HARNESS_FAILPOINT_CHANNEL", None)
        child = subprocess.run(
            [sys.executable, "-c", COMPACT_IN_A_CHILD, str(path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert child.returncode == -signal.SIGKILL, child.stderr
        renamed = point in ("compact.before_dir_fsync", "compact.after_dir_fsync")
        kinds = {type(s.record) for s in scan_journal(path).records}
        assert (CheckpointRecord in kinds) == renamed
        if not renamed:
            assert path.read_bytes() == old
        leftovers = [p.name for p in tmp_path.iterdir() if ".compacting." in p.name]
        assert bool(leftovers) == (point in ("compact.mid_write", "compact.before_rename"))
        assert _answers(path) == expected
        assert not [p for p in tmp_path.iterdir() if ".compacting." in p.name]


class TestCompact:
    def test_settled_ops_fold_open_ones_are_carried_whole(self, tmp_path: Path) -> None:
        path = tmp_path / "agent.journal"
        _history(path)
        expected = _answers(path)
        copy = tmp_path / "copy.journal"
        copy.write_bytes(path.read_bytes())
        key = _key(copy, "k1")
        before = scan_journal(path)
        with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
            size = rt.compact()
            assert size == path.stat().st_size < before.valid_end
        after = scan_journal(path)
        assert after.journal_id == before.journal_id
        settled = {s.record.op_id for s in after.records if isinstance(s.record, SettledRecord)}
        assert settled == {"s1", "s2", "s4", "s5", "s5.redo", "s6"}

        def of_s3(scan: JournalScan) -> list[Record]:
            return [s.record for s in scan.records if getattr(s.record, "op_id", None) == "s3"]

        assert of_s3(after) == of_s3(before)
        assert _answers(path)[1:] == expected[1:]
        assert _key(path, "k1") == key  # the same identity: the same idempotency key

    def test_a_second_process_is_refused_after_the_rename(self, tmp_path: Path) -> None:
        """The new file is locked before it is named: no other writer gets in between."""
        path = tmp_path / "agent.journal"
        _history(path)
        with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
            rt.compact()
            with pytest.raises(JournalLockedError):
                JournalWriter(path)
            rt.call("s7", "read_file", {"path": "d"}, FakeTool())
        with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
            assert rt.outcome_of("s7").status == "ok"

    def test_an_older_runtime_refuses_a_compacted_journal_and_changes_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A runtime that knows no checkpoint (its decoders without the kind) refuses it as a
        newer runtime's work, never as a torn tail."""
        path = tmp_path / "agent.journal"
        _history(path)
        with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
            rt.compact()
        data = path.read_bytes()
        decoders = dict(records_module._DECODERS)
        del decoders["checkpoint"], decoders["settled"]
        monkeypatch.setattr(records_module, "_DECODERS", decoders)
        with pytest.raises(JournalVersionError, match="record kind 'checkpoint'"):
            JournalWriter(path)
        assert path.read_bytes() == data

    def test_the_async_runtime_compacts_while_calls_run(self, tmp_path: Path) -> None:
        path = tmp_path / "agent.journal"
        _history(path)

        async def run() -> list[str]:
            async with await AsyncRuntime.open(path, table=TABLE, compaction=NEVER) as rt:
                tool = FakeTool()
                calls = [rt.call(f"a{i}", "read_file", {"i": i}, tool) for i in range(4)]
                compacting = asyncio.ensure_future(rt.compact())
                results = await asyncio.gather(*calls)
                assert await compacting > 0
                return [r.status for r in results]

        assert asyncio.run(run()) == ["ok"] * 4
        with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
            assert [rt.outcome_of(f"a{i}").executed for i in range(4)] == [False] * 4
            assert [rt.outcome_of(f"a{i}").status for i in range(4)] == ["ok"] * 4


class TestPolicyAtOpen:
    def test_a_journal_past_the_size_is_compacted_at_open(self, tmp_path: Path) -> None:
        path = tmp_path / "agent.journal"
        _history(path)
        expected = _answers(path)
        with Runtime.open(path, table=TABLE, compaction=Compaction(size=1)):
            pass
        first = scan_journal(path).records[0].record
        assert isinstance(first, CheckpointRecord)
        assert _answers(path)[1:] == expected[1:]

    def test_by_ratio_and_never(self, tmp_path: Path) -> None:
        path = tmp_path / "agent.journal"
        _history(path)
        with Runtime.open(
            path, table=TABLE, compaction=Compaction(size=None, ratio=50, min_size=0)
        ):
            pass  # about 20 records folding into about 10: not due
        assert not isinstance(scan_journal(path).records[0].record, CheckpointRecord)
        with Runtime.open(path, table=TABLE, compaction=Compaction(size=None, ratio=1, min_size=0)):
            pass
        assert isinstance(scan_journal(path).records[0].record, CheckpointRecord)


class TestRetention:
    def test_a_count_forgets_the_oldest_settled_ops_and_they_run_as_new(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        path = tmp_path / "agent.journal"
        _history(path)
        keep = Compaction(size=None, ratio=None, retention=Retention(ops=2))
        with (
            caplog.at_level(logging.WARNING, "harness.runtime"),
            Runtime.open(path, table=TABLE, compaction=keep) as rt,
        ):
            kept = set(rt.ops)
            tool = FakeTool()
            again = rt.call("s1", "write_file", {"path": "a"}, tool)
        assert "past retention forgotten" in caplog.text
        # The last two settled (s5.redo, s6), s5 which s5.redo redoes, and s3, still open.
        assert kept == {"s3", "s5", "s5.redo", "s6"}
        assert again.executed and tool.count("s1") == 1

    def test_an_age_counts_from_the_first_compaction_that_folded_the_op(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "agent.journal"
        _history(path)
        with Runtime.open(path, table=TABLE, compaction=Compaction(size=1)) as rt:
            assert "s1" in rt.ops  # folded now: its age starts
        by_age = Compaction(size=None, ratio=None, retention=Retention(seconds=0))
        with Runtime.open(path, table=TABLE, compaction=by_age) as rt:
            assert set(rt.ops) == {"s3"}  # every settled op is 0 seconds old or more

    def test_the_default_keeps_everything(self, tmp_path: Path) -> None:
        path = tmp_path / "agent.journal"
        _history(path)
        with Runtime.open(path, table=TABLE, compaction=Compaction(size=1)) as rt:
            assert len(rt.ops) == 7


class TestRetire:
    def test_a_retired_journal_is_refused_wherever_it_is(self, tmp_path: Path) -> None:
        path = tmp_path / "agent.journal"
        with Runtime.open(path, table=TABLE) as rt:
            rt.call("s1", "read_file", {}, FakeTool())
            rt.retire()
        with pytest.raises(JournalRetiredError, match="retired task"):
            Runtime.open(path, table=TABLE)
        archived = tmp_path / "archive" / "task-1.journal"
        archived.parent.mkdir()
        path.rename(archived)
        with pytest.raises(JournalRetiredError, match="retired task"):
            Runtime.open(archived, table=TABLE)

    def test_retiring_refuses_an_open_op_and_may_delete(self, tmp_path: Path) -> None:
        path = tmp_path / "agent.journal"
        _history(path)
        with Runtime.open(path, table=TABLE) as rt:
            with pytest.raises(ValueError, match="ops s3 are open"):
                rt.retire()
            rt.resolve("s3", Resolution.UNVERIFIABLE)
            rt.retire(delete=True)
        assert not path.exists()


def _compacted_history(path: Path, identity: str = "id") -> None:
    _history(path)
    with Runtime.open(path, table=TABLE, identity=identity, compaction=NEVER) as rt:
        rt.compact()


class TestSettledOpsLeftInTheFile:
    """A start on a compacted journal proves its block with one CRC and decodes no settled
    op until one is asked for; every answer is the one a full read gives."""

    def test_a_start_reads_no_settled_op_and_a_lookup_reads_one(self, tmp_path: Path) -> None:
        path = tmp_path / "agent.journal"
        _compacted_history(path)
        with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
            rt.recover(FakeTool())  # a settled op's SKIP is never journaled: none is read
            assert set(rt.ops._loaded) == set()
        with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
            assert rt.journal.scan.settled is not None
            assert rt.journal.scan.settled.count == 6
            assert not any(isinstance(s.record, SettledRecord) for s in rt.journal.scan.records)
            planned = rt.plan()
            report = rt.recover(FakeTool())
            # Recovery decoded no settled op, and journaled no SKIP for one.
            assert set(rt.ops._loaded) == set()
            skips = [r for r in _records(path) if isinstance(r, DecisionRecord) and r.op_id == "s6"]
            assert skips == []
            assert report.decisions == planned and len(planned) == 5  # all but s4 and s5
            assert rt.outcome_of("s2").status == "fail"
            assert set(rt.ops._loaded) == {"s2"}
            assert "s3" in rt.ops and "nowhere" not in rt.ops
        # Every answer as the same journal read record by record gives it.
        answers = []
        for eager in (False, True):
            with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
                if eager:
                    assert isinstance(rt.journal, JournalWriter)  # a file's reader
                    rt.ops = fold_scan(rt.journal.read(path.read_bytes()))
                assert (rt.ops.settled is None) == eager
                answers.append([list(rt.ops), rt.plan(), [rt.outcome_of(i) for i in rt.ops]])
        assert answers[0] == answers[1]

    def test_a_flipped_byte_in_the_block_is_refused_as_the_full_read_refuses_it(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "agent.journal"
        _compacted_history(path)
        data = bytearray(path.read_bytes())
        settled = next(s for s in scan_journal(path).records if isinstance(s.record, SettledRecord))
        data[settled.offset + HEADER_SIZE + 20] ^= 0x01  # inside the first settled record
        path.write_bytes(bytes(data))
        with pytest.raises(JournalCorruptError) as from_scan:
            scan_journal(path)
        with pytest.raises(JournalCorruptError) as at_open:
            Runtime.open(path, table=TABLE, compaction=NEVER)
        assert at_open.value.offset == from_scan.value.offset == settled.offset
        assert at_open.value.record_number == from_scan.value.record_number

    def test_an_index_whose_crc_does_not_hold_is_read_record_by_record(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "agent.journal"
        _compacted_history(path)
        expected = _answers(path)
        data = path.read_bytes()
        index = next(
            s for s in scan_journal(path).records if isinstance(s.record, SettledIndexRecord)
        )
        record = index.record
        assert isinstance(record, SettledIndexRecord)
        wrong = encode_frame(dataclasses.replace(record, crc=record.crc ^ 1))
        path.write_bytes(data[: index.offset] + wrong + data[index.end :])
        with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
            assert rt.journal.scan.settled is None  # every record read, as before indexes
        assert _answers(path)[1:] == expected[1:]

    def test_retention_still_forgets_and_a_start_within_it_reads_nothing(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "agent.journal"
        _compacted_history(path)
        within = Compaction(size=None, ratio=None, retention=Retention(ops=6))
        with Runtime.open(path, table=TABLE, compaction=within) as rt:
            assert rt.journal.scan.settled is not None and rt.ops._loaded == {}
        past = Compaction(size=None, ratio=None, retention=Retention(ops=2))
        with Runtime.open(path, table=TABLE, compaction=past) as rt:
            assert set(rt.ops) == {"s3", "s5", "s5.redo", "s6"}
            tool = FakeTool()
            assert rt.call("s1", "write_file", {"path": "a"}, tool).executed
        with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
            assert rt.journal.scan.settled is not None
            assert "s2" not in rt.ops and rt.outcome_of("s6").status == "ok"

    def test_identity_by_content_finds_a_settled_op_in_the_block(self, tmp_path: Path) -> None:
        path = tmp_path / "agent.journal"
        _compacted_history(path, identity="content")
        with Runtime.open(path, table=TABLE, identity="content", compaction=NEVER) as rt:
            tool = FakeTool()
            again = rt.call("new-id", "write_file", {"path": "a"}, tool)
            assert again.matched == "s1" and not again.executed and tool.count("new-id") == 0
            assert rt.call("other", "send_email", {"to": "s5"}, tool).matched == "s5"
            # s5.redo has that content too, but a redo is never matched: this one runs.
            assert rt.call("third", "send_email", {"to": "s5"}, tool).executed

    def test_the_checkers_read_the_index_and_find_the_block_end(self, tmp_path: Path) -> None:
        path = tmp_path / "agent.journal"
        _compacted_history(path)
        with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
            rt.call("s7", "read_file", {"path": "d"}, FakeTool())
        data = path.read_bytes()
        reading = read_journal_bytes(data)
        assert reading.corrupt is None
        assert "settled_index" in {e.kind for e in reading.entries}
        found = checkpoint_of(data)
        assert found is not None
        last_of_block = [
            s for s in scan_journal(path).records if not isinstance(s.record, IncarnationRecord)
        ]
        block_end = max(s.end for s in last_of_block if s.offset < found[2])
        assert found[2] == block_end


def _records(path: Path) -> list[Record]:
    return [s.record for s in scan_journal(path).records]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_a_dropped_runtime_lets_go_of_its_settled_ops_file_at_once(tmp_path: Path) -> None:
    """A runtime on a compacted journal reads its settled ops from a file it keeps open; a
    closed and dropped runtime lets go of it then, not at the next garbage collection
    (a service that opens a journal per task would otherwise run out of descriptors)."""
    import gc

    path = tmp_path / "agent.journal"
    _history(path)
    with Runtime.open(path, table=TABLE, compaction=NEVER) as rt:
        rt.compact()

    def open_files() -> int:
        return len(os.listdir("/proc/self/fd"))

    gc.collect()
    gc.disable()  # only reference counting may free what a dropped runtime held
    try:
        before = open_files()
        for _ in range(3):
            runtime = Runtime.open(path, table=TABLE, compaction=NEVER)
            assert runtime.outcome_of("s1").ok  # read from the settled block
            runtime.close()
            del runtime
        assert open_files() == before
    finally:
        gc.enable()


class TestStreamedCompaction:
    """A compaction streams the file (``Compacting.stream``): what it writes is byte for byte
    what the compaction given every record at once writes."""

    @pytest.mark.parametrize(
        "retention", [Retention(), Retention(ops=2), Retention(seconds=0.0)], ids=repr
    )
    def test_the_streamed_file_equals_the_listed_one(
        self, tmp_path: Path, retention: Retention
    ) -> None:
        streamed, listed = tmp_path / "streamed.journal", tmp_path / "listed.journal"
        _history(streamed)
        with Runtime.open(streamed, table=TABLE, compaction=NEVER) as rt:
            rt.call("s7", "write_file", {"path": "d"}, FakeTool())
            rt.journal.append(
                DecisionRecord("s1", OpState.SUCCEEDED, TABLE.classify("write_file"), SKIP, 9)
            )  # a SKIP an older runtime journaled: the settled record says so
            rt.compact()  # a second compaction reads the first's block
            rt.call("s8", "write_file", {"path": "e"}, FakeTool())
        listed.write_bytes(streamed.read_bytes())
        now = 1_700_000_000.0
        for path, streams in ((streamed, True), (listed, False)):
            compacting = Compacting(retention, now)
            with JournalWriter(path) as journal:
                if streams:
                    journal.compact(compacting)
                else:
                    journal.compact(compacting.__call__)
        assert streamed.read_bytes() == listed.read_bytes()
        assert any(isinstance(r, SettledRecord) for r in journal_records(streamed))
