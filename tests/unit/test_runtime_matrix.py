"""The decision matrix held cell by cell against the recovery table
(docs/concepts/recovery.md)."""

from __future__ import annotations

import enum
import json
from typing import ClassVar, cast

import pytest

from harness.runtime import Decision, DecisionKeyError, IdempotencyClass, OpState, ToolClass
from harness.runtime.matrix import DECISION_MATRIX, decide, decide_for_operation
from tests.conftest import IW, NI, RO, UNK

SKIP, RETRY, VERIFY = Decision.SKIP, Decision.RETRY, Decision.VERIFY
SUCCEEDED, FAILED = OpState.SUCCEEDED, OpState.FAILED
NOT_STARTED, RUNNING = OpState.NOT_STARTED, OpState.RUNNING

# The recovery table (docs/concepts/recovery.md), written out by hand:
# (journal state, class snapshot, ask_user) -> decision.
RECOVERY_TABLE: dict[tuple[OpState, IdempotencyClass, bool], Decision] = {
    # SUCCEEDED: never repeat a durable success.
    (SUCCEEDED, RO, False): SKIP,
    (SUCCEEDED, IW, False): SKIP,
    (SUCCEEDED, NI, False): SKIP,
    (SUCCEEDED, UNK, False): SKIP,
    (SUCCEEDED, RO, True): SKIP,
    (SUCCEEDED, IW, True): SKIP,
    (SUCCEEDED, NI, True): SKIP,
    (SUCCEEDED, UNK, True): SKIP,
    # FAILED: a replay does not turn failure into success.
    (FAILED, RO, False): SKIP,
    (FAILED, IW, False): SKIP,
    (FAILED, NI, False): SKIP,
    (FAILED, UNK, False): SKIP,
    (FAILED, RO, True): SKIP,
    (FAILED, IW, True): SKIP,
    (FAILED, NI, True): SKIP,
    (FAILED, UNK, True): SKIP,
    # NOT_STARTED: the normal flow issues it.
    (NOT_STARTED, RO, False): SKIP,
    (NOT_STARTED, IW, False): SKIP,
    (NOT_STARTED, NI, False): SKIP,
    (NOT_STARTED, UNK, False): SKIP,
    (NOT_STARTED, RO, True): SKIP,
    (NOT_STARTED, IW, True): SKIP,
    (NOT_STARTED, NI, True): SKIP,
    (NOT_STARTED, UNK, True): SKIP,
    # RUNNING at the crash (outcome UNKNOWN), by class snapshot.
    (RUNNING, RO, False): RETRY,
    (RUNNING, IW, False): RETRY,
    (RUNNING, NI, False): VERIFY,
    (RUNNING, UNK, False): VERIFY,
    # ... and the ask_user family is retried whatever its class: asking has no side effect.
    (RUNNING, RO, True): RETRY,
    (RUNNING, IW, True): RETRY,
    (RUNNING, NI, True): RETRY,
    (RUNNING, UNK, True): RETRY,
}


class _FakeState(enum.Enum):
    ARCHIVED = "archived"


class _FakeClass(enum.Enum):
    SOMETIMES = "sometimes"


class TestDecisionMatrix:
    def test_recovery_table_literal_has_every_cell(self) -> None:
        """The hand-written recovery table covers all 32 (state, class, ask_user) cells."""
        assert len(RECOVERY_TABLE) == 32
        assert {s for s, _, _ in RECOVERY_TABLE} == set(OpState)
        assert {c for _, c, _ in RECOVERY_TABLE} == set(IdempotencyClass)

    def test_matrix_has_exactly_the_recovery_table_keys(self) -> None:
        """DECISION_MATRIX holds exactly the recovery table's cells, no more and no fewer."""
        assert set(DECISION_MATRIX) == set(RECOVERY_TABLE)

    @pytest.mark.parametrize(
        ("state", "cls", "ask_user"),
        list(RECOVERY_TABLE),
        ids=lambda v: v.name if isinstance(v, enum.Enum) else f"ask_user={v}",
    )
    def test_cell_matches_recovery_table(
        self, state: OpState, cls: IdempotencyClass, ask_user: bool
    ) -> None:
        """Each matrix cell, and decide() for it, equals the recovery table's decision."""
        expected = RECOVERY_TABLE[state, cls, ask_user]
        assert DECISION_MATRIX[state, cls, ask_user] is expected
        assert decide(state, ToolClass(cls, ask_user)) is expected

    def test_matrix_is_read_only(self) -> None:
        """The matrix cannot be edited at run time."""
        with pytest.raises(TypeError):
            DECISION_MATRIX[RUNNING, NI, False] = RETRY  # type: ignore[index]


class TestDecide:
    def test_unknown_state_raises_decision_key_error(self) -> None:
        """A state the table does not know raises DecisionKeyError naming it."""
        with pytest.raises(DecisionKeyError, match="ARCHIVED"):
            decide(cast(OpState, _FakeState.ARCHIVED), ToolClass(RO))

    def test_unknown_class_raises_decision_key_error(self) -> None:
        """A class the table does not know raises DecisionKeyError, not a guess."""
        with pytest.raises(DecisionKeyError, match="SOMETIMES"):
            decide(RUNNING, ToolClass(cast(IdempotencyClass, _FakeClass.SOMETIMES)))

    def test_decision_key_error_is_a_key_error(self) -> None:
        """DecisionKeyError is also a KeyError, so generic lookups can catch it."""
        with pytest.raises(KeyError):
            decide(cast(OpState, _FakeState.ARCHIVED), ToolClass(RO))


class TestDecideForOperation:
    ARGS: ClassVar[dict[str, str]] = {"element": "submit", "form": "order #7 ünïcode"}

    @pytest.mark.parametrize("cls", [NI, UNK])
    def test_verify_carries_hint_naming_tool_op_and_args(self, cls: IdempotencyClass) -> None:
        """A VERIFY decision carries a hint that names the tool, the op id and the arguments."""
        d = decide_for_operation("op-17", "ui_tap", RUNNING, ToolClass(cls), self.ARGS)
        assert d.decision is VERIFY
        assert d.hint is not None
        assert "op-17" in d.hint
        assert "ui_tap" in d.hint
        assert json.dumps(self.ARGS, ensure_ascii=False, sort_keys=True) in d.hint
        assert (d.op_id, d.tool, d.state, d.snapshot) == (
            "op-17",
            "ui_tap",
            RUNNING,
            ToolClass(cls),
        )

    def test_verify_hint_tells_to_check_before_redoing(self) -> None:
        """The hint says the op may already have run and to check with read-only tools first."""
        d = decide_for_operation("op-1", "alarm", RUNNING, ToolClass(NI), {})
        assert d.hint is not None
        assert "may already have run" in d.hint
        assert "read-only" in d.hint

    @pytest.mark.parametrize(
        ("state", "cls", "ask_user"),
        [k for k, v in RECOVERY_TABLE.items() if v is not VERIFY],
    )
    def test_skip_and_retry_carry_no_hint(
        self, state: OpState, cls: IdempotencyClass, ask_user: bool
    ) -> None:
        """SKIP and RETRY decisions carry no hint."""
        d = decide_for_operation("op-2", "read_file", state, ToolClass(cls, ask_user), self.ARGS)
        assert d.decision is RECOVERY_TABLE[state, cls, ask_user]
        assert d.hint is None
