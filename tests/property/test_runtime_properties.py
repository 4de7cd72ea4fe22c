"""Properties of recovery over any run of tool calls and any crash point in its journal.

Each example runs a random sequence of tool calls (random transient, permanent
and unexpected failures) through a real Runtime on a real journal, cuts the
journal at any byte offset (a crash that lost everything after it), and reopens
it with a table that flips every class. The fake tool counts real executions
per op id: that count, not the journal, is the ground truth of what ran.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from harness.failpoints import arm, disarm, parse_failpoints
from harness.runtime import (
    CallContext,
    Decision,
    FailpointTriggered,
    OpState,
    ToolClass,
    ToolError,
    ToolTable,
    TransientToolError,
)
from harness.runtime.journal import FILE_HEADER, scan_journal
from harness.runtime.records import (
    DecisionRecord,
    FinishRecord,
    HintRecord,
    IntentRecord,
    Record,
    RecoveredRecord,
)
from tests.conftest import IW, NI, RO, UNK, FakeTool, open_runtime

DEFAULT = ToolTable.shipped()
UNLISTED = "unlisted_tool"
TOOLS = [*sorted(DEFAULT.entries), UNLISTED]

# The table at call time: the default one, but with one ask_user tool of an
# unsafe class, so that "ask_user is retried whatever its class" is exercised.
CALL_TABLE = DEFAULT.with_overrides({"ask_user_confirm": ToolClass(UNK, ask_user=True)})


def snapshot_at_call(tool: str) -> ToolClass:
    """The class the intent must carry: the call-time table's entry, UNKNOWN when unlisted."""
    return CALL_TABLE.entries.get(tool, ToolClass(UNK))


# Every class swapped for one whose RUNNING decision is the opposite, so a
# decision taken from today's table instead of the snapshot cannot go unseen.
_OPPOSITE = {RO: NI, IW: UNK, NI: RO, UNK: IW}
FLIPPED = ToolTable(
    {
        tool: ToolClass(NI) if c.ask_user else ToolClass(_OPPOSITE[c.idempotency])
        for tool in TOOLS
        for c in [snapshot_at_call(tool)]
    }
)

Behaviour = str  # "ok" | "transient" | "permanent" | "crash"


class ToolCrash(Exception):
    """The fake tool's "crash": an exception no tool declares, so it escapes the runtime.

    Its own class, so that the test lets through only the crash it injected, never
    another exception the runtime might raise.
    """


def _failure(behaviour: Behaviour) -> BaseException | None:
    return {
        "ok": None,
        "transient": TransientToolError("busy"),
        "permanent": ToolError("refused"),
        "crash": ToolCrash("the tool blew up"),  # leaves the op RUNNING
    }[behaviour]


@dataclass(frozen=True)
class Call:
    tool: str
    behaviours: tuple[Behaviour, ...]  # attempt 1, 2, ...; later attempts succeed


calls_strategy = st.lists(
    st.builds(
        Call,
        st.sampled_from(TOOLS),
        st.tuples(st.sampled_from(["ok", "transient", "permanent", "crash"])).flatmap(
            lambda first: st.lists(
                st.sampled_from(["ok", "transient", "permanent"]), max_size=3
            ).map(lambda rest: (*first, *rest))
        ),
    ),
    min_size=1,
    max_size=6,
)


MAX_ATTEMPTS = 3  # the runtime's default


def crashes_at_first_attempt(call: Call) -> bool:
    """Only a first attempt may crash: the tool raises ToolCrash, and the call with it."""
    return call.behaviours[0] == "crash"


def executions_in_first_life(call: Call) -> int:
    """In-process retries: only a retry-safe class retries a transient failure, boundedly."""
    if not snapshot_at_call(call.tool).retry_safe:
        return 1
    runs = 1
    while runs < MAX_ATTEMPTS and call.behaviours[runs - 1 : runs] == ("transient",):
        runs += 1
    return runs


def state_after_first_life(call: Call) -> OpState:
    """The last attempt's behaviour decides: a crash leaves the op RUNNING (outcome unknown),
    and so does a transient failure of a class that may not run twice (the reply may have
    been lost after the effect); a retry-safe class's last transient failure is FAILED."""
    last = executions_in_first_life(call) - 1
    behaviour = call.behaviours[last] if last < len(call.behaviours) else "ok"
    safe = snapshot_at_call(call.tool).retry_safe
    return {
        "ok": OpState.SUCCEEDED,
        "transient": OpState.FAILED if safe else OpState.RUNNING,
        "permanent": OpState.FAILED,
        "crash": OpState.RUNNING,
    }[behaviour]


def seed_decision(state: OpState, snapshot: ToolClass) -> Decision:
    """The recovery rule, restated here independently of DECISION_MATRIX."""
    if state is not OpState.RUNNING:
        return Decision.SKIP
    if snapshot.ask_user or snapshot.idempotency in (RO, IW):
        return Decision.RETRY
    return Decision.VERIFY


def surviving_states(records: list[Record]) -> tuple[dict[str, OpState], Counter[str]]:
    """Each op's state and last attempt by the records that survived the cut."""
    states: dict[str, OpState] = {}
    attempts: Counter[str] = Counter()
    for record in records:
        if isinstance(record, IntentRecord):
            states[record.op_id] = OpState.RUNNING
            attempts[record.op_id] = record.attempt
        elif isinstance(record, FinishRecord) and not (record.retrying or record.unknown):
            # A transient failure the executor retries at once does not settle the op,
            # nor does a call whose tool raised something else (its outcome is unknown).
            states[record.op_id] = OpState.SUCCEEDED if record.succeeded else OpState.FAILED
    return states, attempts


class TestRecoveryAfterAnyCut:
    @settings(max_examples=400, deadline=None)
    @given(
        calls=calls_strategy,
        kill_point=st.sampled_from([None, "recovery.after_decision", "recovery.before_retry"]),
        data=st.data(),
    )
    def test_recovery_after_any_cut(
        self, calls: list[Call], kill_point: str | None, data: st.DataObject
    ) -> None:
        """After any run and cut, recovery never replays unsafe or settled ops; snapshots decide."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "agent.journal"
            ops = {f"op{i}": call for i, call in enumerate(calls)}
            tool = FakeTool(
                {op_id: [_failure(b) for b in call.behaviours] for op_id, call in ops.items()}
            )

            # The first life: run every call.
            with open_runtime(path, table=CALL_TABLE) as rt:
                for op_id, call in ops.items():
                    if crashes_at_first_attempt(call):  # the "crash" behaviour escapes
                        with pytest.raises(ToolCrash):
                            rt.call(op_id, call.tool, {"op": op_id}, tool)
                    else:
                        rt.call(op_id, call.tool, {"op": op_id}, tool)
            ran_before = tool.counts()
            for op_id, call in ops.items():
                assert ran_before[op_id] == executions_in_first_life(call), op_id

            # The crash: everything after some byte offset is lost.
            full = scan_journal(path)
            assert full.torn is None
            assert surviving_states([s.record for s in full.records])[0] == {
                op_id: state_after_first_life(call) for op_id, call in ops.items()
            }
            # Any offset after the file header (durable before the file has its name);
            # half the time one inside the record after an intent, where a crash
            # leaves the op RUNNING (the interesting case for recovery).
            intent_ends = [s.end for s in full.records if isinstance(s.record, IntentRecord)]
            cut = data.draw(
                st.one_of(
                    st.integers(len(FILE_HEADER), full.valid_end),
                    st.sampled_from(intent_ends).flatmap(
                        lambda end: st.integers(end, min(end + 60, full.valid_end))
                    ),
                ),
                label="cut",
            )
            os.truncate(path, cut)
            survivors = [s.record for s in full.records if s.end <= cut]
            states, last_attempt = surviving_states(survivors)
            expected = {
                op_id: seed_decision(
                    states.get(op_id, OpState.NOT_STARTED), snapshot_at_call(call.tool)
                )
                for op_id, call in ops.items()
            }
            not_started = {op_id: call.tool for op_id, call in ops.items()}
            for value in sorted({d.value for d in expected.values()}):
                event(f"plan has {value}")

            # The second life, with a table that flips every class; maybe killed in recovery.
            with open_runtime(path, table=FLIPPED) as rt:
                assert [s.record for s in rt.journal.scan.records] == survivors
                plan = rt.plan(not_started)
                assert rt.plan(not_started) == plan, "planning twice must give the same plan"
                assert {d.op_id: d.decision for d in plan} == expected
                for d in plan:
                    assert d.snapshot == snapshot_at_call(ops[d.op_id].tool) or (
                        d.state is OpState.NOT_STARTED
                    )
                    if not d.snapshot.ask_user and d.snapshot.idempotency in (NI, UNK):
                        assert d.decision is not Decision.RETRY
                if kill_point is not None:
                    arm(parse_failpoints(f"{kill_point}@1=raise"))
                    try:
                        rt.recover(tool)
                        killed = False
                    except FailpointTriggered:
                        killed = True
                    finally:
                        disarm()
                    acted_on = {
                        "recovery.after_decision": {Decision.RETRY, Decision.VERIFY},
                        "recovery.before_retry": {Decision.RETRY},
                    }[kill_point]
                    assert killed == any(d in acted_on for d in expected.values())
                    event(f"killed at {kill_point}" if killed else "kill point not reached")
                    if killed:
                        assert tool.counts() == ran_before, "nothing may run before the kill point"

            # The third life: the same decisions, then recovery runs to its end, and
            # then the normal flow issues every op again.
            with open_runtime(path, table=FLIPPED) as rt:
                again = rt.plan(not_started)
                assert [(d.op_id, d.decision, d.hint) for d in again] == [
                    (d.op_id, d.decision, d.hint) for d in plan
                ]
                incarnation = rt.incarnation

                def decisions_are_durable(ctx: CallContext) -> None:
                    decided = [
                        s.record
                        for s in scan_journal(path).records
                        if isinstance(s.record, DecisionRecord)
                    ]
                    now = {r.op_id for r in decided if r.incarnation == incarnation}
                    # Every RETRY and VERIFY is durable before any retry; a settled op's
                    # SKIP is never written, a not-started op's once.
                    skipped_before = {
                        (r.op_id, r.state)
                        for r in decided
                        if r.incarnation < incarnation and r.decision is Decision.SKIP
                    }
                    assert now == {
                        d.op_id
                        for d in again
                        if d.decision is not Decision.SKIP
                        or (
                            d.state is OpState.NOT_STARTED
                            and (d.op_id, d.state) not in skipped_before
                        )
                    }, "every decision that acts is durable before any retry"
                    assert not any(
                        r.decision is Decision.SKIP and r.state is not OpState.NOT_STARTED
                        for r in decided
                    ), "a settled op's SKIP is never journaled"

                tool.on_call = decisions_are_durable
                report = rt.recover(tool, not_started=not_started)
                tool.on_call = None
                ran_after = tool.counts()
                for op_id, call in ops.items():
                    # The normal flow runs only what never started, from its first attempt.
                    if op_id not in states and crashes_at_first_attempt(call):
                        with pytest.raises(ToolCrash):
                            rt.call(op_id, call.tool, {"op": op_id}, tool)
                        continue
                    outcome = rt.call(op_id, call.tool, {"op": op_id}, tool)
                    assert outcome.executed == (op_id not in states)
                for op_id in states:
                    assert tool.count(op_id) == ran_after[op_id]

            for op_id, decision in expected.items():
                if decision is Decision.RETRY:
                    assert ran_after[op_id] > ran_before[op_id]
                    new_attempts = [i.attempt for i in tool.invocations if i.op_id == op_id][
                        ran_before[op_id] :
                    ]
                    assert new_attempts[0] == last_attempt[op_id] + 1
                else:
                    # SKIP (a surviving SUCCEEDED or FAILED finish, or never started) and
                    # VERIFY: recovery runs nothing, whatever the kill did.
                    assert ran_after[op_id] == ran_before[op_id], (op_id, decision)
            assert {h.op_id for h in report.hints} == {
                op_id for op_id, d in expected.items() if d is Decision.VERIFY
            }
            journal = [s.record for s in scan_journal(path).records]
            written = sum(
                1 for r in journal if isinstance(r, DecisionRecord) and r.incarnation == incarnation
            )
            assert RecoveredRecord(incarnation, written) in journal
            # Recovery's hints: those before its end (a call after it may hand the
            # model a hint of its own, for an outcome it cannot know).
            recovery = journal[: journal.index(RecoveredRecord(incarnation, written))]
            assert {
                r.op_id
                for r in recovery
                if isinstance(r, HintRecord) and r.incarnation == incarnation
            } == {op_id for op_id, d in expected.items() if d is Decision.VERIFY}
