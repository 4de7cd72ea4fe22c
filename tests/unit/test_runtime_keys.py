"""Keyed tools and reconcilers: a provider that deduplicates by the idempotency key.

A keyed op left RUNNING is retried with the same key while the provider's window
holds on the runtime's clock, and decided by its class after; a transient failure
of a keyed call is retried in-process with the same key. A reconciler closes an op
of unknown outcome before the model is involved: present, absent (redone in the
same key chain), or unknown (left to VERIFY), journaled so that a start after a
kill mid-reconcile decides the same.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from itertools import product
from pathlib import Path
from typing import Any

import pytest

from harness.failpoints import arm, disarm, parse_failpoints
from harness.runtime import (
    CallContext,
    Decision,
    FailpointTriggered,
    IdempotencyClass,
    OpState,
    Reconciled,
    Runtime,
    ToolClass,
    ToolTable,
    ToolTableError,
    TransientToolError,
)
from harness.runtime.matrix import DECISION_MATRIX, decide, decide_keyed
from harness.runtime.records import DecisionRecord, IntentRecord, Resolution, ResolvedRecord
from tests.conftest import NI, journal_records

DAY = 86400.0
TABLE = ToolTable.parse(
    'format = 1\n[classes]\nnon_idempotent = ["charge", "notify"]\n[keyed]\ncharge = "24h"\n',
    source="<test>",
)
ARGS = {"amount": 1200, "currency": "eur"}


class Clock:
    """A clock the test moves by hand (the harness gives the trial's)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Provider:
    """A payment provider: ``charge`` drops a repeat of a key it has seen (when it
    deduplicates); ``notify`` sends every time. ``effects`` are the charges made."""

    def __init__(self, *, dedupes: bool = True, fail: Mapping[int, Exception] | None = None):
        self.dedupes = dedupes
        self.charges: dict[str, dict[str, Any]] = {}
        self.effects: list[str] = []
        self.keys_seen: list[str] = []
        self.fail = dict(fail or {})
        self.calls = 0

    def __call__(self, tool: str, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
        self.calls += 1
        key = ctx.idempotency_key
        self.keys_seen.append(key)
        if self.dedupes and key in self.charges:
            return self.charges[key]
        self.effects.append(key)
        result = {"charge": f"ch_{len(self.effects)}", "amount": args["amount"]}
        self.charges[key] = result
        if self.calls in self.fail:  # the effect is made, the reply is lost
            raise self.fail[self.calls]
        return result

    def reconcile(self, args: Mapping[str, Any], ctx: CallContext) -> Reconciled:
        return Reconciled.PRESENT if ctx.idempotency_key in self.charges else Reconciled.ABSENT


def _open(path: Path, clock: Clock, **options: Any) -> Runtime:
    return Runtime.open(path, table=TABLE, clock=clock, **options)


def _killed_after_effect(path: Path, provider: Provider, clock: Clock) -> None:
    """Charge once and die after the provider made the charge, before the finish."""
    with _open(path, clock) as rt:
        arm(parse_failpoints("op.after_effect=raise"))
        try:
            with pytest.raises(FailpointTriggered):
                rt.call("s001", "charge", ARGS, provider)
        finally:
            disarm()
    assert len(provider.effects) == 1


class TestTable:
    def test_keyed_section_gives_the_window_in_seconds(self) -> None:
        assert TABLE.classify("charge") == ToolClass(NI, False, DAY)
        assert TABLE.classify("charge").keyed
        assert not TABLE.classify("notify").keyed

    @pytest.mark.parametrize(
        ("window", "seconds"), [('"90s"', 90.0), ('"30m"', 1800.0), ('"2d"', 2 * DAY), ("45", 45.0)]
    )
    def test_windows_in_units_or_seconds(self, window: str, seconds: float) -> None:
        text = f'[classes]\nnon_idempotent = ["charge"]\n[keyed]\ncharge = {window}\n'
        assert ToolTable.parse(text, source="<t>").classify("charge").key_window == seconds

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            ('[classes]\n[keyed]\ncharge = "24h"\n', "also be listed in a class"),
            ('[classes]\nnon_idempotent = ["charge"]\n[keyed]\ncharge = "soon"\n', "soon"),
            ('[classes]\nnon_idempotent = ["charge"]\n[keyed]\ncharge = 0\n', "positive"),
            ('[classes]\nnon_idempotent = ["charge"]\nkeyed = ["charge"]\n', "keyed"),
        ],
    )
    def test_a_bad_keyed_entry_is_refused_naming_it(self, text: str, problem: str) -> None:
        with pytest.raises(ToolTableError, match=problem):
            ToolTable.parse(text, source="<t>")

    def test_written_back_equal(self) -> None:
        again = ToolTable.parse(TABLE.to_toml(), source="<again>")
        assert dict(again.entries) == dict(TABLE.entries)

    def test_a_snapshot_without_a_window_reads_as_before(self) -> None:
        assert ToolClass(NI).to_json() == {"class": "non_idempotent", "ask_user": False}
        assert ToolClass.from_json(ToolClass(NI, False, DAY).to_json()).key_window == DAY


class TestTheMatrixStands:
    def test_the_four_classes_decide_as_before(self) -> None:
        """The matrix itself is unchanged: RUNNING retries only the safe classes."""
        running = {
            (cls, ask): d
            for (state, cls, ask), d in DECISION_MATRIX.items()
            if state.value == "running"
        }
        assert running == {
            (cls, ask): Decision.RETRY if ask or cls.retry_safe else Decision.VERIFY
            for cls, ask in product(IdempotencyClass, (False, True))
        }
        assert {d for (s, _, _), d in DECISION_MATRIX.items() if s.value != "running"} == {
            Decision.SKIP
        }

    @pytest.mark.parametrize("age", [None, 0.0, 10.0, 10 * DAY])
    def test_without_a_window_every_cell_is_the_matrix(self, age: float | None) -> None:
        for state, cls, ask in DECISION_MATRIX:
            snapshot = ToolClass(cls, ask)
            assert decide_keyed(state, snapshot, age) is decide(state, snapshot)

    def test_a_keyed_op_running_retries_only_inside_its_window(self) -> None:
        keyed = ToolClass(NI, False, DAY)
        assert decide_keyed(OpState.RUNNING, keyed, 0.0) is Decision.RETRY
        assert decide_keyed(OpState.RUNNING, keyed, DAY - 1) is Decision.RETRY
        assert decide_keyed(OpState.RUNNING, keyed, DAY) is Decision.VERIFY
        assert decide_keyed(OpState.RUNNING, keyed, None) is Decision.VERIFY
        assert decide_keyed(OpState.SUCCEEDED, keyed, 0.0) is Decision.SKIP

    def test_a_table_without_keyed_tools_journals_no_time(self, journal_path: Path) -> None:
        provider = Provider()
        plain = ToolTable.parse('[classes]\nnon_idempotent = ["charge"]\n', source="<t>")
        with Runtime.open(journal_path, table=plain) as rt:
            arm(parse_failpoints("op.after_effect=raise"))
            try:
                with pytest.raises(FailpointTriggered):
                    rt.call("s001", "charge", ARGS, provider)
            finally:
                disarm()
        with Runtime.open(journal_path, table=plain) as rt:
            report = rt.recover(provider)
        assert [d.decision for d in report.decisions] == [Decision.VERIFY]
        records = journal_records(journal_path)
        assert all(r.at is None for r in records if isinstance(r, IntentRecord))
        assert all(r.age is None for r in records if isinstance(r, DecisionRecord))


class TestKeyedRecovery:
    def test_inside_the_window_retried_with_the_same_key(self, journal_path: Path) -> None:
        provider, clock = Provider(), Clock()
        _killed_after_effect(journal_path, provider, clock)
        clock.now += 3600
        with _open(journal_path, clock) as rt:
            report = rt.recover(provider)
            assert [(d.decision, d.age) for d in report.decisions] == [(Decision.RETRY, 3600.0)]
            assert report.hints == ()
            outcome = rt.call("s001", "charge", ARGS, provider)
        assert outcome.ok and outcome.result == {"charge": "ch_1", "amount": 1200}
        assert len(provider.effects) == 1  # the provider dropped the duplicate
        assert len(set(provider.keys_seen)) == 1 and len(provider.keys_seen) == 2
        decisions = [r for r in journal_records(journal_path) if isinstance(r, DecisionRecord)]
        assert [(r.decision, r.age) for r in decisions] == [(Decision.RETRY, 3600.0)]

    def test_after_the_window_verified(self, journal_path: Path) -> None:
        provider, clock = Provider(), Clock()
        _killed_after_effect(journal_path, provider, clock)
        clock.now += DAY + 1
        with _open(journal_path, clock) as rt:
            report = rt.recover(provider)
        assert [d.decision for d in report.decisions] == [Decision.VERIFY]
        assert [h.op_id for h in report.hints] == ["s001"]
        assert provider.calls == 1

    def test_a_transient_failure_is_retried_in_process_with_the_same_key(
        self, journal_path: Path
    ) -> None:
        provider = Provider(fail={1: TransientToolError("timeout after the charge")})
        with _open(journal_path, Clock()) as rt:
            outcome = rt.call("s001", "charge", ARGS, provider)
        assert outcome.ok and provider.calls == 2
        assert len(provider.effects) == 1 and len(set(provider.keys_seen)) == 1

    def test_a_provider_that_does_not_deduplicate_charges_twice(self, journal_path: Path) -> None:
        """What the window trusts: marking a tool keyed whose provider ignores the key
        repeats the effect (check-table finds such a tool)."""
        provider, clock = Provider(dedupes=False), Clock()
        _killed_after_effect(journal_path, provider, clock)
        with _open(journal_path, clock) as rt:
            rt.recover(provider)
        assert len(provider.effects) == 2


def _resolutions(path: Path) -> list[tuple[str, Resolution, str | None]]:
    return [
        (r.op_id, r.resolution, r.redo_op)
        for r in journal_records(path)
        if isinstance(r, ResolvedRecord)
    ]


class TestReconcilers:
    """Past the window (or for a tool without a key), a reconciler decides before VERIFY."""

    def _recover(
        self, path: Path, provider: Provider, reconciler: Any, *, lost: bool = False, **options: Any
    ) -> Any:
        clock = Clock()
        _killed_after_effect(path, provider, clock)
        if lost:  # the provider has no charge under the key: the effect is absent
            provider.charges.clear()
        clock.now += 2 * DAY
        with _open(path, clock, reconcilers={"charge": reconciler}, **options) as rt:
            report = rt.recover(provider)
            return report, rt.call("s001", "charge", ARGS, provider)

    def test_present_closes_the_op_as_effect_present(self, journal_path: Path) -> None:
        provider = Provider()
        report, outcome = self._recover(journal_path, provider, provider.reconcile)
        assert [d.decision for d in report.decisions] == [Decision.VERIFY]
        assert report.hints == ()
        assert outcome.ok and outcome.resolution is Resolution.EFFECT_PRESENT
        assert _resolutions(journal_path) == [("s001", Resolution.EFFECT_PRESENT, None)]
        assert provider.calls == 1

    def test_absent_redoes_it_in_the_same_key_chain(self, journal_path: Path) -> None:
        provider = Provider()
        report, outcome = self._recover(journal_path, provider, provider.reconcile, lost=True)
        assert report.hints == ()
        assert _resolutions(journal_path) == [("s001", Resolution.REDONE, "s001.redo")]
        assert outcome.ok and outcome.resolution is Resolution.REDONE
        assert len(provider.effects) == 2
        assert provider.effects[0] == provider.effects[1]  # the redo carried the first key
        redo = [r for r in journal_records(journal_path) if isinstance(r, IntentRecord)][-1]
        assert (redo.op_id, redo.redo_of) == ("s001.redo", "s001")

    @pytest.mark.parametrize(
        "reconciler",
        [
            lambda args, ctx: Reconciled.UNKNOWN,
            lambda args, ctx: "maybe",
            lambda args, ctx: 1 / 0,
            lambda args, ctx: time.sleep(5),
        ],
        ids=["unknown", "no-answer", "raises", "too-slow"],
    )
    def test_anything_else_leaves_it_to_verify(self, journal_path: Path, reconciler: Any) -> None:
        provider = Provider()
        report, outcome = self._recover(journal_path, provider, reconciler, reconcile_timeout=0.2)
        assert [h.op_id for h in report.hints] == ["s001"]
        assert outcome.status == "info" and outcome.hint is not None
        assert _resolutions(journal_path) == []
        assert provider.calls == 1

    @pytest.mark.parametrize("present", [True, False])
    def test_a_kill_mid_reconcile_decides_the_same_at_the_next_start(
        self, journal_path: Path, present: bool
    ) -> None:
        provider, clock = Provider(), Clock()
        _killed_after_effect(journal_path, provider, clock)
        if not present:
            provider.charges.clear()
        clock.now += 2 * DAY
        reconcilers = {"charge": provider.reconcile}
        with _open(journal_path, clock, reconcilers=reconcilers) as rt:
            arm(parse_failpoints("recovery.reconcile=raise"))
            try:
                with pytest.raises(FailpointTriggered):
                    rt.recover(provider)
            finally:
                disarm()
        assert _resolutions(journal_path) == []
        with _open(journal_path, clock, reconcilers=reconcilers) as rt:
            report = rt.recover(provider)
            outcome = rt.call("s001", "charge", ARGS, provider)
        assert report.hints == () and outcome.ok
        want = (
            [("s001", Resolution.EFFECT_PRESENT, None)]
            if present
            else [("s001", Resolution.REDONE, "s001.redo")]
        )
        assert _resolutions(journal_path) == want
        assert len(provider.effects) == (1 if present else 2)

    def test_a_lost_reply_in_a_life_is_reconciled_without_a_hint(self, journal_path: Path) -> None:
        provider = Provider(fail={1: TransientToolError("timeout after the charge")})
        with _open(
            journal_path, Clock(), reconcilers={"charge": provider.reconcile}, max_attempts=1
        ) as rt:
            outcome = rt.call("s001", "charge", ARGS, provider)
            assert outcome.ok and outcome.executed and outcome.hint is None
            assert outcome.resolution is Resolution.EFFECT_PRESENT
            assert rt.deliver_hints() == ()
        assert _resolutions(journal_path) == [("s001", Resolution.EFFECT_PRESENT, None)]
        assert len(provider.effects) == 1


class TestOnAnEventLoop:
    def test_the_async_runtime_retries_keyed_and_reconciles_the_same(
        self, journal_path: Path
    ) -> None:
        """``AsyncRuntime`` carries out the same steps: past the window, the reconciler's
        PRESENT closes the op, with no hint."""
        import asyncio

        from harness.runtime import AsyncRuntime

        provider, clock = Provider(), Clock()
        _killed_after_effect(journal_path, provider, clock)

        async def start(reconcilers: dict[str, Any]) -> Any:
            runtime = await AsyncRuntime.open(
                journal_path, table=TABLE, clock=clock, reconcilers=reconcilers
            )
            async with runtime:
                return await runtime.recover(provider)

        clock.now += 2 * DAY
        report = asyncio.run(start({"charge": provider.reconcile}))
        assert [d.decision for d in report.decisions] == [Decision.VERIFY]
        assert report.hints == ()
        assert _resolutions(journal_path) == [("s001", Resolution.EFFECT_PRESENT, None)]
        assert provider.calls == 1
