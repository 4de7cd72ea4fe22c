"""The harness around compaction: the agent's copy, the checkers' stitching, the schedules."""

from __future__ import annotations

from pathlib import Path

from harness.agent.compaction import compact_at_start
from harness.chaos.schedule import COMPACTION_FAILPOINTS, exhaustive_schedules
from harness.check.journal import read_journal_bytes
from harness.check.stitch import compaction_changes, stitch
from harness.runtime import Compaction, Runtime, ToolTable
from tests.conftest import FakeTool

TABLE = ToolTable.shipped()


def _life(path: Path, ops: list[str], compact_at: int | None) -> bool:
    with Runtime.open(path, table=TABLE, compaction=Compaction.never()) as runtime:
        compacted = compact_at_start(runtime, path, compact_at)
        tool = FakeTool()
        runtime.recover(tool)
        for op in ops:
            runtime.call(op, "write_file", {"path": op}, tool)
    return compacted


def _kinds_and_ops(data: bytes) -> list[tuple[str, str | None]]:
    return [(e.kind, e.op_id) for e in read_journal_bytes(data).entries]


class TestStitching:
    def test_the_stitched_journal_is_the_one_the_lives_wrote(self, tmp_path: Path) -> None:
        """Three lives, the last two compacting as they start: stitched back together, the
        journal holds every record each life wrote, and no compaction changed an op."""
        plain, path = tmp_path / "plain" / "journal", tmp_path / "compacted" / "journal"
        plain.parent.mkdir()
        path.parent.mkdir()
        for ops in (["s1"], ["s2"], ["s3"]):
            _life(plain, ops, None)
        assert [_life(path, ops, 100) for ops in (["s1"], ["s2"], ["s3"])] == [False, True, True]
        found = stitch(path.parent, path.read_bytes())
        assert found is not None and found.problems == ()
        assert len(found.epochs) == 3
        stitched = found.join(path.read_bytes())
        # The same records as the journal never compacted, but for the identity's value.
        assert _kinds_and_ops(stitched) == _kinds_and_ops(plain.read_bytes())
        for before, after in zip(found.epochs, found.epochs[1:], strict=False):
            assert compaction_changes(before.data, after) == []

    def test_a_missing_or_wrong_copy_is_no_evidence(self, tmp_path: Path) -> None:
        path = tmp_path / "journal"
        _life(path, ["s1"], None)
        _life(path, ["s2"], 100)
        (copy,) = tmp_path.glob("journal.replaced.*")
        copy.write_bytes(copy.read_bytes() + b"x")
        wrong = stitch(tmp_path, path.read_bytes())
        assert (
            wrong is not None and "is not the journal the compaction replaced" in wrong.problems[0]
        )
        copy.unlink()
        missing = stitch(tmp_path, path.read_bytes())
        assert missing is not None and "no copy of it" in missing.problems[0]

    def test_a_journal_never_compacted_is_not_stitched(self, tmp_path: Path) -> None:
        path = tmp_path / "journal"
        _life(path, ["s1"], None)
        assert stitch(tmp_path, path.read_bytes()) is None


class TestCompactionSchedules:
    def test_a_compacting_scenario_kills_inside_each_compaction_point(self) -> None:
        hits = {"op.after_intent": 3, "op.after_effect": 2, "op.after_finish": 3}
        plain = dict(exhaustive_schedules(hits))
        compacting = dict(exhaustive_schedules(hits, compacts=True))
        added = {label: s for label, s in compacting.items() if label not in plain}
        assert set(plain) <= set(compacting)
        second = {s.lives[1].failpoints.split("@")[0] for s in added.values()}
        assert second == {*COMPACTION_FAILPOINTS, "agent.before_exit"}
        assert all(len(s.lives) == 2 and s.kills == 2 for s in added.values())
        # One compaction kill per in-flight kill and one exit per intent, each alone and then
        # followed by a power cut.
        assert len(added) == 2 * (3 + 2 + 3)
        cut = [s for s in added.values() if s.lives[1].after_death == "power-loss:drop"]
        assert len(cut) == len(added) // 2
        assert all(s.lives[1].after_death is None for s in added.values() if s not in cut)
