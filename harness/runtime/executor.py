"""The executor: one tool call wrapped in the write-ahead protocol (DESIGN.md §3).

    failpoint op.before_intent
    journal STARTED (op id, tool, class snapshot, args digest, attempt)   durable
    failpoint op.after_intent
    the tool runs                     (a multi-step tool hits op.mid_effect)
    failpoint op.after_effect
    journal FINISHED (SUCCEEDED | FAILED, result digest)                 durable
    failpoint op.after_finish

A ``TransientToolError`` is retried in-process, each attempt journaled under
the same op id, only when the class snapshot is retry-safe and at most
``max_attempts`` times. Any other exception from the tool (a bug, an
interrupt) leaves the op RUNNING: its outcome is unknown and recovery decides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from harness.runtime.classes import ToolClass
from harness.runtime.errors import ToolError, TransientToolError
from harness.runtime.failpoints import failpoint
from harness.runtime.journal import JournalWriter
from harness.runtime.records import FinishRecord, IntentRecord, Record, digest

__all__ = ["CallContext", "CallOutcome", "Executor", "ToolFunction"]


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a tool may know about the call it serves."""

    op_id: str
    tool: str
    attempt: int
    incarnation: int

    def mid_effect(self) -> None:
        """A multi-step tool calls this between its steps: a crash point inside the effect."""
        failpoint("op.mid_effect", self.op_id)


ToolFunction = Callable[[str, Mapping[str, Any], CallContext], Any]
"""``execute(tool, args, ctx) -> JSON result``; raises ``ToolError`` to fail."""


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """What a call came to, in Jepsen's words: ok, fail, or info (outcome unknown).

    ``executed`` is False when the journal answered (a durable success or
    failure is returned, never run again) or when the op awaits verification.
    """

    op_id: str
    status: Literal["ok", "fail", "info"]
    result: Any = None
    error: str | None = None
    hint: str | None = None
    executed: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Executor:
    """Runs calls write-ahead against one journal, for one incarnation."""

    def __init__(
        self,
        journal: JournalWriter,
        incarnation: int,
        *,
        on_record: Callable[[Record], None],
        max_attempts: int = 3,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.journal = journal
        self.incarnation = incarnation
        self.max_attempts = max_attempts
        self._on_record = on_record

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
    ) -> FinishRecord:
        """Run the call from ``attempt`` on; returns the durable finish record."""
        args_digest = digest(args)
        while True:
            intent = IntentRecord(
                op_id, tool, snapshot, args, args_digest, attempt, self.incarnation, redo_of
            )
            failpoint("op.before_intent", op_id)
            self.write_intent(intent)
            failpoint("op.after_intent", op_id)
            finish = self.invoke(intent, execute)
            if finish.transient and snapshot.retry_safe and attempt < self.max_attempts:
                # Journaled, but not settled: a crash before the next attempt leaves
                # the op RUNNING, and recovery retries it as its class allows.
                self.write_finish(replace(finish, retrying=True))
                attempt += 1
                continue
            failpoint("op.after_effect", op_id)
            self.write_finish(finish)
            failpoint("op.after_finish", op_id)
            return finish

    def invoke(self, intent: IntentRecord, execute: ToolFunction) -> FinishRecord:
        """Run the tool itself; a ToolError becomes a FAILED finish, anything else escapes."""
        ctx = CallContext(intent.op_id, intent.tool, intent.attempt, self.incarnation)
        try:
            result = execute(intent.tool, intent.args, ctx)
        except ToolError as exc:
            return FinishRecord(
                intent.op_id,
                False,
                None,
                digest(None),
                intent.attempt,
                self.incarnation,
                error=f"{type(exc).__name__}: {exc}",
                transient=isinstance(exc, TransientToolError),
            )
        return FinishRecord(
            intent.op_id, True, result, digest(result), intent.attempt, self.incarnation
        )

    def write_intent(self, intent: IntentRecord) -> None:
        self.journal.append(intent)
        self._on_record(intent)

    def write_finish(self, finish: FinishRecord) -> None:
        self.journal.append(finish)
        self._on_record(finish)
