"""Whether each life kept the journal it was handed, from the supervisor's observations.

The journal is append-only: a life may add records, and may cut only a torn
tail (the bytes past its last whole frame, as ``harness.check.journal`` reads
them). The supervisor saw the journal at each spawn (its size and CRC-32, and
where a torn tail began with the CRC-32 of the bytes before it) and at each
life's end, before any after-death fault (its size and CRC-32, and how many
bytes of the journal the life started with were still in place). Between two
lives only an after-death fault may change it.

From these and the final file: every life's starting journal must be a prefix
of the final journal (its first ``size`` bytes have its CRC), or its whole
records must be when only a torn tail went, unless a fault after it changed
bytes it held. Where one is not, the life that changed it is named: the first
at or after it that did not keep the journal it started with, or the gap
between two lives (or after the last) where it changed with no fault applied.
Pure functions: nothing here reads a file.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["JournalSeen", "LifeJournal", "is_prefix", "lives_changed"]


@dataclass(frozen=True, slots=True)
class JournalSeen:
    """The journal file at one moment: its size and the CRC-32 of all of it."""

    size: int
    crc: int

    def __str__(self) -> str:
        return f"{self.size} bytes, CRC {self.crc:08x}"


@dataclass(frozen=True, slots=True)
class LifeJournal:
    """One life's journal as the supervisor saw it, and what a fault did after it."""

    life: int
    start: JournalSeen | None
    """At its spawn (None: there was no journal yet)."""
    end: JournalSeen | None = None
    """At its end, before any after-death fault (None: none, or not recorded)."""
    kept: int | None = None
    """How many bytes of the starting journal were still in place at its end."""
    torn_at: int | None = None
    """Where a torn tail of the starting journal began (None: it had none)."""
    valid_crc: int | None = None
    """The CRC-32 of the starting journal's bytes before ``torn_at``."""
    faulted: bool = False
    """An after-death fault was applied after this life (it may change the journal)."""
    changed_from: int | None = None
    """The first byte that fault changed or cut (None: it left every byte in place)."""
    spawned: int | None = None
    """Where its spawn stands in the supervisor's events (None: not known)."""
    ended: int | None = None
    """Where its end stands in the supervisor's events (None: not known). A life paused
    while the next one runs may end after it: lives are not always one after another."""


def is_prefix(data: bytes, seen: JournalSeen) -> bool:
    """Whether the journal ``seen`` describes is a prefix of ``data`` (same bytes)."""
    return len(data) >= seen.size and zlib.crc32(data[: seen.size]) == seen.crc


def _cut_too_much(life: LifeJournal) -> str | None:
    """Why a life did not keep the journal it started with (None: it did, or only cut its
    torn tail, or it is not known)."""
    start, kept = life.start, life.kept
    if start is None or kept is None or kept >= start.size:
        return None
    if life.torn_at is not None and kept >= life.torn_at:
        return None  # a torn tail, cut: the one removal a writer may make
    may = (
        f"only its torn tail from byte {life.torn_at} on could go"
        if life.torn_at is not None
        else "it had no torn tail: every byte was whole records"
    )
    return (
        f"life {life.life} did not keep the journal it started with ({start}): at its end "
        f"only its first {kept} bytes were in place, {start.size - kept} bytes cut or "
        f"changed, yet {may}"
    )


def lives_changed(lives: Sequence[LifeJournal], final: bytes | None) -> list[str]:
    """What changed the journal a life was handed, beyond appending or cutting a torn tail.

    ``final`` is the journal file as the trial left it (None: there is none).
    One problem per change, naming the life (or the gap) where it happened and
    the lives whose starting journal it took from the final one.
    """
    culprits: list[tuple[int, str, list[int]]] = []  # (life, what, lives whose start it took)
    for n, life in enumerate(lives):
        why = _cut_too_much(life)
        if why is not None:
            culprits.append((life.life, why, []))
        if life.faulted or life.end is None or _beside(life, lives):
            continue  # another life ran when it ended: what follows is that life's too
        nxt = _next(life, n, lives)
        after = _seen(final) if nxt is None else nxt.start
        if after == life.end:
            continue
        if nxt is not None:
            where = f"the spawn of life {nxt.life} ({_said(after)})"
        else:
            where = f"the end of the trial ({_said(after)})"
        culprits.append(
            (
                life.life,
                f"the journal changed between the end of life {life.life} ({life.end}) and "
                f"{where}, with no fault applied",
                [],
            )
        )
    lost: list[int] = []
    for n, life in enumerate(lives):
        if life.start is None or life.start.size == 0 or _kept_in(life, final):
            continue
        if any(_fault_cut(later, life.start.size) for later in lives[n:]):
            continue  # a power cut (or damage at rest) after it took bytes it held
        culprit = next((c for c in culprits if c[0] >= life.life), None)
        if culprit is not None:
            culprit[2].append(life.life)
        else:
            lost.append(life.life)
    problems = [what + _took(starts) for _, what, starts in culprits]
    for first in (n for n in lost if n - 1 not in lost):  # each run of lives, once
        last = first
        while last + 1 in lost:
            last += 1
        problems.append(
            f"the journal life {first} started with is no prefix of the final journal: "
            f"changed in life {last} or after it (the last whose starting journal is not)"
        )
    return problems


def _beside(life: LifeJournal, lives: Sequence[LifeJournal]) -> bool:
    """Whether another life was running when ``life`` ended (one paused beside it)."""
    end = life.ended
    return end is not None and any(
        other.spawned is not None and other.ended is not None and other.spawned < end < other.ended
        for other in lives
        if other is not life
    )


def _next(life: LifeJournal, n: int, lives: Sequence[LifeJournal]) -> LifeJournal | None:
    """The life spawned first after ``life`` ended (by position where times are not known)."""
    if life.ended is None:
        return lives[n + 1] if n + 1 < len(lives) else None
    later = [o for o in lives if o.spawned is not None and o.spawned > life.ended]
    return min(later, key=lambda o: o.spawned or 0, default=None)


def _kept_in(life: LifeJournal, final: bytes | None) -> bool:
    """Whether the final journal begins with the life's starting journal, or with its whole
    records when it had a torn tail."""
    assert life.start is not None
    if final is None:
        return False
    if is_prefix(final, life.start):
        return True
    if life.torn_at is None or life.valid_crc is None:
        return False
    return is_prefix(final, JournalSeen(life.torn_at, life.valid_crc))


def _fault_cut(life: LifeJournal, size: int) -> bool:
    return life.faulted and life.changed_from is not None and life.changed_from < size


def _seen(data: bytes | None) -> JournalSeen | None:
    return None if data is None else JournalSeen(len(data), zlib.crc32(data))


def _said(seen: JournalSeen | None) -> str:
    return "no journal" if seen is None else str(seen)


def _took(starts: list[int]) -> str:
    if not starts:
        return ""
    which = f"life {starts[0]}" if len(starts) == 1 else f"lives {', '.join(map(str, starts))}"
    return f"; the journal at the start of {which} is no prefix of the final journal"
