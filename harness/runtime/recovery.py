"""Recovery planning: fold the journal into op states, then decide per op.

``fold`` replays records in order: an intent makes an op RUNNING, a finish
makes it SUCCEEDED or FAILED, a later intent (a retry) makes it RUNNING again.
An op the model resolved after a VERIFY is closed and not planned again.

``plan_recovery`` decides from the class *snapshot* in each op's intent, never
from today's tool table, and is a pure function of the folded journal: planning
twice, or again after a kill during recovery, gives the same decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.runtime.classes import UNLISTED, ToolClass
from harness.runtime.journal import without_cyclic_gc
from harness.runtime.matrix import OpState, RecoveryDecision, decide_for_operation
from harness.runtime.records import (
    CheckpointRecord,
    DecisionRecord,
    FinishRecord,
    HintRecord,
    IncarnationRecord,
    IntentRecord,
    Record,
    ResolvedRecord,
    SettledRecord,
)

__all__ = ["OpHistory", "apply_record", "fold", "last_incarnation", "plan_recovery"]


@dataclass(slots=True)
class OpHistory:
    """Everything the journal says about one op, folded in record order."""

    op_id: str
    tool: str
    snapshot: ToolClass
    args: Mapping[str, Any]
    redo_of: str | None
    args_digest: str = ""
    fresh: bool = False
    """A check that identity by content never matches (``IntentRecord.fresh``)."""
    state: OpState = OpState.RUNNING
    attempt: int = 1
    result: Any = None
    error: str | None = None
    decisions: list[DecisionRecord] = field(default_factory=list)
    hints: int = 0
    resolution: ResolvedRecord | None = None
    settled_at: float | None = None
    """When a compaction first folded the op (None: it never did)."""

    @property
    def resolved(self) -> bool:
        return self.resolution is not None

    @property
    def settled(self) -> bool:
        """Whether the op is closed for good: SUCCEEDED, FAILED, or resolved."""
        return self.state is not OpState.RUNNING or self.resolution is not None


def fold(records: Iterable[Record]) -> dict[str, OpHistory]:
    """Each op's history, in the order of its first intent."""
    ops: dict[str, OpHistory] = {}
    with without_cyclic_gc():
        for record in records:
            apply_record(ops, record)
    return ops


def apply_record(ops: dict[str, OpHistory], record: Record) -> None:
    """Fold one more record into ``ops`` (the runtime keeps its view current this way)."""
    if isinstance(record, IntentRecord):
        op = ops.get(record.op_id)
        if op is None:
            ops[record.op_id] = OpHistory(
                record.op_id,
                record.tool,
                record.snapshot,
                record.args,
                record.redo_of,
                record.args_digest,
                record.fresh,
                attempt=record.attempt,
            )
        else:
            op.state, op.attempt = OpState.RUNNING, record.attempt
        return
    if isinstance(record, SettledRecord):
        ops[record.op_id] = _unfold(record)
        return
    op = ops.get(getattr(record, "op_id", ""))
    if op is None:
        return
    if isinstance(record, FinishRecord):
        if record.retrying or record.unknown:  # retried in-process, or a bug: still in flight
            op.error = record.error
            return
        op.state = OpState.SUCCEEDED if record.succeeded else OpState.FAILED
        op.result, op.error = record.result, record.error
    elif isinstance(record, DecisionRecord):
        op.decisions.append(record)
    elif isinstance(record, HintRecord):
        op.hints += 1
    elif isinstance(record, ResolvedRecord):
        op.resolution = record


_NO_ARGS: Mapping[str, Any] = {}


def _unfold(record: SettledRecord) -> OpHistory:
    """The history of a settled op a compaction folded (its arguments are gone)."""
    resolution = None
    if record.resolution is not None:
        resolution = ResolvedRecord(
            record.op_id, record.resolved_in, record.resolution, record.redo_op, record.note
        )
    return OpHistory(
        record.op_id,
        record.tool,
        record.snapshot,
        _NO_ARGS,
        record.redo_of,
        record.args_digest,
        record.fresh,
        state=record.state,
        attempt=record.attempt,
        result=record.result,
        error=record.error,
        resolution=resolution,
        settled_at=record.settled_at,
    )


def last_incarnation(records: Iterable[Record]) -> int:
    return max(
        (r.incarnation for r in records if isinstance(r, IncarnationRecord | CheckpointRecord)),
        default=0,
    )


def plan_recovery(
    ops: Mapping[str, OpHistory], *, not_started: Mapping[str, str] | None = None
) -> list[RecoveryDecision]:
    """Decide for every op the journal knows (from its snapshot) and for plan ops it does not.

    ``not_started`` maps the op ids the caller will issue to their tools.
    """
    not_started = not_started or {}
    plan = [
        decide_for_operation(op.op_id, op.tool, op.state, op.snapshot, op.args)
        for op in ops.values()
        if not op.resolved
    ]
    # An op without an intent has no snapshot; its class cannot matter (always SKIP).
    plan.extend(
        decide_for_operation(op_id, tool, OpState.NOT_STARTED, UNLISTED, {})
        for op_id, tool in not_started.items()
        if op_id not in ops
    )
    return plan
