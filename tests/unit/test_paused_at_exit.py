"""A life paused at its exit while the next one runs, then resumed: two lives at once.

``tests/data/trials/paused_at_exit_beside_next`` is a random trial of ``replan_calls`` as
the real runtime ran it (``trial.json`` holds its replay line): the pause aimed at a reply
landed only when life 1 was leaving (its runtime closed, the journal's lock let go), life 2
started beside it, found every step settled and ended; then life 1 was resumed and exited.
Life 1 ended after life 2 spawned: the journal life 2 was handed is no witness of what
life 1 left, and the journal at the end of the trial is both lives'.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.check.evidence import TrialEvidence
from harness.check.invariants import check_journal_integrity
from harness.check.lives import JournalSeen, LifeJournal, lives_changed

TRIAL = Path(__file__).parents[1] / "data" / "trials" / "paused_at_exit_beside_next"


def test_a_life_that_ends_after_the_next_spawned_is_not_blamed_for_its_change(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "trial"
    shutil.copytree(TRIAL, folder)
    integrity = check_journal_integrity(TrialEvidence(folder, None, 8))
    assert integrity.status == "pass", integrity.evidence


ONE = JournalSeen(10, 1)
TWO = JournalSeen(20, 2)
THREE = JournalSeen(30, 3)


def test_lives_one_after_another_are_still_held_to_the_next_spawn() -> None:
    lives = [
        LifeJournal(1, None, ONE, spawned=0, ended=1),
        LifeJournal(2, TWO, THREE, spawned=2, ended=3),
    ]
    problems = lives_changed(lives, None)
    gap = "between the end of life 1 (10 bytes, CRC 00000001) and the spawn of life 2"
    assert any(gap in p for p in problems), problems


def test_a_paused_life_is_held_to_what_follows_its_own_end() -> None:
    # Life 1 is paused at event 1, life 2 runs from 2 to 3, life 1 ends at 4: what life 1
    # left at its end must be what the next spawn, or the end of the trial, finds.
    lives = [
        LifeJournal(1, None, TWO, spawned=0, ended=4),
        LifeJournal(2, ONE, TWO, spawned=2, ended=3),
        LifeJournal(3, THREE, THREE, spawned=5, ended=6),
    ]
    problems = lives_changed(lives, None)
    gap = "between the end of life 1 (20 bytes, CRC 00000002) and the spawn of life 3"
    assert any(gap in p for p in problems), problems
    assert not any("end of life 2" in p for p in problems), problems
