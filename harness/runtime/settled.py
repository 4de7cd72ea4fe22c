"""A compacted journal's settled ops, read on demand rather than at every start.

A compaction writes, right after its checkpoint, a ``SettledIndexRecord``: the
length and CRC-32 of the block of records that follows (the settled records and
the records of the ops still open) and where each settled record lies, found by
a hash of its op id or of its content (tool and argument digest). A start proves
the block with one CRC over its bytes, decodes the records of the open ops, and
none of the settled ones: ``SettledOps`` decodes one when a call, ``outcome_of``,
identity by content or recovery asks for it (the record's own frame is proved
again then). Every array is a run of little-endian unsigned 64-bit integers in
base64, used as it is decoded (no Python object per op).
"""

from __future__ import annotations

import array
import base64
import bisect
import hashlib
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TypeAlias

from harness.runtime.errors import JournalError
from harness.runtime.records import Record, SettledIndexRecord, SettledRecord

__all__ = ["SettledOps", "content_hash", "id_hash", "settled_index"]

Offsets: TypeAlias = Sequence[int]
"""A decoded array: a ``memoryview`` cast to unsigned 64-bit integers (or an ``array``)."""


def id_hash(op_id: str) -> int:
    """The hash an op id is looked up by (stable across processes and machines)."""
    raw = hashlib.blake2b(op_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(raw, "little")


def content_hash(tool: str, args_digest: str) -> int:
    """The hash a call is looked up by under identity by content."""
    key = f"{tool}\0{args_digest}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


def _encode(values: Sequence[int]) -> str:
    packed = array.array("Q", values)
    if sys.byteorder != "little":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def _decode(text: str) -> Offsets:
    raw = base64.b64decode(text, validate=True)
    if len(raw) % 8:
        raise ValueError(f"an index array of {len(raw)} bytes (not whole 8-byte integers)")
    if sys.byteorder == "little":
        return memoryview(raw).cast("Q")
    values = array.array("Q", raw)
    values.byteswap()
    return values


def settled_index(placed: Sequence[tuple[int, Record]], size: int, crc: int) -> SettledIndexRecord:
    """The index of a compaction's block: ``placed`` is each of its records with its offset
    from the block's start; ``size`` and ``crc`` its bytes' length and CRC-32."""
    by_id: list[tuple[int, int]] = []
    by_content: list[tuple[int, int]] = []
    unskipped: list[int] = []
    resolved: list[int] = []
    carried: list[int] = []
    oldest: float | None = None
    for offset, record in placed:
        if not isinstance(record, SettledRecord):
            carried.append(offset)
            continue
        by_id.append((id_hash(record.op_id), offset))
        if record.redo_of is None and not record.fresh:  # identity by content never matches these
            by_content.append((content_hash(record.tool, record.args_digest), offset))
        if not record.skipped and record.resolution is None:  # a resolved op is not planned
            unskipped.append(offset)
        if record.resolution is not None:
            resolved.append(offset)
        oldest = record.settled_at if oldest is None else min(oldest, record.settled_at)
    by_id.sort()
    by_content.sort()
    return SettledIndexRecord(
        size,
        crc,
        len(placed),
        _encode([h for h, _ in by_id]),
        _encode([o for _, o in by_id]),
        _encode([h for h, _ in by_content]),
        _encode([o for _, o in by_content]),
        _encode(unskipped),
        _encode(resolved),
        _encode(carried),
        oldest,
    )


class SettledOps:
    """The settled ops of a compacted journal's block, each decoded when asked for.

    ``load(offset)`` decodes the record at ``offset`` from the block's start (its frame
    proved, ``JournalCorruptError`` otherwise); ``close`` lets go of what it reads from,
    as does the collection of the last reference.
    A position is a record's offset in the block: ops are in first-intent order by it.
    """

    def __init__(
        self,
        index: SettledIndexRecord,
        load: Callable[[int], Record],
        close: Callable[[], None],
    ) -> None:
        self._load = load
        # Read from until nothing holds these ops (a plan read after the runtime closed).
        self._closer = weakref.finalize(self, close)
        self._ids = _decode(index.ids)
        self._id_offsets = _decode(index.id_offsets)
        self._contents = _decode(index.contents)
        self._content_offsets = _decode(index.content_offsets)
        self._unskipped = _decode(index.unskipped)
        self.resolved = len(_decode(index.resolved))
        """How many of the settled ops a resolution closed (recovery plans none of them)."""
        self.carried = _decode(index.carried)
        self.oldest = index.oldest
        self.count = len(self._ids)
        self.size = index.size
        if not (
            len(self._id_offsets) == self.count
            and len(self._content_offsets) == len(self._contents)
        ):
            raise ValueError("the index's arrays differ in length")

    def find(self, op_id: str) -> tuple[int, SettledRecord] | None:
        """The settled record of ``op_id`` and its position, if the block holds one."""
        wanted = id_hash(op_id)
        at = bisect.bisect_left(self._ids, wanted)
        while at < self.count and self._ids[at] == wanted:  # a shared hash: read each
            offset = self._id_offsets[at]
            record = self.at(offset)
            if record.op_id == op_id:
                return offset, record
            at += 1
        return None

    def at(self, offset: int) -> SettledRecord:
        if not self._closer.alive:
            raise JournalError("the settled ops were closed: they are not read any more")
        record = self._load(offset)
        if not isinstance(record, SettledRecord):
            raise ValueError(f"the index names a {record.kind} record as a settled one")
        return record

    def by_content(self, tool: str, args_digest: str) -> list[tuple[int, SettledRecord]]:
        """The settled ops identity by content may match to this content, by position."""
        wanted = content_hash(tool, args_digest)
        at = bisect.bisect_left(self._contents, wanted)
        found = []
        while at < len(self._contents) and self._contents[at] == wanted:
            record = self.at(self._content_offsets[at])
            if record.tool == tool and record.args_digest == args_digest:
                found.append((self._content_offsets[at], record))
            at += 1
        return sorted(found, key=lambda placed: placed[0])

    def unskipped(self) -> Iterator[tuple[int, SettledRecord]]:
        """The settled ops whose SKIP is not journaled, by position."""
        for offset in self._unskipped:
            yield offset, self.at(offset)

    def __iter__(self) -> Iterator[tuple[int, SettledRecord]]:
        """Every settled op, by position (each one decoded: not for a start)."""
        for offset in sorted(self._id_offsets):
            yield offset, self.at(offset)

    def close(self) -> None:
        self._closer()
