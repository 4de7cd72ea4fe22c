"""The journal's shadow file: how far the journal was fsynced, as the agent's runtime said.

A supervisor simulates a power cut after a kill by dropping or tearing whatever
the journal holds past its last fsync. It learns where that was from a shadow
file the agent program keeps beside the journal: ``shadow_listener`` returns a
journal listener (``harness.runtime.journal``) that stores, in the file
``HARNESS_JOURNAL_SHADOW`` names, the journal's length when it was opened and
after every fsync (8 bytes, big-endian, not fsynced: it only has to outlive a
SIGKILL). The runtime itself reads no variable of the harness; the agent
programs hand it this listener.

This is the runtime's own account of its durability, which a runtime under
test could get wrong in the same way it gets its fsyncs wrong.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path

from harness.runtime.journal import JournalEvent, JournalListener, Opened, Synced

__all__ = ["SHADOW_ENV", "read_shadow", "shadow_listener"]

SHADOW_ENV = "HARNESS_JOURNAL_SHADOW"


def shadow_listener(environ: Mapping[str, str] = os.environ) -> JournalListener | None:
    """A listener that keeps the shadow file ``SHADOW_ENV`` names, or None without one."""
    path = environ.get(SHADOW_ENV)
    return _listener(path) if path else None


@functools.cache
def _listener(path: str) -> JournalListener:
    # One descriptor per file for the process's life: a guard may open its journal often.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def record(event: JournalEvent) -> None:
        if isinstance(event, Opened | Synced):
            os.pwrite(fd, event.end.to_bytes(8, "big"), 0)

    return record


def read_shadow(path: Path | str) -> int | None:
    """The synced length an agent last stored in its shadow file, if any."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    return int.from_bytes(data[:8], "big") if len(data) >= 8 else None
