"""A world that honours idempotency keys, and check-table's audit of keyed tools.

A declared tool with ``dedupe = "key"`` stands for a provider that drops a repeat
of a key inside its window (on the trial's clock): the first call's result, no
second effect, no ledger row (a ``key_replays`` row); a new key, or one past its
window, has its effect; the same key with other arguments is refused naming it.
check-table holds a keyed class to that: same key, no change; new key, a change.
One declared with ``lookup = "key"`` records the key and drops nothing. The trial's
clock moves a scenario's ``clock_step`` at each restart (life N reads N steps), and
an op left to a reconciler is killed at ``recovery.reconcile`` in the next life.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.agent.plan import load_plan
from harness.chaos.campaign import _retried
from harness.chaos.scenario import compile_plan, load_scenario, write_plan
from harness.chaos.schedule import RECONCILE_FAILPOINT, exhaustive_schedules
from harness.errors import ScenarioError
from harness.runtime import CallContext, ToolError, ToolTable
from harness.table_audit import audit_table
from harness.world.declared import DeclaredTool
from harness.world.store import (
    TRIAL_CLOCK_ENV,
    WorldStore,
    effect_rows,
    key_seen,
    life_clock,
    read_key_replays,
    read_ledger,
)
from harness.world.tools import make_tool_function

SCENARIO = Path("scenarios/payment_flow.toml")
ARGS = {"customer": "C-1", "amount": 500, "currency": "eur"}


def _charge(window: float | None = 3600.0) -> DeclaredTool:
    plan = compile_plan(load_scenario(SCENARIO), seed=1, source=str(SCENARIO))
    declared = plan.tools["charge"]
    assert declared.dedupe == "key" and declared.window == 86400.0
    return DeclaredTool.from_json("charge", {**declared.to_json(), "window": window})


def _ctx(op_id: str, attempt: int = 1, key_op: str | None = None) -> CallContext:
    return CallContext(op_id, "charge", attempt, 1, key_op, "journal-1")


def _charges(db: Path) -> int:
    return sum(1 for row in effect_rows(db) if row.table == "records")


class TestTheProvider:
    def test_a_repeat_of_a_key_is_answered_without_an_effect(self, tmp_path: Path) -> None:
        db = tmp_path / "world.db"
        with WorldStore.open(db) as world:
            execute = make_tool_function(world, {"charge": _charge()})
            first = execute("charge", ARGS, _ctx("s001"))
            again = execute("charge", ARGS, _ctx("s001", attempt=2))
            redo = execute("charge", ARGS, _ctx("s001.redo", key_op="s001"))
            assert key_seen(db, "charge", _ctx("s001").idempotency_key)
            assert not key_seen(db, "charge", _ctx("s002").idempotency_key)
            other = execute("charge", ARGS, _ctx("s002"))
        assert first == again == redo != other
        assert _charges(db) == 2
        assert [(e.op_id, e.attempt) for e in read_ledger(db)] == [("s001", 1), ("s002", 1)]
        assert read_key_replays(db) == [
            ("charge", "s001", "s001", 2),
            ("charge", "s001.redo", "s001", 1),
        ]

    def test_the_same_key_with_other_arguments_is_refused_naming_it(self, tmp_path: Path) -> None:
        db = tmp_path / "world.db"
        with WorldStore.open(db) as world:
            execute = make_tool_function(world, {"charge": _charge()})
            execute("charge", ARGS, _ctx("s001"))
            with pytest.raises(ToolError, match=_ctx("s001").idempotency_key):
                execute("charge", {**ARGS, "amount": 900}, _ctx("s001", attempt=2))
        assert _charges(db) == 1 and len(read_ledger(db)) == 1

    def test_past_its_window_a_key_is_new_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        db = tmp_path / "world.db"
        with WorldStore.open(db) as world:
            execute = make_tool_function(world, {"charge": _charge(window=60.0)})
            monkeypatch.setenv(TRIAL_CLOCK_ENV, "1000")
            execute("charge", ARGS, _ctx("s001"))
            monkeypatch.setenv(TRIAL_CLOCK_ENV, "1059")
            execute("charge", ARGS, _ctx("s001", attempt=2))
            assert _charges(db) == 1
            monkeypatch.setenv(TRIAL_CLOCK_ENV, "1060")
            execute("charge", ARGS, _ctx("s001", attempt=3))
        assert _charges(db) == 2 and len(read_ledger(db)) == 2


class TestCheckTableOfKeyedTools:
    def _audit(self, scenario: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
        loaded = load_scenario(scenario)
        assert loaded.table_path is not None
        plan = compile_plan(loaded, seed=1, source=str(scenario))
        audit = audit_table(ToolTable.load(loaded.table_path), [plan])
        return {a.tool: (a.status, a.reasons) for a in audit.audits}

    def test_a_provider_that_deduplicates_passes(self) -> None:
        found = self._audit(SCENARIO)
        assert found["charge"] == ("ok", ()) and found["refund"] == ("ok", ())

    def test_a_tool_marked_keyed_whose_provider_does_not_deduplicate_fails(
        self, tmp_path: Path
    ) -> None:
        shutil.copytree(SCENARIO.parent / "payment_flow", tmp_path / "payment_flow")
        tools = tmp_path / "payment_flow" / "declared_tools.toml"
        text = tools.read_text("utf-8").split("[tools.refund]")
        tools.write_text(  # the charge's provider forgets keys; the refund's still has them
            text[0].replace('dedupe = "key"\nwindow = "24h"\n', "") + "[tools.refund]" + text[1],
            "utf-8",
        )
        shutil.copy(SCENARIO, tmp_path / SCENARIO.name)
        found = self._audit(tmp_path / SCENARIO.name)
        status, reasons = found["charge"]
        assert status == "unsafe"
        assert reasons == (
            "classed keyed (86400 s), which recovery retries with the same key, but under the "
            "same key its replay changed the world",
        )
        assert found["refund"] == ("ok", ())


class TestAProviderThatRecordsKeys:
    def test_it_sends_every_time_and_a_look_up_by_key_finds_each_message(
        self, tmp_path: Path
    ) -> None:
        plan = compile_plan(load_scenario(SCENARIO), seed=1, source=str(SCENARIO))
        receipt = plan.tools["send_receipt"]
        assert receipt.lookup == "key" and receipt.dedupe is None and receipt.by_key
        db = tmp_path / "world.db"
        args = {"to": "a@example.com", "body": "paid"}
        with WorldStore.open(db) as world:
            execute = make_tool_function(world, {"send_receipt": receipt})
            assert not key_seen(db, "send_receipt", _ctx("s003").idempotency_key)
            execute("send_receipt", args, _ctx("s003"))
            execute("send_receipt", args, _ctx("s003", attempt=2))  # no provider drops it
            assert key_seen(db, "send_receipt", _ctx("s003").idempotency_key)
            assert not key_seen(db, "send_receipt", _ctx("s004").idempotency_key)
        assert sum(1 for row in effect_rows(db) if row.table == "outbox") == 2
        assert read_key_replays(db) == []


class TestTheTrialClock:
    def test_each_life_reads_its_number_of_clock_steps(self, tmp_path: Path) -> None:
        plan = compile_plan(load_scenario(SCENARIO), seed=1, source=str(SCENARIO))
        assert plan.clock_step == 3600.0
        write_plan(plan, tmp_path / "plan.json")
        assert load_plan(tmp_path / "plan.json").clock_step == 3600.0
        assert [life_clock(tmp_path, life) for life in (1, 2, 3)] == [
            "3600.0",
            "7200.0",
            "10800.0",
        ]

    def test_without_a_clock_step_every_life_reads_zero(self, tmp_path: Path) -> None:
        assert life_clock(tmp_path, 2) == "0"  # no plan at all
        mini = Path("scenarios/phone_task.toml")
        plan = compile_plan(load_scenario(mini), seed=1, source=str(mini))
        assert plan.clock_step is None
        write_plan(plan, tmp_path / "plan.json")
        assert "clock_step" not in (tmp_path / "plan.json").read_text("utf-8")
        assert life_clock(tmp_path, 5) == "0"

    @pytest.mark.parametrize(("step", "seconds"), [("90s", 90.0), (30, 30.0), ("2d", 172800.0)])
    def test_a_clock_step_is_written_as_a_window(
        self, tmp_path: Path, step: str | int, seconds: float
    ) -> None:
        scenario = tmp_path / "s.toml"
        step_toml = f'"{step}"' if isinstance(step, str) else str(step)
        scenario.write_text(f"{_MINIMAL}\nclock_step = {step_toml}\n{_STEP}", "utf-8")
        plan = compile_plan(load_scenario(scenario), seed=1, source=str(scenario))
        assert plan.clock_step == seconds

    @pytest.mark.parametrize("step", ['"soon"', "0", '"-1h"'])
    def test_a_bad_clock_step_is_refused_naming_it(self, tmp_path: Path, step: str) -> None:
        scenario = tmp_path / "s.toml"
        scenario.write_text(f"{_MINIMAL}\nclock_step = {step}\n{_STEP}", "utf-8")
        with pytest.raises(ScenarioError, match="clock_step"):
            load_scenario(scenario)

    def test_a_keyed_op_is_retried_at_the_next_start_only_if_a_step_is_inside_its_window(
        self,
    ) -> None:
        table = ToolTable.load(SCENARIO.parent / "payment_flow" / "tools.toml")
        charge, hold = table.classify("charge"), table.classify("place_hold")
        assert _retried(charge, 3600.0) and _retried(charge, None)
        assert not _retried(hold, 3600.0) and _retried(hold, None) and _retried(hold, 1799.0)
        assert not _retried(table.classify("send_receipt"), None)


_MINIMAL = 'name = "clocked"\ndescription = "a clocked scenario"'
_STEP = '[[steps]]\ntool = "app_install"\nargs = { package = "com.example.todo" }'


class TestKillsAtTheReconciler:
    def test_an_op_left_to_a_reconciler_is_killed_at_recovery_reconcile_next(self) -> None:
        """The hit of op 2 (of 3) is left to a reconciler: after its in-flight kill the next
        life is killed at recovery.reconcile (not at after_hint, which it never reaches),
        and after its intent inside the reconciler's redo; the other hits are unchanged."""
        hits = {"op.after_intent": 3, "op.after_effect": 3}
        plain = dict(exhaustive_schedules(hits, lambda point, hit: False))
        asked = dict(
            exhaustive_schedules(
                hits, lambda point, hit: False, reconciled=lambda point, hit: hit == 2
            )
        )
        added = sorted(set(asked) - set(plain))
        gone = sorted(set(plain) - set(asked))
        assert added == [
            "op.after_effect@2+recovery.reconcile@1",
            "op.after_intent@2+op.after_effect@1",
            "op.after_intent@2+recovery.reconcile@1",
        ]
        assert gone == [
            "op.after_effect@2+recovery.after_hint@1",
            "op.after_intent@2+recovery.after_hint@1",
        ]
        schedule = asked["op.after_intent@2+recovery.reconcile@1"]
        assert [life.failpoints for life in schedule.lives] == [
            "op.after_intent@2=kill",
            f"{RECONCILE_FAILPOINT}@1=kill",
        ]
