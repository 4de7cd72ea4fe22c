"""Where each life's records begin in the journal, from the supervisor's records alone.

A power cut leaves a torn tail; the next life to open the journal drops it and
writes from its valid end. When that life dies before touching the journal
(the same size and CRC at the next spawn), the one after it does the dropping,
and its records begin at the valid end too. Found by a 10,000-trial campaign:
they were taken for the dead life's, and I2 said the op it verified got no
decision.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.chaos.supervisor import _common_prefix
from harness.check.evidence import TrialEvidence
from harness.runtime.journal import FILE_HEADER, encode_frame
from harness.runtime.records import IncarnationRecord, JournalIdRecord


def _trial(tmp_path: Path, spawns: list[tuple[int | None, int | None]]) -> TrialEvidence:
    lives = [
        {"life": n, "pid": 100 + n, "returncode": -9, "killed": "timed", "reached": None}
        | {"stderr": ""}
        for n in range(1, len(spawns) + 1)
    ]
    events = [
        {"event": "spawn", "life": n, "journal_size": size, "journal_crc": crc}
        for n, (size, crc) in enumerate(spawns, 1)
    ]
    events.insert(1, {"event": "fault", "life": 1, "valid_end": 2546, "lost": 84})
    (tmp_path / "lives.json").write_text(json.dumps(lives), "utf-8")
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return TrialEvidence(tmp_path, None)


def test_the_cut_after_the_life_before_moves_the_start_back(tmp_path: Path) -> None:
    evidence = _trial(tmp_path, [(None, None), (2781, 7), (3100, 8)])
    assert evidence.life_starts == {1: 0, 2: 2546, 3: 3100}


def test_a_tail_no_life_dropped_moves_the_next_start_back_too(tmp_path: Path) -> None:
    """Life 2 died before touching the journal: life 3 drops the tail and writes from 2546."""
    evidence = _trial(tmp_path, [(None, None), (2781, 7), (2781, 7), (3300, 9)])
    assert evidence.life_starts == {1: 0, 2: 2546, 3: 2546, 4: 3300}
    assert evidence.span_of(2) == (2546, 2546)  # it wrote nothing


def test_the_same_size_with_other_bytes_is_a_changed_journal(tmp_path: Path) -> None:
    """Life 2 dropped the tail and wrote back to the same size: life 3 starts at its spawn."""
    evidence = _trial(tmp_path, [(None, None), (2781, 7), (2781, 8)])
    assert evidence.life_starts == {1: 0, 2: 2546, 3: 2781}


def test_a_life_that_cut_whole_records_writes_from_where_it_cut(tmp_path: Path) -> None:
    """Life 2 cut life 1's last record and wrote its own over it: its records begin where
    the cut one began, not at the size the supervisor saw at its spawn."""
    ident = FILE_HEADER + encode_frame(JournalIdRecord("0" * 32))
    one = ident + encode_frame(IncarnationRecord(1, 101))
    handed = one + encode_frame(IncarnationRecord(1, 101))  # life 1's last record
    final = one + encode_frame(IncarnationRecord(2, 102))  # life 2 wrote over it
    (tmp_path / "journal").write_bytes(final)
    lives = [
        {"life": n, "pid": 100 + n, "returncode": 0, "killed": None, "reached": None}
        | {"stderr": ""}
        for n in (1, 2)
    ]
    events = [
        {"event": "spawn", "life": 1, "journal_size": None, "journal_crc": None},
        {"event": "spawn", "life": 2, "journal_size": len(handed), "journal_crc": 1},
        {"event": "exit", "life": 2, "journal_kept": _common_prefix(handed, final)},
    ]
    (tmp_path / "lives.json").write_text(json.dumps(lives), "utf-8")
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    evidence = TrialEvidence(tmp_path, None)
    assert len(one) < _common_prefix(handed, final) < len(handed)  # the frame's magic is kept
    assert evidence.life_starts == {1: 0, 2: len(one)}
    assert [e.payload["incarnation"] for e in evidence.entries_of(2)] == [2]
