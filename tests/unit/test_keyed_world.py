"""A world that honours idempotency keys, and check-table's audit of keyed tools.

A declared tool with ``dedupe = "key"`` stands for a provider that drops a repeat
of a key inside its window (on the trial's clock): the first call's result, no
second effect, no ledger row (a ``key_replays`` row); a new key, or one past its
window, has its effect; the same key with other arguments is refused naming it.
check-table holds a keyed class to that: same key, no change; new key, a change.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.chaos.scenario import compile_plan, load_scenario
from harness.runtime import CallContext, ToolError, ToolTable
from harness.table_audit import audit_table
from harness.world.declared import DeclaredTool
from harness.world.store import (
    TRIAL_CLOCK_ENV,
    WorldStore,
    effect_rows,
    key_seen,
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
