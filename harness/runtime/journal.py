"""The write-ahead journal: an append-only file of framed, checksummed records.

File layout: the header ``FILE_HEADER`` (``%HJOURNAL 1`` and a newline),
then frames (big-endian)::

    magic b"HJ" | version u8 | length u32 | crc32 u32 | payload (JSON, `length` bytes)

The CRC covers version, length and payload. The first record is the
journal's identity (``JournalIdRecord``). Every append is one ``write`` and
one ``fsync`` (``F_FULLFSYNC`` on macOS, where ``fsync`` does not reach the
disk's platter). A journal is created whole, mode 0600: its header and
identity are written and fsynced in a file of its own, which is then linked
into place (``link`` never replaces a file) and the directory fsynced. So a
file named as a journal either starts with the header or is not one, and is
refused, never cut: a wrong path (a database, a document) loses nothing. An
empty file is taken as a new journal.

The full note: docs/reference/modules.md (``harness/runtime/journal.py``).
"""

from __future__ import annotations

import _thread
import array
import collections
import contextlib
import errno
import functools
import gc
import json
import os
import re
import struct
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from harness.runtime import log
from harness.runtime.errors import (
    JournalCorruptError,
    JournalError,
    JournalLockedError,
    JournalRetiredError,
    JournalVersionError,
    JournalWriteError,
)
from harness.runtime.hooks import failpoint
from harness.runtime.records import (
    CheckpointRecord,
    IncarnationRecord,
    IntentRecord,
    JournalIdRecord,
    OpsIndexRecord,
    Record,
    RecoveredRecord,
    RetiredRecord,
    SettledIndexRecord,
    SettledRecord,
    TailDroppedRecord,
    UnknownRecordKind,
    record_from_json,
    record_from_payload,
    record_to_json,
)
from harness.runtime.settled import IndexedOps, SettledIndexBuilder, SettledOps, settled_index

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # not a POSIX system: the writer refuses to open (SUPPORTED_PLATFORMS)
    fcntl = None

__all__ = [
    "FILE_HEADER",
    "FORMAT_VERSION",
    "HEADER_SIZE",
    "MAX_PAYLOAD",
    "SUPPORTED_PLATFORMS",
    "Appended",
    "JournalEvent",
    "JournalListener",
    "JournalScan",
    "JournalWriter",
    "Opened",
    "ScannedRecord",
    "Synced",
    "TornTail",
    "encode_frame",
    "fsync_dir",
    "new_journal_id",
    "scan_bytes",
    "scan_journal",
]

FORMAT_VERSION = 1
FILE_HEADER = b"%HJOURNAL 1\n"
"""The first bytes of every journal file, durable before its first record."""
_HEADER_WORD = b"%HJOURNAL "
MAGIC = b"HJ"
SUPPORTED_PLATFORMS = ("linux", "darwin")
"""Where the journal's durability holds as written: ``flock``, ``fsync`` of files and
directories, and ``link`` as Linux and macOS define them. Elsewhere it refuses to open."""
_HEADER = struct.Struct(">2sBII")
HEADER_SIZE = _HEADER.size
MAX_PAYLOAD = 16 * 1024 * 1024  # larger "lengths" are damage, not records


def encode_frame(record: Record) -> bytes:
    # ASCII escapes, so that a lone surrogate in a tool's arguments still encodes.
    payload = json.dumps(record_to_json(record), separators=(",", ":")).encode()
    body = struct.pack(">BI", FORMAT_VERSION, len(payload)) + payload
    return MAGIC + body[:5] + struct.pack(">I", zlib.crc32(body)) + payload


@dataclass(frozen=True, slots=True)
class ScannedRecord:
    offset: int
    end: int
    record: Record


@dataclass(frozen=True, slots=True)
class TornTail:
    """An unprovable last frame: where it starts, how long it is, and why it failed."""

    offset: int
    length: int
    reason: str


@dataclass(frozen=True, slots=True)
class JournalScan:
    """What a read proved: the records (the identity record apart), where they end, the
    torn tail cut after them, and the journal's identity (None before it was given one).

    ``settled``: the settled ops a compaction's block or an ops index maps, when they
    were left in the file (a writer's start, ``JournalWriter``): their records are then
    not in ``records``. ``frames``: how many frames the file holds up to ``valid_end``
    (None: one per record and the identity)."""

    records: tuple[ScannedRecord, ...]
    valid_end: int
    torn: TornTail | None
    journal_id: str | None = None
    settled: SettledOps | IndexedOps | None = None
    frames: int | None = None
    proving: Proof | None = None
    """The CRC of the bytes an ops index covers, under way (``Proof``): no tool runs
    before it holds (``JournalWriter.prove``)."""


def new_journal_id() -> str:
    """A journal's identity: 128 random bits as 32 hex digits."""
    return os.urandom(16).hex()


def _check_frame(data: bytes, pos: int) -> tuple[int, bytes, int] | str:
    """The frame's end, payload and version if it is provably whole (its checksum
    holds, whatever its version), else why not."""
    if len(data) - pos < HEADER_SIZE:
        return f"partial header ({len(data) - pos} of {HEADER_SIZE} bytes)"
    magic, version, length, crc = _HEADER.unpack_from(data, pos)
    if magic != MAGIC:
        return f"bad magic {magic!r}"
    if length > MAX_PAYLOAD:
        return f"implausible length {length}"
    end = pos + HEADER_SIZE + length
    if end > len(data):
        return f"partial payload ({len(data) - pos - HEADER_SIZE} of {length} bytes)"
    payload = data[pos + HEADER_SIZE : end]
    if zlib.crc32(data[pos + 2 : pos + 7] + payload) != crc:
        return "checksum mismatch" if version == FORMAT_VERSION else f"bad version {version}"
    return end, payload, version


def _valid_frame_after(data: bytes, pos: int) -> int | None:
    """Offset of the first provable frame after ``pos``, if any (damage vs torn tail)."""
    start = pos + 1
    while True:
        found = data.find(MAGIC, start)
        if found < 0:
            return None
        if not isinstance(_check_frame(data, found), str):
            return found
        start = found + 1


@contextlib.contextmanager
def without_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic collector while a journal's objects are built.

    Reading 100,000 records allocates only acyclic objects, yet triggers the
    collector again and again: planning time grew faster than the journal.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def scan_bytes(data: bytes, *, source: str = "<bytes>") -> JournalScan:
    """Prove every record of a journal file's bytes; drop a torn tail; refuse damage.

    Empty bytes are an empty journal. Bytes that do not start with
    ``FILE_HEADER`` are not a journal: ``JournalCorruptError`` at byte 0.
    """
    if not data:
        return JournalScan((), 0, None)
    if not data.startswith(FILE_HEADER):
        version = _header_version(data)
        if version is not None:
            raise JournalVersionError(source, 0, f"a journal header of format {version}")
        raise JournalCorruptError(
            source,
            0,
            1,
            f"not a journal: it begins with {data[: len(FILE_HEADER)]!r}, "
            f"not the journal header {FILE_HEADER!r}",
        )
    with without_cyclic_gc():
        return _scan(data, source, len(FILE_HEADER))


def _header_version(data: bytes) -> str | None:
    """The version a journal header of a newer format names (``%HJOURNAL 2``), if it is one
    (an older or malformed one is damage: "not a journal")."""
    line = data[: len(FILE_HEADER) + 8].partition(b"\n")
    word, _, version = line[0].partition(b" ")
    newer = version.isdigit() and int(version) > FORMAT_VERSION
    return version.decode() if line[1] and word + b" " == _HEADER_WORD and newer else None


def _scan(
    data: bytes,
    source: str,
    start: int,
    *,
    base: int = 0,
    frames: int = 0,
    journal_id: str | None = None,
) -> JournalScan:
    """Prove the frames of ``data`` from ``start``; ``data`` is the file from byte ``base``
    on, after ``frames`` frames (offsets and record numbers are the file's)."""
    records: list[ScannedRecord] = []
    # records are numbered as they stand in the file, the identity included
    pos = start
    while pos < len(data):
        checked = _check_frame(data, pos)
        if isinstance(checked, str):
            later = _valid_frame_after(data, pos)
            if later is not None:
                raise JournalCorruptError(
                    source,
                    base + pos,
                    frames + 1,
                    f"{checked}, with a valid record at byte {base + later} after it",
                )
            torn = TornTail(base + pos, len(data) - pos, checked)
            return JournalScan(tuple(records), base + pos, torn, journal_id)
        end, payload, version = checked
        if version != FORMAT_VERSION:
            raise JournalVersionError(source, base + pos, f"a frame of format {version}")
        try:
            record = record_from_json(json.loads(payload))
        except UnknownRecordKind as exc:
            raise JournalVersionError(source, base + pos, f"a {exc}") from None
        except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
            raise JournalCorruptError(
                source,
                base + pos,
                frames + 1,
                f"checksum holds but payload is not a record: {exc}",
            ) from None
        frames += 1
        if isinstance(record, JournalIdRecord):
            journal_id = journal_id or record.journal_id  # the first one given is the one
        else:
            records.append(ScannedRecord(base + pos, base + end, record))
        pos = end
    return JournalScan(tuple(records), base + pos, None, journal_id)


def _pread_all(fd: int, length: int, offset: int) -> bytes:
    chunks = []
    got = 0
    while got < length:
        chunk = os.pread(fd, min(length - got, 1 << 24), offset + got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _record_at(fd: int, pos: int, size: int) -> tuple[int, Record] | None:
    """The end and record of a provable frame of this format at ``pos`` (else None)."""
    header = os.pread(fd, HEADER_SIZE, pos)
    if len(header) < HEADER_SIZE:
        return None
    magic, version, length, crc = _HEADER.unpack(header)
    end = pos + HEADER_SIZE + length
    if magic != MAGIC or version != FORMAT_VERSION or length > MAX_PAYLOAD or end > size:
        return None
    payload = _pread_all(fd, length, pos + HEADER_SIZE)
    if len(payload) != length or zlib.crc32(payload, zlib.crc32(header[2:7])) != crc:
        return None
    try:
        return end, record_from_payload(payload)
    except (ValueError, RecursionError):
        return None


def _crc_of(fd: int, start: int, end: int) -> int | None:
    """The CRC-32 of bytes ``start`` to ``end`` of the file, read a MiB at a time (None if
    the file ends first): the block is proved without ever being held whole (nor mapped,
    which would count the file's pages in the process's memory)."""
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    crc = 0
    pos = start
    while pos < end:
        got = os.preadv(fd, [view[: min(len(buffer), end - pos)]], pos)
        if got <= 0:
            return None
        crc = zlib.crc32(view[:got], crc)
        pos += got
    return crc


def _loader(fd: int, start: int, end: int, source: str) -> Callable[[int], Record]:
    """Decode the record at an offset of the block from byte ``start`` to ``end``."""

    def load(offset: int) -> Record:
        pos = start + offset
        found = _record_at(fd, pos, end)
        if found is None:  # proved at open: the file changed under its lock since
            raise JournalCorruptError(
                source, pos, 0, "the settled record the index names there does not prove"
            )
        return found[1]

    return load


def _scan_compacted(fd: int, source: str) -> JournalScan | None:
    """Read a compacted journal without its settled records (``harness.runtime.settled``):
    the identity, checkpoint and index, one CRC over the block, the carried records, then
    the records after the block as ``_scan`` reads them. None when the file is not such a
    journal or its block does not prove as a whole: it is then read record by record,
    which finds and names any damage as before."""
    size = os.fstat(fd).st_size
    if os.pread(fd, len(FILE_HEADER), 0) != FILE_HEADER:
        return None
    head: list[ScannedRecord] = []
    pos = len(FILE_HEADER)
    for _ in range(3):
        found = _record_at(fd, pos, size)
        if found is None:
            return None
        head.append(ScannedRecord(pos, found[0], found[1]))
        pos = found[0]
    identity, checkpoint, index = (s.record for s in head)
    if not (
        isinstance(identity, JournalIdRecord)
        and isinstance(checkpoint, CheckpointRecord)
        and isinstance(index, SettledIndexRecord)
    ):
        return None
    start, end = pos, pos + index.size
    if end > size or _crc_of(fd, start, end) != index.crc:
        return None
    try:
        settled = SettledOps(
            index, _loader(fd, start, end, source), lambda: os.close(fd), base=start
        )
    except ValueError:
        return None
    if settled.count + len(settled.carried) != index.records:
        settled.disown()  # the caller closes fd
        return None
    carried: list[ScannedRecord] = []
    for offset in settled.carried:
        found = _record_at(fd, start + offset, end)
        if found is None:
            settled.disown()
            return None
        carried.append(ScannedRecord(start + offset, found[0], found[1]))
    try:
        tail = _scan(
            _pread_all(fd, size - end, end),
            source,
            0,
            base=end,
            frames=3 + index.records,
            journal_id=identity.journal_id,
        )
    except BaseException:
        settled.disown()  # the caller closes fd
        raise
    return JournalScan(
        (*head[1:], *carried, *tail.records),
        tail.valid_end,
        tail.torn,
        tail.journal_id,
        settled,
        3 + index.records + len(tail.records),
    )


_INDEX_MARK = b'{"kind":"' + OpsIndexRecord.kind.encode() + b'"'
"""How an ops index's payload begins (``record_to_json`` writes the kind first). Inside a
payload a frame header cannot occur (JSON escapes its control bytes), so a match whose
frame proves is the index."""


_INDEX_END = re.compile(rb',"size":([0-9]{1,20})\}\Z')
"""How an ops index's payload ends: with its own offset (its last field)."""


def _index_at_end(fd: int, size: int) -> tuple[int, int, OpsIndexRecord] | None:
    """The ops index that is the file's last frame (a runtime closed it), read once: its
    payload ends with its own offset."""
    last = os.pread(fd, 64, max(0, size - 64))
    named = _INDEX_END.search(last)
    if named is None:
        return None
    pos = int(named.group(1))
    found = _record_at(fd, pos, size) if len(FILE_HEADER) <= pos < size else None
    if found is None or found[0] != size or not isinstance(found[1], OpsIndexRecord):
        return None
    return (pos, size, found[1]) if found[1].size == pos else None


def _last_index(fd: int, size: int) -> tuple[int, int, OpsIndexRecord] | None:
    """The last ops index of the file whose frame proves and that covers the bytes before
    it (its offset, its end and the record): the file's last frame, or else searched
    backwards a MiB at a time (records were written after it)."""
    at_end = _index_at_end(fd, size)
    if at_end is not None:
        return at_end
    chunk = 1 << 20
    end = size
    while end > len(FILE_HEADER):
        start = max(len(FILE_HEADER), end - chunk)
        data = _pread_all(fd, end - start + len(_INDEX_MARK), start)
        at = len(data)
        while (at := data.rfind(_INDEX_MARK, 0, at)) >= 0:
            pos = start + at - HEADER_SIZE
            found = _record_at(fd, pos, size) if pos >= len(FILE_HEADER) else None
            if found is not None and isinstance(found[1], OpsIndexRecord) and found[1].size == pos:
                return pos, found[0], found[1]
        end = start
    return None


class Proof:
    """The CRC-32 of the bytes an ops index covers, computed on a thread of its own (on a
    duplicate of the descriptor, closed when done); ``holds`` waits for it."""

    def __init__(self, fd: int, end: int, crc: int) -> None:
        self.crc = crc
        duplicate = os.dup(fd)

        def work() -> int | None:
            try:
                return _crc_of(duplicate, 0, end)
            finally:
                os.close(duplicate)

        self._running = _Background(work)

    def holds(self) -> bool:
        try:
            return self._running.result() == self.crc
        except OSError:
            return False


class _Background:
    """A function run on a thread of its own; ``result`` waits for it (its exception is
    raised there)."""

    def __init__(self, work: Callable[[], int | None]) -> None:
        self._work = work
        self._done = _thread.allocate_lock()
        self._done.acquire()
        self._value: int | None = None
        self._error: BaseException | None = None
        _thread.start_new_thread(self._run, ())

    def _run(self) -> None:
        try:
            self._value = self._work()
        except BaseException as exc:  # handed to the waiter
            self._error = exc
        finally:
            self._done.release()

    def result(self) -> int | None:
        with self._done:
            pass
        if self._error is not None:
            raise self._error
        return self._value


def _scan_indexed(fd: int, source: str) -> JournalScan | None:
    """Read a journal through its last ops index (``OpsIndexRecord``): one CRC over the
    bytes it covers, the records it carries, then the records after it as ``_scan`` reads
    them; none of the settled ops it maps. None when there is no index, or the bytes it
    covers do not prove as a whole: the file is then read another way, which finds and
    names any damage as before."""
    size = os.fstat(fd).st_size
    if os.pread(fd, len(FILE_HEADER), 0) != FILE_HEADER:
        return None
    found = _last_index(fd, size)
    if found is None:
        return None
    at, end, index = found
    # The CRC of the covered bytes runs on a thread of its own (zlib lets go of the GIL for
    # it) while the index and the records after it are decoded here, and on after the
    # start: the writer waits for it before any tool runs (``JournalWriter.prove``).
    proof = Proof(fd, at, index.crc)
    try:
        ops = IndexedOps(index, _loader(fd, 0, at, source), lambda: os.close(fd), end=end)
    except ValueError:
        proof.holds()
        return None
    carried: list[ScannedRecord] = []
    for offset in ops.carried:
        record = _record_at(fd, offset, at)
        if record is None:
            proof.holds()
            ops.disown()  # the caller closes fd
            return None
        carried.append(ScannedRecord(offset, record[0], record[1]))
    try:
        tail = _scan(
            _pread_all(fd, size - end, end),
            source,
            0,
            base=end,
            frames=index.records + 1,
            journal_id=index.journal_id,
        )
    except BaseException:
        proof.holds()
        ops.disown()  # the caller closes fd
        raise
    return JournalScan(
        (*carried, *tail.records),
        tail.valid_end,
        tail.torn,
        index.journal_id,
        ops,
        index.records + 1 + len(tail.records),
        proof,
    )


def scan_journal(path: Path | str) -> JournalScan:
    """Read a journal without locking it (for checkers and planners that only read)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return JournalScan((), 0, None)
    except OSError as exc:
        raise JournalError(f"{path}: cannot read journal: {exc.strerror}") from exc
    return scan_bytes(data, source=str(path))


@dataclass(frozen=True, slots=True)
class Appended:
    """A write of ``records`` went from byte ``offset`` to ``end``; ``synced``: it is made
    durable, by its own fsync or one a ``Synced`` event whose ``end`` reaches it reports
    (threads' writes share fsyncs)."""

    records: tuple[Record, ...]
    offset: int
    end: int
    synced: bool


@dataclass(frozen=True, slots=True)
class Synced:
    """An fsync made the journal durable up to byte ``end``; it took ``seconds``."""

    end: int
    seconds: float


@dataclass(frozen=True, slots=True)
class Opened:
    """The journal was opened (a torn tail cut, an identity given): its records end at
    ``end``, all of it on disk as far as this process can tell."""

    end: int


JournalEvent = Opened | Appended | Synced
CompactionBuild = Callable[[list[Record], int, int], list[Record]]
"""``build(records, size, crc)``: the records of a compacted journal (``JournalWriter.compact``)."""
StreamBuild = Callable[
    [Iterator[ScannedRecord], Callable[[int], Record], int, int], Iterator[Record]
]
"""``stream(records, load, size, crc)``: a compaction streamed. It is given the file's
records one at a time, ``load(offset)`` to read one again, the file's size and CRC-32, and
yields the new file's checkpoint, then its records, in order (``JournalWriter.compact``)."""
IndexBuild = Callable[[int, int, int, Sequence[int], Sequence[str | None]], OpsIndexRecord | None]
"""Makes an ops index: ``JournalWriter.append_index``."""
JournalListener = Callable[[JournalEvent], None]
"""Called with each write and each fsync, in journal order, one event at a time, outside the
journal's locks, on one of the threads appending (not always the one that made the write):
a slow listener delays the thread that tells it, never another thread's append. An
exception from it is logged, never raised."""


@dataclass(frozen=True, slots=True)
class Written:
    """Records ``JournalWriter.write`` put in the file, from ``offset`` to ``end``: durable
    once ``JournalWriter.settle`` returns, when ``durable`` asks it (an fsync then covers
    them, this thread's or another's)."""

    offset: int
    end: int
    durable: bool
    generation: int
    """Which file they went to: a compaction writes a new one (fsynced whole)."""


class JournalWriter:
    """The single writer of a journal: holds its lock, appends durably.

    Opening cuts off a torn tail (reported in ``scan.torn``) so that new
    records never follow garbage, and gives a journal without an identity
    one. ``journal_id`` is the journal's identity; ``synced_size`` the length
    known to be on disk: everything up to the last fsync.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        fsync: bool = True,
        listener: JournalListener | None = None,
    ) -> None:
        self.path = Path(path)
        if sys.platform not in SUPPORTED_PLATFORMS or fcntl is None:
            raise JournalError(
                f"{self.path}: the journal runs on Linux and macOS only, not {sys.platform}: "
                "its durability rests on flock, fsync and link as those systems define them"
            )
        self._fsync = fsync
        self._listener = listener
        self._lock = _thread.allocate_lock()
        # Group commit (``write``/``settle``): the fsync under way, which later writers
        # wait for rather than making their own, and the file it reaches.
        self._sync_state = _thread.allocate_lock()
        self._syncing = False
        self._sync_waiters: list[_thread.LockType] = []
        self._generation = 0
        # Listener events, told in order outside the locks (``_deliver``).
        self._events: collections.deque[JournalEvent] = collections.deque()
        self._telling = _thread.allocate_lock()
        self._to_settle = False
        """The write under way is made durable by ``settle`` (its ``Appended`` says so)."""
        self._writer_thread: int | None = None
        self._unsynced = 0
        """Writes made since the last fsync began that wait for one."""
        self._last_batch = 1
        """How many such writes the last fsync covered."""
        self._last_fsync = 0.0
        """How long the last fsync took, in seconds."""
        self._gathering: _thread.LockType | None = None
        """Held by an fsync that waits for the group's writes; let go once they are in."""
        self._shared = False
        """Whether more than one thread has written: only then does an fsync wait a turn
        for the others' writes."""
        # Where each record of the file lies and its op (None: of no op), for the ops
        # index written at close (``append_index``); earlier indexes and the identity
        # are left out, as the settled ops a compaction's block or an index maps.
        self._placed_offsets = array.array("q")
        self._placed_ops: list[str | None] = []
        self.frames = 0
        self._indexed_end = 0
        self._proving: Proof | None = None
        self._poisoned: str | None = None
        if not self.path.exists():
            _create(self.path)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot open journal: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise JournalLockedError(
                f"{self.path}: journal is held by another live process "
                f"({holder}); run one agent per journal",
                holder=holder,
            ) from None
        if _replaced(fd, self.path):
            # A compaction renamed its new file over the one opened here, then let
            # this one go: the journal is the new file, held by its compactor.
            os.close(fd)
            raise JournalLockedError(
                f"{self.path}: journal is held by another live process (it was just "
                "compacted); run one agent per journal"
            )
        self._fd: int | None = fd
        self._deferred: list[Record] = []
        try:
            _remove_leftovers(self.path)
            self.scan = self._read_file(fd)
            self._proving = self.scan.proving
            self._place_scan()
            retired = self.scan.records[-1].record if self.scan.records else None
            if isinstance(retired, RetiredRecord):  # the last record a retired journal has
                raise JournalRetiredError(
                    f"{self.path}: journal of a retired task (retired by life "
                    f"{retired.incarnation} at {time.ctime(retired.retired_at)}); nothing runs "
                    "on it: give a new task a journal of its own"
                )
            if self.scan.torn is not None:
                # The one removal of bytes a writer makes: a tail it has just proved torn.
                os.ftruncate(fd, self.scan.valid_end)
                _fsync(fd)
                torn = self.scan.torn
                log.warning(
                    "%s: cut a torn tail of %d bytes at byte %d (%s)",
                    self.path,
                    torn.length,
                    torn.offset,
                    torn.reason,
                )
            self.size = self.synced_size = self.scan.valid_end
            journal_id = self.scan.journal_id
            if journal_id is None:
                # A journal of a runtime that wrote no identity: given one now, durably,
                # before anything else, so that its keys never change again.
                journal_id = new_journal_id()
                self.append(JournalIdRecord(journal_id))
                log.warning("%s: journal given its identity %s", self.path, journal_id)
            self.journal_id = journal_id
            self._queue(Opened(self.synced_size))
        except BaseException:
            self.close()
            raise
        self._deliver()

    def read(self, data: bytes) -> JournalScan:
        """Prove the file's records (``scan_bytes``): the one place a writer reads them."""
        return scan_bytes(data, source=str(self.path))

    def _read_file(self, fd: int) -> JournalScan:
        """The scan of the journal open as ``fd``: a compacted journal's settled ops left
        in the file (``_scan_compacted``), or every record read (``read``).

        A writer that reads its own way (a subclass's ``read``) is given the whole file.
        """
        if type(self).read is JournalWriter.read:
            scan = self._scan_settled_apart()
            if scan is not None:
                return scan
        data = _read_fd(fd)
        if not data:  # an empty file (made by someone else): a new journal
            self._write_header(fd)
            data = _read_fd(fd)
        return self.read(data)

    def _scan_settled_apart(self) -> JournalScan | None:
        """``_scan_indexed``, else ``_scan_compacted``, on a descriptor of its own, which
        the settled ops keep to read from for as long as they live, after the writer
        closes too (it holds no lock: closing it never lets go of the journal's)."""
        try:
            reader = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        scan = None
        try:
            assert self._fd is not None
            if os.fstat(reader).st_ino == os.fstat(self._fd).st_ino:
                with without_cyclic_gc():
                    scan = _scan_indexed(reader, str(self.path))
                    if scan is None:
                        scan = _scan_compacted(reader, str(self.path))
        finally:
            if scan is None:
                os.close(reader)
        return scan

    def append(self, record: Record, *, sync: bool = True) -> int:
        """Append one record durably; returns its offset."""
        return self.append_many((record,), sync=sync)

    def defer(self, records: Iterable[Record]) -> None:
        """Have ``records`` written in front of the next append, in its write and fsync.

        A start saves an fsync this way: its incarnation record goes out with
        its first decisions. A life that dies before appending leaves no trace,
        and it ran nothing: every tool call follows an append.
        """
        with self._lock:
            self._deferred.extend(records)

    def append_many(self, records: Iterable[Record], *, sync: bool = True) -> int:
        """Append records in one write and (by default) one fsync.

        Returns the offset of the first of ``records`` (after any deferred ones).
        A record too large for a frame is refused before anything is written
        (``JournalWriteError``; the writer stays usable). Any other failure
        poisons the writer (see the module docstring).
        """
        try:
            with self._lock:
                return self._append(tuple(records), sync=sync)
        finally:
            self._deliver()

    def write(self, records: Iterable[Record], *, sync: bool = True) -> Written:
        """Write records in one ``write``, without waiting for their fsync: ``settle`` then
        makes them durable. Threads that write while an fsync is under way share the next
        one (group commit). Fails as ``append_many`` does."""
        with self._lock:
            self._unsynced += sync and self._fsync
            if self._gathering is not None and self._unsynced >= self._last_batch:
                self._gathering.release()  # the group is in: its fsync goes ahead
                self._gathering = None
            me = _thread.get_ident()
            if self._writer_thread != me:
                self._shared |= self._writer_thread is not None
                self._writer_thread = me
            self._to_settle = sync and self._fsync
            try:
                offset = self._append(tuple(records), sync=False)
            finally:
                self._to_settle = False
            return Written(offset, self.size, sync and self._fsync, self._generation)

    def settle(self, written: Written) -> None:
        """Return once ``written`` is durable (when it asked to be), and the listener told.

        One thread at a time fsyncs; the others wait for its fsync and return if it
        covered their records (it covers every byte written before it began), else
        make the next one. A failed fsync poisons the writer: every waiter whose records
        it did not cover raises ``JournalWriteError``.
        """
        try:
            if written.durable:
                self._sync_through(written)
        finally:
            self._deliver()

    def _sync_through(self, written: Written) -> None:
        # Hit once per durable write, by its own thread, whether it then leads an fsync or
        # waits for one: a crash point whose count does not vary with how threads group.
        # A failure here is the fsync that would cover this write failing.
        try:
            failpoint("journal.before_fsync")  # written, not yet durable
        except BaseException as exc:
            self._failed_sync(exc)
        while True:
            with self._sync_state:
                if written.generation != self._generation or self.synced_size >= written.end:
                    return  # an fsync (or a compaction's new file) covers it
                self._require_open()
                leading = not self._syncing
                if leading:
                    self._syncing = True
                else:  # wait for the fsync under way (woken with the others at its end)
                    waiter = _thread.allocate_lock()
                    waiter.acquire()
                    self._sync_waiters.append(waiter)
            if not leading:
                waiter.acquire()
                continue  # then look again: it covered these records, or one more is due
            try:
                self._gather()
                self.sync()
            except BaseException as exc:
                self._failed_sync(exc)
            finally:
                with self._sync_state:
                    self._syncing = False
                    waiting, self._sync_waiters = self._sync_waiters, []
                for waiter in waiting:  # all at once, not one after another
                    waiter.release()

    def _failed_sync(self, exc: BaseException) -> NoReturn:
        """An fsync failed (or was interrupted): poison the writer and raise, an
        ``OSError`` as ``JournalWriteError``."""
        with self._lock:
            if self._poisoned is None:
                message = self._poison(self.size, exc)
                if isinstance(exc, OSError):
                    raise JournalWriteError(message) from exc
        raise exc

    GATHER_MAX = 0.004
    """The longest an fsync waits for the rest of its group's writes, in seconds."""
    GATHER_GAP = 0.0005
    """How long an fsync waits for the group's next write before it gives up on the rest
    (or as long as the last fsync took, if longer), in seconds."""

    def _gather(self) -> None:
        """Let the threads an fsync just woke write first, so that this one covers their
        records too (as a loop's ready tasks join the pump's next write): wait, asleep,
        until as many writes wait as the last fsync covered, for as long as they keep
        coming: a gap of ``GATHER_GAP`` (or the last fsync's time) with no new write ends
        the wait, and ``GATHER_MAX`` bounds it. A thread woken by an fsync takes a turn at
        the interpreter's lock before it writes, so its group trickles in over about as
        many of those turns as it has threads: a bound of one fsync's time alone left a
        third of a busy group to the next fsync. Only once more than one thread has
        written."""
        if not self._shared:
            return
        gate = _thread.allocate_lock()
        gate.acquire()
        with self._lock:
            if self._unsynced >= self._last_batch or self._fd is None:
                return
            self._gathering = gate
            seen = self._unsynced
            gap = max(self._last_fsync, self.GATHER_GAP)
        deadline = time.monotonic() + self.GATHER_MAX
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or gate.acquire(timeout=min(gap, left)):
                break
            with self._lock:
                if self._gathering is not gate or self._unsynced == seen:
                    break  # the group is in, or no write came for a whole gap
                seen = self._unsynced
        with self._lock:
            if self._gathering is gate:
                self._gathering = None

    def _append(self, records: tuple[Record, ...], *, sync: bool) -> int:
        fd = self._require_open()
        deferred = [(r, encode_frame(r)) for r in self._deferred]
        encoded = [*deferred, *[(r, encode_frame(r)) for r in records]]
        offset = self.size
        for record, frame in encoded:
            # The reader takes a longer "length" for damage, so such a frame
            # would be dropped as a torn tail or brick the journal as corrupt.
            if len(frame) - HEADER_SIZE > MAX_PAYLOAD:
                raise JournalWriteError(
                    f"{self.path}: append at byte {offset} refused: a {record.kind} record of "
                    f"{len(frame) - HEADER_SIZE} bytes exceeds the journal's limit of "
                    f"{MAX_PAYLOAD} bytes; nothing was written"
                )
        frames = b"".join(frame for _, frame in encoded)
        synced = sync and self._fsync
        seconds = 0.0
        written = 0
        try:
            failpoint("journal.append")
            written = os.write(fd, frames)
            if written != len(frames):
                raise OSError(errno.ENOSPC, f"short write ({written} of {len(frames)} bytes)")
            written = len(frames)
            if synced:
                failpoint("journal.before_fsync")  # written, not yet durable
                started = time.perf_counter()
                _fsync(fd)
                seconds = time.perf_counter() - started
        except BaseException as exc:
            # Whatever was interrupted (a full disk, an I/O error, a signal's
            # exception between two system calls), nobody knows what the file
            # now holds past ``offset``: the writer takes no more appends.
            message = self._poison(offset, exc)
            if isinstance(exc, OSError):
                raise JournalWriteError(
                    message, maybe_durable=_intents_within(encoded, written)
                ) from exc
            raise
        self._deferred.clear()
        at = offset
        for record, frame in encoded:
            self._place(at, record)
            at += len(frame)
        self.frames += len(encoded)
        self.size = offset + len(frames)
        if synced:
            self.synced_size = self.size
        if self._listener is not None:
            durable = synced or self._to_settle
            self._queue(Appended(tuple(r for r, _ in encoded), offset, self.size, durable))
            if synced:
                self._queue(Synced(self.size, seconds))
        return offset + sum(len(frame) for _, frame in deferred)

    def _poison(self, offset: int, exc: BaseException) -> str:
        """Take no more appends, let go of the file, and say what is durable."""
        reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else type(exc).__name__
        unsynced = (
            f", bytes {self.synced_size} to {offset} are written but not known durable"
            if offset > self.synced_size
            else ""
        )
        self._poisoned = (
            f"{self.path}: append at byte {offset} failed ({reason}); the journal takes no "
            f"more appends in this process. Durable: every record up to byte "
            f"{self.synced_size}{unsynced}; whatever this append wrote after byte {offset} "
            "is cut as a torn tail when the journal is opened again. Open it again to go on"
        )
        log.error("%s", self._poisoned)
        self._release()
        return self._poisoned

    def _place_scan(self) -> None:
        """Start the record places over from ``scan`` (at open, and after a compaction)."""
        self._placed_offsets = array.array("q")
        self._placed_ops = []
        for scanned in self.scan.records:
            self._place(scanned.offset, scanned.record)
        scan = self.scan
        self.frames = scan.frames if scan.frames is not None else len(scan.records) + 1
        self._indexed_end = scan.settled.end if isinstance(scan.settled, IndexedOps) else 0

    def _place(self, offset: int, record: Record) -> None:
        # Lives' records are history a start does not read (an index names the last life).
        history = IncarnationRecord | RecoveredRecord | TailDroppedRecord
        if not isinstance(record, JournalIdRecord | OpsIndexRecord | SettledIndexRecord | history):
            self._placed_offsets.append(offset)
            op_id = getattr(record, "op_id", None)
            self._placed_ops.append(op_id if isinstance(op_id, str) else None)

    INDEX_MIN_BYTES = 64 * 1024
    """An ops index is written at close once this many bytes follow the last one."""
    INDEX_MAX_RATIO = 2.0
    """... and when it is at most this many times their size."""

    def append_index(self, build: IndexBuild) -> bool:
        """Append an ops index of the whole file (``OpsIndexRecord``), durably, if it is
        worth it: at least ``INDEX_MIN_BYTES`` written since the last one, and the index
        no more than twice their size (so indexes never come to more than the records).
        ``build(size, crc, frames, offsets, op_ids)`` makes it from the file's size, CRC
        and frame count and the place and op of each of its records (None: no index).
        Returns whether one was written; a failure is the append's."""
        self.prove()  # never map bytes that do not prove
        with self._lock:
            fd = self._require_open()
            if self._deferred:
                self._append((), sync=False)  # its own records first, then the map of all
            new = self.size - self._indexed_end
            if new < self.INDEX_MIN_BYTES:
                return False
            crc = _crc_of(fd, 0, self.size)
            if crc is None:
                return False
            index = build(self.size, crc, self.frames, self._placed_offsets, self._placed_ops)
            if index is None:
                return False
            frame = encode_frame(index)
            if len(frame) - HEADER_SIZE > MAX_PAYLOAD or len(frame) > self.INDEX_MAX_RATIO * new:
                return False
            self._append((index,), sync=True)
            self._indexed_end = self.size
        self._deliver()
        return True

    def _queue(self, event: JournalEvent) -> None:
        """Keep an event for the listener, in journal order (the writer's lock is held)."""
        if self._listener is not None:
            self._events.append(event)

    def _deliver(self) -> None:
        """Tell the listener every queued event, in order, one thread at a time, outside the
        writer's lock. A thread that finds another telling leaves its events to it: the
        teller looks at the queue again after it lets go."""
        while self._events and self._telling.acquire(False):
            try:
                while self._events:
                    self._tell(self._events.popleft())
            finally:
                self._telling.release()

    def _tell(self, event: JournalEvent) -> None:
        try:
            assert self._listener is not None
            self._listener(event)
        except Exception as exc:  # a metrics hook must never fail the journal
            log.warning("%s: journal listener raised %r", self.path, exc)

    def compact(self, build: CompactionBuild) -> int:
        """Replace the journal by ``build(records, size, crc)``: a new file, whole, renamed.

        ``build`` is given every record of the file (the identity apart), the
        file's size and its CRC-32, and returns the records of the new one,
        which keeps the journal's identity. A ``build`` with a ``stream``
        method (``StreamedBuild``) is streamed instead: the file's records
        one at a time, then the new file's, encoded as they come, so that
        the records of neither file are ever all held. The new file is
        written and fsynced under a temporary name, locked, renamed over the
        journal, and the directory fsynced: a crash at any point leaves the
        old journal or the new one (and at worst a leftover temporary file,
        removed at the next open). Appends wait meanwhile. A failure before
        the rename leaves the old journal in use (``JournalWriteError``; the
        writer stays usable); after it, the writer is poisoned. Returns the
        new file's size.
        """
        with self._lock:
            fd = self._require_open()
            stream = getattr(build, "stream", None)
            if stream is not None and type(self).read is JournalWriter.read:
                parts, index, kept = self._streamed(fd, stream)
            else:
                parts, index, kept = self._listed(fd, build)
            head = FILE_HEADER + encode_frame(JournalIdRecord(self.journal_id))
            temporary = self.path.with_name(f"{self.path.name}{_COMPACTING}{os.getpid()}")
            total = len(head) + sum(len(part) for part in parts)
            new_fd: int | None = None
            reader: int | None = None
            try:
                failpoint("compact.before_write")
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
                new_fd = os.open(
                    temporary,
                    os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC,
                    0o600,
                )
                assert fcntl is not None
                fcntl.flock(new_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # locked before it is named
                if index is not None:  # what the settled ops read from (no lock of its own)
                    reader = os.open(temporary, os.O_RDONLY | os.O_CLOEXEC)
                _write_halves(new_fd, [head, *parts], total)
                _fsync(new_fd)
                failpoint("compact.before_rename")
                os.rename(temporary, self.path)
            except BaseException as exc:
                for opened in (new_fd, reader):
                    if opened is not None:
                        os.close(opened)
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                if isinstance(exc, OSError):
                    raise JournalWriteError(
                        f"{self.path}: compaction failed ({exc.strerror}); the journal is "
                        "unchanged and still in use"
                    ) from exc
                raise
            del parts
            os.close(fd)  # the replaced file, and its lock: the new file is locked already
            self._fd = new_fd
            self.size = self.synced_size = total
            self._generation += 1  # whatever waits for an fsync of the old file: it is in this one
            self._proving = None  # every record of the old file was read and proved
            self.scan = self._scan_new(new_fd, reader, index, kept, len(head))
            self._place_scan()
            try:
                failpoint("compact.before_dir_fsync")
                fsync_dir(self.path.parent)
            except BaseException as exc:
                message = self._poison(self.size, exc)
                if isinstance(exc, OSError):
                    raise JournalWriteError(message) from exc
                raise
            failpoint("compact.after_dir_fsync")  # done: the new file is the journal, durably
            self._queue(Opened(self.synced_size))
            size = self.size
        self._deliver()
        return size

    def _refuse_large(self, record: Record, frame: bytes) -> None:
        if len(frame) - HEADER_SIZE > MAX_PAYLOAD:
            raise JournalWriteError(
                f"{self.path}: compaction refused: a {record.kind} record of "
                f"{len(frame) - HEADER_SIZE} bytes exceeds the journal's limit; "
                "the journal is unchanged"
            )

    def _listed(
        self, fd: int, build: CompactionBuild
    ) -> tuple[list[bytes | bytearray], SettledIndexRecord | None, list[tuple[Record, int]]]:
        """The new file after its identity, from ``build`` given every record at once: its
        parts, its index, and each record with its frame's length."""
        data = _read_fd(fd)
        scanned = self.read(data)
        records = build([s.record for s in scanned.records], len(data), zlib.crc32(data))
        del data, scanned
        frames = [encode_frame(r) for r in records]
        for record, frame in zip(records, frames, strict=True):
            self._refuse_large(record, frame)
        indexed = _index_of(records, frames)
        index = None if indexed is None else indexed[0]
        if indexed is not None:  # right after the checkpoint, before the block it names
            records = [records[0], indexed[0], *records[1:]]
            frames = [frames[0], indexed[1], *frames[1:]]
        kept = [(r, len(f)) for r, f in zip(records, frames, strict=True)]
        return [b"".join(frames)], index, kept

    def _streamed(
        self, fd: int, stream: StreamBuild
    ) -> tuple[list[bytes | bytearray], SettledIndexRecord | None, list[tuple[Record, int]]]:
        """The new file after its identity, from ``stream``: the checkpoint it gives first,
        its index, and the block encoded as its records come (only the bytes are held)."""
        size = self.size
        crc = _crc_of(fd, 0, size)
        if crc is None:
            raise JournalWriteError(f"{self.path}: compaction found the file shorter than known")
        source = str(self.path)

        def load(offset: int) -> Record:
            found = _record_at(fd, offset, size)
            if found is None:
                raise JournalCorruptError(
                    source, offset, 0, "a record proved at open no longer does"
                )
            return found[1]

        produced = stream(_records_of(fd, len(FILE_HEADER), size, source), load, size, crc)
        checkpoint = next(produced)
        block = bytearray()
        block_crc = 0
        index = SettledIndexBuilder()
        with without_cyclic_gc():
            for record in produced:
                frame = encode_frame(record)
                self._refuse_large(record, frame)
                index.add(len(block), record)
                block += frame
                block_crc = zlib.crc32(frame, block_crc)
        first = encode_frame(checkpoint)
        self._refuse_large(checkpoint, first)
        built = index.finish(len(block), block_crc)
        index_frame = encode_frame(built)
        if len(index_frame) - HEADER_SIZE > MAX_PAYLOAD:  # the block is read record by record
            return [first, block], None, []
        return [first + index_frame, block], built, []

    def _scan_new(
        self,
        fd: int,
        reader: int | None,
        index: SettledIndexRecord | None,
        kept: list[tuple[Record, int]],
        head: int,
    ) -> JournalScan:
        """The scan of the file a compaction just wrote, without decoding its settled ops:
        from ``kept`` (every record and its frame's length, in file order) when the build
        was listed, else read back from the file (``_scan_compacted``)."""
        if kept:
            offset = head
            placed = []
            for record, length in kept:
                placed.append(ScannedRecord(offset, offset + length, record))
                offset += length
            settled = None
            if index is not None and reader is not None:
                start = placed[1].end
                load = _loader(reader, start, start + index.size, str(self.path))
                settled = SettledOps(index, load, functools.partial(os.close, reader), base=start)
                placed = [p for p in placed if not isinstance(p.record, SettledRecord)]
            frames = 1 + len(kept)
            return JournalScan(tuple(placed), self.size, None, self.journal_id, settled, frames)
        if reader is not None:
            scan = _scan_compacted(reader, str(self.path))
            if scan is not None:
                return scan
            os.close(reader)
        return self.read(_read_fd(fd))

    @property
    def proven(self) -> bool:
        """Whether every byte of the file is proved (``prove`` has nothing to wait for)."""
        return self._proving is None

    def prove(self) -> None:
        """Wait until the bytes an ops index covers are proved by their CRC (a start through
        an index reads none of its settled ops' records, and proves them meanwhile): the
        drivers call it before a tool runs. If they changed since the index was written,
        the file is read record by record to name the damage, the writer takes no more
        appends, and ``JournalCorruptError`` is raised."""
        proving = self._proving
        if proving is None:
            return
        held = proving.holds()
        with self._lock:
            if self._proving is not proving:
                return  # another thread got here first (or a compaction proved it all)
            self._proving = None
            if held:
                return
            fd = self._require_open()
            try:
                self.read(_read_fd(fd))
                raise JournalCorruptError(
                    str(self.path), 0, 0, "the bytes its ops index covers changed since"
                )
            except JournalError as exc:
                self._poisoned = f"{exc}; the journal takes no more appends in this process"
                log.error("%s", self._poisoned)
                self._release()
                raise

    def check_writable(self) -> None:
        """Raise what an append would: ``JournalWriteError`` once poisoned, ``JournalError``
        once closed."""
        self._require_open()

    @property
    def poisoned(self) -> bool:
        """Whether an append failed, so that this writer takes no more."""
        return self._poisoned is not None

    def sync(self) -> None:
        """Make every record written so far durable: one fsync, made outside the writer's
        lock (on a duplicate of its descriptor), so that writes go on meanwhile."""
        with self._lock:
            fd = self._require_open()
            end, generation = self.size, self._generation
            # The group an fsync waits for: as large as this one, or one less than the
            # last (it grows at once, and shrinks one write an fsync as callers leave).
            self._last_batch = max(1, self._unsynced, self._last_batch - 1)
            self._unsynced = 0
            duplicate = os.dup(fd)
        try:
            started = time.perf_counter()
            _fsync(duplicate)
            seconds = self._last_fsync = time.perf_counter() - started
        except OSError as exc:
            with self._lock:
                message = self._poisoned or self._poison(end, exc)
            raise JournalWriteError(message) from exc
        finally:
            os.close(duplicate)
        with self._lock:
            if generation == self._generation and end > self.synced_size:
                self.synced_size = end
            self._queue(Synced(end, seconds))
        if not self._syncing:  # else a group's fsync: told once its waiters go on
            self._deliver()

    def close(self) -> None:
        proving = self._proving
        if proving is not None:
            proving.holds()  # its thread reads a descriptor of its own: let it end first
        with self._lock:
            if self._deferred and self._fd is not None:
                with contextlib.suppress(JournalError):  # closing must not raise
                    self._append((), sync=True)
            self._release()

    @property
    def name(self) -> str:
        """The journal as messages name it: its path."""
        return str(self.path)

    def remove(self) -> None:
        """Delete the closed journal's file and make that durable (its directory fsynced)."""
        os.unlink(self.path)
        fsync_dir(self.path.parent)

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # also releases the flock
            self._fd = None

    def _require_open(self) -> int:
        if self._poisoned is not None:
            raise JournalWriteError(self._poisoned)
        if self._fd is None:
            raise JournalError(f"{self.path}: journal is closed")
        return self._fd

    def _write_header(self, fd: int) -> None:
        try:
            os.write(fd, FILE_HEADER + encode_frame(JournalIdRecord(new_journal_id())))
            _fsync(fd)
        except OSError as exc:
            raise JournalWriteError(
                f"{self.path}: writing the journal header failed ({exc.strerror}); "
                "nothing journaled"
            ) from exc

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fsync(fd: int) -> None:
    """Make a file's written bytes durable: ``F_FULLFSYNC`` on macOS, ``fsync`` elsewhere."""
    if sys.platform == "darwin" and fcntl is not None:
        try:
            fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
            return
        except OSError:
            pass  # a file system without it (a network share): fsync is all there is
    os.fsync(fd)


_COMPACTING = ".compacting."
"""A compaction's new file is written as ``<journal>.compacting.<pid>``, then renamed."""


def _index_of(
    records: list[Record], frames: list[bytes]
) -> tuple[SettledIndexRecord, bytes] | None:
    """The index of a compaction's block (its records after the checkpoint), or None when
    there is no checkpoint first or the index would not fit in a frame (the settled
    records are then read one by one at every start, as the journal's reader reads any)."""
    if not records or not isinstance(records[0], CheckpointRecord):
        return None
    placed = []
    offset = 0
    crc = 0
    for record, frame in zip(records[1:], frames[1:], strict=True):
        placed.append((offset, record))
        offset += len(frame)
        crc = zlib.crc32(frame, crc)
    index = settled_index(placed, offset, crc)
    frame = encode_frame(index)
    return (index, frame) if len(frame) - HEADER_SIZE <= MAX_PAYLOAD else None


def _intents_within(encoded: list[tuple[Record, bytes]], written: int) -> frozenset[str]:
    """The op ids of the intents whose frames lie whole within the first ``written`` bytes
    of a failed append: they may be on disk, and a later open reads them."""
    ops: set[str] = set()
    end = 0
    for record, frame in encoded:
        end += len(frame)
        if end > written:
            break
        if isinstance(record, IntentRecord):
            ops.add(record.op_id)
    return frozenset(ops)


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    written = os.write(fd, data)
    if written != len(data):
        raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes)")


def _write_halves(fd: int, parts: list[bytes | bytearray], total: int) -> None:
    """Write ``parts`` (``total`` bytes) in two halves, a crash point between them."""
    half = total // 2
    written = 0
    for part in parts:
        view = memoryview(part)
        if written < half <= written + len(view):
            cut = half - written
            _write_all(fd, view[:cut])
            failpoint("compact.mid_write")
            _write_all(fd, view[cut:])
        else:
            _write_all(fd, view)
        written += len(view)


def _records_of(fd: int, start: int, end: int, source: str) -> Iterator[ScannedRecord]:
    """The records of the file from byte ``start`` to ``end`` (the identity apart), read a
    MiB at a time and decoded one by one: never the whole file held. They were proved at
    open: a frame that no longer proves is damage (``JournalCorruptError``)."""
    pos = start
    frames = 0
    while pos < end:
        data = _pread_all(fd, min(end - pos, 1 << 20), pos)
        at = 0
        while at < len(data):
            checked = _check_frame(data, at)
            if isinstance(checked, str) and at == 0 and len(data) >= HEADER_SIZE:
                # A frame longer than what was read: read it whole.
                length = _HEADER.unpack_from(data, 0)[2]
                data = _pread_all(fd, HEADER_SIZE + min(length, MAX_PAYLOAD), pos)
                checked = _check_frame(data, 0)
            if isinstance(checked, str):
                if at == 0:
                    raise JournalCorruptError(source, pos, frames + 1, checked)
                break  # cut by the end of what was read: read again from here
            frame_end, payload, _ = checked
            frames += 1
            try:
                record = record_from_json(json.loads(payload))
            except (ValueError, RecursionError) as exc:
                raise JournalCorruptError(source, pos + at, frames, str(exc)) from None
            if not isinstance(record, JournalIdRecord):
                yield ScannedRecord(pos + at, pos + frame_end, record)
            at = frame_end
        pos += at


def fsync_dir(directory: Path) -> None:
    """Make a rename or a link in ``directory`` durable."""
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _replaced(fd: int, path: Path) -> bool:
    """Whether ``path`` no longer names the file open as ``fd`` (a compaction replaced it)."""
    try:
        return os.stat(path).st_ino != os.fstat(fd).st_ino
    except FileNotFoundError:
        return True


def _remove_leftovers(path: Path) -> None:
    """Remove what a compaction killed before its rename left: its journal's lock is held
    here, so no live compaction owns it."""
    prefix = path.name + _COMPACTING
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        with contextlib.suppress(OSError):
            os.unlink(path.parent / name)


def _create(path: Path) -> None:
    """Create ``path`` as an empty journal: header and identity durable first, then linked
    into place, mode 0600 (arguments and results are in plain text).

    ``link`` fails if the name is taken, so two writers racing to create it
    never replace each other's file; the loser opens the winner's.
    """
    temporary = path.with_name(f"{path.name}.creating.{os.getpid()}")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, FILE_HEADER + encode_frame(JournalIdRecord(new_journal_id())))
            _fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another writer created it first: open theirs
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            # A file system without hard links: rename, which could replace a
            # journal created in the same instant, hence the check just before.
            if not path.exists():
                os.rename(temporary, path)
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)  # the new name survives a power cut
        finally:
            os.close(dir_fd)
    except OSError as exc:
        message = f"{path}: creating the journal failed ({exc.strerror}); nothing journaled"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
            raise JournalWriteError(message) from exc  # the disk: the agent may retry later
        raise JournalError(message) from exc  # the path itself: a refusal
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _read_fd(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _whose(pid: int) -> str:
    """A lock holder's pid, said so that a holder in this very process is not taken for
    another: the kernel names the process that took a lock, which a fork shares."""
    if pid == os.getpid():
        return (
            f"pid {pid}, this process: the journal is open here already; close that runtime first"
        )
    if pid == os.getppid():
        return (
            f"pid {pid}, this process's parent: a process forked from the holder shares "
            "its lock; open the journal in one of them only"
        )
    return f"pid {pid}"


def _lock_holder(fd: int) -> str:
    """Who holds the flock on ``fd``'s file, for the refusal message only.

    Read from ``/proc/locks`` (Linux) rather than from a file each writer
    would have to write: that write would cost every agent start.
    """
    inode = os.fstat(fd).st_ino
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            for line in locks:
                fields = line.split()
                # "1: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF"
                if (
                    len(fields) > 5
                    and fields[1:4:2] == ["FLOCK", "WRITE"]
                    and fields[5].rsplit(":", 1)[-1] == str(inode)
                ):
                    return _whose(int(fields[4]))
    except OSError:
        pass
    return "pid unknown"
