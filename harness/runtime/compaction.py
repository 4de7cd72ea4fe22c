"""Compaction: a journal's settled ops folded into a checkpoint at the head of a new file.

``compacted`` turns the records of a journal into those of its compaction: a
``CheckpointRecord``, then per op in the order of its first intent either one
``SettledRecord`` (a settled op the retention keeps) or every record of it
(an op still RUNNING, awaiting verification or not yet resolved). Records of
no op (lives, recoveries, torn tails cut) and the SKIPs of ops that never
started are history only: they go. Every answer a call, ``outcome_of`` or
recovery gives is the same on the new records as on the old (the property
test in ``tests/property/test_compaction.py`` holds it to that).

``Compaction`` is the policy a runtime opens with: when to compact at open (a
size, or a ratio of records to what they fold into) and the ``Retention`` of
settled ops (a count, an age; by default, every op is kept). The file protocol
(new file, fsync, rename, directory fsync) is ``JournalWriter.compact``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.runtime.classes import UNLISTED
from harness.runtime.journal import ScannedRecord, without_cyclic_gc
from harness.runtime.matrix import Decision, OpState
from harness.runtime.records import (
    CheckpointRecord,
    DecisionRecord,
    IncarnationRecord,
    IntentRecord,
    Record,
    SettledRecord,
    digest,
)
from harness.runtime.recovery import OpHistory, OpTable, apply_record, fold, last_incarnation

__all__ = ["Compacting", "Compaction", "Retention", "compacted", "due", "past_retention"]


@dataclass(frozen=True, slots=True)
class Retention:
    """How long a settled op answers by its id: the last ``ops`` settled ops, and those a
    compaction first folded less than ``seconds`` ago (None: no such limit).

    An op past retention is forgotten at the next compaction: a call under its id
    then runs as new. An op a kept op names (its redo, or the op it redoes) is kept
    with it, so that a chain of redoes keeps its idempotency key.
    """

    ops: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.ops is not None and self.ops < 0:
            raise ValueError(f"retention of {self.ops} ops: must be 0 or more")
        if self.seconds is not None and self.seconds < 0:
            raise ValueError(f"retention of {self.seconds} seconds: must be 0 or more")


@dataclass(frozen=True, slots=True)
class Compaction:
    """When a runtime compacts its journal at open, and what it keeps.

    At open the journal is compacted when it is ``size`` bytes or more, or when it
    is ``min_size`` bytes or more and holds ``ratio`` times as many records as its
    compaction would (None turns either test off), or when retention has an op to
    forget. ``Compaction.never()`` compacts only on demand (``Runtime.compact``).
    """

    size: int | None = 64 * 1024 * 1024
    ratio: float | None = 4.0
    min_size: int = 4 * 1024 * 1024
    retention: Retention = field(default_factory=Retention)
    at_open: bool = True
    """False: never at open, only on demand (the retention then applies there)."""

    @classmethod
    def never(cls, retention: Retention | None = None) -> Compaction:
        return cls(size=None, ratio=None, retention=retention or Retention(), at_open=False)


def past_retention(
    ops: Mapping[str, OpHistory], retention: Retention, now: float
) -> frozenset[str]:
    """The settled ops ``retention`` lets go of (none of those a kept op links to)."""
    if retention.ops is None and retention.seconds is None:
        return frozenset()
    if isinstance(ops, OpTable) and ops.settled is not None:
        # A compacted journal's start: nothing to forget, told without reading its ops.
        oldest = ops.oldest_settled()
        if (retention.ops is None or ops.settled_count() <= retention.ops) and (
            retention.seconds is None or oldest is None or now - oldest < retention.seconds
        ):
            return frozenset()
    settled = [op for op in ops.values() if op.settled]
    gone: set[str] = set()
    if retention.ops is not None:
        gone.update(op.op_id for op in settled[: max(0, len(settled) - retention.ops)])
    if retention.seconds is not None:
        gone.update(
            op.op_id
            for op in settled
            if op.settled_at is not None and now - op.settled_at >= retention.seconds
        )
    # Keep what a kept op links to: its redo, and the ops it redoes (their keys).
    linked = [op for op in ops.values() if op.op_id not in gone]
    while linked:
        op = linked.pop()
        redo_op = op.resolution.redo_op if op.resolution is not None else None
        for other in (op.redo_of, redo_op):
            if other is not None and other in gone:
                gone.discard(other)
                linked.append(ops[other])
    return frozenset(gone)


def compacted(
    records: Sequence[Record],
    *,
    replaced_size: int,
    replaced_crc: int,
    retention: Retention | None = None,
    now: float | None = None,
) -> list[Record]:
    """The records of the compaction of ``records`` (see the module docstring)."""
    now = time.time() if now is None else now
    ops = fold(records)
    forget = past_retention(ops, retention or Retention(), now)
    skipped = {
        (r.op_id, r.state)
        for r in records
        if isinstance(r, DecisionRecord) and r.decision is Decision.SKIP
    }
    skipped.update(
        (r.op_id, r.state) for r in records if isinstance(r, SettledRecord) and r.skipped
    )
    open_records: dict[str, list[Record]] = {}
    for record in records:
        op_id = getattr(record, "op_id", None)
        if op_id in ops and not ops[op_id].settled:
            open_records.setdefault(op_id, []).append(record)
    body: list[Record] = []
    settled = 0
    for op in ops.values():
        if op.op_id in forget:
            continue
        if not op.settled:
            body.extend(open_records.get(op.op_id, ()))
            continue
        settled += 1
        body.append(_settled(op, (op.op_id, op.state) in skipped, now))
    checkpoint = CheckpointRecord(
        last_incarnation(records),
        settled,
        len(body) - settled,
        len(forget),
        replaced_size,
        replaced_crc,
    )
    return [checkpoint, *body]


def _settled(op: OpHistory, skipped: bool, now: float) -> SettledRecord:
    resolution = op.resolution
    return SettledRecord(
        op.op_id,
        op.tool,
        op.snapshot,
        op.args_digest,
        op.state,
        op.attempt,
        op.result,
        digest(op.result),
        op.error,
        op.redo_of,
        op.fresh,
        None if resolution is None else resolution.resolution,
        None if resolution is None else resolution.redo_op,
        "" if resolution is None else resolution.note,
        0 if resolution is None else resolution.incarnation,
        skipped,
        now if op.settled_at is None else op.settled_at,
    )


def due(
    policy: Compaction, size: int, records: int, ops: Mapping[str, OpHistory], now: float
) -> str | None:
    """Why the journal is to be compacted at open under ``policy`` (None: it is not)."""
    if not policy.at_open:
        return None
    if policy.size is not None and size >= policy.size:
        return f"it is {size} bytes (compaction at {policy.size})"
    if policy.ratio is not None and size >= policy.min_size:
        after = 1 + len(ops) + _unsettled(ops)  # at least
        if records >= policy.ratio * after:
            return (
                f"its {records} records fold into about {after} "
                f"(compaction at {policy.ratio:g} to 1)"
            )
    gone = past_retention(ops, policy.retention, now)
    if gone:
        return f"{len(gone)} settled ops are past retention"
    return None


def _unsettled(ops: Mapping[str, OpHistory]) -> int:
    if isinstance(ops, OpTable):
        return len(ops.unsettled())  # without reading the settled ops a compaction folded
    return sum(not op.settled for op in ops.values())


_NO_ARGS: Mapping[str, Any] = {}


class Compacting:
    """A compaction under ``retention`` at ``now``, for ``JournalWriter.compact``: called with
    every record (``compacted``), or streamed (``stream``) so that memory follows what the
    new file holds, not the old one. Both give the same records. ``forgotten``: the ops
    retention let go of, once it has run."""

    def __init__(self, retention: Retention | None = None, now: float | None = None) -> None:
        self.retention = retention or Retention()
        self.now = time.time() if now is None else now
        self.forgotten: frozenset[str] = frozenset()

    def __call__(self, records: list[Record], size: int, crc: int) -> list[Record]:
        new = compacted(
            records, replaced_size=size, replaced_crc=crc, retention=self.retention, now=self.now
        )
        kept = {r.op_id for r in new if isinstance(r, SettledRecord | IntentRecord)}
        self.forgotten = frozenset(fold(records)) - kept
        return new

    def stream(
        self,
        records: Iterator[ScannedRecord],
        load: Callable[[int], Record],
        size: int,
        crc: int,
    ) -> Iterator[Record]:
        """``compacted`` in two passes over the file: the first folds each op without its
        arguments and result, noting where its records lie; the second reads each op's
        records again (``load``) and yields its settled record, or its records whole."""
        ops: dict[str, OpHistory] = {}
        places: dict[str, list[int]] = {}
        skipped: set[tuple[str, OpState]] = set()
        incarnation = 0
        with without_cyclic_gc():
            for scanned in records:
                record = scanned.record
                if isinstance(record, IncarnationRecord | CheckpointRecord):
                    incarnation = max(incarnation, record.incarnation)
                elif (isinstance(record, DecisionRecord) and record.decision is Decision.SKIP) or (
                    isinstance(record, SettledRecord) and record.skipped
                ):
                    skipped.add((record.op_id, record.state))
                op_id = getattr(record, "op_id", None)
                if not isinstance(op_id, str):
                    continue
                places.setdefault(op_id, []).append(scanned.offset)
                apply_record(ops, record)
                op = ops.get(op_id)
                if op is not None:  # what the second pass reads again: only its state kept
                    op.args, op.result, op.error = _NO_ARGS, None, None
                    op.tool, op.args_digest, op.snapshot = "", "", UNLISTED
                    op.decisions.clear()
        forget = past_retention(ops, self.retention, self.now)
        self.forgotten = frozenset(forget)
        kept = [op for op in ops.values() if op.op_id not in forget]
        settled = sum(op.settled for op in kept)
        carried = sum(len(places[op.op_id]) for op in kept if not op.settled)
        yield CheckpointRecord(incarnation, settled, carried, len(forget), size, crc)
        for light in kept:
            mine = [load(offset) for offset in places.pop(light.op_id)]
            if not light.settled:
                yield from mine
                continue
            op = fold(mine)[light.op_id]
            yield _settled(op, (op.op_id, op.state) in skipped, self.now)
