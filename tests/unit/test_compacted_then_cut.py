"""A journal compacted by one life, cut by a power loss after a later one.

``tests/data/trials/compacted_then_cut_later`` is a trial of ``long_task`` as the real
runtime ran it (``trial.json`` holds its replay line): life 2 compacted the journal at its
start and was killed between an intent's write and its fsync; life 3 appended nothing and was
killed; the power cut after life 3 took the unsynced tail of the file life 2 left; life 4
compacted what remained. The file life 2 left is then in the journal's history only as
life 4 was handed it, cut: the checkers must place life 2 there, not take its compaction
for a journal it failed to keep.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.check.evidence import TrialEvidence
from harness.check.invariants import check_journal_integrity, check_write_ahead

TRIAL = Path(__file__).parents[1] / "data" / "trials" / "compacted_then_cut_later"


def test_the_life_that_compacted_keeps_its_journal_and_its_intents(tmp_path: Path) -> None:
    folder = tmp_path / "trial"
    shutil.copytree(TRIAL, folder)
    evidence = TrialEvidence(folder, None, 8)
    integrity = check_journal_integrity(evidence)
    assert integrity.status == "pass", integrity.evidence
    write_ahead = check_write_ahead(evidence)
    assert write_ahead.status == "pass", write_ahead.evidence
