"""A life's compaction at start, and the copy of the journal it replaces, for the checkers.

A scenario's ``compact_at`` (``Plan.compact_at``) has each life whose journal
is that many bytes or more compact it as it starts, before it recovers
(``Runtime.compact``). The journal then no longer holds the records the
checkers judge earlier lives by, so the agent program first keeps a copy of
the file it is about to replace, named by its length and CRC-32
(``journal.replaced.<size>.<crc as 8 hex digits>``), the two numbers the new
file's checkpoint names: the checkers stitch the lives' journals back together
from the copies (``harness.check.stitch``) and prove each copy by them. The
copy is written whole or not at all (a temporary file, fsynced, then a rename
and a fsync of the folder), so neither a kill nor a power cut while copying
leaves a partial copy under its name, and a copy outlives a power cut after
the compaction it stands for.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from harness.runtime import Runtime
from harness.runtime.journal import fsync_dir

__all__ = ["REPLACED_PREFIX", "compact_at_start", "replaced_name"]

REPLACED_PREFIX = "journal.replaced."


def replaced_name(size: int, crc: int) -> str:
    return f"{REPLACED_PREFIX}{size}.{crc:08x}"


def compact_at_start(runtime: Runtime, journal: Path, compact_at: int | None) -> bool:
    """Compact the journal when it is ``compact_at`` bytes or more, a copy of it kept first;
    whether it did."""
    if compact_at is None or runtime.journal.size < compact_at:
        return False
    data = journal.read_bytes()  # this life holds the lock: nobody else writes it
    copy = journal.with_name(replaced_name(len(data), zlib.crc32(data)))
    if not copy.exists():
        partial = copy.with_name(copy.name + ".partial")
        with partial.open("wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, copy)
        fsync_dir(journal.parent)  # the copy outlives a power cut, as the journal may
    runtime.compact()
    return True
