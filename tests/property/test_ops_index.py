"""An ops index changes no answer: random histories run twice, one journal indexed.

The histories of ``test_compaction``: lives of calls and resolutions with faults
scripted alike, on two journals side by side. One journal is indexed at every
close (its next start reads the settled ops through the index), and compacted
at a random moment as well (an index then maps a compacted block too); the other
is read record by record at every start. Every answer must be the same on both:
each call's outcome, each exception, each recovery report, each executions
count, and at the end ``outcome_of`` and ``plan`` of every op.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from harness.runtime import Runtime
from harness.runtime.compaction import Compaction
from harness.runtime.journal import JournalScan, JournalWriter, scan_journal
from harness.runtime.records import OpsIndexRecord
from harness.runtime.settled import IndexedOps
from tests.conftest import FakeTool
from tests.property.test_compaction import (
    FAILURES,
    TABLE,
    Action,
    _act,
    _answer,
    _final,
    lives,
    scripts,
)


class _IndexedAlways(JournalWriter):
    INDEX_MIN_BYTES = 0
    INDEX_MAX_RATIO = float("inf")


class _ReadWhole(JournalWriter):
    """Reads every record at every start (a reader of its own: no index, no block)."""

    INDEX_MIN_BYTES = 1 << 62

    def read(self, data: bytes) -> JournalScan:
        return super().read(data)


class IndexedRuntime(Runtime):
    _journal_class = _IndexedAlways


class WholeRuntime(Runtime):
    _journal_class = _ReadWhole


class TestIndexChangesNoAnswer:
    @settings(max_examples=200, deadline=None)
    @given(
        history=lives,
        script=scripts,
        when=st.tuples(st.integers(0, 4), st.integers(0, 6)),
        identity=st.sampled_from(["id", "content"]),
    )
    def test_every_answer_is_the_same_through_the_index(
        self,
        history: list[list[Action]],
        script: dict[str, list[str]],
        when: tuple[int, int],
        identity: str,
    ) -> None:
        life_at, step_at = when  # life 4: never compacted
        with tempfile.TemporaryDirectory() as tmp:
            plain, indexed = Path(tmp) / "plain.journal", Path(tmp) / "indexed.journal"
            faults = {op: [FAILURES[b] for b in s] for op, s in script.items()}
            tools = {plain: FakeTool(faults), indexed: FakeTool(faults)}
            kinds = {plain: WholeRuntime, indexed: IndexedRuntime}
            through_index = 0
            for n, life in enumerate(history):
                answers: dict[Path, list[Any]] = {}
                for path in (plain, indexed):
                    tool = tools[path]
                    got = answers[path] = []
                    with kinds[path].open(
                        path, table=TABLE, identity=identity, compaction=Compaction.never()
                    ) as rt:
                        through_index += isinstance(rt.journal.scan.settled, IndexedOps)
                        got.append(_answer(functools.partial(rt.recover, tool)))
                        for i, action in enumerate([*life, None]):
                            if path == indexed and (n, min(step_at, len(life))) == (life_at, i):
                                rt.compact()
                            if action is not None:
                                got += _act(rt, action, tool)
                        got.append(tool.counts())
                assert answers[plain] == answers[indexed], f"life {n}"
            finals = []
            for path in (plain, indexed):
                with kinds[path].open(
                    path, table=TABLE, identity=identity, compaction=Compaction.never()
                ) as rt:
                    if path == indexed:
                        assert isinstance(rt.journal.scan.settled, IndexedOps)
                    finals.append(_final(rt))
            assert finals[0] == finals[1]
            indexes = sum(
                isinstance(s.record, OpsIndexRecord) for s in scan_journal(indexed).records
            )
            event(f"lives started through an index: {min(through_index, 3)}")
            event(f"indexes in the file: {min(indexes, 3)}")
