"""Deliberately broken runtimes: each breaks one promise of the recovery design.

A harness that cannot fail proves nothing. Each class below is the real
runtime with one mistake of the kind real runtimes make; the chaos self-check
runs every one and requires that the named invariant catches it.

``caught_by`` names the invariants (docs/reference/invariants.md) expected to fail;
``needs_fault`` names the fault that can expose the mistake at all (``a or b``:
either of two).
"""

from __future__ import annotations

import _thread
import contextlib
import functools
import json
import os
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from harness.failpoints import failpoint
from harness.runtime import (
    CallContext,
    CallOutcome,
    Decision,
    OpState,
    RecoveryDecision,
    Resolution,
    Runtime,
    ToolFunction,
    VerifyHint,
    log,
)
from harness.runtime import journal as journal_module
from harness.runtime.classes import IdempotencyClass, ToolClass, ToolTable
from harness.runtime.errors import JournalCorruptError, JournalVersionError
from harness.runtime.executor import NOT_JSON, Executor
from harness.runtime.identity import ContentKey, Identity, match_by_content
from harness.runtime.journal import (
    FILE_HEADER,
    FORMAT_VERSION,
    HEADER_SIZE,
    JournalScan,
    JournalWriter,
    ScannedRecord,
    TornTail,
    encode_frame,
    new_journal_id,
)
from harness.runtime.matrix import decide_for_operation, verify_hint
from harness.runtime.reconcile import Answer, Question
from harness.runtime.records import (
    CheckpointRecord,
    FinishRecord,
    IntentRecord,
    JournalIdRecord,
    Record,
    SettledIndexRecord,
    SettledRecord,
    digest,
    record_from_json,
)
from harness.runtime.recovery import OpHistory
from harness.runtime.runtime import _Gate
from harness.runtime.settled import settled_index
from harness.runtime.steps import Append, Step, Steps

__all__ = ["BROKEN_RUNTIMES", "RUNTIMES", "BrokenRuntime"]

T = TypeVar("T")


class BrokenRuntime(Runtime):
    caught_by: ClassVar[tuple[str, ...]] = ()
    needs_fault: ClassVar[str] = "sigkill"
    mistake: ClassVar[str] = ""
    needs_step: ClassVar[str | None] = None
    """What a scenario must have to expose the mistake, when not every one does (the
    self-check of a selection without it says so rather than run it)."""
    needs_batch: ClassVar[bool] = False
    """Whether only calls run at once (a batch step) can expose the mistake: the
    self-check then shows it caught in a scenario with batches, and escaping every
    trial of the scenarios without."""
    needs_threads: ClassVar[bool] = False
    """Whether only a batch run on threads (``batch_driver = "threads"``) can expose the
    mistake: the self-check then shows it caught in a scenario whose batches run on
    threads, and escaping every trial of the scenarios without (``needs_fault`` then
    selects the threaded scenario's trials that can catch it)."""
    needs_duplicates: ClassVar[bool] = False
    """With ``needs_threads``: the scenario must also deliver its writing calls twice."""
    needs_model: ClassVar[str | None] = None
    """The scripted model (``harness.agent.model.MODELS``) that alone can expose the
    mistake: the self-check then shows it caught in a scenario of that model, and
    escaping every trial of the scenarios that know calls by content under another."""

    exposing: ClassVar[tuple[str, bool] | None] = None
    """The finish a golden run must have for the mistake to show (``needs_step`` says it
    in words): ``("finish", False)`` a step failed for good, ``("compacts", True)`` a
    journal compacted, and so on; ``None`` for every run."""

    @classmethod
    def exposed_by(cls, golden_kinds: Sequence[tuple[str, bool]]) -> bool:
        """Whether a golden run can expose it: its finishes as ``(kind, succeeded)``."""
        return cls.exposing is None or cls.exposing in golden_kinds


@contextlib.contextmanager
def _journal_function(name: str, stand_in: object) -> Iterator[None]:
    """``harness.runtime.journal``'s function ``name`` replaced by ``stand_in`` for the block:
    how a broken writer leaves out (or misdirects) one fsync of the real code."""
    real = getattr(journal_module, name)
    setattr(journal_module, name, stand_in)
    try:
        yield
    finally:
        setattr(journal_module, name, real)


def _rewrite(
    plan: Sequence[RecoveryDecision], state: OpState, to: Decision
) -> list[RecoveryDecision]:
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
    needs_step = "a step that fails for good (scenarios/device_maintenance.toml has one)"
    exposing = ("finish", False)

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

    def _resolve_steps(
        self,
        op_id: str,
        resolution: Resolution,
        *,
        redo_op: str | None = None,
        note: str = "",
    ) -> Steps[None]:
        self._awaiting_verify.pop(op_id, None)  # the mistake: nothing is journaled
        yield from ()


class NoTailReport(BrokenRuntime):
    mistake = "cuts a torn tail off without journaling that it did"
    caught_by = ("I9",)
    needs_fault = "power-loss"

    def __init__(self, journal: JournalWriter, table: ToolTable, **kwargs: Any) -> None:
        journal.scan = replace(journal.scan, torn=None)  # the mistake: the cut goes unsaid
        super().__init__(journal, table, **kwargs)


def _record_without_crc(data: bytes, pos: int) -> tuple[int, Record] | None:
    """The record of the frame at ``pos`` by its magic, version and length: no CRC check."""
    if data[pos : pos + 3] != b"HJ\x01" or len(data) - pos < HEADER_SIZE:
        return None
    end = pos + HEADER_SIZE + int.from_bytes(data[pos + 3 : pos + 7], "big")
    if end > len(data):
        return None
    try:
        return end, record_from_json(json.loads(data[pos + HEADER_SIZE : end]))
    except (ValueError, RecursionError):
        return None


def _newer_frame_at(data: bytes, pos: int) -> int | None:
    """The version of a whole frame of another format at ``pos`` (its CRC holds), if any."""
    if data[pos : pos + 2] != b"HJ" or len(data) - pos < HEADER_SIZE:
        return None
    version = data[pos + 2]
    end = pos + HEADER_SIZE + int.from_bytes(data[pos + 3 : pos + 7], "big")
    crc = int.from_bytes(data[pos + 7 : pos + HEADER_SIZE], "big")
    if version == FORMAT_VERSION or end > len(data):
        return None
    return (
        version
        if zlib.crc32(data[pos + 2 : pos + 7] + data[pos + HEADER_SIZE : end]) == crc
        else None
    )


def _frames_without_crc(data: bytes, source: str) -> JournalScan:
    """The journal's reader with the mistake: every frame's CRC goes unchecked."""
    records: list[ScannedRecord] = []
    pos = len(FILE_HEADER)
    while pos < len(data):
        found = _record_without_crc(data, pos)
        newer = _newer_frame_at(data, pos) if found is None else None
        if newer is not None:  # refused as the real runtime does: not this runtime's mistake
            raise JournalVersionError(source, pos, f"a frame of format {newer}")
        if found is None:
            later = data.find(b"HJ", pos + 1)
            while later >= 0 and _record_without_crc(data, later) is None:
                later = data.find(b"HJ", later + 1)
            if later >= 0:
                raise JournalCorruptError(source, pos, len(records) + 1, "unreadable frame")
            return JournalScan(tuple(records), pos, TornTail(pos, len(data) - pos, "unreadable"))
        end, record = found
        records.append(ScannedRecord(pos, end, record))
        pos = end
    return JournalScan(tuple(records), pos, None)


class _NoCrcWriter(JournalWriter):
    def read(self, data: bytes) -> JournalScan:
        if not data.startswith(FILE_HEADER):
            return super().read(data)
        return _frames_without_crc(data, str(self.path))


class NoCrcCheck(BrokenRuntime):
    mistake = "reads journal frames without checking their CRC"
    caught_by = ("I9",)
    needs_fault = "corrupt-crc"
    _journal_class = _NoCrcWriter


class _ZerosEndWriter(JournalWriter):
    def read(self, data: bytes) -> JournalScan:
        # The mistake: a zeroed frame header is taken for the end of the journal, so
        # whatever follows a lost sector is silently ignored (not torn, not corrupt).
        cut = _first_zero_frame(data, len(FILE_HEADER))
        scan = super().read(data[:cut])
        return replace(scan, torn=None) if cut < len(data) and scan.torn is None else scan


def _first_zero_frame(data: bytes, pos: int) -> int:
    """Where the first frame that begins with zeros starts (the end of the data if none)."""
    while pos + HEADER_SIZE <= len(data):
        if data[pos : pos + 2] == b"\0\0":
            return pos
        if data[pos : pos + 2] != b"HJ":
            break  # not a frame: the real reader judges the rest
        pos += HEADER_SIZE + int.from_bytes(data[pos + 3 : pos + 7], "big")
    return len(data)


class ZerosEndJournal(BrokenRuntime):
    mistake = "takes a zeroed sector for the end of the journal, dropping what follows it"
    caught_by = ("I9",)
    needs_fault = "sector"
    _journal_class = _ZerosEndWriter


class _NewerFrameCutWriter(JournalWriter):
    def read(self, data: bytes) -> JournalScan:
        try:
            return super().read(data)
        except JournalVersionError as exc:
            at = exc.offset
            if at < len(FILE_HEADER) or data[at + 2] == FORMAT_VERSION:
                raise  # a newer header, or a record kind it does not know: refused still
            # The mistake, as the runtime made it before it knew versions: a whole frame of
            # a newer format (and whatever follows it) is taken for a torn last write.
            torn = TornTail(at, len(data) - at, f"unknown format version {data[at + 2]}")
            return replace(super().read(data[:at]), torn=torn)


class NewerFrameCut(BrokenRuntime):
    mistake = "takes a frame of a newer format for a torn tail and cuts it"
    caught_by = ("I9",)
    needs_fault = "version-skew"
    _journal_class = _NewerFrameCutWriter


class _GenerousTable(ToolTable):
    def classify(self, tool: str) -> ToolClass:
        if tool in self:
            return super().classify(tool)
        return ToolClass(IdempotencyClass.READ_ONLY)  # the mistake: unlisted means harmless


class UnlistedAsReadOnly(BrokenRuntime):
    mistake = "gives a tool its table does not list the read-only class, not UNKNOWN"
    caught_by = ("I5",)
    needs_fault = "unlisted"

    def __init__(self, journal: JournalWriter, table: ToolTable, **kwargs: Any) -> None:
        super().__init__(journal, _GenerousTable(table.entries), **kwargs)


class DropVerifyHint(BrokenRuntime):
    mistake = "decides VERIFY but never hands the hint to the model"
    caught_by = ("I2",)

    def _hint_steps(self) -> Steps[tuple[VerifyHint, ...]]:
        self._awaiting_verify.clear()  # the mistake: so nothing is delivered
        return (yield from super()._hint_steps())


class RunningAsNotStarted(BrokenRuntime):
    mistake = "reads an op left RUNNING as NOT_STARTED, so the normal flow issues it again"
    caught_by = ("I2",)

    def plan(self, not_started: Mapping[str, str] | None = None) -> Sequence[RecoveryDecision]:
        running = {
            op_id
            for op_id, op in self.ops.items()
            if op.state is OpState.RUNNING and not op.resolved
        }
        for op_id in running:
            del self.ops[op_id]
        return super().plan(not_started)


class _EffectFirstExecutor(Executor):
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
        intent = IntentRecord(
            op_id, tool, snapshot, args, digest(args), attempt, self.incarnation, redo_of, fresh
        )
        failpoint("op.before_intent", op_id)
        finish = yield from self.invoke(intent, key_op=key_op)  # the mistake: effect first
        failpoint("op.after_intent", op_id)
        yield self._intent_append(intent)
        failpoint("op.after_effect", op_id)
        yield self._finish_append(finish)
        failpoint("op.after_finish", op_id)
        return finish


class _RetryEverythingExecutor(Executor):
    def _may_retry(self, snapshot: ToolClass) -> bool:
        return True  # the mistake: a timeout is taken for "nothing happened"


class RetryLostReply(BrokenRuntime):
    mistake = "retries a timed-out call in-process whatever its class, as if nothing happened"
    caught_by = ("I10",)
    needs_fault = "lost-reply"
    _executor_class = _RetryEverythingExecutor


class EffectBeforeIntent(BrokenRuntime):
    mistake = "runs the tool before its intent record is durable"
    caught_by = ("I6",)
    _executor_class = _EffectFirstExecutor


class _LazyIntentExecutor(Executor):
    def _intent_append(self, intent: IntentRecord) -> Append:
        return Append((intent,), sync=False)  # the mistake: no fsync before the effect


class NoIntentFsync(BrokenRuntime):
    mistake = "does not fsync the intent before running the tool"
    caught_by = ("I6",)
    needs_fault = "power-loss"
    _executor_class = _LazyIntentExecutor


class _LazyFinishExecutor(Executor):
    def _finish_append(self, finish: FinishRecord) -> Append:
        return Append((finish,), sync=False)  # the mistake: success reported before durable


class NoFinishFsync(BrokenRuntime):
    mistake = "reports success before the finish record is fsynced"
    caught_by = ("I1",)
    needs_fault = "power-loss"
    _executor_class = _LazyFinishExecutor


class _UnawaitedIntentExecutor(Executor):
    def _intent_append(self, intent: IntentRecord) -> Append:
        return Append((intent,), wait=False)  # the mistake: a forgotten await


class UnawaitedIntent(BrokenRuntime):
    mistake = (
        "runs a tool without waiting for its intent to be durable (a forgotten await): "
        "right by accident while calls run one at a time"
    )
    caught_by = ("I6",)
    needs_batch = True
    _executor_class = _UnawaitedIntentExecutor


class _OneSlotExecutor(Executor):
    current: str | None = None

    def _intent_append(self, intent: IntentRecord) -> Append:
        self.current = intent.op_id  # the mistake: one slot for "the op in flight"
        return super()._intent_append(intent)

    def _finish_append(self, finish: FinishRecord) -> Append:
        return super()._finish_append(replace(finish, op_id=self.current or finish.op_id))


class OneCurrentOp(BrokenRuntime):
    mistake = (
        "keeps one slot for the op in flight, so a finish is journaled under the id of the "
        "call started last: right while calls run one at a time"
    )
    caught_by = ("I1", "I2", "I3", "I7")
    needs_batch = True
    _executor_class = _OneSlotExecutor


class NoOpLock(BrokenRuntime):
    """A call of an op already in flight does not wait for the first to end.

    A second delivery that comes while the first's intent is being made durable
    (the runtime's view takes a record once it is durable) takes the op for a new
    one and runs it beside the first, whatever its class. One that comes later,
    while the tool runs, finds the op in flight: an unsafe op's duplicate is
    answered ``info`` at once, and a retry-safe op in flight looks like one whose
    call ended without an outcome,
    so the duplicate runs it again beside the first call, under a later attempt's
    intent: its tool runs after the success is journaled, or that intent is left
    after the success and the next start retries it. I1 catches both.
    """

    mistake = "lets two calls of one op run at once (no per-op turn)"
    caught_by = ("I1",)
    needs_threads = True
    needs_duplicates = True

    def call(
        self,
        op_id: str,
        tool: str,
        args: Mapping[str, Any],
        execute: ToolFunction,
        *,
        redo_of: str | None = None,
        fresh: bool = False,
    ) -> CallOutcome:
        # The mistake: the call counts as in flight (recover() and close() still see it)
        # but takes no turn, so a second call of an op in flight does not wait for the
        # first to end; it decides from the journal as it stands mid-call.
        with self._lock:
            gate = self._gates.get(op_id)
            if gate is None:
                gate = self._gates[op_id] = _Gate()
            gate.users += 1  # its lock is never taken: that is the turn left out
        try:
            return self._drive(
                self._call_steps(op_id, tool, args, redo_of=redo_of, fresh=fresh), execute
            )
        finally:
            with self._lock:
                gate.users -= 1
                if gate.users == 0:
                    del self._gates[op_id]


class _StaleOffsetWriter(JournalWriter):
    """Remembers, per thread, where the journal ended after that thread's last append."""

    def __init__(self, path: Path | str, **kwargs: Any) -> None:
        self._seen = _thread._local()  # _thread's, not threading's: the agent starts light
        super().__init__(path, **kwargs)

    def _append(self, records: tuple[Record, ...], *, sync: bool) -> int:
        offset = super()._append(records, sync=sync)
        self._seen.end = self.size
        return offset

    def _poison(self, offset: int, exc: BaseException) -> str:
        # The mistake: the failed append is undone by cutting the file back to the end
        # this thread last saw, and the writer goes on. Other threads have appended since
        # (their durable intents and finishes): the cut removes them.
        end = getattr(self._seen, "end", offset)
        assert self._fd is not None
        os.ftruncate(self._fd, end)
        os.fsync(self._fd)
        self.size = self.synced_size = end
        message = f"{self.path}: append at byte {offset} failed; truncated to byte {end}"
        log.error("%s", message)
        return message


class StaleOffsetTruncate(BrokenRuntime):
    """Undoes a failed append by truncating to the end its thread last saw.

    Alone in a process that is where the failed append began, and nothing is lost.
    With threads appending in between, the cut removes their durable records: an
    intent whose tool then runs (I6: an effect without its intent) and a success
    that was reported or journaled (I1: the op runs again, its success gone).
    """

    mistake = (
        "after a failed append, truncates the file to the offset this thread last saw as the end"
    )
    caught_by = ("I1", "I6")
    # A full disk at an append or at a group's shared fsync: either fails the append it undoes.
    needs_fault = "disk-full or disk-full-mid-write"
    needs_threads = True
    _journal_class = _StaleOffsetWriter


def _exceptions_only(steps: Steps[T]) -> Steps[T]:
    """Carry out ``steps`` as code that catches ``Exception`` only would: an ``Exception``
    thrown at a step is thrown into them, anything else (a cancellation, an interrupt)
    passes them by: the run is dropped where it stands and nothing it would have
    journaled for the interruption is written."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            step: Step = steps.throw(error) if error is not None else steps.send(reply)
        except StopIteration as done:
            value: T = done.value
            return value
        try:
            reply, error = (yield step), None
        except Exception as exc:
            reply, error = None, exc
        except BaseException:
            steps.close()  # the mistake: the protocol never sees it
            raise


class _ExceptionsOnlyExecutor(Executor):
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
        return _exceptions_only(
            super().steps(
                op_id,
                tool,
                args,
                snapshot,
                attempt=attempt,
                redo_of=redo_of,
                key_op=key_op,
                fresh=fresh,
            )
        )


class CancelLeftRunning(BrokenRuntime):
    mistake = (
        "lets a cancellation pass without journaling the call's outcome or handing it on, "
        "as `except Exception` does"
    )
    caught_by = ("I7",)
    needs_fault = "cancel"
    needs_batch = True
    _executor_class = _ExceptionsOnlyExecutor

    def _guarded(self, op_id: str, tool: str, args: Mapping[str, Any], steps: Steps[T]) -> Steps[T]:
        return (yield from _exceptions_only(super()._guarded(op_id, tool, args, steps)))

    def _runs_again(self, op: OpHistory) -> bool:
        return False  # an op left RUNNING in this life is answered "info", without a hint


class ContentByTool(BrokenRuntime):
    """Identity by content that compares the tool alone: a re-issued call is answered from
    the earliest unclaimed op of its tool, whatever its arguments. A model that re-issues
    its calls in the same order never shows it (the k-th call of a tool is the k-th op of
    that tool); one that re-orders a batch gets another call's answer, and that call
    never runs."""

    mistake = "matches a re-issued call by its tool alone, ignoring its arguments"
    caught_by = ("I12",)
    needs_model = "replan"

    def _match(
        self, tool: str, args: Mapping[str, Any], redo_of: str | None, *, fresh: bool
    ) -> str | None:
        if self.identity is not Identity.CONTENT or redo_of is not None or fresh:
            return None
        wanted = ContentKey(tool, _ANY_ARGS)
        return match_by_content(
            ((op_id, wanted) for op_id in self._of_tool(tool)), wanted, self._claimed
        )

    def _of_tool(self, tool: str) -> list[str]:
        """The ops of a tool, in first-intent order: with settled ops left in the file, every
        op read (an index knows contents, not tools), else those held in memory."""
        if self.ops.settled is None:
            return self._by_content.get(ContentKey(tool, _ANY_ARGS), [])
        found = []
        for op_id in self.ops:
            op = self.ops[op_id]
            if op.tool == tool and op.redo_of is None and not op.fresh:
                found.append(op_id)
        return found

    def _index(self, op: OpHistory) -> None:
        if self.identity is Identity.CONTENT and op.redo_of is None and not op.fresh:
            self._by_content.setdefault(ContentKey(op.tool, _ANY_ARGS), []).append(op.op_id)


_ANY_ARGS = "*"
"""The digest ``content-by-tool`` gives every call's arguments: all alike."""


class _GivesUpExecutor(Executor):
    def invoke(self, intent: IntentRecord, *, key_op: str | None = None) -> Steps[FinishRecord]:
        if intent.snapshot.idempotency is not IdempotencyClass.UNKNOWN:
            return (yield from super().invoke(intent, key_op=key_op))
        # The mistake: a call of unknown effect (a shell command, a request: the slow ones)
        # is given up as timed out, its outcome unknown, and the tool is never called.
        return FinishRecord(
            intent.op_id,
            False,
            None,
            digest(None),
            intent.attempt,
            self.incarnation,
            error="TransientToolError: gave up waiting: the outcome is unknown",
            transient=True,
        )
        yield  # a generator, as every invoke is


class GivesUpUnknown(BrokenRuntime):
    mistake = (
        "gives slow calls (of unknown effect) up as outcome unknown without running them: "
        "an unknown finish and a VERIFY hint, and no tool called"
    )
    caught_by = ("I7", "I8", "I11")
    _executor_class = _GivesUpExecutor


class _TimeoutIsSuccessExecutor(Executor):
    def invoke(self, intent: IntentRecord, *, key_op: str | None = None) -> Steps[FinishRecord]:
        finish = yield from super().invoke(intent, key_op=key_op)
        if finish.transient and intent.snapshot.idempotency is IdempotencyClass.NON_IDEMPOTENT:
            # The mistake: a timed-out write that must not run twice (a tap, a payment) is
            # taken for done, as if the request always went through.
            return FinishRecord(
                intent.op_id, True, None, digest(None), intent.attempt, self.incarnation
            )
        return finish


class LostReplyOk(BrokenRuntime):
    mistake = (
        "takes a timed-out non-idempotent call for done: journals it SUCCEEDED and answers "
        "ok, unverified"
    )
    caught_by = ("I2", "I11")
    needs_fault = "lost-reply or lost-request"  # the same timeout: either exposes it
    _executor_class = _TimeoutIsSuccessExecutor


BOGUS_RESULT = {"bogus": True}


class WrongResult(BrokenRuntime):
    mistake = "answers a durable success from the journal with a wrong result"
    caught_by = ("I11",)

    def _outcome_of(self, op_id: str) -> CallOutcome:
        outcome = super()._outcome_of(op_id)
        if outcome.ok and outcome.result is not None:
            return replace(outcome, result=BOGUS_RESULT)  # the mistake: not what was journaled
        return outcome


class _CutsLastRecordWriter(JournalWriter):
    def read(self, data: bytes) -> JournalScan:
        scan = super().read(data)
        if not scan.records:
            return scan
        # The mistake: the last whole record is taken for a write the crash may have torn,
        # and cut (with any real torn tail after it) as a torn tail is, and reported so.
        last = scan.records[-1]
        torn = TornTail(last.offset, len(data) - last.offset, "last record may be torn")
        return replace(scan, records=scan.records[:-1], valid_end=last.offset, torn=torn)


class CutsLastRecord(BrokenRuntime):
    mistake = "cuts the last whole record at every start, as if it were a torn tail"
    caught_by = ("I9",)
    _journal_class = _CutsLastRecordWriter


class _TimeoutIsFailureExecutor(Executor):
    def invoke(self, intent: IntentRecord, *, key_op: str | None = None) -> Steps[FinishRecord]:
        finish = yield from super().invoke(intent, key_op=key_op)
        if finish.transient and not intent.snapshot.retry_safe:
            # The mistake: a timeout of a call that must not run twice is taken for a
            # failure (journaled FAILED, told to the user), though its effect may be there.
            return replace(finish, transient=False)
        return finish


class EffectReportedFailed(BrokenRuntime):
    mistake = "journals a timed-out call of an unsafe tool FAILED and says so, effect or not"
    caught_by = ("I10",)
    needs_fault = "lost-reply"
    _executor_class = _TimeoutIsFailureExecutor


class RetryNeverRun(BrokenRuntime):
    mistake = (
        "decides RETRY for a safe op left RUNNING, then journals it succeeded without running it"
    )
    caught_by = ("I3",)

    def _retry_steps(self, op: OpHistory) -> Steps[CallOutcome]:
        # The mistake: the retry is answered from nothing; no intent, no tool, a success.
        finish = FinishRecord(op.op_id, True, None, digest(None), op.attempt, self.incarnation)
        yield Append((finish,))
        return CallOutcome(op.op_id, "ok", executed=False)


class _WrongFdWriter(JournalWriter):
    """Every fsync of its appends goes to the descriptor of the journal's folder."""

    def __init__(self, path: Path | str, **kwargs: Any) -> None:
        self._elsewhere = os.open(Path(path).parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        super().__init__(path, **kwargs)

    def _append(self, records: tuple[Record, ...], *, sync: bool) -> int:
        with self._fsync_elsewhere():
            return super()._append(records, sync=sync)

    def sync(self) -> None:
        with self._fsync_elsewhere():
            super().sync()

    @contextlib.contextmanager
    def _fsync_elsewhere(self) -> Any:
        # The mistake: the fsync is given another open descriptor than the one written to
        # (it succeeds, and the journal's own bytes stay in the page cache).
        real = journal_module._fsync
        with _journal_function("_fsync", lambda fd: real(self._elsewhere)):
            yield

    def _release(self) -> None:
        super()._release()
        with contextlib.suppress(OSError):
            os.close(self._elsewhere)


class FsyncWrongFd(BrokenRuntime):
    mistake = "fsyncs another descriptor (the journal's folder) instead of the journal's"
    caught_by = ("I1", "I6")
    needs_fault = "power-loss"
    _journal_class = _WrongFdWriter


class _NoDirFsyncWriter(JournalWriter):
    def __init__(self, path: Path | str, **kwargs: Any) -> None:
        if not Path(path).exists():
            _create_without_dir_fsync(Path(path))
        super().__init__(path, **kwargs)


def _create_without_dir_fsync(path: Path) -> None:
    """The journal's creation (header and identity fsynced in a file of their own, linked
    into place) with the mistake: its folder is never fsynced, so its name is not durable."""
    temporary = path.with_name(f"{path.name}.creating.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, FILE_HEADER + encode_frame(JournalIdRecord(new_journal_id())))
        os.fsync(fd)
    finally:
        os.close(fd)
    with contextlib.suppress(FileExistsError):
        os.link(temporary, path)
    os.unlink(temporary)


class NoDirFsync(BrokenRuntime):
    mistake = "creates the journal and links it into place without fsyncing its folder"
    caught_by = ("I1", "I6")
    needs_fault = "power-loss"
    _journal_class = _NoDirFsyncWriter


class _NoLockFcntl:
    """``fcntl`` as the journal module uses it, with ``flock`` doing nothing."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_real_fcntl(), name)

    @staticmethod
    def flock(fd: int, operation: int) -> None:
        del fd, operation  # the mistake: the journal's lock is never taken


def _real_fcntl() -> Any:
    import fcntl

    return fcntl


class _NoLockWriter(JournalWriter):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with _journal_function("fcntl", _NoLockFcntl()):
            super().__init__(*args, **kwargs)


class NoJournalLock(BrokenRuntime):
    """Opens the journal without its ``flock``: a second process opens it too and recovers
    what the first still runs. Only a life that is alive while the next one starts (a
    paused one) can show it: after a kill, nothing holds the lock anyway."""

    mistake = "opens the journal without taking its lock: a second life runs beside the first"
    caught_by = ("I1", "I2", "I8")
    needs_fault = "pause"
    _journal_class = _NoLockWriter


_COMPACTS = "a scenario that compacts its journal (scenarios/long_task.toml: compact_at)"


class CompactionDropsRunning(BrokenRuntime):
    mistake = "compacts the journal without the records of an op still RUNNING"
    caught_by = ("I9",)
    needs_step = _COMPACTS
    exposing = ("compacts", True)

    def _compacted(self, records: list[Record], size: int, crc: int, now: float) -> list[Record]:
        kept = super()._compacted(records, size, crc, now)
        open_ops = {r.op_id for r in kept if isinstance(r, IntentRecord)}
        # The mistake: only settled ops are folded into the new file; an op in flight is lost.
        # (Its checkpoint counts what the file holds, so that the block ends where it says.)
        new = [r for r in kept if getattr(r, "op_id", None) not in open_ops]
        checkpoint = new[0]
        if isinstance(checkpoint, CheckpointRecord):
            new[0] = replace(checkpoint, carried=len(new) - 1 - checkpoint.settled)
        return new


class CompactionDropsResolution(BrokenRuntime):
    mistake = "compacts a resolved op without its resolution (it is RUNNING again)"
    caught_by = ("I9",)
    needs_step = _COMPACTS
    exposing = ("compacts", True)

    def _compacted(self, records: list[Record], size: int, crc: int, now: float) -> list[Record]:
        # The mistake: the model's resolution is not carried into the settled op.
        return [
            replace(r, resolution=None, redo_op=None, note="")
            if isinstance(r, SettledRecord) and r.resolution is not None
            else r
            for r in super()._compacted(records, size, crc, now)
        ]


class _UnsyncedCompactionWriter(JournalWriter):
    def compact(self, build: Any) -> int:
        # The mistake: the compacted file is renamed into place (and its folder fsynced)
        # unsynced, on the theory that the next append's fsync covers it; a power cut
        # before that append leaves the journal's name on an empty file.
        with _journal_function("_fsync", lambda fd: None):
            return super().compact(build)


class CompactionUnsynced(BrokenRuntime):
    mistake = "renames its compacted file into place before fsyncing it"
    caught_by = ("I1", "I6")
    needs_fault = "power-loss"
    needs_step = _COMPACTS
    _journal_class = _UnsyncedCompactionWriter
    exposing = ("compacts", True)


class _CompactionNoDirFsyncWriter(JournalWriter):
    def compact(self, build: Any) -> int:
        # The mistake: the rename is never made durable; the appends that follow go to the
        # new file, fsynced, under a name a power cut gives back to the old one.
        with _journal_function("fsync_dir", lambda directory: None):
            return super().compact(build)


class CompactionNoDirFsync(BrokenRuntime):
    mistake = "renames its compacted file into place without fsyncing the folder"
    caught_by = ("I1", "I6")
    needs_fault = "power-loss"
    needs_step = _COMPACTS
    _journal_class = _CompactionNoDirFsyncWriter
    exposing = ("compacts", True)


class _OsWith:
    """The ``os`` module as the journal's code sees it, with some functions replaced: how a
    broken writer routes the real code's writes another way."""

    def __init__(self, **replaced: Callable[..., Any]) -> None:
        self._replaced = replaced

    def __getattr__(self, name: str) -> Any:
        return self._replaced.get(name) or getattr(os, name)


@contextlib.contextmanager
def _appending_unsynced(**replaced: Callable[..., Any]) -> Iterator[None]:
    """The block's appends go through ``replaced`` functions of ``os`` and are never
    fsynced (the journal's creation, before it, stays durable)."""
    with _journal_function("os", _OsWith(**replaced)), _journal_function("_fsync", _no_fsync):
        yield


def _no_fsync(fd: int) -> None:
    del fd


class _UnsyncedWriter(JournalWriter):
    """A writer whose appends are never fsynced: the fsync a group of threads' writes
    shares (``JournalWriter.sync``) is left out too."""

    def sync(self) -> None:
        with _journal_function("_fsync", _no_fsync):
            super().sync()


@functools.cache
def _c_library() -> Any:
    """The C library through ctypes (loaded once): the calls a C runtime would make."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fwrite.restype = ctypes.c_size_t
    libc.fwrite.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
    libc.fflush.argtypes = [ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    return libc


def _c_error(call: str) -> OSError:
    import ctypes

    code = ctypes.get_errno()
    return OSError(code, f"{call}: {os.strerror(code)}")


_RANGE_WRITE_AND_WAIT = 1 | 2 | 4
"""SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER."""


def _sync_file_range(fd: int) -> None:
    # The mistake: the whole file's pages written back and waited for, which looks like an
    # fsync; but neither its size nor the drive's cache is made durable.
    if _c_library().sync_file_range(fd, 0, 0, _RANGE_WRITE_AND_WAIT) != 0:
        raise _c_error("sync_file_range")


class _RangeSyncWriter(JournalWriter):
    def __init__(self, path: Path | str, **kwargs: Any) -> None:
        with _journal_function("_fsync", _sync_file_range):
            super().__init__(path, **kwargs)

    def _append(self, records: tuple[Record, ...], *, sync: bool) -> int:
        with _journal_function("_fsync", _sync_file_range):
            return super()._append(records, sync=sync)

    def sync(self) -> None:
        with _journal_function("_fsync", _sync_file_range):
            super().sync()


class SyncFileRange(BrokenRuntime):
    mistake = "syncs its journal with sync_file_range, which makes no data durable, not fsync"
    caught_by = ("I1", "I6")
    needs_fault = "power-loss"
    _journal_class = _RangeSyncWriter


class _PwritevWriter(_UnsyncedWriter):
    def _append(self, records: tuple[Record, ...], *, sync: bool) -> int:
        with _appending_unsynced(write=_pwritev_at_end):
            return super()._append(records, sync=sync)


def _pwritev_at_end(fd: int, data: bytes) -> int:
    return os.pwritev(fd, [data], os.fstat(fd).st_size)


class PwritevNoFsync(BrokenRuntime):
    mistake = "appends to its journal with os.pwritev and never fsyncs it"
    caught_by = ("I1", "I6")
    needs_fault = "power-loss"
    _journal_class = _PwritevWriter


class _StdioWriter(_UnsyncedWriter):
    """Appends through C stdio: a stream of its own on the journal, opened ``ab``."""

    _stream: int | None = None

    def _append(self, records: tuple[Record, ...], *, sync: bool) -> int:
        with _appending_unsynced(write=self._fwrite):
            return super()._append(records, sync=sync)

    def _fwrite(self, fd: int, data: bytes) -> int:
        del fd  # the stream's own descriptor names the same file
        libc = _c_library()
        if self._stream is None:
            self._stream = libc.fopen(os.fsencode(self.path), b"ab")
            if not self._stream:
                raise _c_error("fopen")
        written = int(libc.fwrite(data, 1, len(data), self._stream))
        # The mistake: flushed to the kernel, as a C runtime's fflush does, and no fsync.
        if libc.fflush(self._stream) != 0:
            raise _c_error("fflush")
        return written

    def _release(self) -> None:
        if self._stream is not None:
            _c_library().fclose(self._stream)
            self._stream = None
        super()._release()


class StdioNoFsync(BrokenRuntime):
    mistake = "appends to its journal with C stdio (fwrite, fflush) and never fsyncs it"
    caught_by = ("I1", "I6")
    needs_fault = "power-loss"
    _journal_class = _StdioWriter


class _ReplacingWriter(_UnsyncedWriter):
    """Each append rewrites the whole journal: a temporary file, renamed over it."""

    def _append(self, records: tuple[Record, ...], *, sync: bool) -> int:
        with _appending_unsynced(write=self._replace_whole):
            return super()._append(records, sync=sync)

    def _replace_whole(self, fd: int, data: bytes) -> int:
        whole = _read_all(fd) + data
        temporary = self.path.with_name(f"{self.path.name}.replacing.{os.getpid()}")
        new = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            _write_whole(new, whole)
            # The mistake: no fsync of the new file before its rename; the rename and the
            # folder's fsync make its name durable, not its content.
            os.rename(temporary, self.path)
            journal_module.fsync_dir(self.path.parent)
            if journal_module.fcntl is not None:
                journal_module.fcntl.flock(new, journal_module.fcntl.LOCK_EX)
            os.lseek(new, 0, os.SEEK_END)
            os.dup2(new, fd)  # the writer's descriptor (and its lock) now the new file's
        finally:
            os.close(new)
        return len(data)


def _write_whole(fd: int, data: bytes) -> None:
    """Write all of ``data`` with the real ``os.write`` (the journal's is routed here)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0) if size else b""


class RenameNoFileFsync(BrokenRuntime):
    mistake = (
        "rewrites its journal whole at each append: a temporary file renamed over it and "
        "the folder fsynced, the file itself never fsynced"
    )
    caught_by = ("I1", "I6")
    needs_fault = "power-loss"
    _journal_class = _ReplacingWriter


class _TruncatingWriter(_UnsyncedWriter):
    """Each append rewrites the whole journal in place: opened ``O_TRUNC``, written."""

    def _append(self, records: tuple[Record, ...], *, sync: bool) -> int:
        with _appending_unsynced(write=self._rewrite_in_place):
            return super()._append(records, sync=sync)

    def _rewrite_in_place(self, fd: int, data: bytes) -> int:
        whole = _read_all(fd) + data
        # The mistake: truncated and written again, never fsynced.
        out = os.open(self.path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
        try:
            _write_whole(out, whole)
        finally:
            os.close(out)
        return len(data)


class TruncateRewriteNoFsync(BrokenRuntime):
    mistake = "rewrites its journal whole at each append, opened O_TRUNC, and never fsyncs it"
    caught_by = ("I1", "I6")
    needs_fault = "power-loss"
    _journal_class = _TruncatingWriter


_KEYED = "a keyed tool whose provider deduplicates (scenarios/payment_flow.toml: dedupe)"


class KeyChangesOnRetry(BrokenRuntime):
    mistake = "retries an op left RUNNING under a new idempotency key (the attempt in the key)"
    caught_by = ("I2", "I8")
    needs_step = _KEYED
    exposing = ("keyed", True)

    def _retry_steps(self, op: OpHistory) -> Steps[CallOutcome]:
        # The mistake: the key is made from the op and its attempt, so a keyed op retried
        # inside its window reaches its provider as a new request, not as a repeat.
        finish = yield from self.executor.steps(
            op.op_id,
            op.tool,
            op.args,
            op.snapshot,
            attempt=op.attempt + 1,
            redo_of=op.redo_of,
            key_op=f"{op.op_id}@{op.attempt + 1}",
            fresh=op.fresh,
        )
        return CallOutcome(
            op.op_id, "ok" if finish.succeeded else "fail", finish.result, finish.error, None, True
        )


_RECONCILED = (
    "a tool whose effect a reconciler looks up by key (scenarios/payment_flow.toml: lookup)"
)


class _FreshKeyRedoExecutor(Executor):
    reconciling = 0
    """How deep the runtime is in asking a reconciler (its redo comes through here)."""

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
        if self.reconciling and redo_of is not None:
            key_op = op_id  # the mistake: the redo is keyed as a call of its own
        return super().steps(
            op_id,
            tool,
            args,
            snapshot,
            attempt=attempt,
            redo_of=redo_of,
            key_op=key_op,
            fresh=fresh,
        )


class ReconcileNewKey(BrokenRuntime):
    mistake = "redoes an op its reconciler found absent under a new idempotency key"
    caught_by = ("I8",)
    needs_step = _RECONCILED
    _executor_class = _FreshKeyRedoExecutor
    exposing = ("reconciled", True)

    def _reconcile_steps(
        self, op: OpHistory, answer: Answer | None = None, *, lost_now: bool = False
    ) -> Steps[CallOutcome | None]:
        # The redo an ABSENT answer makes is journaled as the op's (``redo_of``), but sent
        # under its own key: a look-up by the op's key (the chain's) never finds its effect.
        executor = self.executor
        assert isinstance(executor, _FreshKeyRedoExecutor)
        executor.reconciling += 1
        try:
            return (yield from super()._reconcile_steps(op, answer, lost_now=lost_now))
        finally:
            executor.reconciling -= 1


class AnswersReusedId(BrokenRuntime):
    mistake = "answers an op id called again with other content from the op it names"
    caught_by = ("I8", "I11")
    needs_fault = "reused-id"

    def _check_content(self, op_id: str, op: OpHistory, tool: str, args: Mapping[str, Any]) -> None:
        pass  # the mistake: the journal holds the id, so the call is taken as that op's


class AwaitsNothing(BrokenRuntime):
    mistake = "takes the coroutine an async tool returns, never awaited, for its result"
    caught_by = ("I8", "I11")
    needs_fault = "async-tool"

    def _check_tool(self, execute: object) -> None:
        pass  # the mistake: an async def tool is taken as any other

    def call(
        self,
        op_id: str,
        tool: str,
        args: Mapping[str, Any],
        execute: ToolFunction,
        *,
        redo_of: str | None = None,
        fresh: bool = False,
    ) -> CallOutcome:
        def unawaited(name: str, given: Mapping[str, Any], ctx: CallContext) -> Any:
            reply = execute(name, given, ctx)
            if not hasattr(type(reply), "__await__"):
                return reply
            reply.close()  # never run: journaled as the object it is, a success
            return {NOT_JSON: type(reply).__qualname__, "repr": repr(reply)}

        return super().call(op_id, tool, args, unawaited, redo_of=redo_of, fresh=fresh)


class RecoversInFlight(BrokenRuntime):
    mistake = "runs recover() while calls are in flight: decides ops still running"
    caught_by = ("I1", "I4", "I8")
    needs_fault = "recover-in-flight"

    def _refuse_recovery_in_flight(self, calls: int) -> None:
        pass  # the mistake: an op in flight is taken for one a crash left running


class BothApisAtOnce(BrokenRuntime):
    mistake = "lets the synchronous API call an op while an AsyncRuntime drives the runtime"
    caught_by = ("I1", "I11")
    needs_fault = "both-apis"
    needs_batch = True

    def _sync_api(self, what: str) -> None:
        pass  # the mistake: the two APIs keep their calls in flight apart


class ReconcilesAtOnce(BrokenRuntime):
    mistake = "asks a reconciler at once after a lost reply, and redoes without limit"
    caught_by = ("I8",)
    needs_fault = "lagging-lookup"
    needs_step = _RECONCILED
    exposing = ("reconciled", True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reconcile_backoff = 0.0  # the mistake: no time for the provider to see it
        self.reconcile_redoes = 8


def _none_within(encoded: Sequence[tuple[Record, bytes]], written: int) -> frozenset[str]:
    return frozenset()  # the mistake: a failed write is taken to have written no frame


class _NothingWrittenWriter(JournalWriter):
    def _append(self, records: tuple[Record, ...], *, sync: bool) -> int:
        with _journal_function("_intents_within", _none_within):  # under the writer's lock
            return super()._append(records, sync=sync)


class FailedGroupWriteFailsAll(BrokenRuntime):
    """Tells every caller of a group write the disk filled up in that its call failed.

    A write of several callers' intents that a full disk cuts short leaves the
    first frames whole; the next start reads them and runs those ops (a
    retry-safe one retried, an unsafe one redone once the model finds no
    effect), though their callers were told they failed and never called them
    again (I10). The callers whose frames were cut are rightly told "failed".
    """

    mistake = (
        "tells every caller of a write cut short by a full disk 'failed', though the "
        "first intent frames were written whole"
    )
    caught_by = ("I10",)
    needs_fault = "disk-full-mid-write"
    needs_batch = True
    _journal_class = _NothingWrittenWriter


class KeyWindowNeverPasses(BrokenRuntime):
    mistake = "ages a keyed op's key from this start, so its window never passes: retried"
    caught_by = ("I2",)
    needs_step = _KEYED
    exposing = ("keyed", True)

    def plan(self, not_started: Mapping[str, str] | None = None) -> list[RecoveryDecision]:
        return [
            self._ageless(d) if d.snapshot.keyed and d.state is OpState.RUNNING else d
            for d in super().plan(not_started)
        ]

    def _ageless(self, d: RecoveryDecision) -> RecoveryDecision:
        # The mistake: the key's age is taken as 0, however long ago its first intent was.
        args = self.ops[d.op_id].args
        return decide_for_operation(d.op_id, d.tool, d.state, d.snapshot, args, age=0.0)


_KEYED_TWICE = "a keyed call made twice with equal arguments (scenarios/payment_flow.toml: charge)"


class _KeyFromArgsExecutor(Executor):
    def invoke(self, intent: IntentRecord, *, key_op: str | None = None) -> Steps[FinishRecord]:
        # The mistake: the key is made from what is asked (the tool and its arguments), not
        # from the op, so two intended calls with equal arguments share one key.
        content = f"{intent.tool}:{intent.args_digest}"
        return (yield from super().invoke(intent, key_op=content))


class KeyFromArgs(BrokenRuntime):
    """An idempotency key derived from the tool and its arguments.

    A retry and a redo of one op keep its arguments, so they keep its key: while
    no task makes the same keyed call twice nothing tells this key from the op's
    own. Two intended charges of the same amount to the same customer share one
    key, and the provider drops the second as a repeat: an effect lost (I8), and the
    second reported done with the first one's result (I11).
    """

    mistake = "derives the idempotency key from the tool and its arguments, not from the op"
    caught_by = ("I8", "I11")
    needs_step = _KEYED_TWICE
    exposing = ("keyed-twice", True)
    _executor_class = _KeyFromArgsExecutor

    def _question(self, op: OpHistory) -> Question | None:
        # Its provider is asked by the same key the call carried: the mistake is one.
        question = super()._question(op)
        if question is None:
            return None
        content = f"{op.tool}:{op.args_digest}"
        return replace(question, ctx=replace(question.ctx, key_op=content))


_WRITE_REPEATED = (
    "an idempotent write repeated with another between, under identity by content "
    "(scenarios/long_task.toml: the note)"
)


class ContentOneOp(BrokenRuntime):
    """Identity by content that keeps one op per content for idempotent writes.

    The reasoning is that an idempotent write made again changes nothing, so after a
    restart a call with the content of an op an earlier life journaled as an
    idempotent write is answered from that op and never run.
    A write between them breaks it: the note written, changed and written back
    ends changed (I8), and the third call is reported done with another call's
    result (I11). Taps and reads (the shapes the re-issuing scenarios had) are
    told apart by position, as the real runtime does.
    """

    mistake = (
        "answers an idempotent write from the first journaled op of its content (of an "
        "earlier life), never running it"
    )
    caught_by = ("I8", "I11")
    needs_step = _WRITE_REPEATED
    exposing = ("content-write-repeated", True)
    _made_here: set[str] | None = None
    """The ops journaled in this life (None while the journal is read at the start)."""

    def _match(
        self, tool: str, args: Mapping[str, Any], redo_of: str | None, *, fresh: bool
    ) -> str | None:
        found = super()._match(tool, args, redo_of, fresh=fresh)
        if self.identity is not Identity.CONTENT or redo_of is not None or fresh:
            return found
        same = self._of_content(ContentKey(tool, self._content_digest(tool, args)), digest(args))
        first = self.ops.get(same[0]) if same else None
        if first is None or first.op_id in (self._made_here or ()):
            return found
        if first.snapshot.idempotency is not IdempotencyClass.IDEMPOTENT_WRITE:
            return found
        return first.op_id  # the mistake: the first op of its content stands for every call

    def __init__(self, journal: JournalWriter, table: ToolTable, **kwargs: Any) -> None:
        super().__init__(journal, table, **kwargs)
        self._made_here = set()  # from now on: the ops this life makes

    def _index(self, op: OpHistory) -> None:
        super()._index(op)
        if self._made_here is not None:
            self._made_here.add(op.op_id)


def _one_op_per_content(
    placed: Sequence[tuple[int, Record]], size: int, crc: int
) -> SettledIndexRecord:
    """The settled index with the mistake: only the first op of each content is found by
    content (the others are indexed as fresh calls, which content never matches)."""
    seen: set[tuple[str, str]] = set()
    indexed = []
    for offset, record in placed:
        if isinstance(record, SettledRecord) and record.redo_of is None and not record.fresh:
            content = (record.tool, record.args_digest)
            if content in seen:
                record = replace(record, fresh=True)
            seen.add(content)
        indexed.append((offset, record))
    return settled_index(indexed, size, crc)


class _OneOpPerContentWriter(JournalWriter):
    def compact(self, build: Any) -> int:
        with _journal_function("settled_index", _one_op_per_content):
            return super().compact(build)


_COMPACTS_REPEATS = (
    "a compacting scenario under identity by content with two equal calls "
    "(scenarios/long_task.toml)"
)


class SettledIndexOnePerContent(BrokenRuntime):
    """A compacted journal's settled index that keeps one op per tool and argument digest.

    Looked up by id every op is there; looked up by content only the first of equal
    calls is. A re-issued call of the second is taken for a new call and run again
    after its success was durable (I1, I8; I2 when it must not run twice).
    """

    mistake = "indexes a compacted journal's settled ops by content keeping one op per content"
    caught_by = ("I1", "I2", "I8")
    needs_step = _COMPACTS_REPEATS
    exposing = ("compacts-repeats", True)
    _journal_class = _OneOpPerContentWriter

    def _compacted(self, records: list[Record], size: int, crc: int, now: float) -> list[Record]:
        # The listed compaction, whose settled index the writer builds its way.
        return super()._compacted(records, size, crc, now)

    def _ops_index(self, *index: Any) -> None:
        return None  # no ops index at close: a start finds settled ops by that index


class ContentIgnoresVolatile(BrokenRuntime):
    """Identity by content that compares a call's whole arguments, whatever its table
    declares: a model that re-issues a payment with a fresh request id is not matched to
    the op it stands for, and the payment runs again. A model that re-issues its calls
    with the same arguments never shows it."""

    mistake = "knows a re-issued call by its exact content, ignoring its declared volatile fields"
    caught_by = ("I1", "I2")
    needs_model = "drift"

    def _content_digest(self, tool: str, args: Mapping[str, Any]) -> str:
        return digest(args)  # the mistake: the table's rule is never applied


class DriftByTool(BrokenRuntime):
    """Knows a re-issued call by its exact content and, for a tool whose fields may drift,
    takes a call no journaled op has the content of for a drift of the latest op of that
    tool from an earlier life (a proxy that keys its journal by tool name): another
    payment is answered with the old one's result and never made."""

    mistake = (
        "answers a re-issued call of a drifting tool from the journal by its tool name alone: "
        "another action gets an old result"
    )
    caught_by = ("I8", "I11")
    needs_model = "drift"

    def __init__(self, journal: JournalWriter, table: ToolTable, **kwargs: Any) -> None:
        super().__init__(journal, table, **kwargs)
        self._earlier = [op.op_id for op in self.ops.in_memory()]

    def _content_digest(self, tool: str, args: Mapping[str, Any]) -> str:
        return digest(args)

    def _match(
        self, tool: str, args: Mapping[str, Any], redo_of: str | None, *, fresh: bool
    ) -> str | None:
        found = super()._match(tool, args, redo_of, fresh=fresh)
        if found is not None or redo_of is not None or fresh:
            return found
        if self.identity is not Identity.CONTENT or self.table.content_rule(tool) is None:
            return found
        for op_id in reversed(self._earlier):
            op = self.ops.get(op_id)
            if op is not None and op.tool == tool and op.redo_of is None and not op.fresh:
                return op_id  # the mistake: the tool's latest op, whatever its arguments
        return None


class ForwardsInDoubt(BrokenRuntime):
    """Forwards a re-issued call whose op's outcome is unknown (left running by a kill,
    awaiting the model's check) to the tool as a new call, instead of answering it with
    the op's VERIFY hint: the payment in doubt is made a second time. A model that reads
    its hints at the start (before any re-issue) never meets it."""

    mistake = "forwards a re-issued call in doubt to the tool instead of answering with VERIFY"
    caught_by = ("I2",)
    needs_model = "drift"

    def _match(
        self, tool: str, args: Mapping[str, Any], redo_of: str | None, *, fresh: bool
    ) -> str | None:
        found = super()._match(tool, args, redo_of, fresh=fresh)
        op = None if found is None else self.ops.get(found)
        if op is not None and not op.settled and found in self._awaiting_verify:
            return None  # the mistake: an op in doubt is run again as a new call
        return found


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
    "retry-lost-reply": RetryLostReply,
    "no-crc-check": NoCrcCheck,
    "zeros-end-journal": ZerosEndJournal,
    "newer-frame-cut": NewerFrameCut,
    "unlisted-as-read-only": UnlistedAsReadOnly,
    "unawaited-intent": UnawaitedIntent,
    "one-current-op": OneCurrentOp,
    "no-op-lock": NoOpLock,
    "stale-offset-truncate": StaleOffsetTruncate,
    "cancel-left-running": CancelLeftRunning,
    "gives-up-unknown": GivesUpUnknown,
    "lost-reply-ok": LostReplyOk,
    "wrong-result": WrongResult,
    "content-by-tool": ContentByTool,
    "cuts-last-record": CutsLastRecord,
    "effect-reported-failed": EffectReportedFailed,
    "retry-never-run": RetryNeverRun,
    "fsync-wrong-fd": FsyncWrongFd,
    "no-dir-fsync": NoDirFsync,
    "no-journal-lock": NoJournalLock,
    "compaction-drops-running": CompactionDropsRunning,
    "compaction-drops-resolution": CompactionDropsResolution,
    "compaction-unsynced": CompactionUnsynced,
    "compaction-no-dir-fsync": CompactionNoDirFsync,
    "sync-file-range": SyncFileRange,
    "pwritev-no-fsync": PwritevNoFsync,
    "stdio-no-fsync": StdioNoFsync,
    "rename-no-file-fsync": RenameNoFileFsync,
    "truncate-rewrite-no-fsync": TruncateRewriteNoFsync,
    "key-changes-on-retry": KeyChangesOnRetry,
    "reconcile-new-key": ReconcileNewKey,
    "key-window-never-passes": KeyWindowNeverPasses,
    "answers-reused-id": AnswersReusedId,
    "awaits-nothing": AwaitsNothing,
    "recovers-in-flight": RecoversInFlight,
    "failed-group-write-fails-all": FailedGroupWriteFailsAll,
    "reconciles-at-once": ReconcilesAtOnce,
    "both-apis-at-once": BothApisAtOnce,
    "key-from-args": KeyFromArgs,
    "content-one-op": ContentOneOp,
    "settled-index-one-per-content": SettledIndexOnePerContent,
    "content-ignores-volatile": ContentIgnoresVolatile,
    "drift-by-tool": DriftByTool,
    "forwards-in-doubt": ForwardsInDoubt,
}

RUNTIMES: Mapping[str, type[Runtime]] = {"real": Runtime, **BROKEN_RUNTIMES}
"""Every runtime the agent can run, by name."""
