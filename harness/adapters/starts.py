"""How many times an adapter's agent program has started in a trial folder.

A third-party framework keeps no incarnation count of its own that the harness can
read, yet a tool's ``CallContext`` carries one: each start counts itself in a small
file of the trial folder, written whole (temporary file, fsync, rename), so that a
start killed while counting leaves the last count, never half of one.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["next_incarnation"]


def next_incarnation(trial: Path, counter: str) -> int:
    """Count this start in ``trial/counter`` (1 for the first), durably."""
    path = trial / counter
    try:
        previous = int(path.read_text("ascii").strip() or "0")
    except FileNotFoundError:
        previous = 0
    temporary = trial / f".{counter}.tmp"
    with temporary.open("w", encoding="ascii") as file:
        file.write(f"{previous + 1}\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    return previous + 1
