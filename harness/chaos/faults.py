"""The fault registry: everything the harness can do to an agent, by kind.

| kind        | how it is injected                                                    |
|-------------|-----------------------------------------------------------------------|
| sigkill     | SIGKILL from outside, at a failpoint hand-shake or a random moment     |
| power-loss  | after the kill, the journal loses what it held past its last fsync:    |
|             | ``drop`` cuts it off; ``tear:<keep>:<garbage>`` keeps a prefix of it   |
|             | (``keep`` a fraction) followed by ``garbage`` random bytes             |
| disk-full   | an append fails with ENOSPC (failpoint ``journal.append@N=enospc``)    |
| corrupt     | after the kill, one byte inside an earlier record is flipped           |
|             | (``corrupt:<where>``, a fraction of the records): the next start must  |
|             | refuse to run anything                                                 |

SIGKILL never loses data already written: the OS flushes it. Power loss does,
and the journal's shadow file (``HARNESS_JOURNAL_SHADOW``) says how much was
fsynced. The world database is the outside world: it keeps its own durability
(SQLite WAL with ``synchronous=FULL``) and no fault here touches it.

After-death faults are applied by ``apply_after_death`` between two lives;
every parameter is in the spec string, so a schedule replays exactly.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.runtime.journal import read_shadow, scan_bytes

__all__ = [
    "FAULT_KINDS",
    "PRISTINE_JOURNAL",
    "SHADOW_FILE",
    "apply_after_death",
    "parse_after_death",
]

FAULT_KINDS = {
    "sigkill": "SIGKILL from outside, at a failpoint or at a random moment",
    "power-loss": "drop or tear what the journal held past its last fsync",
    "disk-full": "an append fails with ENOSPC",
    "corrupt": "a byte inside an earlier journal record is flipped",
}

SHADOW_FILE = "journal.synced"
PRISTINE_JOURNAL = "journal.before-corruption"
"""The journal as it was before a corruption was injected, for the checkers."""


def _power_loss(trial_dir: Path, args: list[str]) -> dict[str, Any]:
    journal = trial_dir / "journal"
    if not journal.exists():
        return {"lost": 0}
    data = journal.read_bytes()
    synced = read_shadow(trial_dir / SHADOW_FILE)
    synced = len(data) if synced is None else min(synced, len(data))
    unsynced = len(data) - synced
    if args == ["drop"]:
        kept, garbage = synced, b""
    else:
        keep_fraction, garbage_len = float(args[1]), int(args[2])
        kept = synced + int(unsynced * keep_fraction)
        garbage = random.Random(f"{kept}:{garbage_len}").randbytes(garbage_len) if unsynced else b""
    torn = data[:kept] + garbage
    journal.write_bytes(torn)
    scan = scan_bytes(torn, source=str(journal))
    return {
        "synced": synced,
        "size": len(data),
        "kept": kept,
        "garbage": len(garbage),
        "lost": len(data) - kept,
        "valid_end": scan.valid_end,
        "torn": 0 if scan.torn is None else scan.torn.length,
    }


def _corrupt(trial_dir: Path, args: list[str]) -> dict[str, Any]:
    journal = trial_dir / "journal"
    data = journal.read_bytes()
    records = scan_bytes(data, source=str(journal)).records
    if len(records) < 2:
        return {"corrupted": None, "why": "fewer than two records: nothing before the tail"}
    victim = records[min(int(float(args[0]) * (len(records) - 1)), len(records) - 2)]
    offset = (victim.offset + victim.end) // 2
    shutil.copyfile(journal, trial_dir / PRISTINE_JOURNAL)
    damaged = bytearray(data)
    damaged[offset] ^= 0xFF
    journal.write_bytes(bytes(damaged))
    return {
        "corrupted": offset,
        "record": records.index(victim) + 1,
        "record_offset": victim.offset,
    }


_AFTER_DEATH: dict[str, tuple[Callable[[Path, list[str]], dict[str, Any]], int, int]] = {
    "power-loss": (_power_loss, 1, 3),
    "corrupt": (_corrupt, 1, 1),
}


def parse_after_death(spec: str) -> tuple[str, list[str]]:
    """Split and check a spec; ``ValueError`` names what is wrong."""
    kind, *args = spec.split(":")
    if kind not in _AFTER_DEATH:
        raise ValueError(f"unknown after-death fault {kind!r} (known: {', '.join(_AFTER_DEATH)})")
    _, least, most = _AFTER_DEATH[kind]
    if not least <= len(args) <= most:
        raise ValueError(f"{spec!r}: {kind} takes {least} to {most} parameters")
    if kind == "power-loss" and args[0] not in ("drop", "tear"):
        raise ValueError(f"{spec!r}: power-loss is drop or tear:<keep>:<garbage>")
    if kind == "power-loss" and args[0] == "tear" and len(args) != 3:
        raise ValueError(f"{spec!r}: tear needs <keep fraction>:<garbage bytes>")
    return kind, args


def apply_after_death(trial_dir: Path, spec: str) -> dict[str, Any]:
    """Apply an after-death fault to a dead agent's files; returns what it did."""
    kind, args = parse_after_death(spec)
    return {"fault": spec, **_AFTER_DEATH[kind][0](trial_dir, args)}
