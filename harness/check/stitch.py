"""A compacted journal, stitched back into the journal its lives wrote, for the checkers.

A compaction replaces the journal by a new file: a ``checkpoint`` record (after
the identity), a ``settled_index`` record (where the runtime finds its settled
ops; absent from the files of older runtimes), one ``settled`` record per settled
op and the whole records of the ops still open (its block), then whatever lives
append after it. The
checkers judge each life by the records it wrote and where they lie, so they
need the records the compaction folded away. The agent program keeps a copy of
each journal it replaces, named by its length and CRC-32
(``journal.replaced.<size>.<crc as 8 hex digits>``, ``harness.agent.compaction``),
the two numbers the checkpoint names; a copy is used only when its bytes have
that length and CRC.

The stitched journal is the first file (before any compaction) followed, for
each compaction in turn, by what was appended after its block: the journal as
it would stand had nothing been compacted. A byte ``p`` of a compacted file at
or after its block's end lies at ``base + p - block_end`` of the stitched one
(``Epoch.place``). Nothing here reads ``harness.runtime``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

from harness.check.journal import JournalEntry, OpView, fold_ops, read_journal_bytes

__all__ = [
    "REPLACED_PREFIX",
    "Epoch",
    "Stitched",
    "checkpoint_of",
    "compaction_changes",
    "stitch",
]

REPLACED_PREFIX = "journal.replaced."


@dataclass(frozen=True, slots=True)
class Epoch:
    """One file of the journal's history: from one compaction (or the start) to the next."""

    data: bytes
    """The file at its fullest: the copy kept when it was replaced, or the last file."""
    block_end: int
    """Where the records appended after its compaction's block begin (0: the first file)."""
    base: int
    """Where those records begin in the stitched journal."""

    def place(self, position: int) -> int:
        """Where byte ``position`` of this file lies in the stitched journal."""
        if self.block_end == 0:
            return position
        return self.base + max(0, position - self.block_end)

    def holds(self, size: int, crc: int) -> bool:
        """Whether a journal of ``size`` bytes with that CRC-32 is a prefix of this file."""
        return len(self.data) >= size and zlib.crc32(self.data[:size]) == crc


@dataclass(frozen=True, slots=True)
class Stitched:
    """The journal's files in order, and what the stitching could not prove."""

    epochs: tuple[Epoch, ...]
    problems: tuple[str, ...] = ()

    def join(self, last: bytes) -> bytes:
        """The stitched journal, with ``last`` as the last file's bytes."""
        first = self.epochs[0]
        if len(self.epochs) == 1:
            return last
        middle = b"".join(e.data[e.block_end :] for e in self.epochs[1:-1])
        return first.data + middle + last[self.epochs[-1].block_end :]


def checkpoint_of(data: bytes) -> tuple[int, int, int] | None:
    """``(replaced size, replaced CRC, block end)`` of a compacted file (None: not one)."""
    entries = read_journal_bytes(data).entries
    records = [e for e in entries if e.kind != "journal"]
    if not records or records[0].kind != "checkpoint":
        return None
    head = records[0].payload
    indexed = len(records) > 1 and records[1].kind == "settled_index"
    block = records[: 1 + indexed + int(head["settled"]) + int(head["carried"])]
    return int(head["replaced_size"]), int(head["replaced_crc"]), block[-1].end


def stitch(directory: Path, data: bytes) -> Stitched | None:
    """The history of the journal ``data`` (its copies in ``directory``); None when it was
    never compacted."""
    found = checkpoint_of(data)
    if found is None:
        return None
    later: list[tuple[bytes, int]] = []
    current = data
    while found is not None:
        size, crc, block_end = found
        later.append((current, block_end))
        name = f"{REPLACED_PREFIX}{size}.{crc:08x}"
        try:
            before = (directory / name).read_bytes()
        except FileNotFoundError:
            return Stitched(
                (Epoch(data, 0, 0),),
                (
                    f"a compaction replaced a journal of {size} bytes (CRC {crc:08x}) and no "
                    f"copy of it ({name}) was kept: the lives before it cannot be judged",
                ),
            )
        if len(before) != size or zlib.crc32(before) != crc:
            return Stitched(
                (Epoch(data, 0, 0),),
                (
                    f"{name} is not the journal the compaction replaced: {len(before)} bytes, "
                    f"CRC {zlib.crc32(before):08x}",
                ),
            )
        current = before
        found = checkpoint_of(current)
    epochs = [Epoch(current, 0, 0)]
    length = len(current)
    for file, block_end in reversed(later):
        epochs.append(Epoch(file, block_end, length))
        length += len(file) - block_end
    return Stitched(tuple(epochs))


def compaction_changes(replaced: bytes, compacted: Epoch) -> list[str]:
    """What a compaction changed of the ops of the journal it replaced (none: it kept each
    op, its state and whether it was resolved, as the checkers' own fold reads them).

    A settled op may be missing only as one of the ``forgotten`` the checkpoint counts
    (retention); an op still open must be carried whole, record for record.
    """
    before_entries = read_journal_bytes(replaced).entries
    block = read_journal_bytes(compacted.data[: compacted.block_end]).entries
    head = next(e for e in block if e.kind == "checkpoint")
    before, after = fold_ops(before_entries), fold_ops(block)
    forgotten = int(head.payload["forgotten"])
    changes = []
    for op_id, op in before.items():
        kept = after.get(op_id)
        if kept is None:
            if _settled(op) and forgotten > 0:
                forgotten -= 1
                continue
            changes.append(f"{op_id} ({op.tool}, {_state(op)}) is gone")
        elif _state(kept) != _state(op):
            changes.append(f"{op_id} ({op.tool}) was {_state(op)}, is {_state(kept)}")
        elif not _settled(op) and _records(before_entries, op_id) != _records(block, op_id):
            changes.append(f"{op_id} ({op.tool}, {_state(op)}) was not carried whole")
    changes += [f"{op_id} ({op.tool}) is new" for op_id, op in after.items() if op_id not in before]
    return changes


def _settled(op: OpView) -> bool:
    return op.state != "running" or op.resolved


def _state(op: OpView) -> str:
    return op.state.upper() + (" and resolved" if op.resolved else "")


def _records(entries: tuple[JournalEntry, ...], op_id: str) -> list[object]:
    return [dict(e.payload) for e in entries if e.op_id == op_id]
