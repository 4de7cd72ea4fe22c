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
import binascii
import bisect
import hashlib
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Literal, TypeAlias, overload

from harness.runtime.errors import JournalError
from harness.runtime.records import OpsIndexRecord, Record, SettledIndexRecord, SettledRecord

__all__ = [
    "IndexEntry",
    "IndexedOps",
    "SettledIndexBuilder",
    "SettledOps",
    "content_hash",
    "id_hash",
    "ops_index",
    "settled_index",
]

Offsets: TypeAlias = Sequence[int]
"""A decoded array: a ``memoryview`` cast to unsigned 64-bit integers (or an ``array``)."""

IndexEntry: TypeAlias = tuple[int, Sequence[int], int | None]
"""A settled op in an ops index: its id hash, its records' offsets in file order, and its
content hash (None: identity by content never matches it)."""


def id_hash(op_id: str) -> int:
    """The hash an op id is looked up by (stable across processes and machines)."""
    raw = hashlib.blake2b(op_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(raw, "little")


def content_hash(tool: str, args_digest: str) -> int:
    """The hash a call is looked up by under identity by content."""
    key = f"{tool}\0{args_digest}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


_TYPECODES: dict[int, Literal["Q", "I"]] = {8: "Q", 4: "I"}
"""The array type of unsigned integers of each width (``I`` is 32 bits where this runs)."""
_NARROW = (1 << 32) - 1


def _encode(values: Sequence[int], width: int = 8) -> str:
    packed = array.array(_TYPECODES[width], values)
    if sys.byteorder != "little":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def _decode(text: str, width: int = 8) -> Offsets:
    raw = binascii.a2b_base64(text, strict_mode=True)
    code = _TYPECODES.get(width)
    if code is None or len(raw) % width:
        raise ValueError(f"an index array of {len(raw)} bytes (not whole {width}-byte integers)")
    return _as_integers(raw, code)


class _Packed(Sequence[int]):
    """An array of an ops index read where it stands, in its base64 text: the elements a
    lookup asks for are decoded (a few dozen), the whole array only once it is iterated.
    A start then pays for the index's size in bytes read, not in decoding."""

    __slots__ = ("_code", "_length", "_text", "_whole", "_width")

    def __init__(self, text: str, width: int) -> None:
        code = _TYPECODES.get(width)
        padding = len(text) - len(text.rstrip("="))
        size = len(text) // 4 * 3 - padding
        if code is None or len(text) % 4 or padding > 2 or size % width:
            raise ValueError(f"an index array of {len(text)} base64 characters")
        self._code: Literal["Q", "I"] = code
        self._width = width
        self._text = text
        self._length = size // width
        self._whole: Offsets | None = None

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, at: int) -> int: ...
    @overload
    def __getitem__(self, at: slice) -> Sequence[int]: ...
    def __getitem__(self, at: int | slice) -> int | Sequence[int]:
        if self._whole is not None:
            return self._whole[at]
        if isinstance(at, slice):
            start, stop, step = at.indices(self._length)
            if step != 1:
                return self.whole()[at]
            return self._window(start, max(start, stop))
        if at < 0:
            at += self._length
        if not 0 <= at < self._length:
            raise IndexError("index array position out of range")
        return self._window(at, at + 1)[0]

    def __iter__(self) -> Iterator[int]:
        return iter(self.whole())

    def _window(self, start: int, stop: int) -> Offsets:
        """Elements ``start`` to ``stop``, decoded from the base64 groups that hold them."""
        width = self._width
        first, last = start * width // 3, -(-stop * width // 3)
        try:
            raw = binascii.a2b_base64(self._text[4 * first : 4 * last], strict_mode=True)
        except binascii.Error as exc:
            raise JournalError(f"an ops index array is not base64: {exc}") from None
        cut = start * width - 3 * first
        return _as_integers(raw[cut : cut + (stop - start) * width], self._code)

    def whole(self) -> Offsets:
        if self._whole is None:
            try:
                self._whole = _decode(self._text, self._width)
            except (binascii.Error, ValueError) as exc:
                raise JournalError(f"an ops index array is not base64: {exc}") from None
        return self._whole


def _as_integers(raw: bytes, code: Literal["Q", "I"]) -> Offsets:
    if sys.byteorder == "little":
        return memoryview(raw).cast(code)
    values = array.array(code, raw)
    values.byteswap()
    return values


def settled_index(placed: Sequence[tuple[int, Record]], size: int, crc: int) -> SettledIndexRecord:
    """The index of a compaction's block: ``placed`` is each of its records with its offset
    from the block's start; ``size`` and ``crc`` its bytes' length and CRC-32."""
    index = SettledIndexBuilder()
    for offset, record in placed:
        index.add(offset, record)
    return index.finish(size, crc)


class SettledIndexBuilder:
    """``settled_index`` a record at a time, keeping integers only (a compaction streams its
    block through it: the settled records are not held)."""

    def __init__(self) -> None:
        self._by_id: list[tuple[int, int]] = []
        self._by_content: list[tuple[int, int]] = []
        self._unskipped: list[int] = []
        self._resolved: list[int] = []
        self._carried: list[int] = []
        self._oldest: float | None = None
        self._records = 0

    def add(self, offset: int, record: Record) -> None:
        """The block's next record, at ``offset`` from its start."""
        self._records += 1
        if not isinstance(record, SettledRecord):
            self._carried.append(offset)
            return
        self._by_id.append((id_hash(record.op_id), offset))
        if record.redo_of is None and not record.fresh:  # identity by content never matches these
            self._by_content.append((content_hash(record.tool, record.args_digest), offset))
        if not record.skipped and record.resolution is None:  # a resolved op is not planned
            self._unskipped.append(offset)
        if record.resolution is not None:
            self._resolved.append(offset)
        oldest = self._oldest
        self._oldest = record.settled_at if oldest is None else min(oldest, record.settled_at)

    def finish(self, size: int, crc: int) -> SettledIndexRecord:
        by_id, by_content = sorted(self._by_id), sorted(self._by_content)
        return SettledIndexRecord(
            size,
            crc,
            self._records,
            _encode([h for h, _ in by_id]),
            _encode([o for _, o in by_id]),
            _encode([h for h, _ in by_content]),
            _encode([o for _, o in by_content]),
            _encode(self._unskipped),
            _encode(self._resolved),
            _encode(self._carried),
            self._oldest,
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
        *,
        base: int = 0,
    ) -> None:
        self._load = load
        self.base = base
        """The block's first byte in the file."""
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
        self.records = self.count
        """How many of the file's records the block's settled ops are (one each)."""
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

    def entries(self) -> Iterator[IndexEntry]:
        """Every settled op as an ``IndexEntry`` (read without decoding a record)."""
        content_of = dict(zip(self._content_offsets, self._contents, strict=True))
        for at in range(self.count):
            offset = self._id_offsets[at]
            yield self._ids[at], (self.base + offset,), content_of.get(offset)

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

    def disown(self) -> None:
        """Stop owning what it reads from without closing it (its opener closes it)."""
        self._closer.detach()


def ops_index(
    entries: list[IndexEntry],
    carried: Sequence[int],
    *,
    size: int,
    crc: int,
    records: int,
    journal_id: str,
    incarnation: int,
    oldest: float | None,
) -> OpsIndexRecord:
    """The ``OpsIndexRecord`` of the file's first ``size`` bytes (see the record): hashes cut
    to 32 bits (a shared hash only costs a read), places 32 bits wide below 4 GiB."""
    entries.sort(key=lambda entry: entry[0] & _NARROW)
    starts = [0]
    offsets: list[int] = []
    contents: list[tuple[int, int]] = []
    for place, (_, placed, content) in enumerate(entries):
        offsets.extend(placed)
        starts.append(len(offsets))
        if content is not None:
            contents.append((content & _NARROW, place))
    contents.sort()
    width = 4 if size <= _NARROW and len(offsets) <= _NARROW else 8
    return OpsIndexRecord(
        crc,
        records,
        journal_id,
        incarnation,
        width,
        _encode([h & _NARROW for h, _, _ in entries], 4),
        _encode(starts, width),
        _encode(offsets, width),
        _encode([h for h, _ in contents], 4),
        _encode([place for _, place in contents], width),
        _encode(sorted(carried), width),
        oldest,
        size,
    )


class IndexedOps:
    """The settled ops an ``OpsIndexRecord`` maps, each read when asked for.

    ``load(offset)`` decodes the record at a byte offset of the file (its frame proved,
    ``JournalCorruptError`` otherwise); ``close`` lets go of what it reads from, as the
    collection of the last reference does. A position is the offset of an op's first
    record: ops are in first-intent order by it.
    """

    def __init__(
        self,
        index: OpsIndexRecord,
        load: Callable[[int], Record],
        close: Callable[[], None],
        *,
        end: int = 0,
    ) -> None:
        self._load = load
        self.end = end
        """Where the index's own frame ends in the file."""
        self._closer = weakref.finalize(self, close)
        width = index.width
        # Read in place (``_Packed``): a start decodes only what it looks up.
        self._ids = _Packed(index.ids, 4)
        self._starts = _Packed(index.starts, width)
        self._offsets = _Packed(index.offsets, width)
        self._contents = _Packed(index.contents, 4)
        self._content_ops = _Packed(index.content_ops, width)
        self.carried = _decode(index.carried, width)
        self.incarnation = index.incarnation
        """The last life the bytes it covers name (their lives' records are not carried)."""
        self.oldest = index.oldest
        self.count = len(self._ids)
        self.size = index.size
        self.records = index.records - len(self.carried)
        """How many of the file's records the index stands for (its settled ops' records)."""
        if not (
            len(self._starts) == self.count + 1
            and len(self._content_ops) == len(self._contents)
            and (self.count == 0 or self._starts[-1] == len(self._offsets))
        ):
            raise ValueError("the index's arrays differ in length")

    def _records_of(self, place: int) -> list[Record]:
        if not self._closer.alive:
            raise JournalError("the settled ops were closed: they are not read any more")
        return [self._load(o) for o in self._offsets[self._starts[place] : self._starts[place + 1]]]

    def _op_id(self, records: list[Record]) -> str | None:
        first = records[0] if records else None
        op_id = getattr(first, "op_id", None)
        return op_id if isinstance(op_id, str) else None

    def find(self, op_id: str) -> tuple[int, list[Record]] | None:
        """The records of ``op_id`` and its position, if the index maps it."""
        wanted = id_hash(op_id) & _NARROW
        at = bisect.bisect_left(self._ids, wanted)
        while at < self.count and self._ids[at] == wanted:  # a shared hash: read each
            records = self._records_of(at)
            if self._op_id(records) == op_id:
                return self._offsets[self._starts[at]], records
            at += 1
        return None

    def by_content(self, tool: str, args_digest: str) -> list[tuple[int, str]]:
        """``(position, op id)`` of the ops identity by content may match, by position."""
        wanted = content_hash(tool, args_digest) & _NARROW
        at = bisect.bisect_left(self._contents, wanted)
        found = []
        while at < len(self._contents) and self._contents[at] == wanted:
            place = self._content_ops[at]
            records = self._records_of(place)
            first = records[0]
            if getattr(first, "tool", None) == tool and (
                getattr(first, "args_digest", None) == args_digest
            ):
                op_id = self._op_id(records)
                if op_id is not None:
                    found.append((self._offsets[self._starts[place]], op_id))
            at += 1
        return sorted(found)

    def offsets_of(self, op_id: str) -> Sequence[int] | None:
        """Where the records of ``op_id`` lie, if the index maps it."""
        wanted = id_hash(op_id) & _NARROW
        at = bisect.bisect_left(self._ids, wanted)
        while at < self.count and self._ids[at] == wanted:
            placed = self._offsets[self._starts[at] : self._starts[at + 1]]
            if self._op_id(self._records_of(at)) == op_id:
                return placed
            at += 1
        return None

    def entries(self) -> Iterator[IndexEntry]:
        """Every op as an ``IndexEntry`` (its content hash found without reading it)."""
        content_of = dict(zip(self._content_ops, self._contents, strict=True))
        ids, starts, offsets = self._ids.whole(), self._starts.whole(), self._offsets.whole()
        for place in range(self.count):
            yield ids[place], offsets[starts[place] : starts[place + 1]], content_of.get(place)

    def __iter__(self) -> Iterator[tuple[int, list[Record]]]:
        """Every op's position and records, by position (each one read: not for a start)."""
        starts, offsets = self._starts.whole(), self._offsets.whole()
        firsts = sorted((offsets[starts[p]], p) for p in range(self.count))
        for at, place in firsts:
            yield at, self._records_of(place)

    def close(self) -> None:
        self._closer()

    def disown(self) -> None:
        """Stop owning what it reads from without closing it (its opener closes it)."""
        self._closer.detach()
