"""The runtime: a journal, an executor and a recovery planner behind one object.

    runtime = Runtime.open("agent.journal")          # lock, read, new incarnation
    report = runtime.recover(execute)                # RETRY what is safe, hints for the rest
    outcome = runtime.call("s001", "write_file", {...}, execute)

A keyed tool left RUNNING is retried with the same idempotency key while its
provider's window holds; an op of unknown outcome whose tool has a reconciler is
closed by its answer before any VERIFY hint (``harness.runtime.reconcile``).

The full note: docs/reference/modules.md (``harness/runtime/runtime.py``).
"""

from __future__ import annotations

import _thread
import contextlib
import heapq
import os
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from math import inf
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from harness.runtime import log
from harness.runtime.classes import ToolTable
from harness.runtime.compaction import Compacting, Compaction, compacted, due
from harness.runtime.errors import (
    FailpointTriggered,
    JournalClosedError,
    JournalError,
    JournalWriteError,
    OpConflictError,
    RuntimeUsageError,
)
from harness.runtime.executor import CallOutcome, Executor, ToolFunction
from harness.runtime.hooks import failpoint
from harness.runtime.identity import ContentKey, Identity, match_by_content
from harness.runtime.journal import JournalListener, JournalWriter
from harness.runtime.matrix import (
    Decision,
    OpState,
    RecoveryDecision,
    verify_hint,
)
from harness.runtime.reconcile import Answer, Asking, Question, Reconciled, Reconciler
from harness.runtime.records import (
    DecisionRecord,
    FinishRecord,
    HintRecord,
    IncarnationRecord,
    IntentRecord,
    OpsIndexRecord,
    Record,
    RecoveredRecord,
    Resolution,
    ResolvedRecord,
    RetiredRecord,
    SettledRecord,
    TailDroppedRecord,
    digest,
)
from harness.runtime.recovery import (
    OpHistory,
    OpTable,
    Plan,
    apply_record,
    fold_scan,
    index_entries,
    last_incarnation,
    plan_recovery,
)
from harness.runtime.settled import IndexedOps, ops_index
from harness.runtime.steps import (
    Append,
    Blocking,
    CallContext,
    Steps,
    is_async_function,
    no_tool,
    run_steps,
)
from harness.runtime.store import Journal, open_journal

__all__ = [
    "CLOSE_TIMEOUT",
    "RECONCILE_BACKOFF",
    "RECONCILE_REDOES",
    "RECONCILE_TIMEOUT",
    "RecoveryReport",
    "Runtime",
    "VerifyHint",
]

T = TypeVar("T")

RECONCILE_TIMEOUT = 10.0
"""Seconds a reconciler has to answer before its answer counts as unknown; at a start, the
reconcilers of every op are asked at once, under this one deadline."""
RECONCILE_REDOES = 2
"""How many redoes a reconciler's ABSENT answers may make in one chain (each redo's reply
lost again), counted from the journal over every life; past it the op goes to VERIFY."""
RECONCILE_BACKOFF = 0.2
"""Seconds waited before asking a reconciler about a reply lost in this life, doubled for
each redo of the chain: a provider's lookup may lag the effect it looks up."""
CLOSE_TIMEOUT = 10.0
"""Seconds ``close`` waits for the calls in flight before it closes the journal under them."""
REDO_SUFFIX = ".redo"
"""A redo a reconciler's ABSENT makes is ``<op>.redo``, as the model names its redoes."""


@dataclass(frozen=True, slots=True)
class VerifyHint:
    """An op whose effect the model must check before deciding to redo it."""

    op_id: str
    tool: str
    args: Mapping[str, Any]
    text: str


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    incarnation: int
    decisions: Sequence[RecoveryDecision]
    """Every op's decision, in op order (on a compacted journal, its settled ops' SKIPs are
    made when first read: ``harness.runtime.recovery.Plan``)."""
    hints: tuple[VerifyHint, ...]
    retried: tuple[CallOutcome, ...]


class Runtime:
    """The recovery system around one journal; one instance per process life.

    Not a stable API, but the one surface for fault-injection subclasses (the
    harness's deliberately broken runtimes): ``_journal_class``,
    ``_executor_class``, ``plan``, ``_hint_steps``, ``_resolve_steps``,
    ``_check_tool``, ``_check_content`` and ``_compacted`` here,
    and the executor's ``steps``, ``invoke``, ``_intent_append``,
    ``_finish_append`` and ``_may_retry``.
    """

    _journal_class: ClassVar[type[JournalWriter]] = JournalWriter
    """The journal's writer (a seam: the harness's broken runtimes read it their own way)."""
    _executor_class: ClassVar[type[Executor]] = Executor
    """The write-ahead protocol of a call (a seam: the broken runtimes run it their way)."""

    def __init__(
        self,
        journal: Journal,
        table: ToolTable,
        *,
        max_attempts: int = 3,
        identity: Identity | str = Identity.ID,
        compaction: Compaction | None = None,
        clock: Callable[[], float] | None = None,
        reconcilers: Mapping[str, Reconciler] | None = None,
        reconcile_timeout: float = RECONCILE_TIMEOUT,
        reconcile_redoes: int = RECONCILE_REDOES,
        reconcile_backoff: float = RECONCILE_BACKOFF,
    ) -> None:
        _check_options(reconcile_timeout, reconcile_redoes, reconcile_backoff)
        self.identity = _identity(identity)
        self.clock: Callable[[], float] = clock if clock is not None else time.time
        """What keyed tools' windows are measured on (seconds; by default ``time.time``)."""
        self.reconcilers: Mapping[str, Reconciler] = dict(reconcilers or {})
        self.reconcile_timeout = reconcile_timeout
        self.reconcile_redoes = reconcile_redoes
        self.reconcile_backoff = reconcile_backoff
        self._asking = Asking()
        # Who drives the runtime: None for the synchronous API, or the AsyncRuntime that
        # holds it (one API at a time); whether close() has begun.
        self._async_owner: object | None = None
        self._closing = False
        self.journal = journal
        self.table = table
        self.compaction = compaction if compaction is not None else Compaction()
        records = [s.record for s in journal.scan.records]
        # A start through an ops index reads no lives' records: the index names the last.
        mapped = journal.scan.settled
        known = mapped.incarnation if isinstance(mapped, IndexedOps) else 0
        self.incarnation = max(last_incarnation(records), known) + 1
        # A compacted journal's settled ops stay in the file until asked for.
        self.ops: OpTable = fold_scan(journal.scan)
        # Identity by content: each content's ops in first-intent order (those held in
        # memory: the table finds the block's), the ops this life's calls have claimed,
        # and the calls answered by another op's id.
        self._by_content: dict[ContentKey, list[str]] = {}
        for op in self.ops.in_memory():
            self._index(op)
        self._claimed: set[str] = set()
        self._aliases: dict[str, str] = {}
        # (op, state) of every SKIP in the journal, kept current by _note.
        self._skipped = {key for key in map(_skip_key, records) if key is not None}
        self.executor = self._executor_class(
            journal,
            self.incarnation,
            on_record=_weakly(self._note),
            max_attempts=max_attempts,
            clock=self.clock,
        )
        self._awaiting_verify: dict[str, VerifyHint] = {}
        # Ops an earlier life left open: until recover() has decided them, no call of
        # them is answered (it would answer a bare info, its hint never made).
        self._must_recover = {op.op_id for op in self.ops.unsettled()}
        # Threads: every step and append is made under _lock; an op's calls take turns
        # at its gate (a lock and how many calls hold or wait for it).
        self._lock = _thread.RLock()
        self._gates: dict[str, _Gate] = {}
        # The gates' own lock: a call's entry and exit take no turn at the runtime's.
        self._gates_lock = _thread.allocate_lock()
        held = 0 if journal.scan.settled is None else journal.scan.settled.records
        why = due(self.compaction, journal.size, len(records) + held, self.ops, time.time())
        del records  # the journal's records, folded: not kept for the runtime's life
        if why is not None:
            # Before this life writes anything: its records (a torn tail's report first)
            # go to the new file.
            log.info("%s: compacting at open: %s", journal.name, why)
            self._compact()
        incarnation = IncarnationRecord(self.incarnation, os.getpid())
        torn = journal.scan.torn
        if torn is None:
            # Written with this life's first append (its decisions), in one fsync.
            journal.defer([incarnation])
            self._note(incarnation)
        else:
            # The tail is already cut: report it now, the report first, so that
            # even a torn write that keeps the incarnation record keeps the report.
            report = TailDroppedRecord(torn.offset, torn.length, torn.reason, self.incarnation)
            self._write_many([report, incarnation])

    @classmethod
    def open(
        cls,
        path: Path | str | Journal,
        *,
        table: ToolTable | None = None,
        max_attempts: int = 3,
        identity: Identity | str = Identity.ID,
        listener: JournalListener | None = None,
        compaction: Compaction | None = None,
        clock: Callable[[], float] | None = None,
        reconcilers: Mapping[str, Reconciler] | None = None,
        reconcile_timeout: float = RECONCILE_TIMEOUT,
        reconcile_redoes: int = RECONCILE_REDOES,
        reconcile_backoff: float = RECONCILE_BACKOFF,
    ) -> Runtime:
        """Lock and read the journal, start an incarnation.

        ``path`` names the journal's file, or is a PostgreSQL URL naming a journal in a
        database (``postgresql://user@host/db?journal=task-42``, for a fleet of workers:
        ``harness.runtime.postgres``), or is a journal opened already (any store that
        keeps ``harness.runtime.store.Journal``); the runtime then closes it.

        ``compaction`` (``harness.runtime.compaction.Compaction``) says when the
        journal is compacted at open and how long settled ops are kept; by
        default at 64 MiB or at 4 records to 1 past 4 MiB, keeping every op.

        ``table`` classes the tools; without one every tool is UNKNOWN (calls run,
        and any left RUNNING by a crash goes to VERIFY). ``listener`` is called
        with each journal write and fsync (``harness.runtime.journal.Appended``,
        ``Synced``), for metrics.
        ``identity`` is how a call is known as one the journal holds: ``"id"``
        (the default) or ``"content"`` (for a model that re-issues its calls
        under new ids: ``harness.runtime.identity``); anything else is a
        ``ValueError`` before the journal is opened.
        ``clock`` (seconds, ``time.time`` by default) stamps a keyed tool's intents
        and measures its provider's window at each start. ``reconcilers`` maps a
        tool to the function that asks its provider whether an op's effect is there
        (``harness.runtime.reconcile``); one that has not answered after
        ``reconcile_timeout`` seconds counts as unknown. A chain of redoes made by a
        reconciler's ABSENT answers holds at most ``reconcile_redoes`` redoes, and a
        reply lost in a life is reconciled only after ``reconcile_backoff`` seconds
        (doubled at each redo). Options out of range are a ``ValueError`` before the
        journal is opened.
        """
        identity = _identity(identity)
        _check_options(reconcile_timeout, reconcile_redoes, reconcile_backoff)
        journal = (
            open_journal(path, file_class=cls._journal_class, listener=listener)
            if isinstance(path, str | os.PathLike)
            else path
        )
        try:
            return cls(
                journal,
                table if table is not None else ToolTable({}, source="<no table>"),
                max_attempts=max_attempts,
                identity=identity,
                compaction=compaction,
                clock=clock,
                reconcilers=reconcilers,
                reconcile_timeout=reconcile_timeout,
                reconcile_redoes=reconcile_redoes,
                reconcile_backoff=reconcile_backoff,
            )
        except BaseException:
            journal.close()
            raise

    # -- recovery --------------------------------------------------------------------------

    def plan(self, not_started: Mapping[str, str] | None = None) -> Sequence[RecoveryDecision]:
        """This start's decisions, from the journal alone; acts on nothing (a ``Plan`` on a
        compacted journal: its settled ops' SKIPs are made when it is read)."""
        return plan_recovery(self.ops, not_started=not_started, now=self.clock())

    def recover(
        self, execute: ToolFunction, *, not_started: Mapping[str, str] | None = None
    ) -> RecoveryReport:
        """Journal every decision, then retry what is safe and hand over VERIFY hints.

        ``RuntimeUsageError`` (a ``RuntimeError``) while a call is in flight:
        recovery decides from a journal no call is writing. Calls made while it
        runs wait for it. Until it has run, a journal that holds ops an earlier
        life left open answers no call.
        """
        self._sync_api("recover()")
        _refuse_async_tool(execute)
        with self._lock:
            self._refuse_recovery_in_flight(len(self._gates))
            return self._drive(self._recover_steps(not_started=not_started), execute)

    def _refuse_recovery_in_flight(self, calls: int) -> None:
        if calls:
            raise RuntimeUsageError(
                f"recover() while {calls} call(s) are in flight: it would decide ops that "
                "are still running; recover before the calls start"
            )

    def _recover_steps(
        self, *, not_started: Mapping[str, str] | None = None
    ) -> Steps[RecoveryReport]:
        """``recover`` as steps (``harness.runtime.steps``), for either API to carry out."""
        decisions = self.plan(not_started)
        self._must_recover = set()
        # Every RETRY and VERIFY is written, every life. A settled op's SKIP never is
        # (``_to_journal``): a start writes in proportion to its open ops, not the journal.
        batch: list[Record] = [
            DecisionRecord(d.op_id, d.state, d.snapshot, d.decision, self.incarnation, d.age)
            for d in self._to_journal(decisions)
        ]
        acting = self._acting(decisions)
        report = decisions if isinstance(decisions, Plan) else tuple(decisions)
        if not acting:
            # Nothing to act on: the decisions and the end of recovery in one
            # append, one fsync (the common start, after a clean step or none).
            yield Append((*batch, RecoveredRecord(self.incarnation, len(batch))))
            return RecoveryReport(self.incarnation, report, (), ())
        if batch:
            yield Append(tuple(batch))
        for d in acting:
            log.info("%s (%s) left %s: %s", d.op_id, d.tool, d.state.value, d.decision.value)
        retried: list[CallOutcome] = []
        # Every op a reconciler may close is asked about at once, under one deadline.
        answers = yield from self._ask_steps(
            [
                self.ops[d.op_id]
                for d in acting
                if d.decision is Decision.VERIFY and d.hint is not None
            ]
        )
        for decision in acting:
            failpoint("recovery.after_decision", decision.op_id)
            op = self.ops[decision.op_id]
            if decision.decision is Decision.RETRY:
                failpoint("recovery.before_retry", decision.op_id)
                retried.append((yield from self._retry_steps(op)))
            elif decision.decision is Decision.VERIFY and decision.hint is not None:
                if op.op_id in answers:
                    reconciled = yield from self._reconcile_steps(op, answers[op.op_id])
                    if reconciled is not None:
                        continue
                self._awaiting_verify[op.op_id] = VerifyHint(
                    op.op_id, op.tool, op.args, decision.hint
                )
        hints = yield from self._hint_steps()
        yield Append((RecoveredRecord(self.incarnation, len(batch)),))
        return RecoveryReport(self.incarnation, report, hints, tuple(retried))

    def _to_journal(self, decisions: Sequence[RecoveryDecision]) -> list[RecoveryDecision]:
        """The decisions a start journals, in op order: every RETRY and VERIFY, and the SKIP of
        each op the plan names that never started, once. A settled op's SKIP is not written:
        its state alone decides it (the matrix skips every SUCCEEDED and FAILED op, and
        recovery plans no resolved one), so a start writes nothing for the ops it skips
        and reads none of them."""
        held = [d for _, d in decisions.live] if isinstance(decisions, Plan) else decisions
        return [
            d
            for d in held
            if d.decision is not Decision.SKIP
            or (d.state is OpState.NOT_STARTED and (d.op_id, d.state) not in self._skipped)
        ] + [
            d
            for d in (decisions.extra if isinstance(decisions, Plan) else ())
            if (d.op_id, d.state) not in self._skipped
        ]

    @staticmethod
    def _acting(decisions: Sequence[RecoveryDecision]) -> list[RecoveryDecision]:
        """The decisions a start acts on (RETRY, VERIFY), in op order: of a ``Plan``, only
        its ops held in memory can have one (a settled op is skipped)."""
        held = [d for _, d in decisions.live] if isinstance(decisions, Plan) else decisions
        return [d for d in held if d.decision is not Decision.SKIP]

    def retry(self, op: OpHistory, execute: ToolFunction) -> CallOutcome:
        """Run an op again under its own id, with its original snapshot and arguments."""
        return self._drive(self._retry_steps(op), execute)

    def _retry_steps(self, op: OpHistory) -> Steps[CallOutcome]:
        finish = yield from self.executor.steps(
            op.op_id,
            op.tool,
            op.args,
            op.snapshot,
            attempt=op.attempt + 1,
            redo_of=op.redo_of,
            key_op=self._key_op(op.redo_of),
            fresh=op.fresh,
        )
        return _outcome(finish, executed=True)

    def deliver_hints(self) -> tuple[VerifyHint, ...]:
        """Journal each pending hint as delivered and return them for the model."""
        self._sync_api("deliver_hints()")
        with self._lock:
            self._check_recovered("deliver_hints()", None)
            return self._drive(self._hint_steps(), no_tool)

    def _hint_steps(self) -> Steps[tuple[VerifyHint, ...]]:
        hints = tuple(self._awaiting_verify.values())
        for hint in hints:
            yield Append((HintRecord(hint.op_id, self.incarnation, hint.text),))
            log.info("%s (%s): VERIFY hint handed to the model", hint.op_id, hint.tool)
            failpoint("recovery.after_hint", hint.op_id)
        return hints

    def resolve(
        self,
        op_id: str,
        resolution: Resolution,
        *,
        redo_op: str | None = None,
        note: str = "",
    ) -> None:
        """The model closes an op whose outcome was unknown, after checking its effect.

        ``Resolution.EFFECT_PRESENT``: a read-only check found the effect, so
        the op counts as done; ``REDONE``: the effect was absent and the op was
        redone as ``redo_op`` (run it first, with ``call(redo_op, ...,
        redo_of=op_id)``); ``UNVERIFIABLE``: nothing could tell, and the op is
        not redone. Journaled durably; from then on ``call(op_id, ...)``
        answers from it: ``ok``, the redo's outcome, or ``info``.
        ``ValueError`` for an op that is not RUNNING, or a redo op given for
        anything but REDONE (or missing for it). A call answered by content
        may be resolved under its own id: the op that answered it is.
        """
        self._sync_api("resolve()")
        with self._lock:
            self._drive(self._resolve_steps(op_id, resolution, redo_op=redo_op, note=note), no_tool)

    def _resolve_steps(
        self,
        op_id: str,
        resolution: Resolution,
        *,
        redo_op: str | None = None,
        note: str = "",
    ) -> Steps[None]:
        op_id = self._aliases.get(op_id, op_id)
        op = self.ops.get(op_id)
        if op is None or op.state is not OpState.RUNNING:
            state = "unknown to the journal" if op is None else op.state.value
            raise ValueError(
                f"resolve({op_id!r}): only an op left RUNNING can be resolved; it is {state}"
            )
        if op_id in self._gates:
            raise ValueError(f"resolve({op_id!r}): a call of this op is in flight")
        resolution = Resolution(resolution)
        if (resolution is Resolution.REDONE) != (redo_op is not None):
            raise ValueError(
                f"resolve({op_id!r}, {resolution.name}): "
                "a redo op goes with REDONE, and only with it"
            )
        yield Append((ResolvedRecord(op_id, self.incarnation, resolution, redo_op, note),))
        self._awaiting_verify.pop(op_id, None)

    # -- the normal flow -------------------------------------------------------------------

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
        """Run a tool call write-ahead, unless the journal already knows the op.

        An op the journal knows is answered from it, never run again: a
        durable success with its result, a failure with its error, an op the
        model resolved with its resolution (``outcome_of``), an op awaiting
        verification with ``info`` and its hint. Under identity by content a
        call whose id the journal does not know is answered so from the
        earliest unclaimed op of the same tool and arguments, if there is one
        (``matched`` names it); a redo (``redo_of``) and a ``fresh`` call (a
        read-only check that must see the world now) never are. A tool that
        raises anything but ``ToolError`` leaves the op's outcome unknown:
        journaled so, the exception raised on, and the op handed to the model
        as a VERIFY hint (or, for a retry-safe op, run again at its next call).
        A call of an op another thread is calling waits for it, then is answered
        as above.

        Refused before anything is journaled or run: an op id the journal holds for
        another tool or other arguments (``OpConflictError``); a call before
        ``recover()`` on a journal an earlier life left ops open in, after
        ``close()``, or while an ``AsyncRuntime`` drives this runtime
        (``RuntimeUsageError``); an ``async def`` tool (``TypeError``: use
        ``AsyncRuntime``). A ``JournalWriteError`` says whether the call's outcome
        is unknown (``outcome_unknown``).
        """
        self._sync_api("call()")
        self._check_tool(execute)
        gate = self._enter(op_id)
        try:
            return self._drive(
                self._call_steps(op_id, tool, args, redo_of=redo_of, fresh=fresh), execute
            )
        except JournalError as exc:
            told = self._told(op_id, exc)
            if told is exc:
                raise
            raise told from exc.__cause__ or exc
        finally:
            self._leave(op_id, gate)

    def _told(self, op_id: str, exc: JournalError) -> JournalError:
        """A journal failure as the call of ``op_id`` is told it: whether its outcome is
        unknown (its intent may be on disk, or an earlier one was), or it did not run."""
        if isinstance(exc, JournalWriteError) and exc.op_id is None:
            op = self.ops.get(op_id)
            open_now = op is not None and op.state is OpState.RUNNING and not op.resolved
            return exc.for_call(op_id, unknown=open_now or op_id in exc.maybe_durable)
        if self._closing and not isinstance(exc, JournalWriteError | JournalClosedError):
            return JournalClosedError(
                f"{self.journal.name}: the runtime was closed while call {op_id} was under "
                "way; its outcome is unknown, and the next start decides it by its class"
            )
        return exc

    def _enter(self, op_id: str) -> _Gate:
        """Wait for this op's turn: no other call of it is under way when this returns."""
        with self._gates_lock:
            if self._closing:
                raise RuntimeUsageError(f"call({op_id!r}) after close(): the runtime is closed")
            gate = self._gates.get(op_id)
            if gate is None:
                gate = self._gates[op_id] = _Gate()
            gate.users += 1
        gate.lock.acquire()
        return gate

    def _leave(self, op_id: str, gate: _Gate) -> None:
        gate.lock.release()
        with self._gates_lock:
            gate.users -= 1
            if gate.users == 0:
                del self._gates[op_id]

    def _call_steps(
        self,
        op_id: str,
        tool: str,
        args: Mapping[str, Any],
        *,
        redo_of: str | None = None,
        fresh: bool = False,
    ) -> Steps[CallOutcome]:
        """``call`` as steps (``harness.runtime.steps``), for either API to carry out."""
        self.journal.check_writable()  # after a failed append, no call is answered at all
        self._check_recovered(f"call({op_id!r})", op_id)
        if not isinstance(args, Mapping):
            raise TypeError(
                f"{op_id} ({tool}): arguments must be a mapping of names to values, not "
                f"{type(args).__name__}; nothing was journaled or run"
            )
        if redo_of is not None and redo_of not in self.ops:
            raise ValueError(
                f"{op_id} ({tool}): redo_of={redo_of!r} names an op the journal does not "
                "hold; nothing was journaled or run"
            )
        op = self.ops.get(op_id)
        if op is not None:
            self._check_content(op_id, op, tool, args)
            self._claimed.add(op_id)
            if self._runs_again(op):
                return (yield from self._guarded(op_id, tool, args, self._retry_steps(op)))
            return self.outcome_of(op_id)
        alias = self._aliases.get(op_id)
        if alias is not None and not self._same_action(self.ops[alias], tool, args):
            self._check_content(op_id, self.ops[alias], tool, args)
        known = alias or self._match(tool, args, redo_of, fresh=fresh)
        if known is not None:
            self._check_recovered(f"call({op_id!r}), known by content as {known!r},", known)
            self._aliases[op_id] = known
            self._claimed.add(known)
            return self.outcome_of(op_id)
        self._claimed.add(op_id)
        snapshot = self.table.classify(tool)
        steps = self.executor.steps(
            op_id,
            tool,
            args,
            snapshot,
            redo_of=redo_of,
            key_op=self._key_op(redo_of),
            fresh=fresh,
        )
        finish = yield from self._guarded(op_id, tool, args, steps)
        if finish.unknown:  # a lost reply of a call that must not run twice: VERIFY it now
            op = self.ops.get(op_id)
            if op is not None and tool in self.reconcilers:  # unless its provider can tell
                reconciled = yield from self._reconcile_steps(op, lost_now=True)
                if reconciled is not None:
                    return replace(reconciled, op_id=op_id, executed=True)
            hint = yield from self._verify_now(op_id, tool, args)
            return CallOutcome(op_id, "info", error=finish.error, hint=hint, executed=True)
        return _outcome(finish, executed=True)

    def _guarded(self, op_id: str, tool: str, args: Mapping[str, Any], steps: Steps[T]) -> Steps[T]:
        """Run a call's steps; when the tool raised (journaled as an unknown outcome), hand
        the op on by its class before the exception goes on."""
        try:
            return (yield from steps)
        except (FailpointTriggered, JournalError, GeneratorExit):
            raise  # a crash, the journal failing, the run dropped: nothing more is written
        except BaseException:  # the tool's own exception, or a cancellation, journaled
            op = self.ops.get(op_id)
            if op is not None and not op.snapshot.retry_safe:
                yield from self._verify_now(op_id, tool, args)
            raise

    def _check_tool(self, execute: object) -> None:
        """Refuse an ``async def`` tool on the synchronous API (a seam: a broken runtime
        takes the coroutine it makes for the tool's result)."""
        _refuse_async_tool(execute)

    def _check_content(self, op_id: str, op: OpHistory, tool: str, args: Mapping[str, Any]) -> None:
        """Refuse a call of a journaled op with other content (a seam: a broken runtime
        answers it from the op instead)."""
        _refuse_conflict(op_id, op, tool, args)

    def _runs_again(self, op: OpHistory) -> bool:
        """Whether a call of an op the journal knows runs it again: an op of a retry-safe
        class whose outcome is unknown (its tool raised, or the call was cancelled), that no
        resolution closed. Recovery retries such ops at a start; this is the same rule in
        the life that saw the call end without an outcome."""
        return (
            op.state is OpState.RUNNING
            and op.snapshot.retry_safe
            and not op.resolved
            and op.op_id not in self._awaiting_verify
        )

    def _verify_now(self, op_id: str, tool: str, args: Mapping[str, Any]) -> Steps[str | None]:
        """Hand an op of unknown outcome to the model in this life, as recovery would."""
        op = self.ops.get(op_id)
        if op is None or op.state is not OpState.RUNNING:
            return None
        hint = verify_hint(op_id, tool, args)
        self._awaiting_verify[op_id] = VerifyHint(op_id, tool, args, hint)
        yield Append((HintRecord(op_id, self.incarnation, hint),))
        return hint

    def _question(self, op: OpHistory) -> Question | None:
        """What the op's reconciler is asked, or None when it has none or the op is closed."""
        reconciler = self.reconcilers.get(op.tool)
        if reconciler is None or op.state is not OpState.RUNNING or op.resolved:
            return None
        key_op = self._key_op(op.redo_of) or op.op_id
        ctx = CallContext(
            op.op_id, op.tool, op.attempt, self.incarnation, key_op, self.journal.journal_id
        )
        return Question(reconciler, op.args, ctx)

    def _ask_steps(
        self, ops: Sequence[OpHistory], *, delay: float = 0.0
    ) -> Steps[dict[str, Answer]]:
        """The answers of the ops' reconcilers, asked at once under one deadline, outside
        the lock and off the loop (``harness.runtime.reconcile``), by op id."""
        questions = {op.op_id: q for op in ops if (q := self._question(op)) is not None}
        if not questions:
            return {}
        asked = list(questions.values())
        timeout = self.reconcile_timeout
        answers: list[Answer] = yield Blocking(
            lambda: self._asking.ask_all(asked, timeout, delay=delay)
        )
        return dict(zip(questions, answers, strict=True))

    def _redoes_before(self, op: OpHistory) -> int:
        """How many redoes the op's chain holds up to it (0 for an op that redoes nothing)."""
        depth, seen = 0, {op.op_id}
        parent = op.redo_of
        while parent is not None and parent in self.ops and parent not in seen:
            seen.add(parent)
            depth += 1
            parent = self.ops[parent].redo_of
        return depth

    def _reconcile_steps(
        self, op: OpHistory, answer: Answer | None = None, *, lost_now: bool = False
    ) -> Steps[CallOutcome | None]:
        """Ask the op's reconciler about its effect (``harness.runtime.reconcile``), unless
        ``answer`` is its answer already, and close it as the answer says, journaled as the
        model's resolutions are: present, or absent and redone as ``<op>.redo`` under the
        same key. None when it could not tell, the op is not open, or its chain already
        holds ``reconcile_redoes`` redoes: the op is left to VERIFY.

        ``lost_now``: the op's reply was lost in this life, so the provider is asked only
        after ``reconcile_backoff`` seconds, doubled at each redo of the chain."""
        depth = self._redoes_before(op)
        if answer is None:
            delay = self.reconcile_backoff * 2**depth if lost_now else 0.0
            answers = yield from self._ask_steps([op], delay=delay)
            if op.op_id not in answers:
                return None
            answer = answers[op.op_id]
        found, note = answer
        failpoint("recovery.reconcile", op.op_id)
        log.info("%s (%s): %s", op.op_id, op.tool, note)
        if op.state is not OpState.RUNNING or op.resolved:
            return None  # closed while the provider was asked
        key_op = self._key_op(op.redo_of) or op.op_id
        if found is Reconciled.PRESENT:
            yield Append(
                (ResolvedRecord(op.op_id, self.incarnation, Resolution.EFFECT_PRESENT, None, note),)
            )
            self._awaiting_verify.pop(op.op_id, None)
            return self._outcome_of(op.op_id)
        if found is not Reconciled.ABSENT:
            return None
        if depth >= self.reconcile_redoes:
            log.info(
                "%s (%s): absent, but its chain holds %d redoes already: left to VERIFY",
                op.op_id,
                op.tool,
                depth,
            )
            return None
        redo_op = f"{op.op_id}{REDO_SUFFIX}"
        if redo_op not in self.ops:  # else a kill came before the resolution: it stands
            self._claimed.add(redo_op)
            finish = yield from self.executor.steps(
                redo_op,
                op.tool,
                op.args,
                self.table.classify(op.tool),
                redo_of=op.op_id,
                key_op=key_op,
                fresh=op.fresh,
            )
        else:
            finish = None
        yield Append(
            (ResolvedRecord(op.op_id, self.incarnation, Resolution.REDONE, redo_op, note),)
        )
        self._awaiting_verify.pop(op.op_id, None)
        if finish is not None and finish.unknown:  # the redo's reply was lost as well
            redo = self.ops[redo_op]
            if (yield from self._reconcile_steps(redo, lost_now=True)) is None:
                yield from self._verify_now(redo_op, op.tool, op.args)
        return self._outcome_of(op.op_id)

    def claim(self, op_ids: Iterable[str]) -> None:
        """Take ops out of identity by content for this life: calls the framework already
        holds the answers of (in its own saved history), which its model will not issue
        again, so that no new call of the same tool and arguments (a check that reads the
        world now) is answered from them. Ops the journal does not know are ignored."""
        self._claimed.update(op_id for op_id in op_ids if op_id in self.ops)

    def outcome_of(self, op_id: str) -> CallOutcome:
        """What the journal says of an op it knows, without running anything.

        A resolved op answers with its resolution: ``ok`` when the effect was
        found, the outcome of its redo when it was redone, ``info`` when it
        could not be verified. A call answered by content answers, under its
        own id, with the op that answered it.
        """
        known = self._aliases.get(op_id)
        if known is not None:
            return replace(self._outcome_of(known), op_id=op_id, matched=known)
        return self._outcome_of(op_id)

    def _outcome_of(self, op_id: str) -> CallOutcome:
        op = self.ops[op_id]
        if op.state is OpState.SUCCEEDED:
            return CallOutcome(op_id, "ok", result=op.result)
        if op.state is OpState.FAILED:
            return CallOutcome(op_id, "fail", error=op.error)
        resolved = op.resolution
        if resolved is not None:
            resolution = resolved.resolution
            if resolution is Resolution.EFFECT_PRESENT:
                return CallOutcome(op_id, "ok", resolution=resolution)
            if resolution is Resolution.REDONE and resolved.redo_op in self.ops:
                redo = self._outcome_of(str(resolved.redo_op))
                return replace(redo, op_id=op_id, resolution=resolution, executed=False)
            return CallOutcome(op_id, "info", resolution=resolution)
        pending = self._awaiting_verify.get(op_id)
        return CallOutcome(op_id, "info", hint=pending.text if pending else None)

    def _match(
        self, tool: str, args: Mapping[str, Any], redo_of: str | None, *, fresh: bool
    ) -> str | None:
        """The journaled op a call under an unknown id stands for, by content (or None)."""
        if self.identity is not Identity.CONTENT or redo_of is not None or fresh:
            return None
        try:
            wanted = ContentKey(tool, self._content_digest(tool, args))
            exact = digest(args)
        except (TypeError, ValueError):
            return None  # not JSON: the executor refuses it with its reason
        candidates = ((op_id, wanted) for op_id in self._of_content(wanted, exact))
        return match_by_content(candidates, wanted, self._claimed)

    def _content_digest(self, tool: str, args: Mapping[str, Any]) -> str:
        """What identity by content compares of a call: the digest of its arguments, or of
        the part its table's ``ContentRule`` names (its business key, or all but its
        volatile arguments)."""
        rule = self.table.content_rule(tool)
        if rule is None:
            return digest(args)
        return "rule:" + digest(rule.compared(args))

    def _same_action(self, op: OpHistory, tool: str, args: Mapping[str, Any]) -> bool:
        """Whether a call is the op's action by its tool's declared rule (never without one:
        then only the exact content is)."""
        if self.table.content_rule(tool) is None or op.tool != tool:
            return False
        try:
            return self._content_digest(tool, args) == self._content_digest(op.tool, op.args)
        except (TypeError, ValueError):
            return False

    def _of_content(self, wanted: ContentKey, exact: str) -> list[str]:
        """The ops of a content, in first-intent order: the block's settled ones (found by
        the table, by the exact digest: a compacted op keeps no arguments to apply a rule
        to) merged with those held in memory (the carried ones first, then later)."""
        held = self._by_content.get(wanted, [])
        block = self.ops.by_content(wanted.tool, exact)
        if not block:
            return held
        carried = [(self.ops.order_key(op_id), op_id) for op_id in held]
        placed = [((0, at), op_id) for at, op_id in block]
        return [op_id for _, op_id in heapq.merge(placed, carried)]

    def _index(self, op: OpHistory) -> None:
        """Make a new op a candidate for identity by content, unless it never may be."""
        if self.identity is Identity.CONTENT and op.redo_of is None and not op.fresh:
            known = op.args_digest
            if self.table.content_rule(op.tool) is not None:
                known = self._content_digest(op.tool, op.args)
            self._by_content.setdefault(ContentKey(op.tool, known), []).append(op.op_id)

    def _key_op(self, redo_of: str | None) -> str | None:
        """The first op of a chain of redoes: its idempotency key serves them all."""
        seen: set[str] = set()
        while redo_of is not None and redo_of in self.ops and redo_of not in seen:
            seen.add(redo_of)
            parent = self.ops[redo_of].redo_of
            if parent is None:
                return redo_of
            redo_of = parent
        return redo_of

    # -- compaction ------------------------------------------------------------------------

    def compact(self) -> int:
        """Fold the journal's settled ops into a checkpoint at the head of a new file.

        Ops still open are carried whole; settled ops past the retention are
        forgotten (a call under their id then runs as new). The journal keeps
        its identity (so every idempotency key stays the same) and every answer
        stays the same. The new file replaces the old one whole (written,
        fsynced, renamed, the directory fsynced): a crash leaves one or the
        other. Calls in other threads wait meanwhile; a tool running in one
        goes on, and its finish goes to the new file. Returns the new size.
        """
        self._sync_api("compact()")
        return self._compact_locked()

    def _compact_locked(self) -> int:
        with self._lock:
            return self._compact()

    def _compact(self) -> int:
        self.journal.check_writable()
        now = time.time()
        before = self.journal.size
        if type(self)._compacted is Runtime._compacted:
            # Streamed: memory follows the new file, not the old one (``Compacting``).
            compacting = Compacting(self.compaction.retention, now)
            size = self.journal.compact(compacting)
            dropped = set(compacting.forgotten)
        else:
            dropped = set()

            def build(records: list[Record], size: int, crc: int) -> list[Record]:
                new = self._compacted(records, size, crc, now)
                kept = {r.op_id for r in new if isinstance(r, SettledRecord | IntentRecord)}
                known = {r.op_id for r in records if isinstance(r, SettledRecord | IntentRecord)}
                dropped.update(known - kept)
                return new

            size = self.journal.compact(build)
        # The ops as the new file has them (its settled ops left in it), the open ones
        # still the objects they were.
        still_open = self.ops.unsettled()
        self.ops = fold_scan(self.journal.scan)
        for op in still_open:
            self.ops.keep(op)
        forget = dropped - {op.op_id for op in still_open}
        self._by_content = {}
        for op in self.ops.in_memory():
            self._index(op)
        self._forget(forget)
        if forget:
            log.warning(
                "%s: %d settled ops past retention forgotten: a call under their id runs as new",
                self.journal.name,
                len(forget),
            )
        log.info("%s: compacted from %d to %d bytes", self.journal.name, before, size)
        return size

    def retire(self, *, delete: bool = False) -> None:
        """Close a finished task's journal for good, then close this runtime.

        A last record says the task is retired, durably: any later
        ``Runtime.open`` of the file refuses it (``JournalRetiredError``), so
        a finished task's journal is never taken for a live one, wherever it
        is moved to (archive it so, or ``delete=True`` removes it, its
        directory fsynced). ``ValueError`` while an op is open (RUNNING and
        not resolved: its outcome is unknown) or a call is in flight.
        """
        self._sync_api("retire()")
        with self._lock:
            open_ops = [op.op_id for op in self.ops.unsettled()]
            if open_ops or self._gates:
                why = f"ops {', '.join(open_ops)} are open" if open_ops else "a call is in flight"
                then = (
                    "call recover() to decide them, then settle or resolve them"
                    if self._must_recover
                    else "settle or resolve them first"
                )
                raise ValueError(f"retire(): {why}; {then}")
            self._write_many([RetiredRecord(self.incarnation, time.time())])
            self.journal.close()
            if delete:
                self.journal.remove()
            log.info("%s: journal retired%s", self.journal.name, " and deleted" if delete else "")

    def _compacted(self, records: list[Record], size: int, crc: int, now: float) -> list[Record]:
        """The records of the compacted journal (a seam: the broken runtimes compact their
        way)."""
        return compacted(
            records,
            replaced_size=size,
            replaced_crc=crc,
            retention=self.compaction.retention,
            now=now,
        )

    def _forget(self, gone: set[str]) -> None:
        """Let go of settled ops retention forgot (each set walked once, not once per op)."""
        if not gone:
            return
        for key, same in self._by_content.items():
            if not gone.isdisjoint(same):
                self._by_content[key] = [op_id for op_id in same if op_id not in gone]
        self._skipped = {key for key in self._skipped if key[0] not in gone}
        self._claimed -= gone
        self._aliases = {a: known for a, known in self._aliases.items() if known not in gone}

    def close(self, *, timeout: float = CLOSE_TIMEOUT) -> None:
        """Refuse new calls, wait up to ``timeout`` seconds for those in flight, then close.

        A call still in flight then goes on running its tool, and ends with
        ``JournalClosedError`` when it next writes: its outcome is unknown, and
        its op stays RUNNING for the next start to decide by its class. With no
        call in flight, an ops index of the journal is appended first, when enough
        was written since the last one, so that the next start reads none of the
        ops it settled (``harness.runtime.settled.IndexedOps``); closing never
        raises for the index.
        """
        with self._lock, self._gates_lock:
            self._closing = True
        deadline = time.monotonic() + max(0.0, timeout)
        while self._gates and time.monotonic() < deadline:
            time.sleep(0.002)  # rare and short: not worth a condition on every call
        with self._lock:
            if not self._gates:
                with contextlib.suppress(JournalError):
                    self.journal.append_index(self._ops_index)
            self.journal.close()

    def _sync_api(self, what: str) -> None:
        """Refuse the synchronous API while an ``AsyncRuntime`` drives this runtime."""
        if self._async_owner is not None:
            raise RuntimeUsageError(
                f"{what} on a runtime an AsyncRuntime drives: use one API at a time "
                "(await the AsyncRuntime's methods, or aclose() it first)"
            )

    def _check_recovered(self, what: str, op_id: str | None) -> None:
        """Refuse, before ``recover()``, a call of an op an earlier life left open (or, for
        ``op_id`` None, anything while such an op is there)."""
        if op_id in self._must_recover or (op_id is None and self._must_recover):
            raise RuntimeUsageError(
                f"{what} before recover(): the journal holds {len(self._must_recover)} op(s) "
                "an earlier life left open; call recover() first, which decides each of them"
            )

    def _attach(self, owner: object) -> None:
        """An ``AsyncRuntime`` takes this runtime over; refused while it is in use."""
        with self._lock:
            if self._async_owner is not None:
                raise RuntimeUsageError("another AsyncRuntime drives this runtime already")
            if self._gates:
                raise RuntimeUsageError(
                    f"AsyncRuntime over a runtime with {len(self._gates)} synchronous call(s) "
                    "in flight: use one API at a time"
                )
            self._async_owner = owner

    def _detach(self, owner: object) -> None:
        with self._lock:
            if self._async_owner is owner:
                self._async_owner = None

    def _ops_index(
        self,
        size: int,
        crc: int,
        frames: int,
        offsets: Sequence[int],
        op_ids: Sequence[str | None],
    ) -> OpsIndexRecord | None:
        """The ops index of the journal's first ``size`` bytes (``JournalWriter.append_index``)."""
        found = index_entries(self.ops, offsets, op_ids)
        if found is None:
            return None
        entries, carried = found
        return ops_index(
            entries,
            carried,
            size=size,
            crc=crc,
            records=frames,
            journal_id=self.journal.journal_id,
            incarnation=self.incarnation,
            oldest=self.ops.oldest_settled(),
        )

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- journal ---------------------------------------------------------------------------

    def _drive(self, steps: Steps[T], execute: ToolFunction) -> T:
        """Carry out a run of steps in this thread (the synchronous API), taking turns with
        other threads at every step."""
        return run_steps(steps, self.journal, self._note, execute, lock=self._lock)

    def _write_many(self, records: list[Record]) -> None:
        if records:
            self.journal.append_many(records)
            for record in records:
                self._note(record)

    def _note(self, record: Record) -> None:
        new = record.op_id if isinstance(record, IntentRecord) else None
        if new in self.ops:
            new = None
        apply_record(self.ops, record)
        if new is not None:
            self._index(self.ops[new])
        key = _skip_key(record)
        if key is not None:
            self._skipped.add(key)


class _Gate:
    """One op's turn: held by the call under way, waited for by the others."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = _thread.allocate_lock()
        self.users = 0


def _weakly(note: Callable[[Record], None]) -> Callable[[Record], None]:
    """``note`` (a runtime's bound method) held weakly: the executor it is handed does not
    keep its runtime alive, so a dropped runtime is freed at once, with the file a
    compacted journal's settled ops are read from, not at the next garbage collection."""
    method = weakref.WeakMethod(note)

    def call(record: Record) -> None:
        bound = method()
        if bound is not None:
            bound(record)

    return call


def _skip_key(record: Record) -> tuple[str, OpState] | None:
    """``(op id, state)`` of a journaled SKIP decision, which later starts need not repeat."""
    if isinstance(record, DecisionRecord) and record.decision is Decision.SKIP:
        return record.op_id, record.state
    if isinstance(record, SettledRecord) and record.skipped:
        return record.op_id, record.state
    return None


def _refuse_async_tool(execute: object) -> None:
    """The synchronous API cannot await a tool: refused before anything is journaled."""
    if is_async_function(execute):
        raise TypeError(
            f"{getattr(execute, '__qualname__', execute)!r} is an async function: the "
            "synchronous Runtime cannot await it; run it through AsyncRuntime. Nothing "
            "was journaled or run"
        )


def _refuse_conflict(op_id: str, op: OpHistory, tool: str, args: Mapping[str, Any]) -> None:
    """``OpConflictError`` for an op id the journal holds, called for another tool or with
    other arguments."""
    try:
        asked = digest(args)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{op_id} ({tool}): arguments are not JSON ({exc}); nothing was journaled or run"
        ) from None
    if op.tool != tool or (op.args_digest and op.args_digest != asked):
        raise OpConflictError(op_id, (op.tool, op.args_digest), (tool, asked))


def _check_options(timeout: float, redoes: int, backoff: float) -> None:
    """Refuse reconciling options no runtime could keep."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < inf:
        raise ValueError(f"reconcile_timeout must be a positive number of seconds, got {timeout!r}")
    if isinstance(redoes, bool) or not isinstance(redoes, int) or redoes < 0:
        raise ValueError(f"reconcile_redoes must be a whole number, 0 or more, got {redoes!r}")
    if isinstance(backoff, bool) or not isinstance(backoff, int | float) or not 0 <= backoff < inf:
        raise ValueError(f"reconcile_backoff must be 0 or more seconds, got {backoff!r}")


def _identity(value: Identity | str) -> Identity:
    try:
        return Identity(value)
    except ValueError:
        known = ", ".join(repr(i.value) for i in Identity)
        raise ValueError(f"identity {value!r}: expected one of {known}") from None


def _outcome(finish: FinishRecord, *, executed: bool) -> CallOutcome:
    if finish.succeeded:
        return CallOutcome(finish.op_id, "ok", result=finish.result, executed=executed)
    return CallOutcome(finish.op_id, "fail", error=finish.error, executed=executed)
