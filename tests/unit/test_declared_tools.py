"""Declared tools in the world: each behaviour's SQL, replays, multi-step, failpoints, digests.

Every test runs the tools through ``make_tool_function`` against a real SQLite
world, as the agent process does, and judges by what the world holds.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.agent.plan import Plan, PlanStep, Verification, load_plan
from harness.chaos.scenario import write_plan
from harness.runtime.errors import FailpointTriggered, ToolError, TransientToolError
from harness.runtime.executor import CallContext, ToolFunction
from harness.world import (
    EFFECT_TABLES,
    SEED_OP,
    WorldStore,
    effect_rows,
    make_tool_function,
    read_ledger,
    world_digest,
)
from harness.world.catalog import ArgSpec
from harness.world.declared import BEHAVIOURS, DeclaredTool, WorldRecord, canonical_json


def _args(*names: str) -> tuple[ArgSpec, ...]:
    specs = []
    for written in names:
        name, kind = written.split(":")
        specs.append(ArgSpec(name.rstrip("?"), kind, name.endswith("?")))
    return tuple(specs)


TOOLS: Mapping[str, DeclaredTool] = {
    t.name: t
    for t in (
        DeclaredTool("list_tickets", "read", collection="tickets"),
        DeclaredTool(
            "lookup_customer",
            "read",
            _args("customer:str"),
            collection="customers",
            key="customer",
        ),
        DeclaredTool("sent_emails", "read", channel="email"),
        DeclaredTool(
            "update_crm",
            "put",
            _args("customer:str", "status:str"),
            collection="customers",
            key="customer",
            value=("status",),
        ),
        DeclaredTool(
            "create_ticket",
            "create",
            _args("subject:str"),
            collection="tickets",
            value=("subject",),
        ),
        DeclaredTool(
            "charge_card",
            "increment",
            _args("customer:str", "amount:int"),
            collection="charges",
            key="customer",
            by="amount",
        ),
        DeclaredTool(
            "add_point",
            "increment",
            _args("customer:str"),
            collection="points",
            key="customer",
            by=1,
        ),
        DeclaredTool(
            "cancel_strict",
            "delete",
            _args("customer:str"),
            collection="subscriptions",
            key="customer",
            missing="fail",
        ),
        DeclaredTool(
            "cancel_lenient",
            "delete",
            _args("customer:str"),
            collection="subscriptions",
            key="customer",
            missing="ignore",
        ),
        DeclaredTool(
            "send_email",
            "send",
            _args("to:str", "body:str"),
            channel="email",
            value=("to", "body"),
        ),
        DeclaredTool("notify", "opaque", _args("text:str")),
        DeclaredTool(
            "refund",
            "create",
            _args("customer:str", "amount:int"),
            collection="refunds",
            value=("customer", "amount"),
            multi_step=True,
        ),
    )
}


class Calls:
    """Runs declared tools against one world, a new op id per call unless told otherwise."""

    def __init__(self, world: WorldStore, tools: Mapping[str, DeclaredTool] = TOOLS) -> None:
        self.execute: ToolFunction = make_tool_function(world, tools)
        self.count = 0

    def __call__(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        op_id: str | None = None,
        attempt: int = 1,
        ctx_type: type[CallContext] = CallContext,
    ) -> Any:
        if op_id is None:
            self.count += 1
            op_id = f"s{self.count:03d}"
        return self.execute(tool, dict(args or {}), ctx_type(op_id, tool, attempt, 1))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "world.db"


@pytest.fixture
def world(db_path: Path) -> Iterator[WorldStore]:
    with WorldStore.open(db_path) as store:
        yield store


@pytest.fixture
def call(world: WorldStore) -> Calls:
    return Calls(world)


def state(db_path: Path) -> Counter[tuple[str, tuple[str, ...]]]:
    """The world as a multiset of (table, content), whichever ops wrote it."""
    return Counter((row.table, row.values) for row in effect_rows(db_path))


def seeded(world: WorldStore, collection: str, key: str, value: Any) -> None:
    world.seed([(collection, key, canonical_json(value))])


class TestVocabulary:
    def test_the_vocabulary(self) -> None:
        """The behaviours are read, put, create, increment, delete, send and opaque."""
        assert BEHAVIOURS == ("read", "put", "create", "increment", "delete", "send", "opaque")

    def test_generic_tables_are_world_state(self) -> None:
        """records, outbox, opaque_calls and prepared are effect tables of the world."""
        names = {t.name for t in EFFECT_TABLES}
        assert {"records", "outbox", "opaque_calls", "prepared"} <= names

    def test_a_declaration_round_trips_through_json(self) -> None:
        """Every declaration reads back equal from its JSON (the plan's form)."""
        for name, tool in TOOLS.items():
            assert DeclaredTool.from_json(name, json.loads(json.dumps(tool.to_json()))) == tool


class TestPut:
    def test_a_replay_changes_nothing(self, call: Calls, db_path: Path) -> None:
        """A put run twice (a replay, same or new op id) leaves the world as one run does."""
        call("update_crm", {"customer": "C-1", "status": "vip"}, op_id="s001")
        once = state(db_path)
        call("update_crm", {"customer": "C-1", "status": "vip"}, op_id="s001")
        call("update_crm", {"customer": "C-1", "status": "vip"}, op_id="s002")
        assert state(db_path) == once
        assert len(read_ledger(db_path)) == 3

    def test_sets_fields_of_an_existing_record(
        self, world: WorldStore, call: Calls, db_path: Path
    ) -> None:
        """A put merges its fields into the record under the key; the others stay."""
        seeded(world, "customers", "C-1", {"name": "Ada", "status": "active"})
        result = call("update_crm", {"customer": "C-1", "status": "vip"})
        assert result["value"] == {"name": "Ada", "status": "vip"}
        found = call("lookup_customer", {"customer": "C-1"})
        assert found == {
            "collection": "customers",
            "key": "C-1",
            "found": True,
            "value": {"name": "Ada", "status": "vip"},
        }


class TestCreate:
    def test_a_replay_duplicates(self, call: Calls, db_path: Path) -> None:
        """A create run twice adds two records of the same value."""
        first = call("create_ticket", {"subject": "refund"}, op_id="s001")
        second = call("create_ticket", {"subject": "refund"}, op_id="s001")
        assert first["key"] != second["key"]
        listed = call("list_tickets")
        assert listed["values"] == [{"subject": "refund"}, {"subject": "refund"}]
        assert listed["count"] == 2

    def test_keys_do_not_depend_on_the_order_of_creates(self, tmp_path: Path) -> None:
        """Two worlds that created the same records in another order are equal."""
        digests = []
        for order, subjects in enumerate((["a", "b", "a"], ["b", "a", "a"])):
            path = tmp_path / f"{order}.db"
            with WorldStore.open(path) as world:
                call = Calls(world)
                for subject in subjects:
                    call("create_ticket", {"subject": subject})
            digests.append(world_digest(path))
        assert digests[0] == digests[1]


class TestIncrement:
    def test_adds_the_amount_each_call(self, call: Calls) -> None:
        """An increment starts from 0 and a replay adds the amount again."""
        assert call("charge_card", {"customer": "C-1", "amount": 40})["value"] == 40
        assert call("charge_card", {"customer": "C-1", "amount": 40}, op_id="s001")["value"] == 80
        assert call("add_point", {"customer": "C-1"})["value"] == 1

    def test_a_value_that_is_no_number_fails_without_effect(
        self, world: WorldStore, call: Calls, db_path: Path
    ) -> None:
        """Incrementing a record that holds no number fails; the call is ledgered, nothing
        changes."""
        seeded(world, "charges", "C-1", {"total": 3})
        before = state(db_path)
        with pytest.raises(ToolError, match="not a number"):
            call("charge_card", {"customer": "C-1", "amount": 5})
        assert state(db_path) == before
        assert [e.tool for e in read_ledger(db_path)] == ["charge_card"]


class TestDelete:
    def test_second_call_fails_when_declared_so(
        self, world: WorldStore, call: Calls, db_path: Path
    ) -> None:
        """``missing = fail``: the first call deletes, the second fails, ledgered, no effect."""
        seeded(world, "subscriptions", "C-1", {"plan": "pro"})
        assert call("cancel_strict", {"customer": "C-1"})["deleted"] is True
        after_one = state(db_path)
        with pytest.raises(ToolError, match="no record 'C-1'"):
            call("cancel_strict", {"customer": "C-1"})
        assert state(db_path) == after_one
        assert len(read_ledger(db_path)) == 2

    def test_second_call_does_nothing_when_declared_so(
        self, world: WorldStore, call: Calls, db_path: Path
    ) -> None:
        """``missing = ignore``: the second call succeeds and changes nothing."""
        seeded(world, "subscriptions", "C-1", {"plan": "pro"})
        assert call("cancel_lenient", {"customer": "C-1"})["deleted"] is True
        after_one = state(db_path)
        assert call("cancel_lenient", {"customer": "C-1"})["deleted"] is False
        assert state(db_path) == after_one


class TestSendAndOpaque:
    def test_send_appends_each_call(self, call: Calls) -> None:
        """A send appends its message to the channel; a replay sends it again."""
        message = {"to": "a@b.c", "body": "hello"}
        call("send_email", message)
        call("send_email", message, op_id="s001")
        assert call("sent_emails") == {
            "channel": "email",
            "messages": [message, message],
            "count": 2,
        }

    def test_opaque_is_recorded_only(self, call: Calls, db_path: Path) -> None:
        """An opaque call adds a recorded call each time, and nothing any read sees."""
        call("notify", {"text": "refunded"})
        call("notify", {"text": "refunded"}, op_id="s001")
        rows = [r for r in effect_rows(db_path)]
        assert [(r.table, r.values) for r in rows] == [
            ("opaque_calls", ("notify", '{"text":"refunded"}'))
        ] * 2


class TestMultiStep:
    def test_hits_mid_effect_between_prepare_and_apply(self, call: Calls, db_path: Path) -> None:
        """A multi-step tool has prepared its call, with its ledger row, when it reaches
        mid_effect; its effect comes after."""
        seen: list[list[str]] = []

        class Peeking(CallContext):
            def mid_effect(self) -> None:
                seen.append(sorted(r.table for r in effect_rows(db_path)))

        call("refund", {"customer": "C-1", "amount": 5}, ctx_type=Peeking)
        assert seen == [["prepared"]]
        assert sorted(r.table for r in effect_rows(db_path)) == ["prepared", "records"]

    def test_single_step_tools_do_not(self, call: Calls) -> None:
        """A tool not declared multi-step never calls mid_effect."""
        hits: list[str] = []

        class Recording(CallContext):
            def mid_effect(self) -> None:
                hits.append(self.op_id)

        call("create_ticket", {"subject": "x"}, ctx_type=Recording)
        call("update_crm", {"customer": "C-1", "status": "x"}, ctx_type=Recording)
        assert hits == []

    def test_a_crash_at_mid_effect_then_a_redo_equals_one_run(
        self, call: Calls, db_path: Path, tmp_path: Path, armed: Callable[[str], None]
    ) -> None:
        """Killed at mid_effect and redone, a multi-step create leaves one record: preparing
        the same call again is a cost, not an effect."""
        armed("op.mid_effect@1=raise")
        with pytest.raises(FailpointTriggered):
            call("refund", {"customer": "C-1", "amount": 5}, op_id="s001")
        assert set(state(db_path)) == {("prepared", ("refund", '{"amount":5,"customer":"C-1"}'))}
        call("refund", {"customer": "C-1", "amount": 5}, op_id="s001.redo")
        with WorldStore.open(tmp_path / "clean.db") as clean:
            Calls(clean)("refund", {"customer": "C-1", "amount": 5}, op_id="s001")
        assert world_digest(db_path) == world_digest(tmp_path / "clean.db")

    def test_a_failing_check_prepares_nothing(
        self, world: WorldStore, db_path: Path, armed: Callable[[str], None]
    ) -> None:
        """A multi-step delete of nothing fails before it prepares, and never hits mid_effect."""
        strict = DeclaredTool(
            "cancel",
            "delete",
            _args("customer:str"),
            collection="subscriptions",
            key="customer",
            missing="fail",
            multi_step=True,
        )
        armed("op.mid_effect=raise")
        with pytest.raises(ToolError, match="no record"):
            Calls(world, {"cancel": strict})("cancel", {"customer": "C-9"})
        assert effect_rows(db_path) == []


class TestLikeTheBuiltIns:
    def test_ledgered_in_the_effects_transaction(self, call: Calls, db_path: Path) -> None:
        """Each execution is one ledger row, whose op wrote the effect."""
        call("create_ticket", {"subject": "x"}, op_id="s007")
        [entry] = read_ledger(db_path)
        assert (entry.op_id, entry.tool, entry.step) == ("s007", "create_ticket", "s007")
        assert [r.op_id for r in effect_rows(db_path)] == ["s007"]

    def test_op_reply_comes_after_the_effect(
        self, call: Calls, db_path: Path, armed: Callable[[str], None]
    ) -> None:
        """A failure at op.reply (a lost reply) finds the effect committed."""
        armed("op.reply=raise")
        with pytest.raises(FailpointTriggered):
            call("send_email", {"to": "a@b.c", "body": "x"})
        assert [r.table for r in effect_rows(db_path)] == ["outbox"]

    def test_the_gate_checks_arguments_and_transient_failures(
        self, call: Calls, db_path: Path
    ) -> None:
        """Bad arguments and a simulated transient failure reach no world and leave no row."""
        with pytest.raises(ToolError, match="missing argument 'amount'"):
            call("charge_card", {"customer": "C-1"})
        with pytest.raises(ToolError, match="must be int"):
            call("charge_card", {"customer": "C-1", "amount": "5"})
        with pytest.raises(TransientToolError):
            call("charge_card", {"customer": "C-1", "amount": 5, "fail_attempts": 1})
        assert read_ledger(db_path) == [] and effect_rows(db_path) == []
        call("charge_card", {"customer": "C-1", "amount": 5, "fail_attempts": 1}, attempt=2)
        assert len(read_ledger(db_path)) == 1

    def test_built_in_names_cannot_be_declared(self, world: WorldStore) -> None:
        """make_tool_function refuses declared tools that reuse a catalog name."""
        shadow = DeclaredTool("read_file", "read", collection="files")
        with pytest.raises(ValueError, match="reuse built-in names: read_file"):
            make_tool_function(world, {"read_file": shadow})

    def test_an_undeclared_tool_is_unknown(self, call: Calls) -> None:
        """A name neither built in nor declared fails at the gate."""
        with pytest.raises(ToolError, match="unknown tool 'charge'"):
            call("charge")


class TestDigestAndSeed:
    @pytest.mark.parametrize(
        ("tool", "args"),
        [
            ("update_crm", {"customer": "C-1", "status": "churned"}),
            ("create_ticket", {"subject": "another"}),
            ("send_email", {"to": "a@b.c", "body": "again"}),
            ("notify", {"text": "again"}),
        ],
    )
    def test_the_digest_covers_the_generic_tables(
        self, tool: str, args: dict[str, Any], tmp_path: Path
    ) -> None:
        """A world with one more record, message or opaque call has another digest; leaving
        out the step that made it, the same."""
        first = [
            ("update_crm", {"customer": "C-1", "status": "vip"}),
            ("create_ticket", {"subject": "refund"}),
            ("send_email", {"to": "a@b.c", "body": "x"}),
            ("notify", {"text": "y"}),
        ]
        paths = tmp_path / "base.db", tmp_path / "more.db"
        for path in paths:
            with WorldStore.open(path) as world:
                run = Calls(world)
                for tool_once, args_once in first:
                    run(tool_once, args_once)
                if path.stem == "more":
                    run(tool, args, op_id="s009")
        base, more = paths
        assert world_digest(more) != world_digest(base)
        if tool != "update_crm":  # a put overwrites s001's record: its step owns it now
            assert world_digest(more, {"s009"}) == world_digest(base)

    def test_seeded_records_are_world_state_of_no_step(
        self, world: WorldStore, db_path: Path
    ) -> None:
        """Seeded records are rows of the world, written by op ``seed``, ledgered nowhere."""
        seeded(world, "inbox", "m-1", {"subject": "hi"})
        [row] = effect_rows(db_path)
        assert (row.table, row.op_id, row.values) == (
            "records",
            SEED_OP,
            ("inbox", "m-1", '{"subject":"hi"}'),
        )
        assert read_ledger(db_path) == []

    def test_seed_refuses_a_world_a_tool_ran_in(self, call: Calls, world: WorldStore) -> None:
        """A world is seeded before the first life, never after a tool ran."""
        call("list_tickets")
        with pytest.raises(ValueError, match="already ran"):
            seeded(world, "inbox", "m-1", {})

    def test_an_old_world_gets_the_new_tables(self, db_path: Path) -> None:
        """A world of schema 1 is brought to the current schema when opened."""
        db = sqlite3.connect(db_path)
        db.execute("PRAGMA user_version = 1")
        db.close()
        with WorldStore.open(db_path):
            pass
        assert effect_rows(db_path) == []


class TestPlan:
    def test_tools_and_world_travel_in_the_plan(self, tmp_path: Path) -> None:
        """A plan with declared tools and seed records reads back equal from plan.json."""
        plan = Plan(
            "billing",
            3,
            "billing.toml",
            (
                PlanStep(
                    1,
                    "s001",
                    "charge_card",
                    {"customer": "C-1", "amount": 5},
                    Verification("get_balance", {"customer": "C-1"}, "value", equals=5),
                ),
            ),
            dict(TOOLS),
            (WorldRecord("customers", "C-1", {"name": "Ada"}),),
        )
        write_plan(plan, tmp_path / "plan.json")
        assert load_plan(tmp_path / "plan.json") == plan

    def test_a_plan_without_them_is_written_as_before(self, tmp_path: Path) -> None:
        """A plan of built-in tools has no ``tools`` or ``world`` key."""
        plan = Plan("p", 1, "p.toml", (PlanStep(1, "s001", "ui_dump", {}),))
        write_plan(plan, tmp_path / "plan.json")
        data = json.loads((tmp_path / "plan.json").read_text())
        assert "tools" not in data and "world" not in data
