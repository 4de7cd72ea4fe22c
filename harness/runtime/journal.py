"""The write-ahead journal: an append-only file of framed, checksummed records.

File layout: the header ``FILE_HEADER`` (``%HJOURNAL 1`` and a newline),
then frames (big-endian)::

    magic b"HJ" | version u8 | length u32 | crc32 u32 | payload (JSON, `length` bytes)

The CRC covers version, length and payload. Every append is one ``write`` and
one ``fsync``. A journal is created whole: its header is written and fsynced
in a file of its own, which is then linked into place (``link`` never replaces
a file) and the directory fsynced. So a file named as a journal either starts
with the header or is not one, and is refused, never cut: a wrong path (a
database, a document) loses nothing. An empty file is taken as a new journal.

Reading proves each record it returns. A bad frame with no valid frame after
it is a torn tail (the crash interrupted the last append): it is reported and,
by a writer, cut off. A bad frame with a valid frame after it is corruption in
the middle: ``JournalCorruptError`` names the file, the byte offset and the
record number, and nothing is run.

One writer at a time: a ``JournalWriter`` holds an ``flock`` on the file. The
kernel drops it when the holder dies, so a SIGKILLed agent never blocks its
successor, while a second live process is refused at once.

What is durable: ``synced_size`` is the length up to the last fsync. When the
environment names a shadow file (``HARNESS_JOURNAL_SHADOW``), the writer also
stores that length there (8 bytes, big-endian, not fsynced: it only has to
outlive a SIGKILL), so that a supervisor can simulate a power cut afterwards by
dropping or tearing whatever the journal holds past it. This is the one seam
through which the harness learns what a power loss would take.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import json
import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.runtime.errors import (
    JournalCorruptError,
    JournalError,
    JournalLockedError,
    JournalWriteError,
)
from harness.runtime.hooks import failpoint
from harness.runtime.records import Record, record_from_json, record_to_json

__all__ = [
    "FILE_HEADER",
    "FORMAT_VERSION",
    "HEADER_SIZE",
    "SHADOW_ENV",
    "JournalScan",
    "JournalWriter",
    "ScannedRecord",
    "TornTail",
    "encode_frame",
    "read_shadow",
    "scan_bytes",
    "scan_journal",
]

SHADOW_ENV = "HARNESS_JOURNAL_SHADOW"
FILE_HEADER = b"%HJOURNAL 1\n"
"""The first bytes of every journal file, durable before its first record."""
MAGIC = b"HJ"
FORMAT_VERSION = 1
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
    records: tuple[ScannedRecord, ...]
    valid_end: int
    torn: TornTail | None


def _check_frame(data: bytes, pos: int) -> tuple[int, bytes] | str:
    """The frame's end and payload if it is provably whole, else why not."""
    if len(data) - pos < HEADER_SIZE:
        return f"partial header ({len(data) - pos} of {HEADER_SIZE} bytes)"
    magic, version, length, crc = _HEADER.unpack_from(data, pos)
    if magic != MAGIC:
        return f"bad magic {magic!r}"
    if version != FORMAT_VERSION:
        return f"unknown format version {version}"
    if length > MAX_PAYLOAD:
        return f"implausible length {length}"
    end = pos + HEADER_SIZE + length
    if end > len(data):
        return f"partial payload ({len(data) - pos - HEADER_SIZE} of {length} bytes)"
    payload = data[pos + HEADER_SIZE : end]
    if zlib.crc32(data[pos + 2 : pos + 7] + payload) != crc:
        return "checksum mismatch"
    return end, payload


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
        raise JournalCorruptError(
            source,
            0,
            1,
            f"not a journal: it begins with {data[: len(FILE_HEADER)]!r}, "
            f"not the journal header {FILE_HEADER!r}",
        )
    with without_cyclic_gc():
        return _scan(data, source, len(FILE_HEADER))


def _scan(data: bytes, source: str, start: int) -> JournalScan:
    records: list[ScannedRecord] = []
    pos = start
    while pos < len(data):
        checked = _check_frame(data, pos)
        if isinstance(checked, str):
            later = _valid_frame_after(data, pos)
            if later is not None:
                raise JournalCorruptError(
                    source,
                    pos,
                    len(records) + 1,
                    f"{checked}, with a valid record at byte {later} after it",
                )
            return JournalScan(tuple(records), pos, TornTail(pos, len(data) - pos, checked))
        end, payload = checked
        try:
            record = record_from_json(json.loads(payload))
        except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
            raise JournalCorruptError(
                source, pos, len(records) + 1, f"checksum holds but payload is not a record: {exc}"
            ) from None
        records.append(ScannedRecord(pos, end, record))
        pos = end
    return JournalScan(tuple(records), pos, None)


def scan_journal(path: Path | str) -> JournalScan:
    """Read a journal without locking it (for checkers and planners that only read)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return JournalScan((), 0, None)
    except OSError as exc:
        raise JournalError(f"{path}: cannot read journal: {exc.strerror}") from exc
    return scan_bytes(data, source=str(path))


class JournalWriter:
    """The single writer of a journal: holds its lock, appends durably.

    Opening cuts off a torn tail (reported in ``scan.torn``) so that new
    records never follow garbage. ``synced_size`` is the length known to be
    on disk: everything up to the last fsync.
    """

    def __init__(
        self, path: Path | str, *, fsync: bool = True, shadow: Path | str | None = None
    ) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self._shadow_fd: int | None = None
        if shadow is None and os.environ.get(SHADOW_ENV):
            shadow = os.environ[SHADOW_ENV]
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
                f"({holder}); run one agent per journal"
            ) from None
        self._fd: int | None = fd
        self._deferred: list[Record] = []
        try:
            data = _read_fd(fd)
            if not data:  # an empty file (made by someone else): a new journal
                self._write_header(fd)
                data = FILE_HEADER
            self.scan = self.read(data)
            if self.scan.torn is not None:
                os.ftruncate(fd, self.scan.valid_end)
                os.fsync(fd)
        except BaseException:
            self.close()
            raise
        self.size = self.scan.valid_end
        self.synced_size = self.size
        if shadow is not None:
            self._shadow_fd = os.open(shadow, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._record_synced()

    def read(self, data: bytes) -> JournalScan:
        """Prove the file's records (``scan_bytes``): the one place a writer reads them."""
        return scan_bytes(data, source=str(self.path))

    def append(self, record: Record, *, sync: bool = True) -> int:
        """Append one record durably; returns its offset."""
        return self.append_many((record,), sync=sync)

    def defer(self, records: Iterable[Record]) -> None:
        """Have ``records`` written in front of the next append, in its write and fsync.

        A start saves an fsync this way: its incarnation record goes out with
        its first decisions. A life that dies before appending leaves no trace,
        and it ran nothing: every tool call follows an append.
        """
        self._deferred.extend(records)

    def append_many(self, records: Iterable[Record], *, sync: bool = True) -> int:
        """Append records in one write and (by default) one fsync.

        Returns the offset of the first of ``records`` (after any deferred ones).
        """
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
                    f"{MAX_PAYLOAD} bytes; it is not journaled and earlier records are intact"
                )
        frames = b"".join(frame for _, frame in encoded)
        try:
            failpoint("journal.append")
            written = os.write(fd, frames)
            if written != len(frames):
                raise OSError(errno.ENOSPC, f"short write ({written} of {len(frames)} bytes)")
            if sync and self._fsync:
                failpoint("journal.before_fsync")  # written, not yet durable
                os.fsync(fd)
        except OSError as exc:
            self._undo_partial(offset)
            raise JournalWriteError(
                f"{self.path}: append at byte {offset} failed ({exc.strerror or exc}); "
                f"the record is not journaled and earlier records are intact"
            ) from exc
        self._deferred.clear()
        self.size = offset + len(frames)
        if sync and self._fsync:
            self.synced_size = self.size
            self._record_synced()
        return offset + sum(len(frame) for _, frame in deferred)

    def sync(self) -> None:
        os.fsync(self._require_open())
        self.synced_size = self.size
        self._record_synced()

    def _record_synced(self) -> None:
        if self._shadow_fd is not None:
            os.pwrite(self._shadow_fd, self.synced_size.to_bytes(8, "big"), 0)

    def close(self) -> None:
        if self._deferred and self._fd is not None:
            with contextlib.suppress(JournalError):  # closing must not raise
                self.append_many(())
        if self._shadow_fd is not None:
            os.close(self._shadow_fd)
            self._shadow_fd = None
        if self._fd is not None:
            os.close(self._fd)  # also releases the flock
            self._fd = None

    def _require_open(self) -> int:
        if self._fd is None:
            raise JournalError(f"{self.path}: journal is closed (an earlier append failed?)")
        return self._fd

    def _undo_partial(self, offset: int) -> None:
        # A partial frame must not stay in the middle of the file; if even
        # the truncate fails the writer closes, and the next opener drops the
        # partial frame as a torn tail.
        try:
            os.ftruncate(self._require_open(), offset)
        except OSError:
            self.close()

    def _write_header(self, fd: int) -> None:
        try:
            os.write(fd, FILE_HEADER)
            os.fsync(fd)
        except OSError as exc:
            raise JournalWriteError(
                f"{self.path}: writing the journal header failed ({exc.strerror}); "
                "nothing journaled"
            ) from exc

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _create(path: Path) -> None:
    """Create ``path`` as an empty journal: header durable first, then linked into place.

    ``link`` fails if the name is taken, so two writers racing to create it
    never replace each other's file; the loser opens the winner's.
    """
    temporary = path.with_name(f"{path.name}.creating.{os.getpid()}")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, FILE_HEADER)
            os.fsync(fd)
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


def read_shadow(path: Path | str) -> int | None:
    """The synced length a writer last stored in its shadow file, if any."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    return int.from_bytes(data[:8], "big") if len(data) >= 8 else None


def _read_fd(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


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
                    return f"pid {fields[4]}"
    except OSError:
        pass
    return "pid unknown"
