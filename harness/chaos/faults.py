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

import math
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.check.journal import read_journal_bytes
from harness.runtime.journal import read_shadow

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
        # The life died before it made a journal: a power cut takes nothing.
        return {"landed": True, "journal": False, "lost": 0}
    data = journal.read_bytes()
    synced = read_shadow(trial_dir / SHADOW_FILE)
    if synced is None:
        if read_journal_bytes(data).entries:
            return {"landed": False, "why": "no shadow file says what was fsynced", "lost": 0}
        synced = len(data)  # a header, durable at creation, and nothing after it
    synced = min(synced, len(data))
    unsynced = len(data) - synced
    if args == ["drop"]:
        kept, garbage = synced, b""
    else:
        keep_fraction, garbage_len = float(args[1]), int(args[2])
        kept = synced + int(unsynced * keep_fraction)
        garbage = random.Random(f"{kept}:{garbage_len}").randbytes(garbage_len) if unsynced else b""
    torn = data[:kept] + garbage
    journal.write_bytes(torn)
    reading = read_journal_bytes(torn)
    return {
        "landed": True,
        "synced": synced,
        "size": len(data),
        "kept": kept,
        "garbage": len(garbage),
        "lost": len(data) - kept,
        "valid_end": reading.valid_end,
        "torn": 0 if reading.torn is None else reading.torn[1],
    }


def _corrupt(trial_dir: Path, args: list[str]) -> dict[str, Any]:
    journal = trial_dir / "journal"
    if not journal.exists():
        return {"landed": False, "corrupted": None, "why": "there is no journal to corrupt"}
    data = journal.read_bytes()
    records = read_journal_bytes(data).entries
    if len(records) < 2:
        return {
            "landed": False,
            "corrupted": None,
            "why": "fewer than two records: nothing before the tail",
        }
    victim = records[min(int(float(args[0]) * (len(records) - 1)), len(records) - 2)]
    offset = (victim.offset + victim.end) // 2
    shutil.copyfile(journal, trial_dir / PRISTINE_JOURNAL)
    damaged = bytearray(data)
    damaged[offset] ^= 0xFF
    journal.write_bytes(bytes(damaged))
    # Landed when a reader now finds that very record damaged.
    landed = read_journal_bytes(bytes(damaged)).corrupt_offset == victim.offset
    return {
        "landed": landed,
        "corrupted": offset,
        "record": records.index(victim) + 1,
        "record_offset": victim.offset,
        **({} if landed else {"why": "the flipped byte left the record readable"}),
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
    if kind == "power-loss" and args[0] == "drop" and len(args) != 1:
        raise ValueError(f"{spec!r}: drop takes no parameters")
    if kind == "power-loss" and args[0] == "tear":
        _fraction(spec, "keep fraction", args[1])
        if not args[2].isdigit():
            raise ValueError(f"{spec!r}: garbage bytes {args[2]!r} is not a whole number >= 0")
    if kind == "corrupt":
        _fraction(spec, "where", args[0])
    return kind, args


def _fraction(spec: str, what: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:  # also refuses nan
        raise ValueError(f"{spec!r}: {what} {text!r} is not a fraction from 0 to 1")
    return value


def apply_after_death(trial_dir: Path, spec: str) -> dict[str, Any]:
    """Apply an after-death fault to a dead agent's files; returns what it did."""
    kind, args = parse_after_death(spec)
    return {"fault": spec, **_AFTER_DEATH[kind][0](trial_dir, args)}
