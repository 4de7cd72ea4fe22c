"""What every framework adapter's agent program does as a life starts.

``begin_life`` is the opening the adapter contract asks of each (``harness.adapters``):
the trial folder from the command line, containment when asked for, then ``ready``
once the imports are done. ``next_incarnation`` counts the starts: a third-party
framework keeps no incarnation count of its own that the harness can read, yet a
tool's ``CallContext`` carries one, so each start counts itself in a small file of
the trial folder, written whole (temporary file, fsync, rename): a start killed
while counting leaves the last count, never half of one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from harness.agent.audit import CONTAINMENT_ENV, install_containment
from harness.failpoints import tell_supervisor

__all__ = ["begin_life", "next_incarnation"]


def begin_life(argv: list[str], program: str) -> Path | None:
    """The trial folder of ``python -m <program> TRIAL_DIR`` (None, with the usage on
    stderr, for any other command line); containment installed if asked for
    (``HARNESS_CONTAINMENT=1``), then ``ready`` told: random-time kills count from here."""
    if len(argv) != 1:
        print(f"usage: python -m {program} TRIAL_DIR", file=sys.stderr)
        return None
    trial = Path(argv[0])
    if os.environ.get(CONTAINMENT_ENV) == "1":
        install_containment(trial)
    tell_supervisor("ready")
    return trial


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
