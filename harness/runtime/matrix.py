"""The recovery decision matrix, as a lookup table.

Hold ``DECISION_MATRIX`` against the recovery table (docs/runtime.md): a durable
success, a failure and an op never started are skipped; an op that was running
at the crash (its outcome UNKNOWN) is retried only when running it again is
harmless (read-only, idempotent, or asking a person), and otherwise verified:
never replayed, but handed to the model as a hint to check its real effect.

A keyed tool (its provider drops a repeat of the same idempotency key inside a
retention window) adds one rule before the matrix, ``decide_keyed``: an op of
it left RUNNING is RETRIED with the same key while its key is younger than the
window, and decided by its cell once the window has passed (or its age is not
known). A table without keyed tools decides by the matrix alone.

Contract: ``decide`` is a pure lookup; a key the table does not hold raises
``DecisionKeyError`` rather than guessing.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import product
from types import MappingProxyType
from typing import Any

from harness.runtime.classes import IdempotencyClass, ToolClass
from harness.runtime.errors import DecisionKeyError

__all__ = [
    "DECISION_MATRIX",
    "Decision",
    "OpState",
    "RecoveryDecision",
    "decide",
    "decide_for_operation",
    "decide_keyed",
    "verify_hint",
]


class OpState(enum.Enum):
    """An op's state as the journal tells it at restart."""

    NOT_STARTED = "not_started"
    """No intent record: the normal flow will issue it."""
    RUNNING = "running"
    """An intent without a finish: it was in flight at the crash, outcome UNKNOWN."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Decision(enum.Enum):
    SKIP = "skip"
    """Do nothing now."""
    RETRY = "retry"
    """Run it again under the same op id."""
    VERIFY = "verify"
    """Do not replay; tell the model to check the real effect first."""


# The first table: a settled state decides alone.
_SETTLED = {
    OpState.SUCCEEDED: Decision.SKIP,  # never repeat a durable success
    OpState.FAILED: Decision.SKIP,  # a replay does not turn failure into success
    OpState.NOT_STARTED: Decision.SKIP,  # the normal flow issues it
}
# The second table: an op RUNNING at the crash, by its class snapshot.
_UNKNOWN_OUTCOME = {
    IdempotencyClass.READ_ONLY: Decision.RETRY,
    IdempotencyClass.IDEMPOTENT_WRITE: Decision.RETRY,
    IdempotencyClass.NON_IDEMPOTENT: Decision.VERIFY,
    IdempotencyClass.UNKNOWN: Decision.VERIFY,
}


def _build_matrix() -> Mapping[tuple[OpState, IdempotencyClass, bool], Decision]:
    cells: dict[tuple[OpState, IdempotencyClass, bool], Decision] = {}
    for state, cls, ask_user in product(OpState, IdempotencyClass, (False, True)):
        if state in _SETTLED:
            cells[state, cls, ask_user] = _SETTLED[state]
        elif ask_user:
            cells[state, cls, ask_user] = Decision.RETRY  # asking a person has no side effect
        else:
            cells[state, cls, ask_user] = _UNKNOWN_OUTCOME[cls]
    return MappingProxyType(cells)


DECISION_MATRIX = _build_matrix()
"""Every (journal state, class snapshot, ask_user) cell and its decision."""


def decide(state: OpState, snapshot: ToolClass) -> Decision:
    """The matrix cell for an op in ``state`` whose intent snapshotted ``snapshot``."""
    key = (state, snapshot.idempotency, snapshot.ask_user)
    try:
        return DECISION_MATRIX[key]
    except (KeyError, TypeError):
        raise DecisionKeyError(
            f"no decision for state={state!r}, class={snapshot.idempotency!r}, "
            f"ask_user={snapshot.ask_user!r}"
        ) from None


def decide_keyed(state: OpState, snapshot: ToolClass, age: float | None) -> Decision:
    """``decide``, for a keyed tool first: an op RUNNING whose key is ``age`` seconds old
    is RETRIED (the provider drops a duplicate) while ``age`` is inside the window."""
    window = snapshot.key_window
    if state is OpState.RUNNING and window is not None and age is not None and 0 <= age < window:
        return Decision.RETRY
    return decide(state, snapshot)


def verify_hint(op_id: str, tool: str, args: Mapping[str, Any]) -> str:
    """The VERIFY hint for the model, naming the tool, the op id and the arguments."""
    rendered = json.dumps(args, ensure_ascii=False, sort_keys=True)
    return (
        f"Operation {op_id} ({tool} with arguments {rendered}) may already have run before "
        f"the interruption. Check its real effect with read-only tools first, then decide "
        f"whether to redo it. Do not assume it ran, and do not assume it did not."
    )


@dataclass(frozen=True, slots=True)
class RecoveryDecision:
    """What recovery does with one op, and why."""

    op_id: str
    tool: str
    state: OpState
    snapshot: ToolClass
    decision: Decision
    hint: str | None = None
    age: float | None = None
    """A keyed op RUNNING: how old its key was when decided (None otherwise)."""


def decide_for_operation(
    op_id: str,
    tool: str,
    state: OpState,
    snapshot: ToolClass,
    args: Mapping[str, Any],
    *,
    age: float | None = None,
) -> RecoveryDecision:
    """Decide for one op; a VERIFY carries the hint text for the model. ``age`` counts
    only for a keyed op RUNNING (``decide_keyed``)."""
    if not (snapshot.keyed and state is OpState.RUNNING):
        age = None
    decision = decide_keyed(state, snapshot, age)
    hint = verify_hint(op_id, tool, args) if decision is Decision.VERIFY else None
    return RecoveryDecision(op_id, tool, state, snapshot, decision, hint, age)
