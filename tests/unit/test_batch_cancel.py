"""A batch call cancelled at a failpoint, in process: the model's side of a cancellation.

The failpoint action ``cancel`` cancels the asyncio task of the call that hit the
point. The call comes back to the model cancelled, for that call only; the model
tells ``info`` and, once the batch is back, issues it again under the same op id:
a retry-safe op runs again, an unsafe one is verified as a lost reply is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.agent.batch import Cancelled, run_batch
from harness.agent.model import ScriptedModel
from harness.agent.plan import Plan, PlanStep, Verification
from harness.failpoints import arm, hit_ops, parse_failpoints
from harness.runtime import CallContext, Runtime, ToolClass, ToolTable
from harness.runtime.records import FinishRecord, IntentRecord, ResolvedRecord
from tests.conftest import IW, NI, RO, journal_records, open_runtime

TABLE = ToolTable({"tap": ToolClass(NI), "put": ToolClass(IW), "read": ToolClass(RO)})
TAP = PlanStep(
    1, "s001a", "tap", {"element": "save"}, Verification("read", {}, "taps", "save"), batch=1
)
PUT = PlanStep(1, "s001b", "put", {"key": "k"}, batch=1)
READ = PlanStep(1, "s001c", "read", {}, batch=1)
PLAN = Plan("phone", 1, "phone.toml", (TAP, PUT, READ))


class Phone:
    """A world of taps and puts; every call it runs is listed as (op id, attempt)."""

    def __init__(self) -> None:
        self.taps: list[str] = []
        self.calls: list[tuple[str, int]] = []

    def __call__(self, tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        self.calls.append((ctx.op_id, ctx.attempt))
        if tool == "tap":
            self.taps.append(args["element"])
        return {"taps": list(self.taps)}


class Recording(ScriptedModel):
    """The scripted model, its words to the supervisor kept instead of sent."""

    def __init__(self, runtime: Runtime, plan: Plan, execute: Phone) -> None:
        super().__init__(runtime, plan, execute)
        self.told: list[tuple[str, str]] = []

    def tell(
        self, what: str, op_id: str, result: object = None, answered_by: str | None = None
    ) -> None:
        self.told.append((what, op_id))

    def of(self, op_id: str) -> list[str]:
        return [what for what, op in self.told if op == op_id]


def _run(journal: Path, spec: str) -> tuple[Recording, Phone]:
    arm(parse_failpoints(spec, source="test"))
    phone = Phone()
    with open_runtime(journal, table=TABLE) as runtime:
        model = Recording(runtime, PLAN, phone)
        model.run()
    return model, phone


class TestABatchCallCancelledAfterItsIntent:
    def test_the_others_of_the_batch_finish(self, journal_path: Path) -> None:
        """Only the cancelled call comes back cancelled; the others come back ok."""
        arm(parse_failpoints("op.after_intent@2=cancel", source="test"))
        told: list[tuple[str, str]] = []
        with open_runtime(journal_path, table=TABLE) as runtime:
            calls = [(step.op_id, step) for step in PLAN.steps]
            outcomes = run_batch(
                runtime,
                calls,
                Phone(),
                lambda what, op, result=None, by=None: told.append((what, op)),
            )
        assert isinstance(outcomes[1], Cancelled) and outcomes[1].op_id == "s001b"
        assert [o.status for o in outcomes if not isinstance(o, Cancelled)] == ["ok", "ok"]
        assert ("info", "s001b") in told and ("ack", "s001a") in told

    def test_a_retry_safe_call_runs_again_as_a_new_attempt(self, journal_path: Path) -> None:
        """The put never ran its tool; issued again, it runs once, as attempt 2."""
        model, phone = _run(journal_path, "op.after_intent@2=cancel")
        assert [call for call in phone.calls if call[0] == "s001b"] == [("s001b", 2)]
        assert model.of("s001b") == ["invoke", "info", "invoke", "ack"]
        finishes = [
            r
            for r in journal_records(journal_path)
            if isinstance(r, FinishRecord) and r.op_id == "s001b"
        ]
        assert [(f.unknown, f.succeeded) for f in finishes] == [(True, False), (False, True)]

    def test_an_unsafe_call_is_verified_and_resolved(self, journal_path: Path) -> None:
        """The tap never ran: issued again it answers info with its hint, its check finds
        the effect absent, and it is redone once and resolved."""
        model, phone = _run(journal_path, "op.after_intent@1=cancel")
        assert phone.taps == ["save"]
        assert [op for op, _ in phone.calls if op.startswith("s001a")] == [
            "s001a.check",
            "s001a.redo",
        ]
        assert model.of("s001a") == ["invoke", "info", "invoke", "info", "hint", "ack"]
        records = journal_records(journal_path)
        resolved = [r for r in records if isinstance(r, ResolvedRecord)]
        assert [(r.op_id, r.resolution.value, r.redo_op) for r in resolved] == [
            ("s001a", "redone", "s001a.redo")
        ]
        intents = [r.op_id for r in records if isinstance(r, IntentRecord)]
        assert intents.count("s001a") == 1  # never replayed under its own id


class TestABatchCallCancelledAfterItsEffect:
    def test_its_finish_is_durable_and_it_is_not_run_again(self, journal_path: Path) -> None:
        """Cancelled while its finish is written: the finish holds, and issuing it again is
        answered ok from the journal, without a hint or a second run."""
        model, phone = _run(journal_path, "op.after_effect@1=cancel")
        assert phone.taps == ["save"] and ("s001a.check", 1) not in phone.calls
        assert model.of("s001a") == ["invoke", "info", "invoke", "ack"]
        finishes = [
            r
            for r in journal_records(journal_path)
            if isinstance(r, FinishRecord) and r.op_id == "s001a"
        ]
        assert [(f.unknown, f.succeeded) for f in finishes] == [(False, True)]


class TestTheBatchsOrder:
    @pytest.mark.parametrize("run", range(3))
    def test_the_crash_free_hit_order_is_the_same_every_run(self, run: int, tmp_path: Path) -> None:
        """Without a cancel each call runs its tool at once after its intent: the points
        come call by call, the same in every run."""
        points = ("op.after_intent", "op.after_effect", "op.after_finish")
        arm(tuple(spec for p in points for spec in parse_failpoints(f"{p}=count")))
        with open_runtime(tmp_path / "journal", table=TABLE) as runtime:
            Recording(runtime, PLAN, Phone()).run()
        ops = [step.op_id for step in PLAN.steps]
        assert hit_ops() == dict.fromkeys(points, ops)
