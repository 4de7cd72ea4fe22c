"""Recovery after a simulated crash: RETRY, VERIFY, snapshots, decisions first, kills."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from harness.failpoints import arm, disarm, parse_failpoints
from harness.runtime import (
    CallContext,
    Decision,
    FailpointTriggered,
    OpState,
    RecoveryDecision,
    ToolClass,
    ToolTable,
)
from harness.runtime.records import (
    DecisionRecord,
    FinishRecord,
    HintRecord,
    IncarnationRecord,
    IntentRecord,
    Record,
    RecoveredRecord,
    Resolution,
    ResolvedRecord,
    TailDroppedRecord,
)
from harness.runtime.recovery import fold, plan_recovery
from tests.conftest import IW, NI, RO, UNK, FakeTool, journal_records, open_runtime

CRASH_POINTS = ["op.after_intent", "op.after_effect"]


def _args(op_id: str) -> dict[str, object]:
    return {"target": f"/{op_id}", "note": "ünïcode"}


def crash_during(
    path: Path,
    calls: Sequence[tuple[str, str]],
    point: str,
    *,
    tool: FakeTool | None = None,
    table: ToolTable | None = None,
) -> FakeTool:
    """Run each (op id, tool) call, crashing each one at ``point``; then the process 'dies'."""
    tool = tool or FakeTool()
    with open_runtime(path, table=table) as rt:
        arm(parse_failpoints(f"{point}=raise"))
        try:
            for op_id, name in calls:
                with pytest.raises(FailpointTriggered):
                    rt.call(op_id, name, _args(op_id), tool)
        finally:
            disarm()
    return tool


def _decisions(plan: Sequence[RecoveryDecision]) -> dict[str, Decision]:
    return {d.op_id: d.decision for d in plan}


R = TypeVar("R", bound=Record)


def _of(kind: type[R], path: Path) -> list[R]:
    return [r for r in journal_records(path) if isinstance(r, kind)]


def _ran_during_crash(point: str) -> int:
    return 0 if point == "op.after_intent" else 1


class TestRetry:
    @pytest.mark.parametrize("point", CRASH_POINTS)
    @pytest.mark.parametrize(
        "tool_name", ["read_file", "logcat", "write_file", "app_install", "ask_user"]
    )
    def test_retry_safe_op_is_retried_under_same_id(
        self, journal_path: Path, tool_name: str, point: str
    ) -> None:
        """A read-only, idempotent or ask_user op left RUNNING is retried: same op id, attempt+1."""
        tool = crash_during(journal_path, [("op-1", tool_name)], point)
        before = tool.count("op-1")
        assert before == _ran_during_crash(point)
        with open_runtime(journal_path) as rt:
            report = rt.recover(tool)
            assert _decisions(report.decisions) == {"op-1": Decision.RETRY}
            assert report.hints == ()
            assert [(o.op_id, o.status, o.executed) for o in report.retried] == [
                ("op-1", "ok", True)
            ]
            assert rt.ops["op-1"].state is OpState.SUCCEEDED
        assert tool.count("op-1") == before + 1
        assert tool.invocations[-1].attempt == 2
        assert tool.invocations[-1].args == _args("op-1")
        intents = _of(IntentRecord, journal_path)
        assert [(i.op_id, i.attempt) for i in intents] == [("op-1", 1), ("op-1", 2)]
        assert intents[0].snapshot == intents[1].snapshot

    @pytest.mark.parametrize("point", CRASH_POINTS)
    def test_ask_user_is_retried_whatever_its_class(self, journal_path: Path, point: str) -> None:
        """An ask_user op is retried even when its class snapshot is non-idempotent."""
        table = ToolTable.shipped().with_overrides({"ask_user_confirm": ToolClass(NI, True)})
        tool = crash_during(journal_path, [("ask", "ask_user_confirm")], point, table=table)
        with open_runtime(journal_path, table=table) as rt:
            report = rt.recover(tool)
        assert _decisions(report.decisions) == {"ask": Decision.RETRY}
        assert tool.attempts("ask")[-1] == 2

    def test_retried_op_is_not_run_again_after_next_restart(self, journal_path: Path) -> None:
        """Once a retry succeeded durably, later restarts skip it."""
        tool = crash_during(journal_path, [("op-1", "write_file")], "op.after_effect")
        with open_runtime(journal_path) as rt:
            rt.recover(tool)
        with open_runtime(journal_path) as rt:
            report = rt.recover(tool)
            assert rt.call("op-1", "write_file", _args("op-1"), tool).executed is False
        assert _decisions(report.decisions) == {"op-1": Decision.SKIP}
        assert tool.count("op-1") == 2


class TestVerify:
    @pytest.mark.parametrize("point", CRASH_POINTS)
    @pytest.mark.parametrize(
        "tool_name",
        ["ui_tap", "alarm", "terminal_send", "shell_execute", "http_request", "teleport"],
    )
    def test_unsafe_op_gets_verify_hint_and_is_not_run(
        self, journal_path: Path, tool_name: str, point: str
    ) -> None:
        """A non-idempotent or unknown op left RUNNING gets VERIFY: a journaled hint, no rerun."""
        tool = crash_during(journal_path, [("op-1", tool_name)], point)
        before = tool.count("op-1")
        with open_runtime(journal_path) as rt:
            report = rt.recover(tool)
            incarnation = rt.incarnation
        assert tool.count("op-1") == before
        assert _decisions(report.decisions) == {"op-1": Decision.VERIFY}
        assert report.retried == ()
        [hint] = report.hints
        assert (hint.op_id, hint.tool, dict(hint.args)) == ("op-1", tool_name, _args("op-1"))
        assert "op-1" in hint.text and tool_name in hint.text and "/op-1" in hint.text
        assert report.decisions[0].hint == hint.text
        assert _of(HintRecord, journal_path) == [HintRecord("op-1", incarnation, hint.text)]
        assert _of(RecoveredRecord, journal_path) == [RecoveredRecord(incarnation, 1)]
        assert [i.attempt for i in _of(IntentRecord, journal_path)] == [1]

    def test_call_on_verify_op_returns_info_with_hint(self, journal_path: Path) -> None:
        """Calling an op awaiting verification returns 'info' with its hint and runs nothing."""
        tool = crash_during(journal_path, [("op-1", "ui_tap")], "op.after_effect")
        with open_runtime(journal_path) as rt:
            [hint] = rt.recover(tool).hints
            outcome = rt.call("op-1", "ui_tap", _args("op-1"), tool)
        assert (outcome.status, outcome.hint, outcome.executed) == ("info", hint.text, False)
        assert tool.count("op-1") == 1

    def test_unresolved_verify_is_delivered_again_next_start(self, journal_path: Path) -> None:
        """A VERIFY op the model did not resolve gets its hint again after the next restart."""
        tool = crash_during(journal_path, [("op-1", "alarm")], "op.after_intent")
        for _ in range(2):
            with open_runtime(journal_path) as rt:
                report = rt.recover(tool)
            assert [h.op_id for h in report.hints] == ["op-1"]
        assert len(_of(HintRecord, journal_path)) == 2
        assert tool.count("op-1") == 0

    def test_resolve_closes_verify_op(self, journal_path: Path) -> None:
        """Once resolved, a VERIFY op is journaled closed, no longer planned or hinted, and
        answered from its resolution (the effect was found: ok), never run again."""
        tool = crash_during(journal_path, [("op-1", "ui_tap")], "op.after_effect")
        with open_runtime(journal_path) as rt:
            rt.recover(tool)
            rt.resolve("op-1", Resolution.EFFECT_PRESENT)
            incarnation = rt.incarnation
            assert rt.call("op-1", "ui_tap", _args("op-1"), tool).hint is None
        assert _of(ResolvedRecord, journal_path) == [
            ResolvedRecord("op-1", incarnation, Resolution.EFFECT_PRESENT)
        ]
        with open_runtime(journal_path) as rt:
            assert rt.plan() == []
            report = rt.recover(tool)
            outcome = rt.call("op-1", "ui_tap", _args("op-1"), tool)
        assert (report.decisions, report.hints) == ((), ())
        assert (outcome.status, outcome.executed, outcome.resolution) == (
            "ok",
            False,
            Resolution.EFFECT_PRESENT,
        )
        assert tool.count("op-1") == 1

    def test_redo_runs_as_a_new_op(self, journal_path: Path) -> None:
        """The model redoes a VERIFY op as a new op that records what it redoes."""
        tool = crash_during(journal_path, [("op-1", "ui_tap")], "op.after_intent")
        with open_runtime(journal_path) as rt:
            rt.recover(tool)
            redo = rt.call("op-1.redo", "ui_tap", _args("op-1"), tool, redo_of="op-1")
            rt.resolve("op-1", Resolution.REDONE, redo_op="op-1.redo")
        assert redo.ok and redo.executed
        assert tool.counts() == {"op-1.redo": 1}
        [intent] = [r for r in _of(IntentRecord, journal_path) if r.op_id == "op-1.redo"]
        assert intent.redo_of == "op-1"
        assert fold(journal_records(journal_path))["op-1"].resolution == ResolvedRecord(
            "op-1", 2, Resolution.REDONE, "op-1.redo"
        )


class TestSettled:
    def test_settled_and_not_started_ops_are_skipped(self, journal_path: Path) -> None:
        """SUCCEEDED, FAILED and NOT_STARTED ops get SKIP and are not run by recovery."""
        from harness.runtime import ToolError

        tool = FakeTool({"failed": [ToolError("no")]})
        with open_runtime(journal_path) as rt:
            rt.call("done", "alarm", {}, tool)
            rt.call("failed", "write_file", {}, tool)
        with open_runtime(journal_path) as rt:
            plan = rt.plan(not_started={"later": "ui_tap", "done": "alarm"})
            report = rt.recover(tool, not_started={"later": "ui_tap"})
        assert [(d.op_id, d.state, d.decision) for d in plan] == [
            ("done", OpState.SUCCEEDED, Decision.SKIP),
            ("failed", OpState.FAILED, Decision.SKIP),
            ("later", OpState.NOT_STARTED, Decision.SKIP),
        ]
        assert _decisions(report.decisions) == {
            "done": Decision.SKIP,
            "failed": Decision.SKIP,
            "later": Decision.SKIP,
        }
        assert report.retried == () and report.hints == ()
        assert tool.counts() == {"done": 1, "failed": 1}

    def test_a_skip_is_journaled_once_per_op_and_state(self, journal_path: Path) -> None:
        """A not-started op's SKIP is journaled once; a settled op's SKIP never is."""
        tool = FakeTool()
        plan_ops = {"a": "alarm", "b": "alarm"}
        with open_runtime(journal_path) as rt:
            rt.recover(tool, not_started=plan_ops)  # a and b not started: two SKIPs
            rt.call("a", "alarm", {}, tool)
        for _ in range(3):  # three more starts: a now succeeded (no SKIP written), b unchanged
            with open_runtime(journal_path) as rt:
                report = rt.recover(tool, not_started=plan_ops)
                assert _decisions(report.decisions) == {"a": Decision.SKIP, "b": Decision.SKIP}
        written = [(r.op_id, r.state, r.incarnation) for r in _of(DecisionRecord, journal_path)]
        assert written == [
            ("a", OpState.NOT_STARTED, 1),
            ("b", OpState.NOT_STARTED, 1),
        ]
        assert [r.decisions for r in _of(RecoveredRecord, journal_path)] == [2, 0, 0, 0]

    def test_a_second_recovery_in_one_life_writes_no_skip_again(self, journal_path: Path) -> None:
        """The SKIPs a start wrote count as journaled for the rest of that life too."""
        with open_runtime(journal_path) as rt:
            rt.recover(FakeTool(), not_started={"a": "alarm"})
            rt.recover(FakeTool(), not_started={"a": "alarm"})
        assert [r.op_id for r in _of(DecisionRecord, journal_path)] == ["a"]


class TestSnapshotRules:
    @pytest.mark.parametrize(
        ("tool_name", "today", "expected"),
        [
            ("read_file", ToolClass(NI), Decision.RETRY),
            ("write_file", ToolClass(UNK), Decision.RETRY),
            ("ask_user", ToolClass(UNK, False), Decision.RETRY),
            ("ui_tap", ToolClass(RO), Decision.VERIFY),
            ("shell_execute", ToolClass(IW), Decision.VERIFY),
            ("teleport", ToolClass(RO, True), Decision.VERIFY),
        ],
    )
    def test_decision_follows_snapshot_not_todays_table(
        self, journal_path: Path, tool_name: str, today: ToolClass, expected: Decision
    ) -> None:
        """Reopened with a table that reclassifies the tool, recovery decides by the snapshot."""
        tool = crash_during(journal_path, [("op-1", tool_name)], "op.after_effect")
        table = ToolTable.shipped().with_overrides({tool_name: today})
        assert table.classify(tool_name) == today
        with open_runtime(journal_path, table=table) as rt:
            report = rt.recover(tool)
        assert _decisions(report.decisions) == {"op-1": expected}
        assert tool.count("op-1") == (2 if expected is Decision.RETRY else 1)
        snapshots = {i.snapshot for i in _of(IntentRecord, journal_path)}
        assert snapshots == {ToolTable.shipped().classify(tool_name)}


def _crash_mix(path: Path) -> FakeTool:
    """A journal with a success and four ops left RUNNING, in a known order."""
    tool = FakeTool()
    with open_runtime(path) as rt:
        rt.call("s0", "alarm", _args("s0"), tool)
    return crash_during(
        path,
        [("r1", "ui_tap"), ("r2", "read_file"), ("r3", "shell_execute"), ("r4", "write_file")],
        "op.after_effect",
        tool=tool,
    )


MIX_DECISIONS = {
    "s0": Decision.SKIP,
    "r1": Decision.VERIFY,
    "r2": Decision.RETRY,
    "r3": Decision.VERIFY,
    "r4": Decision.RETRY,
}


class TestDecisionsJournaledFirst:
    def test_all_decisions_are_durable_before_any_retry(self, journal_path: Path) -> None:
        """Every decision of this start is in the journal before the first retried tool runs."""
        seen: list[dict[str, Decision]] = []

        def look(ctx: CallContext) -> None:
            seen.append(
                {
                    r.op_id: r.decision
                    for r in _of(DecisionRecord, journal_path)
                    if r.incarnation == ctx.incarnation
                }
            )

        _crash_mix(journal_path)
        with open_runtime(journal_path) as rt:
            rt.recover(FakeTool(on_call=look))
        acting = {op: d for op, d in MIX_DECISIONS.items() if d is not Decision.SKIP}
        assert seen == [acting, acting]

    def test_plan_is_pure_and_repeatable(self, journal_path: Path) -> None:
        """Planning twice gives the same plan and writes nothing."""
        _crash_mix(journal_path)
        with open_runtime(journal_path) as rt:
            size = journal_path.stat().st_size
            first, second = rt.plan(), rt.plan()
            assert journal_path.stat().st_size == size
        assert first == second
        assert _decisions(first) == MIX_DECISIONS
        assert plan_recovery(fold(journal_records(journal_path))) == first


class TestKillDuringRecovery:
    @pytest.mark.parametrize(
        ("point", "finished_before_kill"),
        [
            ("recovery.after_decision@1", set()),
            ("recovery.before_retry@1", set()),
            ("op.after_intent@1", set()),  # inside r2's retry, before it ran
            ("op.after_effect@1", set()),  # inside r2's retry, after it ran, before its finish
            ("recovery.after_decision@3", {"r2"}),
            ("recovery.before_retry@2", {"r2"}),
        ],
    )
    def test_kill_in_recovery_leads_to_same_decisions(
        self,
        journal_path: Path,
        point: str,
        finished_before_kill: set[str],
        armed: Callable[[str], None],
    ) -> None:
        """A crash in recovery leads to the same decisions, but for retries that finished (SKIP)."""
        tool = _crash_mix(journal_path)
        counts = tool.counts()
        with open_runtime(journal_path) as rt:
            first = rt.plan()
            armed(f"{point}=raise")
            with pytest.raises(FailpointTriggered):
                rt.recover(tool)
            disarm()
        assert not _of(RecoveredRecord, journal_path)
        with open_runtime(journal_path) as rt:
            second = rt.plan()
            report = rt.recover(tool)
        expected = [
            (d.op_id, Decision.SKIP, None)
            if d.op_id in finished_before_kill
            else (d.op_id, d.decision, d.hint)
            for d in first
        ]
        assert [(d.op_id, d.decision, d.hint) for d in second] == expected
        assert _decisions(first) == MIX_DECISIONS
        # Whatever the kill interrupted, unsafe and settled ops never ran again.
        for op_id in ("s0", "r1", "r3"):
            assert tool.count(op_id) == counts[op_id]
        for op_id in ("r2", "r4"):
            assert tool.count(op_id) > counts[op_id]
        assert fold(journal_records(journal_path))["r4"].state is OpState.SUCCEEDED
        assert [h.op_id for h in report.hints] == ["r1", "r3"]

    def test_kill_after_hint_redelivers_hints(
        self, journal_path: Path, armed: Callable[[str], None]
    ) -> None:
        """After a crash past a delivered hint, the next start delivers every hint again."""
        tool = _crash_mix(journal_path)
        with open_runtime(journal_path) as rt:
            armed("recovery.after_hint@1=raise")
            with pytest.raises(FailpointTriggered):
                rt.recover(tool)
            disarm()
        with open_runtime(journal_path) as rt:
            report = rt.recover(tool)
        assert [h.op_id for h in report.hints] == ["r1", "r3"]
        assert tool.counts() == {"s0": 1, "r1": 1, "r2": 2, "r3": 1, "r4": 2}


class TestFold:
    def test_retry_intent_reopens_a_finished_op(self) -> None:
        """A later intent for an op makes it RUNNING again with the new attempt."""
        snap = ToolClass(RO)
        records: list[Record] = [
            IntentRecord("a", "read_file", snap, {}, "d", 1, 1),
            FinishRecord("a", False, None, "d", 1, 1, error="busy", transient=True),
            IntentRecord("a", "read_file", ToolClass(NI), {}, "d", 2, 1),
        ]
        [op] = fold(records).values()
        assert (op.state, op.attempt, op.snapshot) == (OpState.RUNNING, 2, snap)
        records.append(FinishRecord("a", True, 7, "d", 2, 1))
        [op] = fold(records).values()
        assert (op.state, op.result) == (OpState.SUCCEEDED, 7)

    def test_records_for_unknown_ops_are_ignored(self) -> None:
        """Finish, decision and hint records for ops without an intent create no op."""
        records: list[Record] = [
            FinishRecord("ghost", True, None, "d", 1, 1),
            DecisionRecord("ghost", OpState.NOT_STARTED, ToolClass(UNK), Decision.SKIP, 1),
            HintRecord("ghost", 1, "h"),
        ]
        assert fold(records) == {}


class TestIncarnationGoesWithFirstDecisions:
    """A start costs one fsync for its incarnation and decisions together."""

    def test_open_alone_writes_nothing(self, journal_path: Path) -> None:
        crash_during(journal_path, [("a", "write_file")], "op.after_effect")
        size = journal_path.stat().st_size
        with open_runtime(journal_path):
            assert journal_path.stat().st_size == size

    def test_incarnation_leads_the_decision_batch_in_one_fsync(
        self, journal_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with open_runtime(journal_path) as rt:
            rt.call("a", "write_file", _args("a"), FakeTool())
        syncs: list[int] = []
        real_fsync = os.fsync

        def counted_fsync(fd: int) -> None:
            syncs.append(fd)
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", counted_fsync)
        with open_runtime(journal_path) as rt:
            rt.recover(FakeTool(), not_started={"b": "write_file"})
            records = journal_records(journal_path)
        assert len(syncs) == 1
        second = [i for i, r in enumerate(records) if isinstance(r, IncarnationRecord)][1]
        assert isinstance(records[second + 1], DecisionRecord)
        incarnation = records[second]
        assert isinstance(incarnation, IncarnationRecord) and incarnation.incarnation == 2

    def test_a_life_that_only_closes_still_leaves_its_incarnation(self, journal_path: Path) -> None:
        with open_runtime(journal_path):
            pass
        assert [type(r) for r in journal_records(journal_path)] == [IncarnationRecord]

    def test_a_torn_tail_is_reported_at_open(self, journal_path: Path) -> None:
        crash_during(journal_path, [("a", "write_file")], "op.after_effect")
        with journal_path.open("ab") as f:
            f.write(b"HJ\x01\x00garbage")
        rt = open_runtime(journal_path)
        try:
            kinds = [type(r) for r in journal_records(journal_path)[-2:]]
            assert kinds == [TailDroppedRecord, IncarnationRecord]
        finally:
            rt.close()
