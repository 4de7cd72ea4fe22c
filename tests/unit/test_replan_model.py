"""The re-planning model's order of a batch, and what the supervisor keeps of an answer by
content."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.agent.model import MODELS, ReplanningModel
from harness.agent.plan import Plan, PlanStep, batches
from harness.chaos.supervisor import History, LedgerWatch


def _plan(seed: int = 7) -> Plan:
    taps = tuple(
        PlanStep(1, f"s001{letter}", "ui_tap", {"element": letter}, batch=1) for letter in "abcd"
    )
    after = PlanStep(2, "s002", "ui_dump", {})
    pair = tuple(PlanStep(3, f"s003{x}", "alarm", {"time": x}, batch=3) for x in "ab")
    return Plan("replan", seed, "replan.toml", (*taps, after, *pair), model="replan")


def _orders(life: int, seed: int = 7) -> list[tuple[str, ...]]:
    """The op ids of each batch of the plan, in the order the model issues them in ``life``."""
    runtime: Any = SimpleNamespace(incarnation=life)
    model = ReplanningModel(runtime, _plan(seed), lambda tool, args, ctx: None)
    return [
        tuple(step.op_id for step in model.batch_order(issued))
        for issued in batches(model.plan.steps)
    ]


class TestTheReplanningModel:
    def test_is_a_model_a_plan_may_name(self) -> None:
        assert MODELS["replan"] is ReplanningModel

    def test_the_first_life_issues_the_plans_order(self) -> None:
        assert _orders(1) == [("s001a", "s001b", "s001c", "s001d"), ("s002",), ("s003a", "s003b")]

    @pytest.mark.parametrize("life", range(2, 12))
    def test_a_later_life_reorders_every_batch_never_as_planned(self, life: int) -> None:
        """Each batch of two or more comes in another order, of the same calls; a step of
        one call stays where it is."""
        planned = _orders(1)
        shuffled = _orders(life)
        assert shuffled[1] == ("s002",)
        for mine, theirs in ((shuffled[0], planned[0]), (shuffled[2], planned[2])):
            assert sorted(mine) == sorted(theirs) and mine != theirs

    def test_the_order_is_a_function_of_the_seed_and_the_life(self) -> None:
        """The same seed and life give the same order (a replayed trial issues it again);
        the lives of a trial, and other seeds, do not all give one order."""
        assert _orders(3) == _orders(3)
        assert len({_orders(life)[0] for life in range(2, 12)}) > 1
        assert len({_orders(2, seed)[0] for seed in range(10)}) > 1


class TestTheSupervisorKeepsTheAnsweringOp:
    def test_an_answer_by_content_is_kept_with_its_op(self, tmp_path: Path) -> None:
        """``ack s001b~2 <digest> s001a`` is an ``ok`` of ``s001b~2``, handed a result of that
        digest, answered by ``s001a``; an answer by its own id, and an invoke, carry no
        ``answered_by``; the ack event names the call and the digest."""
        out, events = io.StringIO(), io.StringIO()
        history = History(out)
        ledger = LedgerWatch(tmp_path / "world.db")
        for message in (
            "invoke s001b~2",
            "ack s001b~2 d1g35t s001a",
            "invoke s002~2",
            "fail s002~2",
        ):
            history.note(message, 2, events, ledger)
        ledger.close()
        told = [json.loads(line) for line in out.getvalue().splitlines()]
        assert [(t["type"], t["op"], t.get("answered_by")) for t in told] == [
            ("invoke", "s001b~2", None),
            ("ok", "s001b~2", "s001a"),
            ("invoke", "s002~2", None),
            ("fail", "s002~2", None),
        ]
        (ack,) = [json.loads(line) for line in events.getvalue().splitlines()]
        assert (ack["event"], ack["op"], ack["result"]) == ("ack", "s001b~2", "d1g35t")
