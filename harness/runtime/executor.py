"""The executor: one tool call wrapped in the write-ahead protocol (docs/runtime.md).

    failpoint op.before_intent
    journal STARTED (op id, tool, class snapshot, args digest, attempt)   durable
    failpoint op.after_intent
    the tool runs                     (a multi-step tool hits op.mid_effect)
    failpoint op.after_effect
    journal FINISHED (SUCCEEDED | FAILED, result digest)                 durable
    failpoint op.after_finish

A ``TransientToolError`` is retried in-process, each attempt journaled under the
same op id, only when the class snapshot is retry-safe and at most ``max_attempts``
times in one call (attempts of earlier lives do not count). From a call that is not
retry-safe it is an unknown outcome, not a failure: a timeout may come after the
effect (the reply was lost), so the op is journaled as of unknown outcome, never
retried here, and handed to the model to VERIFY. Any other exception from the tool
(a bug), and a cancellation, ``KeyboardInterrupt`` or ``SystemExit`` raised while
the call is under way, is journaled as an unknown outcome and raised on: the op
stays RUNNING, as after a crash, and is handed on by its class. A result that is not
JSON is journaled as what it is (its type and ``repr``), never left out; one too
large for a journal frame as its digest and size (``TOO_LARGE``), never turned into
a failure after its effect.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from harness.runtime import log
from harness.runtime.classes import ToolClass
from harness.runtime.errors import FailpointTriggered, ToolError, TransientToolError
from harness.runtime.hooks import failpoint
from harness.runtime.journal import MAX_PAYLOAD
from harness.runtime.records import FinishRecord, IntentRecord, Record, Resolution, digest
from harness.runtime.steps import Append, CallContext, Invoke, Steps, idempotency_key, run_steps
from harness.runtime.store import Journal

__all__ = [
    "JSON_LIMIT",
    "NOT_JSON",
    "TOO_LARGE",
    "CallContext",
    "CallOutcome",
    "Executor",
    "ToolFunction",
    "idempotency_key",
]


ToolFunction = Callable[[str, Mapping[str, Any], CallContext], Any]
"""``execute(tool, args, ctx) -> JSON result``; raises ``ToolError`` to fail.

Any other exception is a bug the runtime cannot see past: it journals the op's
outcome as unknown and lets the exception go on (see ``Executor.invoke``)."""

NOT_JSON = "not_json"
"""The key under which a result that is not JSON is journaled (with its ``repr``)."""

TOO_LARGE = "too_large"
"""The key under which a result too large for a frame is journaled: ``{"too_large":
<bytes of its JSON>, "digest": <its digest>}``. It is the op's result from then on, for
the call that ran as for every later answer: the journal answers the same in every life."""

JSON_LIMIT = MAX_PAYLOAD - 64 * 1024
"""The largest arguments or result, as JSON, that a journal record carries; the rest of a
frame is left for the record's other fields."""


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
    resolution: Resolution | None = None
    """How the model closed the op after a VERIFY, when it did (``Runtime.resolve``)."""
    matched: str | None = None
    """The journaled op that answered this call by content, under identity by content
    (``harness.runtime.identity``); None when the call was known by its own id or ran."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Executor:
    """Runs calls write-ahead against one journal, for one incarnation."""

    def __init__(
        self,
        journal: Journal,
        incarnation: int,
        *,
        on_record: Callable[[Record], None],
        max_attempts: int = 3,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.clock = clock
        """The runtime's clock, which stamps a keyed tool's intents (None: not stamped)."""
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
        key_op: str | None = None,
        fresh: bool = False,
    ) -> FinishRecord:
        """Run the call from ``attempt`` on, in this thread; returns the durable finish record.

        Arguments that are not JSON are refused (``ValueError``) before
        anything is journaled or run. ``fresh`` marks its intents as a call
        that identity by content never matches (``harness.runtime.identity``).
        """
        steps = self.steps(
            op_id,
            tool,
            args,
            snapshot,
            attempt=attempt,
            redo_of=redo_of,
            key_op=key_op,
            fresh=fresh,
        )
        return run_steps(steps, self.journal, self._on_record, execute)

    def steps(
        self,
        op_id: str,
        tool: str,
        args: Mapping[str, Any],
        snapshot: ToolClass,
        *,
        attempt: int = 1,
        redo_of: str | None = None,
        key_op: str | None = None,
        fresh: bool = False,
    ) -> Steps[FinishRecord]:
        """The write-ahead protocol of one call, as steps (``harness.runtime.steps``):
        what ``run`` carries out in this thread and ``AsyncRuntime`` on an event loop."""
        try:
            size = len(json.dumps(args))
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"{op_id} ({tool}): arguments are not JSON ({exc}); nothing was journaled or run"
            ) from None
        if size > JSON_LIMIT:
            raise ValueError(
                f"{op_id} ({tool}): arguments of {size} bytes as JSON exceed the journal's "
                f"limit of {JSON_LIMIT}; nothing was journaled or run"
            )
        args_digest = digest(args)
        first_attempt = attempt  # max_attempts counts this call's attempts, not earlier lives'
        while True:
            at = self.clock() if snapshot.keyed and self.clock is not None else None
            intent = IntentRecord(
                op_id,
                tool,
                snapshot,
                args,
                args_digest,
                attempt,
                self.incarnation,
                redo_of,
                fresh,
                at,
            )
            failpoint("op.before_intent", op_id)
            try:
                yield self._intent_append(intent)
            except (GeneratorExit, FailpointTriggered):
                raise
            except BaseException as exc:
                # Only a driver on an event loop throws here: the call was cancelled while
                # its intent was being written. The intent may be durable, but the tool
                # never ran. An unsafe op is journaled as failed, so that no start asks the
                # model to verify an effect that cannot be there; a retry-safe one as of
                # unknown outcome, so that its next call (or start) runs it after all.
                interrupted = self._interrupted if snapshot.retry_safe else self._not_run
                yield self._finish_append(interrupted(intent, exc))
                raise
            failpoint("op.after_intent", op_id)
            finish = yield from self.invoke(intent, key_op=key_op)
            tries = attempt - first_attempt + 1
            if finish.transient and self._may_retry(snapshot) and tries < self.max_attempts:
                # Journaled, but not settled: a crash before the next attempt leaves
                # the op RUNNING, and recovery retries it as its class allows.
                yield self._finish_append(replace(finish, retrying=True))
                attempt += 1
                continue
            if finish.transient and not snapshot.retry_safe:
                # A timeout may come after the effect (the reply was lost): for a call
                # that must not run twice the outcome is unknown, not a failure. It is
                # not retried here; the op stays RUNNING and goes to VERIFY.
                finish = replace(finish, unknown=True)
            failpoint("op.after_effect", op_id)
            yield self._finish_append(finish)
            failpoint("op.after_finish", op_id)
            return finish

    def _may_retry(self, snapshot: ToolClass) -> bool:
        """Whether a transient failure of a call of this class is retried in-process: a
        retry-safe class, or a keyed tool (the same key: its provider drops a duplicate)."""
        return snapshot.retry_safe or snapshot.keyed

    def invoke(self, intent: IntentRecord, *, key_op: str | None = None) -> Steps[FinishRecord]:
        """Run the tool itself: its result, or a ToolError, becomes the finish to journal.

        Any other exception (a bug in the tool or its dispatcher, after or
        before its effect: nobody knows) is journaled at once as a finish of
        unknown outcome, which leaves the op RUNNING as after a crash, and
        goes on to the caller. A result that is not JSON is journaled as
        ``{"not_json": <type>, "repr": <its repr>}``: the call succeeded.
        """
        ctx = CallContext(
            intent.op_id,
            intent.tool,
            intent.attempt,
            self.incarnation,
            key_op,
            self.journal.journal_id,
        )
        try:
            result = yield Invoke(intent.tool, intent.args, ctx)
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
        except (FailpointTriggered, GeneratorExit):
            raise  # a crash at that point, or the run dropped: nothing more is written
        except BaseException as exc:
            yield self._finish_append(self._interrupted(intent, exc))
            raise
        journaled, result_digest = _journalable(result)
        return FinishRecord(
            intent.op_id, True, journaled, result_digest, intent.attempt, self.incarnation
        )

    def _not_run(self, intent: IntentRecord, exc: BaseException) -> FinishRecord:
        """The finish of a call interrupted before its tool ran: a failure, settled."""
        log.info("%s (%s): interrupted before its tool ran: %r", intent.op_id, intent.tool, exc)
        error = f"{type(exc).__name__}: interrupted before the tool ran"
        return self._without_result(intent, error, unknown=False)

    def _interrupted(self, intent: IntentRecord, exc: BaseException) -> FinishRecord:
        """The finish of a call that ended without an outcome the runtime can trust."""
        if not isinstance(exc, Exception):  # a cancellation, KeyboardInterrupt, SystemExit
            # Info, not a warning: a service that cancels calls on purpose (a timeout, a
            # task group) would print one line per call with logging left unconfigured.
            log.info("%s (%s): interrupted by %r", intent.op_id, intent.tool, exc)
        return self._without_result(intent, f"{type(exc).__name__}: {exc}", unknown=True)

    def _without_result(self, intent: IntentRecord, error: str, *, unknown: bool) -> FinishRecord:
        return FinishRecord(
            intent.op_id,
            False,
            None,
            digest(None),
            intent.attempt,
            self.incarnation,
            error=error,
            unknown=unknown,
        )

    def _intent_append(self, intent: IntentRecord) -> Append:
        """How an intent is journaled: durable before the tool runs."""
        return Append((intent,))

    def _finish_append(self, finish: FinishRecord) -> Append:
        """How a finish is journaled: durable before the call returns."""
        return Append((finish,))


def _journalable(result: Any) -> tuple[Any, str]:
    """What stands for ``result`` in the journal (itself, if it is JSON and fits a frame),
    and the digest of the result itself."""
    try:
        size = len(json.dumps(result))
    except (TypeError, ValueError):
        stand_in = {NOT_JSON: type(result).__qualname__, "repr": repr(result)[:1000]}
        return stand_in, digest(stand_in)
    result_digest = digest(result)
    if size > JSON_LIMIT:
        return {TOO_LARGE: size, "digest": result_digest}, result_digest
    return result, result_digest
