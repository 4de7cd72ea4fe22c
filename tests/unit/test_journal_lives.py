"""I9 over whole lives: which life changed the journal it was handed (harness.check.lives).

Built from bytes as the supervisor would see them: a journal that only grows
holds; a cut of whole records is named by the life that made it, however many
lives' starting journals it took; a torn tail may go, nothing before it; a
power cut excuses what it took; a change between two lives with no fault does
not. And the supervisor's measure of what a life kept of its journal.
"""

from __future__ import annotations

import struct
import zlib

from harness.chaos.supervisor import _common_prefix, _journal_left, _torn_tail
from harness.check.journal import FILE_HEADER
from harness.check.lives import JournalSeen, LifeJournal, is_prefix, lives_changed
from harness.runtime.journal import encode_frame
from harness.runtime.records import JournalIdRecord

A = FILE_HEADER + b"record-one;"
B = A + b"record-two;"
C = B + b"record-three;"


def _seen(data: bytes) -> JournalSeen:
    return JournalSeen(len(data), zlib.crc32(data))


def _life(n: int, start: bytes | None, end: bytes | None, **extra: object) -> LifeJournal:
    kept = None if start is None or end is None else _common_prefix(start, end)
    return LifeJournal(
        n,
        None if start is None else _seen(start),
        None if end is None else _seen(end),
        kept,
        **extra,  # type: ignore[arg-type]
    )


def test_a_prefix_has_the_same_first_bytes() -> None:
    assert is_prefix(C, _seen(B)) and is_prefix(B, _seen(B))
    assert not is_prefix(A, _seen(B))  # shorter
    assert not is_prefix(C.replace(b"one", b"1ne"), _seen(B))  # same length, other bytes


def test_a_journal_that_only_grows_holds() -> None:
    lives = [_life(1, None, A), _life(2, A, B), _life(3, B, C)]
    assert lives_changed(lives, C) == []


def test_a_cut_of_a_whole_record_names_the_life_that_made_it() -> None:
    """Life 2 cut life 1's last record and wrote its own: lives 2's start is lost."""
    cut = A + b"life-two-wrote;"
    lives = [_life(1, None, B), _life(2, B, cut), _life(3, cut, cut + b"x;")]
    problems = lives_changed(lives, cut + b"x;")
    assert len(problems) == 1
    assert problems[0].startswith("life 2 did not keep the journal it started with")
    assert f"only its first {len(A)} bytes were in place" in problems[0]
    assert "no torn tail" in problems[0]
    assert problems[0].endswith(
        "the journal at the start of life 2 is no prefix of the final journal"
    )


def test_every_life_that_cuts_is_named() -> None:
    """A runtime that cuts at every start: each life is named, the first first."""
    two = A + b"two;"
    three = A + b"three;"
    lives = [_life(1, None, B), _life(2, B, two), _life(3, two, three)]
    problems = lives_changed(lives, three)
    assert [p.split(" did not")[0] for p in problems] == ["life 2", "life 3"]


def test_a_torn_tail_may_go_and_nothing_before_it() -> None:
    torn = B + b"\x00garbage"
    after = B + b"record-three;"
    extra = {"torn_at": len(B), "valid_crc": zlib.crc32(B)}
    fine = [_life(1, None, torn), _life(2, torn, after, **extra)]
    assert lives_changed(fine, after) == []
    over = A + b"record-three;"
    problems = lives_changed([_life(1, None, torn), _life(2, torn, over, **extra)], over)
    assert problems and problems[0].startswith("life 2 did not keep")
    assert f"only its torn tail from byte {len(B)} on could go" in problems[0]


def test_a_power_cut_excuses_what_it_took_but_not_a_cut_after_it() -> None:
    """The power cut after life 1 took B's last record: life 1's start and end are excused,
    life 2 kept what the cut left."""
    lives = [
        _life(1, A, B, faulted=True, changed_from=len(A)),
        _life(2, A, A + b"again;"),
    ]
    assert lives_changed(lives, A + b"again;") == []
    cut = FILE_HEADER + b"x;"
    lives[1] = _life(2, A, cut)
    problems = lives_changed(lives, cut)
    assert len(problems) == 1 and problems[0].startswith("life 2 did not keep")


def test_a_change_between_lives_needs_a_fault() -> None:
    lives = [_life(1, None, C), _life(2, B, C)]
    problems = lives_changed(lives, C)
    assert problems == [
        f"the journal changed between the end of life 1 ({_seen(C)}) and the spawn of "
        f"life 2 ({_seen(B)}), with no fault applied"
    ]
    lives[0] = _life(1, None, C, faulted=True, changed_from=len(B))
    assert lives_changed(lives, C) == []


def test_a_change_after_the_last_life_is_one_too() -> None:
    problems = lives_changed([_life(1, None, B), _life(2, B, C)], B)
    assert problems == [
        f"the journal changed between the end of life 2 ({_seen(C)}) and the end of the "
        f"trial ({_seen(B)}), with no fault applied"
    ]


def test_without_the_end_of_each_life_the_starts_still_judge() -> None:
    """Lives recorded without their end (an older trial folder): a start that is no prefix
    of the final journal is still a failure, placed as well as the starts allow."""
    lives = [_life(1, None, None), _life(2, B, None), _life(3, C, None), _life(4, A, None)]
    problems = lives_changed(lives, A + b"z;")
    assert problems == [
        "the journal life 2 started with is no prefix of the final journal: changed in "
        "life 3 or after it (the last whose starting journal is not)"
    ]


def test_the_supervisor_measures_what_a_life_kept() -> None:
    assert _common_prefix(B, C) == len(B)
    assert _common_prefix(C, A + b"record-tw0") == len(A) + len(b"record-tw")
    assert _journal_left(B, A + b"other") == {
        "journal_size": len(A) + 5,
        "journal_crc": zlib.crc32(A + b"other"),
        "journal_kept": len(A),
    }
    assert _journal_left(None, A)["journal_kept"] is None  # no journal at its spawn
    assert _journal_left(A, None)["journal_size"] is None  # none at its end


def test_the_supervisor_finds_a_torn_tail_with_the_checkers_reader() -> None:
    whole = FILE_HEADER + encode_frame(JournalIdRecord("0" * 32))
    assert _torn_tail(whole) == {"journal_torn_at": None, "journal_valid_crc": None}
    assert _torn_tail(whole + b"HJ\x01\x00") == {
        "journal_torn_at": len(whole),
        "journal_valid_crc": zlib.crc32(whole),
    }
    payload = b'{"kind":"intent"}'
    head = struct.pack(">BI", 2, len(payload))
    newer = b"HJ" + head + struct.pack(">I", zlib.crc32(head + payload)) + payload
    assert _torn_tail(whole + newer)["journal_torn_at"] is None  # a newer frame is no tear
