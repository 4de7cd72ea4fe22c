"""Deliberately broken runtimes: each breaks one promise of the seed.

A harness that cannot fail proves nothing. Each class below is the real
runtime with one mistake of the kind real runtimes make; the chaos self-check
runs every one and requires that the named invariant catches it.

``caught_by`` names the invariants (DESIGN.md §4) expected to fail;
``needs_fault`` names the fault that can expose the mistake at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from harness.runtime import (
    Decision,
    Executor,
    OpState,
    RecoveryDecision,
    Resolution,
    Runtime,
    ToolFunction,
    VerifyHint,
    decide_for_operation,
)
from harness.runtime.classes import IdempotencyClass, ToolClass, ToolTable
from harness.runtime.failpoints import failpoint
from harness.runtime.journal import JournalWriter
from harness.runtime.matrix import verify_hint
from harness.runtime.records import FinishRecord, IntentRecord, digest

__all__ = ["BROKEN_RUNTIMES", "RUNTIMES", "BrokenRuntime"]


class BrokenRuntime(Runtime):
    caught_by: ClassVar[tuple[str, ...]] = ()
    needs_fault: ClassVar[str] = "sigkill"
    mistake: ClassVar[str] = ""


def _rewrite(plan: list[RecoveryDecision], state: OpState, to: Decision) -> list[RecoveryDecision]:
    return [replace(d, decision=to) if d.state is state else d for d in plan]


class ReplaySuccess(BrokenRuntime):
    mistake = "re-runs ops whose SUCCEEDED finish is durable"
    caught_by = ("I1",)

    def plan(self, not_started: Mapping[str, str] | None = None) -> list[RecoveryDecision]:
        return _rewrite(super().plan(not_started), OpState.SUCCEEDED, Decision.RETRY)


class RetryNonIdempotent(BrokenRuntime):
    mistake = "retries every op left RUNNING (at-least-once, as durable-execution engines do)"
    caught_by = ("I2",)

    def plan(self, not_started: Mapping[str, str] | None = None) -> list[RecoveryDecision]:
        return [
            replace(d, decision=Decision.RETRY, hint=None) if d.decision is Decision.VERIFY else d
            for d in super().plan(not_started)
        ]


class RetryFailed(BrokenRuntime):
    mistake = "retries ops whose FAILED finish is durable"
    caught_by = ("I4",)

    def plan(self, not_started: Mapping[str, str] | None = None) -> list[RecoveryDecision]:
        return _rewrite(super().plan(not_started), OpState.FAILED, Decision.RETRY)


class DecideFromCurrentTable(BrokenRuntime):
    mistake = "decides from today's tool table instead of the intent's snapshot"
    caught_by = ("I5",)

    def plan(self, not_started: Mapping[str, str] | None = None) -> list[RecoveryDecision]:
        return [
            decide_for_operation(
                d.op_id, d.tool, d.state, self.table.classify(d.tool), self.ops[d.op_id].args
            )
            if d.op_id in self.ops
            else d
            for d in super().plan(not_started)
        ]


class VerifySafe(BrokenRuntime):
    mistake = "verifies ops left RUNNING whose class is retry-safe, instead of retrying them"
    caught_by = ("I3",)

    def plan(self, not_started: Mapping[str, str] | None = None) -> list[RecoveryDecision]:
        return [
            replace(
                d,
                decision=Decision.VERIFY,
                hint=verify_hint(d.op_id, d.tool, self.ops[d.op_id].args),
            )
            if d.decision is Decision.RETRY
            else d
            for d in super().plan(not_started)
        ]


class WrongSnapshot(BrokenRuntime):
    mistake = "snapshots non-idempotent tools as read-only, so recovery retries them"
    caught_by = ("I5",)

    def __init__(self, journal: JournalWriter, table: ToolTable, **kwargs: Any) -> None:
        lying = {
            tool: IdempotencyClass.READ_ONLY
            for tool, cls in table.entries.items()
            if cls.idempotency is IdempotencyClass.NON_IDEMPOTENT
        }
        super().__init__(journal, table.with_overrides(lying), **kwargs)


class ForgetsResolution(BrokenRuntime):
    mistake = "never journals the model's resolution of a VERIFY, so the op stays unresolved"
    caught_by = ("I7",)

    def resolve(
        self,
        op_id: str,
        resolution: Resolution,
        *,
        redo_op: str | None = None,
        note: str = "",
    ) -> None:
        self._awaiting_verify.pop(op_id, None)  # the mistake: nothing is journaled


class NoTailReport(BrokenRuntime):
    mistake = "cuts a torn tail off without journaling that it did"
    caught_by = ("I9",)
    needs_fault = "power-loss"

    def __init__(self, journal: JournalWriter, table: ToolTable, **kwargs: Any) -> None:
        journal.scan = replace(journal.scan, torn=None)  # the mistake: the cut goes unsaid
        super().__init__(journal, table, **kwargs)


class DropVerifyHint(BrokenRuntime):
    mistake = "decides VERIFY but never hands the hint to the model"
    caught_by = ("I2",)

    def deliver_hints(self) -> tuple[VerifyHint, ...]:
        self._awaiting_verify.clear()
        return ()


class RunningAsNotStarted(BrokenRuntime):
    mistake = "reads an op left RUNNING as NOT_STARTED, so the normal flow issues it again"
    caught_by = ("I2",)

    def plan(self, not_started: Mapping[str, str] | None = None) -> list[RecoveryDecision]:
        running = {
            op_id
            for op_id, op in self.ops.items()
            if op.state is OpState.RUNNING and not op.resolved
        }
        for op_id in running:
            del self.ops[op_id]
        return super().plan(not_started)


class _EffectFirstExecutor(Executor):
    def run(
        self,
        op_id: str,
        tool: str,
        args: Mapping[str, Any],
        snapshot: ToolClass,
        execute: ToolFunction,
        *,
        attempt: int = 1,
        redo_of: str | None = None,
        key_op: str | None = None,
    ) -> FinishRecord:
        intent = IntentRecord(
            op_id, tool, snapshot, args, digest(args), attempt, self.incarnation, redo_of
        )
        failpoint("op.before_intent", op_id)
        finish = self.invoke(intent, execute, key_op=key_op)  # the mistake: effect first
        failpoint("op.after_intent", op_id)
        self.write_intent(intent)
        failpoint("op.after_effect", op_id)
        self.write_finish(finish)
        failpoint("op.after_finish", op_id)
        return finish


class EffectBeforeIntent(BrokenRuntime):
    mistake = "runs the tool before its intent record is durable"
    caught_by = ("I6",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.executor = _EffectFirstExecutor(
            self.journal,
            self.incarnation,
            on_record=self._note,
            max_attempts=self.executor.max_attempts,
        )


class _LazyIntentExecutor(Executor):
    def write_intent(self, intent: IntentRecord) -> None:
        self.journal.append(intent, sync=False)  # the mistake: no fsync before the effect
        self._on_record(intent)


class NoIntentFsync(BrokenRuntime):
    mistake = "does not fsync the intent before running the tool"
    caught_by = ("I6",)
    needs_fault = "power-loss"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.executor = _LazyIntentExecutor(
            self.journal,
            self.incarnation,
            on_record=self._note,
            max_attempts=self.executor.max_attempts,
        )


class _LazyFinishExecutor(Executor):
    def write_finish(self, finish: FinishRecord) -> None:
        self.journal.append(finish, sync=False)  # the mistake: success reported before durable
        self._on_record(finish)


class NoFinishFsync(BrokenRuntime):
    mistake = "reports success before the finish record is fsynced"
    caught_by = ("I1",)
    needs_fault = "power-loss"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.executor = _LazyFinishExecutor(
            self.journal,
            self.incarnation,
            on_record=self._note,
            max_attempts=self.executor.max_attempts,
        )


BROKEN_RUNTIMES: Mapping[str, type[BrokenRuntime]] = {
    "replay-success": ReplaySuccess,
    "retry-non-idempotent": RetryNonIdempotent,
    "effect-before-intent": EffectBeforeIntent,
    "decide-from-current-table": DecideFromCurrentTable,
    "retry-failed": RetryFailed,
    "drop-verify-hint": DropVerifyHint,
    "running-as-not-started": RunningAsNotStarted,
    "no-intent-fsync": NoIntentFsync,
    "no-finish-fsync": NoFinishFsync,
    "verify-safe": VerifySafe,
    "wrong-snapshot": WrongSnapshot,
    "forgets-resolution": ForgetsResolution,
    "no-tail-report": NoTailReport,
}

RUNTIMES: Mapping[str, type[Runtime]] = {"real": Runtime, **BROKEN_RUNTIMES}
"""Every runtime the agent can run, by name."""
