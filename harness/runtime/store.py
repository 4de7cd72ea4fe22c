"""The journal's one face: what the runtime asks of the store that keeps its records.

A store keeps one task's records in order and hands them back after a crash.
Two stores implement ``Journal``: the local file (``harness.runtime.journal.
JournalWriter``, the default, embedded) and PostgreSQL (``harness.runtime.
postgres.PostgresJournal``, for fleets). The runtime (``harness.runtime.runtime``)
decides; a store only keeps, and never decides what a record means.

The contract every store keeps:

- Opening claims the journal for one writer (the file's ``flock``, a database
  lease) and reads it: ``scan`` holds what it proved, a torn tail cut.
- ``write`` then ``settle``: once ``settle`` returns, the records are durable
  (fsynced, committed) and in the journal's order. Nothing is ever reported
  durable that might not be, and a failure that leaves it unknown says so
  (``JournalWriteError.maybe_durable``).
- A writer that lost its claim never writes again (``JournalLockedError`` at
  open, ``JournalFencedError`` at a write).
- ``prove`` returns only when a tool may run: no tool runs on a journal whose
  records do not prove, or whose claim is not held.
- ``compact`` replaces the records by what ``build`` makes of them, whole or not
  at all; it must not change any answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.runtime.records import Record

if TYPE_CHECKING:
    from harness.runtime.journal import (
        CompactionBuild,
        IndexBuild,
        JournalListener,
        JournalScan,
        JournalWriter,
        Written,
    )

__all__ = ["POSTGRES_SCHEMES", "Journal", "is_database_url", "open_journal"]

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""A journal named by a URL of these schemes is kept in PostgreSQL (``postgres.py``)."""


class Journal(Protocol):
    """A task's journal in some store, held by this process (see the module docstring)."""

    journal_id: str
    """The journal's random identity, given when it was created: idempotency keys derive
    from it, so it must never change."""
    scan: JournalScan
    """What opening read: the records (or the settled ops left in the store), a torn tail."""
    size: int
    """How many bytes the journal holds: what compaction at open measures."""

    @property
    def name(self) -> str:
        """The journal as messages name it (a path, a URL without its password)."""
        ...

    @property
    def proven(self) -> bool:
        """Whether a tool may run now without ``prove`` waiting for anything."""
        ...

    def prove(self) -> None:
        """Return once a tool may run; raise what forbids it (damage, a lost claim)."""
        ...

    @property
    def synced_size(self) -> int:
        """Where the records known durable end, in the positions ``write`` returns."""
        ...

    @property
    def poisoned(self) -> bool:
        """Whether a write failed so that this writer takes no more."""
        ...

    def check_writable(self) -> None:
        """Raise what the next append would raise (poisoned, closed, fenced)."""
        ...

    def defer(self, records: Iterable[Record]) -> None:
        """Have ``records`` written in front of the next append, in its one write."""
        ...

    def append(self, record: Record, *, sync: bool = True) -> int:
        """Write one record and make it durable; its position."""
        ...

    def append_many(self, records: Iterable[Record], *, sync: bool = True) -> int:
        """Write records and make them durable (``write`` then ``settle``)."""
        ...

    def write(self, records: Iterable[Record], *, sync: bool = True) -> Written:
        """Put records in the journal's order; durable once ``settle`` returns."""
        ...

    def settle(self, written: Written) -> None:
        """Return once ``written`` is durable (when it asked to be)."""
        ...

    def compact(self, build: CompactionBuild) -> int:
        """Replace the records by ``build``'s, whole or not at all; the new size."""
        ...

    def append_index(self, build: IndexBuild) -> bool:
        """Append an index for the next start if the store uses one; whether it did."""
        ...

    def remove(self) -> None:
        """Delete the closed journal, durably (``Runtime.retire(delete=True)``)."""
        ...

    def close(self) -> None:
        """Let go of the claim; nothing more is written."""
        ...


def is_database_url(source: object) -> bool:
    """Whether ``source`` names a journal in PostgreSQL rather than a file."""
    return isinstance(source, str) and source.startswith(POSTGRES_SCHEMES)


def open_journal(
    source: Path | str,
    *,
    file_class: type[JournalWriter],
    listener: JournalListener | None = None,
) -> Journal:
    """Open the journal ``source`` names: a PostgreSQL URL (``harness.runtime.postgres``,
    which needs the ``postgres`` extra) or a file's path (``file_class``)."""
    if is_database_url(source):
        from harness.runtime.postgres import PostgresJournal

        return PostgresJournal.open(str(source), listener=listener)
    return file_class(source, listener=listener)
