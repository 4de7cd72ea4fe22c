"""The write-ahead journal: framing, torn tails, corruption, ENOSPC and durability."""

from __future__ import annotations

import errno
import os
import stat
import struct
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, get_args

import pytest

from harness.runtime import (
    CallContext,
    Decision,
    IdempotencyClass,
    JournalCorruptError,
    JournalError,
    JournalWriteError,
    OpState,
    ToolClass,
)
from harness.runtime import journal as journal_module
from harness.runtime.journal import (
    FILE_HEADER,
    MAX_PAYLOAD,
    JournalScan,
    JournalWriter,
    encode_frame,
    scan_bytes,
    scan_journal,
)
from harness.runtime.records import (
    CheckpointRecord,
    DecisionRecord,
    FinishRecord,
    HintRecord,
    IncarnationRecord,
    IntentRecord,
    JournalIdRecord,
    Record,
    RecoveredRecord,
    Resolution,
    ResolvedRecord,
    RetiredRecord,
    SettledRecord,
    TailDroppedRecord,
    digest,
    record_from_json,
    record_to_json,
)
from harness.runtime.settled import ops_index, settled_index
from tests.conftest import open_runtime

ARGS = {"path": "/tmp/ü.txt", "content": "line\n", "n": [1, 2, {"deep": None}]}
RECORDS: list[Record] = [
    IncarnationRecord(3, 4242),
    IntentRecord(
        "op-1",
        "write_file",
        ToolClass(IdempotencyClass.IDEMPOTENT_WRITE),
        ARGS,
        digest(ARGS),
        2,
        3,
        redo_of="op-0",
    ),
    IntentRecord("op-2", "ask_user", ToolClass(IdempotencyClass.READ_ONLY, True), {}, "d", 1, 3),
    FinishRecord("op-1", True, {"bytes": 5, "ok": True}, digest({"bytes": 5, "ok": True}), 2, 3),
    FinishRecord(
        "op-3", False, None, digest(None), 1, 3, error="TransientToolError: busy", transient=True
    ),
    DecisionRecord(
        "op-4", OpState.RUNNING, ToolClass(IdempotencyClass.NON_IDEMPOTENT), Decision.VERIFY, 4
    ),
    HintRecord("op-4", 4, "Operation op-4 may already have run."),
    ResolvedRecord("op-4", 4, Resolution.REDONE, redo_op="op-4-redo"),
    ResolvedRecord("op-5", 4, Resolution.EFFECT_PRESENT),
    RecoveredRecord(4, 3),
    TailDroppedRecord(120, 17, "partial payload (3 of 40 bytes)", 4),
    CheckpointRecord(4, 2, 3, 1, 4096, 0xDEADBEEF),
    RetiredRecord(5, 1700000000.25),
    SettledRecord(
        "op-6",
        "write_file",
        ToolClass(IdempotencyClass.IDEMPOTENT_WRITE),
        digest(ARGS),
        OpState.SUCCEEDED,
        2,
        {"bytes": 5},
        digest({"bytes": 5}),
        None,
        "op-0",
        True,
        None,
        None,
        "",
        0,
        True,
        1700000000.5,
    ),
    SettledRecord(
        "op-7",
        "send_email",
        ToolClass(IdempotencyClass.NON_IDEMPOTENT),
        digest(ARGS),
        OpState.RUNNING,
        1,
        None,
        digest(None),
        None,
        None,
        False,
        Resolution.REDONE,
        "op-7.redo",
        "no such mail in the outbox",
        3,
        False,
        1700000000.0,
    ),
]
# A compaction's index of a block: the two settled records above and a carried one.
RECORDS.append(settled_index([(0, RECORDS[-2]), (420, RECORDS[-1]), (900, RECORDS[0])], 960, 77))
# An ops index of a file's first 2,000 bytes: one settled op of two records, one carried.
RECORDS.append(
    ops_index(
        [(7, [300, 700], 11)],
        [500],
        size=2000,
        crc=99,
        records=6,
        journal_id="0123456789abcdef0123456789abcdef",
        incarnation=2,
        oldest=None,
    )
)


JOURNAL_ID = "0123456789abcdef0123456789abcdef"
IDENTITY = FILE_HEADER + encode_frame(JournalIdRecord(JOURNAL_ID))
"""How every journal begins: the header, then its identity."""


def _frames(records: list[Record]) -> tuple[bytes, list[int]]:
    """The journal bytes for ``records`` (after the header and the identity) and the offset
    where each one starts."""
    data, starts = IDENTITY, []
    for record in records:
        starts.append(len(data))
        data += encode_frame(record)
    return data, starts


def _raw_frame(payload: bytes, *, version: int = 1) -> bytes:
    """A frame built from the documented layout, independently of ``encode_frame``."""
    body = struct.pack(">BI", version, len(payload)) + payload
    return b"HJ" + body[:5] + struct.pack(">I", zlib.crc32(body)) + payload


def _recs(scan: JournalScan) -> list[Record]:
    return [s.record for s in scan.records]


THREE = [RECORDS[0], RECORDS[1], RECORDS[3]]


class TestRoundTrip:
    def test_every_record_kind_is_covered(self) -> None:
        """The round-trip sample holds every record kind of an op's history (the identity
        record is the journal's own: TestIdentity)."""
        assert {type(r) for r in RECORDS} == set(get_args(Record)) - {JournalIdRecord}

    @pytest.mark.parametrize("record", RECORDS, ids=lambda r: f"{r.kind}")
    def test_json_round_trip(self, record: Record) -> None:
        """A record's JSON form maps back to an equal record."""
        assert record_from_json(record_to_json(record)) == record

    def test_journal_round_trip(self, journal_path: Path) -> None:
        """Records appended to a journal are scanned back equal, in order, with exact offsets."""
        with JournalWriter(journal_path) as writer:
            offsets = [writer.append(r) for r in RECORDS]
        scan = scan_journal(journal_path)
        assert _recs(scan) == RECORDS
        assert [s.offset for s in scan.records] == offsets
        assert scan.torn is None
        assert scan.valid_end == journal_path.stat().st_size

    def test_append_many_is_one_batch(self, journal_path: Path) -> None:
        """append_many writes its records in order and returns the first offset."""
        with JournalWriter(journal_path) as writer:
            writer.append(RECORDS[0])
            first = writer.append_many(RECORDS[1:])
        scan = scan_journal(journal_path)
        assert _recs(scan) == RECORDS
        assert first == scan.records[1].offset

    def test_reopened_writer_sees_earlier_records(self, journal_path: Path) -> None:
        """A writer opened on an existing journal scans it and appends after it."""
        with JournalWriter(journal_path) as writer:
            writer.append_many(RECORDS[:3])
        with JournalWriter(journal_path) as writer:
            assert [s.record for s in writer.scan.records] == RECORDS[:3]
            assert writer.size == journal_path.stat().st_size
            writer.append(RECORDS[3])
        assert _recs(scan_journal(journal_path)) == RECORDS[:4]

    def test_frame_layout_is_as_documented(self) -> None:
        """encode_frame writes magic, version, length, crc32 and the JSON payload."""
        frame = encode_frame(RECORDS[0])
        magic, version, length, crc = struct.unpack_from(">2sBII", frame)
        payload = frame[11:]
        assert (magic, version, length) == (b"HJ", 1, len(payload))
        assert crc == zlib.crc32(frame[2:7] + payload)
        assert _raw_frame(payload) == frame

    def test_missing_journal_scans_empty(self, tmp_path: Path) -> None:
        """A journal that does not exist yet scans as empty, not as an error."""
        scan = scan_journal(tmp_path / "absent")
        assert (scan.records, scan.valid_end, scan.torn) == ((), 0, None)

    def test_unreadable_journal_raises(self, tmp_path: Path) -> None:
        """A journal path that cannot be read raises JournalError naming it."""
        with pytest.raises(JournalError, match=str(tmp_path)):
            scan_journal(tmp_path)

    def test_sync_tracks_durable_size(self, journal_path: Path) -> None:
        """An unsynced append leaves synced_size behind until sync()."""
        with JournalWriter(journal_path) as writer:
            writer.append(RECORDS[0])
            assert writer.synced_size == writer.size
            writer.append(RECORDS[1], sync=False)
            assert writer.synced_size < writer.size
            writer.sync()
            assert writer.synced_size == writer.size == journal_path.stat().st_size


class TestTornTail:
    def test_cut_at_every_byte_of_last_record_is_dropped(self) -> None:
        """A cut anywhere inside the last record reports it torn and keeps the rest."""
        data, starts = _frames(THREE)
        last = starts[-1]
        for cut in range(last + 1, len(data)):
            scan = scan_bytes(data[:cut], source="j")
            assert _recs(scan) == THREE[:2], cut
            assert scan.valid_end == last
            assert scan.torn is not None
            assert (scan.torn.offset, scan.torn.length) == (last, cut - last)
            assert scan.torn.reason

    def test_cut_at_record_boundary_is_clean(self) -> None:
        """A journal cut exactly between records has no torn tail."""
        data, starts = _frames(THREE)
        for count, cut in enumerate([*starts, len(data)]):
            scan = scan_bytes(data[:cut])
            assert _recs(scan) == THREE[:count]
            assert scan.torn is None

    def test_writer_truncates_torn_tail_and_appends_cleanly(self, journal_path: Path) -> None:
        """Opening a writer on a torn journal cuts the tail; later appends scan cleanly."""
        data, starts = _frames(THREE)
        last = starts[-1]
        new = RECORDS[6]
        for cut in range(last + 1, len(data)):
            journal_path.write_bytes(data[:cut])
            with JournalWriter(journal_path) as writer:
                assert writer.scan.torn is not None
                assert writer.scan.torn.offset == last
                assert [s.record for s in writer.scan.records] == THREE[:2]
                assert journal_path.stat().st_size == last
                assert writer.size == last
                writer.append(new)
            scan = scan_journal(journal_path)
            assert _recs(scan) == [*THREE[:2], new], cut
            assert scan.torn is None

    @pytest.mark.parametrize(
        "garbage",
        [
            b"\x00",
            b"\x00" * 4096,
            b"HJ",
            b"HJ\x01\x00\x00\x00\x10",
            b"HJ\x01\x00\x00\x00\x02\xde\xad\xbe\xef{}",
            b"\xff\xfe garbage that is not a frame",
            b"HJ\x07" + b"\x00" * 40,
        ],
        ids=["zero", "zero-page", "magic", "header", "bad-crc", "text", "bad-version"],
    )
    def test_garbage_tail_is_dropped(self, journal_path: Path, garbage: bytes) -> None:
        """Garbage after the last valid record is a torn tail: dropped, never misread."""
        data, _ = _frames(THREE)
        scan = scan_bytes(data + garbage)
        assert _recs(scan) == THREE
        assert scan.torn is not None
        assert (scan.torn.offset, scan.torn.length) == (len(data), len(garbage))
        journal_path.write_bytes(data + garbage)
        with JournalWriter(journal_path) as writer:
            assert writer.scan.torn == scan.torn
        assert journal_path.read_bytes() == data

    def test_runtime_journals_dropped_tail(self, journal_path: Path) -> None:
        """A runtime opened on a torn journal records what it cut off."""
        data, starts = _frames(THREE)
        journal_path.write_bytes(data[:-3])
        with open_runtime(journal_path):
            pass
        dropped = [r for r in _recs(scan_journal(journal_path)) if isinstance(r, TailDroppedRecord)]
        assert len(dropped) == 1
        assert (dropped[0].offset, dropped[0].length) == (starts[-1], len(data) - 3 - starts[-1])


class TestCorruption:
    @pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
    def test_flipped_byte_in_first_record_is_refused(self, mask: int) -> None:
        """Any damaged byte of the first of three records is refused at its offset, record #2
        (records are numbered as they stand in the file: the identity is #1)."""
        data, starts = _frames(THREE)
        first = starts[0]
        for index in range(starts[0], starts[1]):
            damaged = bytearray(data)
            damaged[index] ^= mask
            with pytest.raises(JournalCorruptError) as info:
                scan_bytes(bytes(damaged), source="/j/agent.journal")
            err = info.value
            assert (err.path, err.offset, err.record_number) == ("/j/agent.journal", first, 2)
            assert "/j/agent.journal" in str(err)
            assert f"byte {first}" in str(err)
            assert "record #2" in str(err)

    def test_flipped_byte_in_middle_record_names_its_offset(self) -> None:
        """Damage to the second record is reported at that record's offset, as record #3."""
        data, starts = _frames(THREE)
        damaged = bytearray(data)
        damaged[starts[1] + 20] ^= 0x01
        with pytest.raises(JournalCorruptError) as info:
            scan_bytes(bytes(damaged), source="j")
        assert (info.value.offset, info.value.record_number) == (starts[1], 3)
        assert f"byte {starts[1]}" in str(info.value)

    def test_writer_refuses_corrupt_journal_and_leaves_it(self, journal_path: Path) -> None:
        """Opening a writer or a runtime on a corrupt journal is refused; the file is untouched."""
        data, _ = _frames(THREE)
        damaged = bytearray(data)
        damaged[15] ^= 0x01
        journal_path.write_bytes(bytes(damaged))
        with pytest.raises(JournalCorruptError) as info:
            JournalWriter(journal_path)
        assert info.value.path == str(journal_path)
        with pytest.raises(JournalCorruptError):
            open_runtime(journal_path)
        assert journal_path.read_bytes() == bytes(damaged)
        with pytest.raises(JournalCorruptError):  # the refused opens released the lock
            JournalWriter(journal_path)

    @pytest.mark.parametrize(
        "payload",
        [
            b"not json",
            b"[1, 2]",
            b'"intent"',
            b'{"no_kind": 1}',
            b'{"kind": "intent", "op_id": "x"}',
            b'{"kind": "incarnation", "incarnation": "1", "pid": 2}',
            b'{"kind": "incarnation", "incarnation": true, "pid": 2}',
            b'{"kind": "decision", "op_id": "x", "state": "maybe", "incarnation": 1,'
            b' "snapshot": {"class": "read_only", "ask_user": false}, "decision": "skip"}',
            b'{"kind": "intent", "op_id": "x", "tool": "t", "args": [], "args_digest": "d",'
            b' "attempt": 1, "incarnation": 1,'
            b' "snapshot": {"class": "read_only", "ask_user": false}}',
            b'{"kind": "intent", "op_id": "x", "tool": "t", "args": {}, "args_digest": "d",'
            b' "attempt": 1, "incarnation": 1,'
            b' "snapshot": {"class": "sometimes", "ask_user": false}}',
        ],
        ids=[
            "not-json",
            "list",
            "string",
            "no-kind",
            "missing-fields",
            "string-as-int",
            "bool-as-int",
            "unknown-state",
            "args-not-object",
            "unknown-class",
        ],
    )
    @pytest.mark.parametrize("where", ["first", "last"])
    def test_checksummed_non_record_is_refused(self, payload: bytes, where: str) -> None:
        """A checksummed frame whose payload is not a record is corruption, not a torn tail."""
        good, _ = _frames(THREE[:2])
        bad = _raw_frame(payload)
        head = len(FILE_HEADER)
        data = FILE_HEADER + bad + good[head:] if where == "first" else good + bad
        offset, number = (head, 1) if where == "first" else (len(good), 4)
        with pytest.raises(JournalCorruptError, match="payload is not a record") as info:
            scan_bytes(data, source="j")
        assert (info.value.offset, info.value.record_number) == (offset, number)


class TestWriteFailure:
    def test_enospc_on_append_keeps_earlier_records(
        self, journal_path: Path, armed: Callable[[str], None]
    ) -> None:
        """ENOSPC at append raises JournalWriteError; the file and its records are unchanged."""
        with JournalWriter(journal_path) as writer:
            writer.append_many(THREE[:2])
            size = journal_path.stat().st_size
            armed("journal.append=enospc")
            with pytest.raises(JournalWriteError) as info:
                writer.append(THREE[2])
            assert isinstance(info.value.__cause__, OSError)
            assert info.value.__cause__.errno == errno.ENOSPC
            assert str(journal_path) in str(info.value)
            assert f"byte {size}" in str(info.value)
            assert journal_path.stat().st_size == size
            assert writer.size == size
        scan = scan_journal(journal_path)
        assert _recs(scan) == THREE[:2]
        assert scan.torn is None

    def test_a_failed_append_poisons_the_writer(
        self, journal_path: Path, armed: Callable[[str], None]
    ) -> None:
        """After a failed append the writer takes no more, saying what is durable; opening the
        journal again goes on right after the earlier records."""
        with JournalWriter(journal_path) as writer:
            armed("journal.append@2=enospc")
            writer.append(THREE[0])
            durable = writer.synced_size
            with pytest.raises(JournalWriteError) as info:
                writer.append(THREE[1])
            assert f"every record up to byte {durable}" in str(info.value)
            assert writer.poisoned
            with pytest.raises(JournalWriteError, match="takes no more appends"):
                writer.append(THREE[2])
        with JournalWriter(journal_path) as writer:
            writer.append(THREE[2])
        assert _recs(scan_journal(journal_path)) == [THREE[0], THREE[2]]

    def test_a_short_write_is_left_for_the_next_open_to_cut(
        self, journal_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A write that lands half a frame is never truncated by the failing writer: the next
        open cuts it as a torn tail and reports it, and appends follow the earlier records."""
        with JournalWriter(journal_path) as writer:
            writer.append(THREE[0])
            size = journal_path.stat().st_size
            real_write = os.write

            def half_write(fd: int, data: bytes) -> int:
                return real_write(fd, data[: len(data) // 2])

            monkeypatch.setattr(os, "write", half_write)
            with pytest.raises(JournalWriteError, match="short write"):
                writer.append(THREE[1])
            monkeypatch.setattr(os, "write", real_write)
            assert journal_path.stat().st_size > size  # the half frame stays until reopened
        with JournalWriter(journal_path) as writer:
            assert writer.scan.torn is not None and writer.scan.torn.offset == size
            assert journal_path.stat().st_size == size
            writer.append(THREE[2])
        scan = scan_journal(journal_path)
        assert _recs(scan) == [THREE[0], THREE[2]]
        assert scan.torn is None

    def test_threads_sharing_a_writer_never_lose_a_record(
        self, journal_path: Path, armed: Callable[[str], None]
    ) -> None:
        """Eight threads append at once, one append fails (ENOSPC): every record an append
        returned for is in the file, and the writer's size is the file's."""
        import threading

        done: list[Record] = []
        armed("journal.append@120=enospc")
        with JournalWriter(journal_path) as writer:

            def append_many(thread: int) -> None:
                for n in range(40):
                    record = IncarnationRecord(thread * 1000 + n, thread)
                    try:
                        writer.append(record)
                    except JournalWriteError:
                        return
                    done.append(record)

            threads = [threading.Thread(target=append_many, args=(t,)) for t in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert writer.poisoned
        assert 100 <= len(done) < 320
        assert set(_recs(scan_journal(journal_path))) == set(done)


class TestPayloadLimit:
    def test_record_over_the_limit_is_refused_before_writing(self, journal_path: Path) -> None:
        """A record longer than the reader accepts is refused, so the journal stays readable."""
        big = "x" * MAX_PAYLOAD
        with JournalWriter(journal_path) as writer:
            writer.append(THREE[0])
            size = journal_path.stat().st_size
            with pytest.raises(JournalWriteError, match="exceeds the journal's limit"):
                writer.append(FinishRecord("op-1", True, big, digest(big), 1, 1))
            assert journal_path.stat().st_size == size == writer.size
            writer.append(THREE[2])
        scan = scan_journal(journal_path)
        assert _recs(scan) == [THREE[0], THREE[2]]
        assert scan.torn is None

    def test_writer_and_reader_agree_on_the_limit(
        self, journal_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A record exactly at the limit is written and read back; one byte more is refused."""
        at_limit = FinishRecord("op-1", True, "y" * 100, digest("y" * 100), 1, 1)
        over = FinishRecord("op-1", True, "y" * 101, digest("y" * 100), 1, 1)
        monkeypatch.setattr(journal_module, "MAX_PAYLOAD", len(encode_frame(at_limit)) - 11)
        with JournalWriter(journal_path) as writer:
            writer.append(at_limit)
            with pytest.raises(JournalWriteError):
                writer.append(over)
            writer.append(THREE[0])
        assert _recs(scan_journal(journal_path)) == [at_limit, THREE[0]]

    def test_oversized_result_leaves_the_op_running(
        self, journal_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A tool result too large to journal fails the call and leaves the op RUNNING, not lost."""
        monkeypatch.setattr(journal_module, "MAX_PAYLOAD", 2000)

        def huge(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            return "z" * 5000

        with open_runtime(journal_path) as rt, pytest.raises(JournalWriteError):
            rt.call("op-1", "read_file", {}, huge)
        with open_runtime(journal_path) as rt:
            assert rt.ops["op-1"].state is OpState.RUNNING


class TestDurability:
    @staticmethod
    def _record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, int]]:
        """Patch os.fsync to log (is_directory, inode) for every call, then really sync."""
        calls: list[tuple[bool, int]] = []
        real_fsync = os.fsync

        def logging_fsync(fd: int) -> None:
            st = os.fstat(fd)
            calls.append((stat.S_ISDIR(st.st_mode), st.st_ino))
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", logging_fsync)
        return calls

    def test_directory_is_fsynced_on_create(
        self, journal_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Creating a journal fsyncs its directory, so the new file survives a power cut."""
        calls = self._record_fsyncs(monkeypatch)
        with JournalWriter(journal_path):
            pass
        assert (True, journal_path.parent.stat().st_ino) in calls

    def test_directory_not_fsynced_when_reopened(
        self, journal_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Reopening an existing journal needs no directory fsync."""
        with JournalWriter(journal_path) as writer:
            writer.append(THREE[0])
        calls = self._record_fsyncs(monkeypatch)
        with JournalWriter(journal_path):
            pass
        assert not any(is_dir for is_dir, _ in calls)

    def test_every_append_is_fsynced(
        self, journal_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Each durable append fsyncs the journal file before returning."""
        with JournalWriter(journal_path) as writer:
            calls = self._record_fsyncs(monkeypatch)
            inode = journal_path.stat().st_ino
            for record in THREE:
                before = len(calls)
                writer.append(record)
                assert calls[before:] == [(False, inode)]

    def test_truncated_tail_is_fsynced(
        self, journal_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Cutting off a torn tail at open is made durable before any new record."""
        data, _ = _frames(THREE)
        journal_path.write_bytes(data[:-1])
        calls = self._record_fsyncs(monkeypatch)
        with JournalWriter(journal_path):
            assert (False, journal_path.stat().st_ino) in calls


class TestFileHeader:
    """A file named as a journal either begins with the header or is refused, never cut."""

    @pytest.mark.parametrize(
        "content",
        [b"SQLite format 3\x00" + bytes(100), b"# README\n\nsome text\n", b"HJ", b"%HJOURNAL"],
        ids=["database", "text", "frame-magic-only", "partial-header"],
    )
    def test_a_file_that_is_not_a_journal_is_refused_and_kept(
        self, journal_path: Path, content: bytes
    ) -> None:
        journal_path.write_bytes(content)
        with pytest.raises(JournalCorruptError, match="not a journal") as info:
            JournalWriter(journal_path)
        assert (info.value.offset, info.value.record_number) == (0, 1)
        with pytest.raises(JournalCorruptError, match="not a journal"):
            open_runtime(journal_path)
        assert journal_path.read_bytes() == content

    def test_a_new_journal_is_created_with_its_header_and_identity_and_nothing_else(
        self, journal_path: Path
    ) -> None:
        with JournalWriter(journal_path) as writer:
            identity = FILE_HEADER + encode_frame(JournalIdRecord(writer.journal_id))
            assert journal_path.read_bytes() == identity
            assert writer.size == writer.synced_size == len(identity)
            assert writer.scan.records == () and writer.scan.torn is None
        assert sorted(p.name for p in journal_path.parent.iterdir()) == [journal_path.name]

    def test_an_empty_file_becomes_a_journal(self, journal_path: Path) -> None:
        journal_path.write_bytes(b"")
        with JournalWriter(journal_path) as writer:
            writer.append(RECORDS[0])
        assert _recs(scan_bytes(journal_path.read_bytes())) == [RECORDS[0]]

    def test_creation_never_replaces_a_journal_that_appeared_meanwhile(
        self, journal_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Two writers racing to create: the loser's link fails and it opens the winner's."""
        winner, _ = _frames(THREE)
        real_link = os.link

        def someone_else_first(src: str, dst: str) -> None:
            Path(dst).write_bytes(winner)  # another writer created it a moment ago
            real_link(src, dst)

        monkeypatch.setattr(os, "link", someone_else_first)
        with JournalWriter(journal_path) as writer:
            assert [s.record for s in writer.scan.records] == THREE
        assert journal_path.read_bytes() == winner
        assert sorted(p.name for p in journal_path.parent.iterdir()) == [journal_path.name]

    def test_a_file_system_without_hard_links_still_gets_a_whole_journal(
        self, journal_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def no_links(src: str, dst: str) -> None:
            raise OSError(errno.EPERM, "Operation not permitted")

        monkeypatch.setattr(os, "link", no_links)
        with JournalWriter(journal_path) as writer:
            writer.append(RECORDS[0])
        assert journal_path.read_bytes().startswith(FILE_HEADER)
        assert sorted(p.name for p in journal_path.parent.iterdir()) == [journal_path.name]

    def test_a_journal_in_a_missing_folder_is_refused_not_a_write_failure(
        self, tmp_path: Path
    ) -> None:
        from harness.runtime import JournalWriteError

        with pytest.raises(JournalError, match="creating the journal failed") as info:
            JournalWriter(tmp_path / "no-such-folder" / "agent.journal")
        assert not isinstance(info.value, JournalWriteError)
