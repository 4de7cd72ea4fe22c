"""Recovery planning: fold the journal into op states, then decide per op.

``fold`` replays records in order: an intent makes an op RUNNING, a finish
makes it SUCCEEDED or FAILED, a later intent (a retry) makes it RUNNING again.
An op the model resolved after a VERIFY is closed and not planned again.

``plan_recovery`` decides from the class *snapshot* in each op's intent, never
from today's tool table, and is a pure function of the folded journal: planning
twice, or again after a kill during recovery, gives the same decisions.

A compacted journal's settled ops are not read at a start (``harness.runtime.settled``):
``OpTable`` holds the ops folded from records and decodes a settled op the first time
it is asked for, and ``plan_recovery`` then answers with a ``Plan`` whose SKIPs for
those ops are made when the plan is read, not when it is made.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from harness.runtime.classes import UNLISTED, ToolClass
from harness.runtime.journal import JournalScan, without_cyclic_gc
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
    SettledIndexRecord,
    SettledRecord,
)
from harness.runtime.settled import (
    IndexedOps,
    IndexEntry,
    SettledOps,
    content_hash,
    id_hash,
)

__all__ = [
    "OpHistory",
    "OpTable",
    "Plan",
    "apply_record",
    "fold",
    "fold_scan",
    "index_entries",
    "key_age",
    "last_incarnation",
    "plan_recovery",
]


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
    started_at: float | None = None
    """When its first intent was written (``IntentRecord.at``: keyed tools only)."""

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


def apply_record(ops: MutableMapping[str, OpHistory], record: Record) -> None:
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
                started_at=record.at,
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


LazyOps = SettledOps | IndexedOps
"""Settled ops left in the file: a compaction's block, or the ops an ops index maps."""


def _lazy_op(settled: LazyOps, op_id: str) -> tuple[int, OpHistory] | None:
    """An op of ``settled`` and its position, decoded (None: it holds no such op)."""
    if isinstance(settled, IndexedOps):
        mapped = settled.find(op_id)
        op = None if mapped is None else fold(mapped[1]).get(op_id)
        return None if mapped is None or op is None else (mapped[0], op)
    found = settled.find(op_id)
    return None if found is None else (found[0], _unfold(found[1]))


def _lazy_ops(settled: LazyOps) -> Iterator[tuple[int, OpHistory]]:
    """Every op of ``settled``, decoded, by position (not for a start)."""
    if isinstance(settled, IndexedOps):
        for at, records in settled:
            op_id = getattr(records[0], "op_id", None)
            op = fold(records).get(op_id) if isinstance(op_id, str) else None
            if op is not None:
                yield at, op
        return
    for at, record in settled:
        yield at, _unfold(record)


OrderKey = tuple[int, int]
"""Where an op stands in first-intent order: ``(0, its offset in a compaction's block)``,
or ``(1, n)`` for the n-th op whose first intent came after the block."""


class OpTable(MutableMapping[str, OpHistory]):
    """Each op's history in the order of its first intent, as ``fold`` gives it: the ops
    folded from records, and a compacted journal's settled ops (``SettledOps``), each
    decoded the first time it is asked for and kept from then on.

    Iterating over it decodes every settled op: a start never does."""

    def __init__(self, settled: LazyOps | None = None) -> None:
        self.settled = settled
        self._live: dict[str, OpHistory] = {}
        """Ops folded from records: the carried ones first (block order), then the later."""
        self._carried_at: dict[str, int] = {}
        self._later: dict[str, int] = {}
        self._loaded: dict[str, tuple[int, OpHistory]] = {}
        self._gone: set[str] = set()
        self._by_content: dict[tuple[str, str], list[tuple[int, str]]] = {}

    def _find(self, op_id: str) -> OpHistory | None:
        op = self._live.get(op_id)
        if op is not None:
            return op
        loaded = self._loaded.get(op_id)
        if loaded is not None:
            return loaded[1]
        if self.settled is None or op_id in self._gone:
            return None
        found = _lazy_op(self.settled, op_id)
        if found is None:
            return None
        self._loaded[op_id] = found
        return found[1]

    def __getitem__(self, op_id: str) -> OpHistory:
        op = self._find(op_id) if isinstance(op_id, str) else None
        if op is None:
            raise KeyError(op_id)
        return op

    def __contains__(self, op_id: object) -> bool:
        return isinstance(op_id, str) and self._find(op_id) is not None

    def __setitem__(self, op_id: str, op: OpHistory) -> None:
        if op_id not in self._live and self._find(op_id) is not None:  # the block's
            self._loaded[op_id] = (self._loaded[op_id][0], op)
        else:
            self._live[op_id] = op
            if op_id not in self._carried_at and op_id not in self._later:
                self._later[op_id] = len(self._later)

    def keep(self, op: OpHistory) -> None:
        """Hold ``op`` as it is in place of the op of its id folded from records (an open op
        a compaction carried), or as a later op if the table has none (nor a settled one)."""
        if op.op_id in self._live:
            self._live[op.op_id] = op
        elif op.op_id not in self:
            self[op.op_id] = op

    def carry(self, op: OpHistory, position: int) -> None:
        """Hold an op the block carries whole (its first record at ``position``)."""
        self._live[op.op_id] = op
        self._carried_at[op.op_id] = position

    def __delitem__(self, op_id: str) -> None:
        if op_id in self._live:
            del self._live[op_id]
            self._carried_at.pop(op_id, None)
            self._later.pop(op_id, None)
        elif self._find(op_id) is not None:  # a settled op of the block
            del self._loaded[op_id]
            self._gone.add(op_id)
        else:
            raise KeyError(op_id)

    def __len__(self) -> int:
        held = 0 if self.settled is None else self.settled.count - len(self._gone)
        return len(self._live) + held

    def __iter__(self) -> Iterator[str]:
        if self.settled is None:
            yield from self._live
            return
        carried = sorted(
            (at, op_id) for op_id, at in self._carried_at.items() if op_id in self._live
        )
        block = ((at, op.op_id) for at, op in _lazy_ops(self.settled) if op.op_id not in self._gone)
        for _, op_id in heapq.merge(block, carried):
            yield op_id
        yield from (op_id for op_id in self._live if op_id not in self._carried_at)

    def order_key(self, op_id: str) -> OrderKey:
        """Where a held op stands in first-intent order (``KeyError`` if it is not held)."""
        if op_id in self._carried_at:
            return (0, self._carried_at[op_id])
        if op_id in self._later:
            return (1, self._later[op_id])
        return (0, self._loaded[op_id][0])

    def in_memory(self) -> list[OpHistory]:
        """The ops folded from records, in first-intent order (no settled op of the block)."""
        return list(self._live.values())

    def moving(self) -> list[tuple[OrderKey, OpHistory]]:
        """Every op whose state may still change (held in memory, or a settled op of the
        block some record reopened), by first-intent order."""
        held = [(self.order_key(op_id), op) for op_id, op in self._live.items()]
        reopened = [(key, op) for key, op in self._loaded.values() if not op.settled]
        held += [((0, key), op) for key, op in reopened]
        return sorted(held, key=lambda placed: placed[0])

    def unsettled(self) -> list[OpHistory]:
        """The ops not settled (RUNNING and not resolved), by first-intent order."""
        if self.settled is None:
            return [op for op in self._live.values() if not op.settled]
        return [op for _, op in self.moving() if not op.settled]

    def settled_count(self) -> int:
        """How many ops are settled (the block's without decoding them)."""
        reopened = sum(not op.settled for _, op in self._loaded.values())
        held = 0 if self.settled is None else self.settled.count - len(self._gone) - reopened
        return held + sum(op.settled for op in self._live.values())

    def oldest_settled(self) -> float | None:
        """The earliest time a compaction folded a settled op (None: none was)."""
        times = [op.settled_at for op in self._live.values() if op.settled_at is not None]
        if self.settled is not None and self.settled.oldest is not None:
            times.append(self.settled.oldest)
        return min(times, default=None)

    def by_content(self, tool: str, args_digest: str) -> list[tuple[int, str]]:
        """``(position, op id)`` of the block's settled ops of this content that identity
        by content may match (no redo, no fresh call), in first-intent order."""
        if self.settled is None:
            return []
        key = (tool, args_digest)
        found = self._by_content.get(key)
        if found is None:
            if isinstance(self.settled, IndexedOps):
                found = self.settled.by_content(tool, args_digest)
            else:
                placed = self.settled.by_content(tool, args_digest)
                found = [(at, record.op_id) for at, record in placed]
            self._by_content[key] = found
        return [(at, op_id) for at, op_id in found if op_id not in self._gone]


def fold_scan(scan: JournalScan) -> OpTable:
    """``fold`` of a writer's scan: its records, and the settled ops it left in the file."""
    table = OpTable(scan.settled)
    if scan.settled is None:
        table._live = fold(s.record for s in scan.records)
        return table
    if isinstance(scan.settled, IndexedOps):
        covered = scan.settled.size
        with without_cyclic_gc():
            for scanned in scan.records:
                record = scanned.record
                if (
                    scanned.offset < covered
                    and isinstance(record, IntentRecord | SettledRecord)
                    and record.op_id not in table
                ):
                    first: dict[str, OpHistory] = {}
                    apply_record(first, record)
                    table.carry(first[record.op_id], scanned.offset)
                    continue
                apply_record(table, record)
        return table
    block: tuple[int, int] | None = None
    with without_cyclic_gc():
        for scanned in scan.records:
            record = scanned.record
            if isinstance(record, SettledIndexRecord):
                block = (scanned.end, scanned.end + record.size)
            elif (
                block is not None
                and scanned.offset < block[1]
                and isinstance(record, IntentRecord)
                and record.op_id not in table
            ):
                carried: dict[str, OpHistory] = {}
                apply_record(carried, record)
                table.carry(carried[record.op_id], scanned.offset - block[0])
                continue
            apply_record(table, record)
    return table


def index_entries(
    table: OpTable, offsets: Sequence[int], op_ids: Sequence[str | None]
) -> tuple[list[IndexEntry], list[int]] | None:
    """What an ops index of the file holds, from the runtime's ops and the place and op of
    each record its writer read or wrote (``JournalWriter.append_index``): an entry per
    settled op (its records, those the file's settled ops already map first) and every
    other record carried. None when an op was let go of (retention): the next
    compaction writes the file anew anyway."""
    if table._gone:
        return None
    by_op: dict[str, list[int]] = {}
    carried: list[int] = []
    for offset, op_id in zip(offsets, op_ids, strict=True):
        if op_id is None:
            carried.append(offset)
        else:
            by_op.setdefault(op_id, []).append(offset)
    lazy = table.settled
    entries: list[IndexEntry] = []
    touched: set[int] = set()  # the first places of the lazy ops written to since
    for op_id, placed in by_op.items():
        op = table.get(op_id)
        if op is None:  # a record of an op without an intent (a SKIP of one never run)
            carried.extend(placed)
            continue
        before: Sequence[int] = ()
        if lazy is not None and op_id in table._loaded:
            if isinstance(lazy, IndexedOps):
                before = lazy.offsets_of(op_id) or ()
            else:
                before = (lazy.base + table._loaded[op_id][0],)
            touched.update(before[:1])
        mine = [*before, *placed]
        if not op.settled:
            carried.extend(mine)
        else:
            entries.append((id_hash(op_id), mine, _content_of(op)))
    if lazy is not None:
        entries.extend(e for e in lazy.entries() if e[1][0] not in touched)
    return entries, carried


def _content_of(op: OpHistory) -> int | None:
    """The content hash identity by content finds ``op`` by (None: it never matches it)."""
    if op.redo_of is not None or op.fresh:
        return None
    return content_hash(op.tool, op.args_digest)


class Plan(Sequence[RecoveryDecision]):
    """A start's decisions, in the order ``plan_recovery`` gives them, on a compacted
    journal: those of the ops in memory (``live``, made now) and a SKIP for each settled
    op of the block, made when the plan is read (a start reads only ``live``)."""

    def __init__(
        self,
        table: OpTable,
        live: list[tuple[OrderKey, RecoveryDecision]],
        extra: list[RecoveryDecision],
    ) -> None:
        self.table = table
        self.live = live
        """The decisions of the ops held in memory, with their place in op order."""
        self.extra = extra
        """The decisions of the plan's ops the journal does not know (after every op)."""
        self._held = {d.op_id for _, d in live}
        self._gone = set(table._gone)
        self._all: tuple[RecoveryDecision, ...] | None = None

    def _decisions(self) -> tuple[RecoveryDecision, ...]:
        if self._all is None:
            settled = self.table.settled
            block = (
                ((0, at), _decide(op))
                for at, op in (_lazy_ops(settled) if settled is not None else ())
                if op.resolution is None
                and op.op_id not in self._held
                and op.op_id not in self._gone
            )
            merged = heapq.merge(block, self.live, key=lambda placed: placed[0])
            self._all = (*(d for _, d in merged), *self.extra)
        return self._all

    @overload
    def __getitem__(self, index: int) -> RecoveryDecision: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[RecoveryDecision]: ...
    def __getitem__(self, index: int | slice) -> RecoveryDecision | Sequence[RecoveryDecision]:
        return self._decisions()[index]

    def __len__(self) -> int:
        return len(self._decisions())

    def __iter__(self) -> Iterator[RecoveryDecision]:
        return iter(self._decisions())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return list(self) == list(other)

    def __hash__(self) -> int:
        return hash(self._decisions())

    def __repr__(self) -> str:
        return repr(self._decisions())


def _decide(
    op: OpHistory, ops: Mapping[str, OpHistory] | None = None, now: float | None = None
) -> RecoveryDecision:
    age = key_age(ops, op, now) if ops is not None and op.snapshot.keyed else None
    return decide_for_operation(op.op_id, op.tool, op.state, op.snapshot, op.args, age=age)


def key_age(ops: Mapping[str, OpHistory], op: OpHistory, now: float | None) -> float | None:
    """How old ``op``'s idempotency key is at ``now``: since the first intent of the first op
    of its chain of redoes (they share its key, and the provider's window counts from its
    first request); None when ``now`` or that intent's time is not known."""
    if now is None:
        return None
    first, seen = op, {op.op_id}
    while first.redo_of is not None and first.redo_of in ops and first.redo_of not in seen:
        seen.add(first.redo_of)
        first = ops[first.redo_of]
    return None if first.started_at is None else now - first.started_at


def last_incarnation(records: Iterable[Record]) -> int:
    return max(
        (r.incarnation for r in records if isinstance(r, IncarnationRecord | CheckpointRecord)),
        default=0,
    )


def plan_recovery(
    ops: Mapping[str, OpHistory],
    *,
    not_started: Mapping[str, str] | None = None,
    now: float | None = None,
) -> Sequence[RecoveryDecision]:
    """Decide for every op the journal knows (from its snapshot) and for plan ops it does not.

    ``not_started`` maps the op ids the caller will issue to their tools; ``now`` is the
    runtime's clock, against which a keyed op's window is measured (None: no keyed op is
    inside its window, and each is decided by its class's cell).
    """
    not_started = not_started or {}
    # An op without an intent has no snapshot; its class cannot matter (always SKIP).
    extra = [
        decide_for_operation(op_id, tool, OpState.NOT_STARTED, UNLISTED, {})
        for op_id, tool in not_started.items()
        if op_id not in ops
    ]
    if isinstance(ops, OpTable) and ops.settled is not None:
        live = [(key, _decide(op, ops, now)) for key, op in ops.moving() if not op.resolved]
        return Plan(ops, live, extra)
    return [*(_decide(op, ops, now) for op in ops.values() if not op.resolved), *extra]
