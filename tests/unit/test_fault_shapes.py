"""The shapes of the journal faults themselves: what each changes, and what a reader sees.

Checksum-only corruption keeps the frame's length and a payload that is still
UTF-8 and JSON, so that only the CRC can tell; sector damage acts on whole
512-byte blocks; a tear at a sector edge keeps whole sectors. Whatever the
damage, the runtime's reader drops it or refuses it naming file, offset and
record, and never returns a record that was not written. A version skew is no
damage: a whole frame of a newer format, which both readers refuse where it
lies and which the runtime leaves as it is.
"""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import pytest

from harness.agent.broken import BROKEN_RUNTIMES, NewerFrameCut
from harness.chaos.faults import (
    PRISTINE_JOURNAL,
    SECTOR,
    apply_after_death,
    parse_after_death,
)
from harness.chaos.observer import TRACE_FOLDER, start_trace
from harness.check.journal import read_journal_bytes
from harness.runtime import JournalCorruptError, JournalVersionError, Runtime
from harness.runtime.journal import HEADER_SIZE, JournalWriter, scan_bytes, scan_journal
from tests.conftest import FakeTool


def _journal(trial: Path, calls: int = 12) -> bytes:
    trial.mkdir(parents=True, exist_ok=True)
    with Runtime.open(trial / "journal") as runtime:
        for n in range(calls):
            runtime.call(f"op{n}", "read_file", {"path": f"/notes/{n:03d}.txt"}, FakeTool())
    return (trial / "journal").read_bytes()


class TestChecksumOnlyCorruption:
    @pytest.mark.parametrize("where", ["0.0", "0.3", "0.5", "0.9"])
    def test_the_payload_stays_json_and_only_the_crc_tells(
        self, tmp_path: Path, where: str
    ) -> None:
        """One digit changes: same length, valid UTF-8 and JSON, a record still; the CRC fails."""
        before = _journal(tmp_path)
        done = apply_after_death(tmp_path, f"corrupt-crc:{where}")
        after = (tmp_path / "journal").read_bytes()
        assert done["landed"] and len(after) == len(before)
        assert [i for i in range(len(before)) if before[i] != after[i]] == [done["corrupted"]]
        victim = next(s for s in scan_bytes(before).records if s.offset == done["record_offset"])
        payload = after[victim.offset + HEADER_SIZE : victim.end]
        assert isinstance(json.loads(payload.decode("utf-8")), dict)  # JSON accepts it...
        crc = int.from_bytes(after[victim.offset + 7 : victim.offset + 11], "big")
        assert zlib.crc32(after[victim.offset + 2 : victim.offset + 7] + payload) != crc
        assert (tmp_path / PRISTINE_JOURNAL).read_bytes() == before

    def test_the_reader_refuses_naming_file_offset_and_record(self, tmp_path: Path) -> None:
        """...the CRC does not: the journal is refused at that record, by file and number."""
        _journal(tmp_path)
        done = apply_after_death(tmp_path, "corrupt-crc:0.5")
        with pytest.raises(JournalCorruptError) as refused:
            JournalWriter(tmp_path / "journal")
        message = str(refused.value)
        assert str(tmp_path / "journal") in message
        assert f"byte {done['record_offset']} (record #{done['record']})" in message


class TestSectorDamage:
    @pytest.mark.parametrize("how", ["zero", "stale"])
    @pytest.mark.parametrize("where", [f"{n / 20:.2f}" for n in range(21)])
    def test_whole_blocks_change_and_the_reader_refuses(
        self, tmp_path: Path, how: str, where: str
    ) -> None:
        """The damage lies in one 512-byte block with a whole record after it, wherever it is
        aimed: the reader refuses it at the damaged record and never reads it as a torn tail."""
        before = _journal(tmp_path, calls=20)
        done = apply_after_death(tmp_path, f"sector:{how}:{where}")
        after = (tmp_path / "journal").read_bytes()
        changed = [i for i in range(len(before)) if before[i] != after[i]]
        assert done["landed"] and changed
        assert changed[0] // SECTOR == changed[-1] // SECTOR
        assert all(after[i] == 0 for i in changed)
        assert any(s.offset > changed[-1] for s in scan_bytes(before).records)
        with pytest.raises(JournalCorruptError) as refused:
            scan_journal(tmp_path / "journal")
        assert refused.value.offset == done["record_offset"], (refused.value, done)

    def test_a_journal_within_one_block_is_left_alone(self, tmp_path: Path) -> None:
        """With no whole record after any block, the damage would read as a torn last
        write: the fault says it did not land and the journal is unchanged."""
        before = _journal(tmp_path, calls=1)
        done = apply_after_death(tmp_path, "sector:zero:0.5")
        assert not done["landed"] and "after it" in done["why"]
        assert (tmp_path / "journal").read_bytes() == before
        assert not (tmp_path / PRISTINE_JOURNAL).exists()

    def test_a_torn_write_keeps_whole_sectors(self, tmp_path: Path) -> None:
        """power-loss:tear-sector keeps an unsynced write up to its first sector edge."""
        tmp_path.mkdir(exist_ok=True)
        synced = _journal(tmp_path, calls=3)
        start_trace(tmp_path)  # the journal as it is, durable: the observer's baseline
        with open(tmp_path / "journal", "ab") as journal:  # an append never fsynced
            journal.write(b"x" * (2 * SECTOR))
        with open(tmp_path / TRACE_FOLDER / "trace", "a") as trace:  # as the observer saw it
            trace.write(f"write 1 {len(synced)} {2 * SECTOR}\t{tmp_path / 'journal'}\n")
        done = apply_after_death(tmp_path, "power-loss:tear-sector")
        assert done["landed"] and done["kept"] == (len(synced) // SECTOR + 1) * SECTOR
        assert done["kept"] % SECTOR == 0 and done["torn"] == done["kept"] - len(synced)
        assert scan_journal(tmp_path / "journal").torn is not None


class TestVersionSkew:
    def test_the_frame_is_whole_and_its_crc_holds(self, tmp_path: Path) -> None:
        """One frame of format 2 follows the records, whole, its CRC over version, length and
        payload holding, its payload a newer intent; the report says where and what."""
        before = _journal(tmp_path, calls=3)
        done = apply_after_death(tmp_path, "version-skew")
        after = (tmp_path / "journal").read_bytes()
        assert done["landed"] and after[: len(before)] == before
        assert (done["offset"], done["length"], done["version"]) == (
            len(before),
            len(after) - len(before),
            2,
        )
        frame = after[done["offset"] :]
        assert frame[:3] == b"HJ\x02"
        length = int.from_bytes(frame[3:7], "big")
        assert HEADER_SIZE + length == len(frame)
        payload = frame[HEADER_SIZE:]
        assert zlib.crc32(frame[2:7] + payload) == int.from_bytes(frame[7:11], "big")
        record = json.loads(payload)
        assert record["kind"] == "intent" and record["op_id"] == "op2"
        assert (done["journal_size"], done["journal_crc"]) == (len(after), zlib.crc32(after))
        assert (tmp_path / PRISTINE_JOURNAL).read_bytes() == before

    def test_both_readers_refuse_it_where_it_lies(self, tmp_path: Path) -> None:
        """The checkers' reader calls it a frame of format 2 at its offset, after every
        record; the runtime's refuses it there, naming the journal and the version, and
        opening the journal changes nothing."""
        before = _journal(tmp_path)
        done = apply_after_death(tmp_path, "version-skew")
        skewed = (tmp_path / "journal").read_bytes()
        reading = read_journal_bytes(skewed)
        assert reading.corrupt_offset == done["offset"] and "format 2" in str(reading.corrupt)
        assert reading.entries == read_journal_bytes(before).entries
        with pytest.raises(JournalVersionError) as refused:
            scan_journal(tmp_path / "journal")
        assert refused.value.offset == done["offset"]
        with pytest.raises(JournalVersionError) as opened:
            JournalWriter(tmp_path / "journal")
        message = str(opened.value)
        assert f"{tmp_path / 'journal'}: at byte {done['offset']}: a frame of format 2" in message
        assert (tmp_path / "journal").read_bytes() == skewed

    def test_the_broken_runtime_cuts_it_as_a_torn_tail(self, tmp_path: Path) -> None:
        """newer-frame-cut reads the frame as a torn tail at its offset and cuts it, as the
        runtime did before it knew versions: the records before it are all it keeps."""
        before = _journal(tmp_path)
        done = apply_after_death(tmp_path, "version-skew")
        with NewerFrameCut.open(tmp_path / "journal") as runtime:
            torn = runtime.journal.scan.torn
        assert torn is not None and (torn.offset, torn.length) == (done["offset"], done["length"])
        assert "version 2" in torn.reason
        after = (tmp_path / "journal").read_bytes()
        assert after[: len(before)] == before and b"HJ\x02" not in after[len(before) :]

    @pytest.mark.parametrize("name", sorted(set(BROKEN_RUNTIMES) - {"newer-frame-cut"}))
    def test_every_other_broken_runtime_refuses_it(self, tmp_path: Path, name: str) -> None:
        """Only newer-frame-cut has the mistake: every other broken runtime refuses the frame
        as the real one does (no-crc-check too), so no other is caught by this fault."""
        _journal(tmp_path)
        done = apply_after_death(tmp_path, "version-skew")
        skewed = (tmp_path / "journal").read_bytes()
        with pytest.raises(JournalVersionError) as refused:
            BROKEN_RUNTIMES[name].open(tmp_path / "journal")
        assert refused.value.offset == done["offset"]
        assert (tmp_path / "journal").read_bytes() == skewed

    def test_it_replays_from_its_spec(self, tmp_path: Path) -> None:
        """The same journal and spec give the same bytes; the spec may name the version, and
        a version that is not newer, or too large for the byte, is refused."""
        _journal(tmp_path / "a")
        (tmp_path / "b").mkdir()
        shutil.copyfile(tmp_path / "a" / "journal", tmp_path / "b" / "journal")
        reports = [apply_after_death(tmp_path / t, "version-skew") for t in ("a", "b")]
        assert reports[0] == reports[1]
        assert (tmp_path / "a" / "journal").read_bytes() == (
            tmp_path / "b" / "journal"
        ).read_bytes()
        _journal(tmp_path / "c")
        assert apply_after_death(tmp_path / "c", "version-skew:7")["version"] == 7
        assert parse_after_death("version-skew:255") == ("version-skew", ["255"])
        for bad in ("version-skew:1", "version-skew:256", "version-skew:x", "version-skew:2:3"):
            with pytest.raises(ValueError, match="version-skew"):
                parse_after_death(bad)

    def test_it_follows_whole_records_only(self, tmp_path: Path) -> None:
        """Behind a torn tail (or with no journal) the frame is not appended: the fault says
        it did not land and the journal is unchanged."""
        assert not apply_after_death(tmp_path, "version-skew")["landed"]
        _journal(tmp_path)
        with open(tmp_path / "journal", "ab") as journal:
            journal.write(b"HJ\x01\x00")  # a torn last write
        torn = (tmp_path / "journal").read_bytes()
        done = apply_after_death(tmp_path, "version-skew")
        assert not done["landed"] and "whole record" in done["why"]
        assert (tmp_path / "journal").read_bytes() == torn
        assert not (tmp_path / PRISTINE_JOURNAL).exists()
