"""The shapes of the journal faults themselves: what each changes, and what a reader sees.

Checksum-only corruption keeps the frame's length and a payload that is still
UTF-8 and JSON, so that only the CRC can tell; sector damage acts on whole
512-byte blocks; a tear at a sector edge keeps whole sectors. Whatever the
damage, the runtime's reader drops it or refuses it naming file, offset and
record, and never returns a record that was not written.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from harness.chaos.faults import PRISTINE_JOURNAL, SECTOR, SHADOW_FILE, apply_after_death
from harness.runtime import JournalCorruptError, Runtime
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
        (tmp_path / SHADOW_FILE).write_bytes(len(synced).to_bytes(8, "big"))
        with open(tmp_path / "journal", "ab") as journal:  # an append never fsynced
            journal.write(b"x" * (2 * SECTOR))
        done = apply_after_death(tmp_path, "power-loss:tear-sector")
        assert done["landed"] and done["kept"] == (len(synced) // SECTOR + 1) * SECTOR
        assert done["kept"] % SECTOR == 0 and done["torn"] == done["kept"] - len(synced)
        assert scan_journal(tmp_path / "journal").torn is not None
