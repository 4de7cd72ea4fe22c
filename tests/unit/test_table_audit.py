"""The table audit: each tool's first call made twice in a scratch world, judged by its class."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.agent.plan import Plan, PlanStep
from harness.chaos.scenario import compile_plan, load_scenarios
from harness.runtime.classes import IdempotencyClass, ToolClass, ToolTable
from harness.runtime.executor import CallContext, ToolFunction
from harness.table_audit import (
    SCRATCH_PREFIX,
    CallObservation,
    RowChange,
    TableAudit,
    ToolAudit,
    audit_table,
    first_calls,
    judge,
    simulated_tools,
)
from harness.world import CATALOG, EffectRow, WorldStore, make_tool_function

ROOT = Path(__file__).resolve().parents[2]
RO, IW = IdempotencyClass.READ_ONLY, IdempotencyClass.IDEMPOTENT_WRITE
NI, UNK = IdempotencyClass.NON_IDEMPOTENT, IdempotencyClass.UNKNOWN
ASK = ToolClass(RO, ask_user=True)


@pytest.fixture(autouse=True)
def scratch_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The folder the audit's temporary folders go to (``tempfile``'s, as TMPDIR sets it),
    for every test here: a leak is seen, and never left in the machine's /tmp."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    yield root


@pytest.fixture(scope="module")
def shipped_plans() -> list[Plan]:
    """The shipped scenarios that run with the shipped table (not with one of their own)."""
    return [
        compile_plan(s, seed=1, source=s.source)
        for s in load_scenarios(ROOT / "scenarios")
        if s.table_path is None
    ]


def plan_of(*calls: tuple[str, Mapping[str, Any]], name: str = "made") -> Plan:
    steps = tuple(
        PlanStep(index, f"s{index:03d}", tool, dict(args))
        for index, (tool, args) in enumerate(calls, start=1)
    )
    return Plan(name, 1, f"<{name}>", steps)


def only(audit: TableAudit, tool: str) -> list[ToolAudit]:
    found = [a for a in audit.audits if a.tool == tool]
    assert found, f"{tool} was not audited"
    return found


# --- the verdict, as a table of cases -----------------------------------------------

ROW = RowChange("+", EffectRow("ui_taps", "s001", ("ok",)))
QUESTION = RowChange("+", EffectRow("questions", "s001", ("ask_user", "Which?")))
CHANGED = CallObservation(None, (ROW,))
UNCHANGED = CallObservation(None, ())
ASKED = CallObservation(None, (), (QUESTION,))
FAILED = CallObservation("ToolError: no such app", ())
FAILED_CHANGED = CallObservation("RuntimeError: half done", (ROW,))

JUDGE_CASES = [
    # (class, first, replay, status, a fragment of the first reason)
    (ToolClass(RO), CHANGED, UNCHANGED, "unsafe", "its first call changed the world"),
    (ToolClass(RO), UNCHANGED, CHANGED, "unsafe", "its replay changed the world"),
    (ToolClass(RO), UNCHANGED, FAILED, "unsafe", "replay failed where its first call succeeded"),
    (ToolClass(RO), UNCHANGED, UNCHANGED, "ok", None),
    (ToolClass(RO), FAILED_CHANGED, UNCHANGED, "unsafe", "its first call changed the world"),
    (ToolClass(IW), CHANGED, UNCHANGED, "ok", None),
    (ToolClass(IW), CHANGED, CHANGED, "unsafe", "classed idempotent_write, which recovery"),
    (ToolClass(IW), CHANGED, FAILED, "unsafe", "replay failed where its first call succeeded"),
    (ToolClass(IW), FAILED, FAILED, "unjudged", "its first call failed (ToolError: no such app)"),
    (ASK, ASKED, UNCHANGED, "ok", None),
    (ASK, CHANGED, UNCHANGED, "unsafe", "classed in the ask-user family"),
    (ASK, ASKED, FAILED, "unsafe", "replay failed"),
    (ToolClass(NI), CHANGED, CHANGED, "ok", None),
    (ToolClass(NI), CHANGED, FAILED, "ok", None),
    (ToolClass(NI), CHANGED, UNCHANGED, "note", "replay changed nothing: could be idempotent_w"),
    (ToolClass(NI), ASKED, UNCHANGED, "note", "neither call changed the world: could be read_"),
    (ToolClass(NI), FAILED, UNCHANGED, "unjudged", "its first call failed"),
    (ToolClass(UNK), CHANGED, UNCHANGED, "note", "classed unknown, which recovery verifies"),
    (ToolClass(UNK), CHANGED, CHANGED, "ok", None),
]


class TestJudge:
    @pytest.mark.parametrize(("tool_class", "first", "replay", "status", "reason"), JUDGE_CASES)
    def test_the_verdict_of_each_case(
        self,
        tool_class: ToolClass,
        first: CallObservation,
        replay: CallObservation,
        status: str,
        reason: str | None,
    ) -> None:
        """Each class family is unsafe exactly where a retry would repeat or break a call."""
        found, reasons = judge(tool_class, first, replay)
        assert found == status
        if reason is None:
            assert reasons == ()
        else:
            assert reason in reasons[0], reasons

    def test_every_unsafe_finding_is_given(self) -> None:
        """A read-only tool that changed the world on both calls has both findings listed."""
        status, reasons = judge(ToolClass(RO), CHANGED, CHANGED)
        assert status == "unsafe"
        assert len(reasons) == 2
        assert "first call changed" in reasons[0] and "replay changed" in reasons[1]

    def test_a_summary_counts_rows_and_says_failures(self) -> None:
        """The table's cells: rows added and removed, a failure's kind, a question asked."""
        removed = RowChange("-", EffectRow("installed_apps", "s001", ("com.x",)))
        assert CallObservation(None, (ROW, removed)).summary() == "+1 -1 rows"
        assert CHANGED.summary() == "+1 row"
        assert UNCHANGED.summary() == "no change"
        assert ASKED.summary() == "asked, no effect"
        assert FAILED.summary() == "failed (ToolError)"
        assert FAILED_CHANGED.summary() == "failed (RuntimeError), +1 row"

    def test_a_row_is_described_by_its_content_columns(self) -> None:
        """Rows read as the table and its content columns; a long value is shortened."""
        assert ROW.describe() == "+ ui_taps(element='ok')"
        long = RowChange("-", EffectRow("files", "s002", ("/a", "x" * 200)))
        assert long.describe().startswith("- files(path='/a', content='xxx")
        assert long.describe().endswith("... (202 chars))")


# --- the audit, on real scratch worlds ----------------------------------------------


class TestShippedTable:
    def test_the_shipped_table_agrees_with_every_shipped_call(
        self, shipped_plans: list[Plan], scratch_root: Path
    ) -> None:
        """Every catalog tool is audited, every verdict is ok, no note, nothing left behind."""
        audit = audit_table(ToolTable.shipped(), shipped_plans)
        assert {a.tool for a in audit.audits} == set(CATALOG)
        assert [a for a in audit.audits if a.status != "ok"] == []
        assert audit.status == "ok"
        assert audit.table == "harness/runtime/tools.toml"
        assert list(scratch_root.iterdir()) == []

    def test_each_distinct_tool_and_scenario_is_audited_once(
        self, shipped_plans: list[Plan]
    ) -> None:
        """One audit per (tool, scenario): the tool's first call in that scenario's plan."""
        audit = audit_table(ToolTable.shipped(), shipped_plans)
        keys = [(a.tool, a.source) for a in audit.audits]
        assert len(keys) == len(set(keys))
        expected = [(s.tool, p.source, s.op_id) for p in shipped_plans for s in first_calls(p)]
        assert [(a.tool, a.source, a.op_id) for a in audit.audits] == expected

    def test_the_calls_really_ran(self, shipped_plans: list[Plan]) -> None:
        """A tap adds a tap row on each call; an uninstall removes the app, its replay fails."""
        audit = audit_table(ToolTable.shipped(), shipped_plans)
        tap = next(a for a in only(audit, "ui_tap") if a.scenario == "phone_task")
        expected = "+ ui_taps(element='com.example.todo:id/new_item_button')"
        assert [c.describe() for c in tap.first.changes] == [expected]
        assert [c.describe() for c in tap.replay.changes] == [expected]
        uninstall = next(a for a in only(audit, "app_uninstall") if a.scenario == "phone_task")
        assert "- installed_apps(package='com.example.todo.tour')" in [
            c.describe() for c in uninstall.first.changes
        ]
        assert uninstall.replay.error == (
            "ToolError: app_uninstall: com.example.todo.tour is not installed"
        )
        assert uninstall.status == "ok"  # non_idempotent: a replay may fail


class TestMisclassifications:
    def test_ui_tap_as_idempotent_write_is_unsafe_with_the_rows_its_replay_added(
        self, shipped_plans: list[Plan]
    ) -> None:
        """Every audit of ui_tap fails, and its evidence shows the second tap (and submission)."""
        table = ToolTable.shipped().with_overrides({"ui_tap": IW})
        audit = audit_table(table, shipped_plans)
        assert audit.status == "unsafe"
        assert {a.tool for a in audit.with_status("unsafe")} == {"ui_tap"}
        taps = only(audit, "ui_tap")
        assert {a.status for a in taps} == {"unsafe"}
        device = next(a for a in taps if a.scenario == "device_maintenance")
        assert device.reasons == (
            "classed idempotent_write, which recovery retries after a crash, but its replay "
            "changed the world",
        )
        evidence = device.evidence()
        assert "replay: + ui_taps(element='com.android.settings:id/clear_cache')" in evidence
        assert "replay: + submissions(channel='ui', form='clear_cache_dialog')" in evidence

    def test_a_writing_tool_as_read_only_is_unsafe_by_its_first_call(
        self, shipped_plans: list[Plan]
    ) -> None:
        """write_file classed read_only: its first call wrote a file, which is the evidence."""
        table = ToolTable.shipped().with_overrides({"write_file": RO})
        audit = audit_table(table, shipped_plans)
        writes = only(audit, "write_file")
        assert {a.status for a in writes} == {"unsafe"}
        assert all("its first call changed the world" in a.reasons[0] for a in writes)
        containment = next(a for a in writes if a.scenario == "containment")
        assert any(
            line.startswith("first call: + files(path='/etc/passwd', content=")
            for line in containment.evidence()
        )
        assert {a.tool for a in audit.with_status("unsafe")} == {"write_file"}

    def test_a_tool_whose_replay_fails_is_unsafe_as_idempotent_write(
        self, scratch_root: Path
    ) -> None:
        """An uninstall replayed fails where its first run succeeded: not idempotent."""
        plan = plan_of(
            ("app_install", {"package": "com.x"}), ("app_uninstall", {"package": "com.x"})
        )
        audit = audit_table(ToolTable.shipped().with_overrides({"app_uninstall": IW}), [plan])
        uninstall = only(audit, "app_uninstall")[0]
        assert uninstall.status == "unsafe"
        assert "its replay failed where its first call succeeded" in uninstall.reasons[0]
        assert "replay failed: ToolError: app_uninstall: com.x is not installed" in (
            uninstall.evidence()
        )

    def test_an_effect_in_the_ask_user_family_is_unsafe(self, shipped_plans: list[Plan]) -> None:
        """A tap moved into the ask-user family: its tap is an effect on the world."""
        table = ToolTable.shipped().with_overrides({"ui_tap": ASK})
        taps = only(audit_table(table, shipped_plans), "ui_tap")
        assert {a.status for a in taps} == {"unsafe"}
        assert all(a.class_label == "ask_user (read_only)" for a in taps)
        assert all("classed in the ask-user family" in a.reasons[0] for a in taps)

    def test_the_question_log_is_not_an_effect(self, shipped_plans: list[Plan]) -> None:
        """Asking records the question, reported apart; asking again under the op id adds none."""
        audit = audit_table(ToolTable.shipped(), shipped_plans)
        ask = only(audit, "ask_user")[0]
        assert ask.first.changes == () and ask.replay.changes == ()
        assert [c.row.table for c in ask.first.logged] == ["questions"]
        assert ask.replay.logged == ()
        assert ask.replay.digest == ask.first.digest  # the replay left the world as it was
        assert ask.status == "ok"


class TestNotes:
    def test_an_idempotent_tool_classed_non_idempotent_is_a_note(
        self, shipped_plans: list[Plan]
    ) -> None:
        """write_file as non_idempotent: its replay changed nothing, so it could be retried."""
        table = ToolTable.shipped().with_overrides({"write_file": NI})
        audit = audit_table(table, shipped_plans)
        assert audit.status == "note"
        assert {a.tool for a in audit.with_status("note")} == {"write_file"}
        note = only(audit, "write_file")[0]
        assert note.reasons == (
            "classed non_idempotent, which recovery verifies, but its replay changed nothing: "
            "could be idempotent_write",
        )
        assert "replay: no change to the world" in note.evidence()

    def test_an_unlisted_tool_is_judged_as_unknown(self, shipped_plans: list[Plan]) -> None:
        """Left out of the table, a tap is unknown (ok: a replay taps again) and a whole-file
        write is unknown too (a note: its replay changed nothing)."""
        kept = {
            tool: cls
            for tool, cls in ToolTable.shipped().entries.items()
            if tool not in ("ui_tap", "write_file")
        }
        audit = audit_table(ToolTable(kept, source="partial.toml"), shipped_plans)
        for tool, status in (("ui_tap", "ok"), ("write_file", "note")):
            for row in only(audit, tool):
                assert row.class_label == "unknown (not listed)"
                assert not row.listed
                assert row.status == status
        assert audit.table == "partial.toml"


class TestTheScratchWorld:
    def test_earlier_calls_bring_the_world_to_the_call(self, scratch_root: Path) -> None:
        """The uninstall finds the app the plan installed first; alone, it has nothing to
        uninstall and cannot be judged."""
        install = ("app_install", {"package": "com.x"})
        uninstall = ("app_uninstall", {"package": "com.x"})
        audit = audit_table(ToolTable.shipped(), [plan_of(install, uninstall), plan_of(uninstall)])
        after_install, alone = only(audit, "app_uninstall")
        assert after_install.first.ok and after_install.status == "ok"
        assert alone.status == "unjudged"
        assert (
            "its first call failed (ToolError: app_uninstall: com.x is not installed)"
            in (alone.reasons[0])
        )
        assert "first call failed: ToolError: app_uninstall: com.x is not installed" in (
            alone.evidence()
        )

    def test_a_simulated_transient_failure_is_passed_by(self, scratch_root: Path) -> None:
        """A call with fail_attempts is made at the first attempt past them, its replay next."""
        seen: list[int] = []

        def counting(world: WorldStore, plan: Plan) -> ToolFunction:
            execute = make_tool_function(world)

            def call(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
                seen.append(ctx.attempt)
                return execute(tool, args, ctx)

            return call

        plan = plan_of(("write_file", {"path": "/a", "content": "x", "fail_attempts": 2}))
        audit = audit_table(ToolTable.shipped(), [plan], tools=counting)
        assert seen == [3, 4]
        assert audit.audits[0].first.changed and audit.audits[0].status == "ok"

    def test_the_worlds_live_in_the_temporary_folder_and_are_removed(
        self, scratch_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Each audited call has its own fresh world under TMPDIR; none is left, and nothing
        is written in the current folder."""
        here = tmp_path / "cwd"
        here.mkdir()
        monkeypatch.chdir(here)
        worlds: list[Path] = []

        def watching(world: WorldStore, plan: Plan) -> ToolFunction:
            worlds.append(world.path)
            assert world.path.exists()
            return simulated_tools(world, plan)

        plan = plan_of(
            ("write_file", {"path": "/a", "content": "x"}), ("read_file", {"path": "/a"})
        )
        audit_table(ToolTable.shipped(), [plan], tools=watching)
        assert len(worlds) == 2 and len(set(worlds)) == 2
        for world in worlds:
            assert world.parent.parent == scratch_root
            assert world.parent.name.startswith(SCRATCH_PREFIX)
            assert not world.parent.exists()
        assert list(scratch_root.iterdir()) == []
        assert list(here.iterdir()) == []

    def test_a_tool_that_raises_is_reported_and_nothing_is_left(self, scratch_root: Path) -> None:
        """A tool's bug (not a ToolError) is the call's outcome, not a crash of the audit."""

        def buggy(world: WorldStore, plan: Plan) -> ToolFunction:
            def call(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
                raise RuntimeError(f"bug in {tool} at attempt {ctx.attempt}")

            return call

        audit = audit_table(ToolTable.shipped(), [plan_of(("ui_dump", {}))], tools=buggy)
        row = audit.audits[0]
        assert row.first.error == "RuntimeError: bug in ui_dump at attempt 1"
        assert row.replay.error == "RuntimeError: bug in ui_dump at attempt 2"
        assert row.status == "unjudged"
        assert list(scratch_root.iterdir()) == []

    def test_the_scratch_goes_even_when_the_audit_stops(self, scratch_root: Path) -> None:
        """An error out of the seam itself stops the audit, and its folder is still removed."""

        def broken(world: WorldStore, plan: Plan) -> ToolFunction:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            audit_table(ToolTable.shipped(), [plan_of(("ui_dump", {}))], tools=broken)
        assert list(scratch_root.iterdir()) == []


class TestTheToolSeam:
    def test_the_audit_judges_the_tools_the_seam_gives(self, scratch_root: Path) -> None:
        """A world whose write_file appends (a declared tool whose true behaviour differs from
        the catalog's) makes the shipped table's idempotent_write unsafe: the seam decides."""
        given: list[str] = []

        def appending(world: WorldStore, plan: Plan) -> ToolFunction:
            given.append(plan.scenario)
            simulated = make_tool_function(world)

            def call(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
                if tool != "write_file":
                    return simulated(tool, args, ctx)
                with world.execution(ctx) as db:
                    db.execute(
                        "INSERT INTO files (path, content, op_id) VALUES (?, ?, ?) "
                        "ON CONFLICT (path) DO UPDATE SET content = files.content || "
                        "excluded.content",
                        (args["path"], args["content"], ctx.op_id),
                    )
                return {}

            return call

        plan = plan_of(("write_file", {"path": "/log", "content": "x"}), name="declared")
        audit = audit_table(ToolTable.shipped(), [plan], tools=appending)
        row = audit.audits[0]
        assert given == ["declared"]
        assert row.status == "unsafe"
        assert row.evidence()[-2:] == (
            "replay: - files(path='/log', content='x')",
            "replay: + files(path='/log', content='xx')",
        )
        assert os.listdir(scratch_root) == []
