"""Crash schedules: which faults each life of the agent meets, as plain data.

A schedule lists lives (incarnations) in order; each may arm failpoints (a
``kill`` there is delivered from outside by the supervisor), be killed at a
random moment ``kill_after_ms`` after the agent said it was ready, and run
with a changed tool table. Lives past the list run clean until the plan is
done. A schedule, a seed and a scenario are all a trial needs to replay.

``exhaustive_schedules`` enumerates every failpoint hit a crash-free run made,
plus kills during recovery and a tool-table change; ``random_schedules``
draws time-based kills from a seed. Both are pure functions.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harness.chaos.faults import parse_after_death
from harness.runtime.errors import FailpointSpecError
from harness.runtime.failpoints import parse_failpoints

__all__ = [
    "JOURNAL_FAULTS",
    "OP_FAILPOINTS",
    "RECOVERY_FAILPOINTS",
    "CrashSchedule",
    "Life",
    "exhaustive_schedules",
    "random_schedule",
]

OP_FAILPOINTS = (
    "op.before_intent",
    "op.after_intent",
    "op.mid_effect",
    "op.after_effect",
    "op.after_finish",
)
RECOVERY_FAILPOINTS = ("recovery.after_decision", "recovery.before_retry", "recovery.after_hint")

DISK_FULL_HITS = (1, 2, 3, 5, 8, 13, 21, 34)
"""Which appends of a crash-free run meet a full disk: spread over the run."""

JOURNAL_FAULTS = frozenset(
    {"power-loss", "corrupt", "corrupt-crc", "sector", "disk-full", "unlisted"}
)
"""Fault kinds that act on this project's journal."""

TABLE_VARIANTS = ("reclassified", "unlisted")
"""Tool-table variants a life may run with (built by ``harness.chaos.tables``)."""


_LIFE_KEYS = ("failpoints", "kill_after_ms", "table", "after_death")


@dataclass(frozen=True, slots=True)
class Life:
    """The faults one incarnation meets.

    ``after_death`` is a fault applied to its files once it is dead (see
    ``harness.chaos.faults``): ``power-loss:drop``, ``power-loss:tear:<keep>:<garbage>``
    or ``corrupt:<where>``.
    """

    failpoints: str = ""
    kill_after_ms: float | None = None
    table: str | None = None
    after_death: str | None = None

    def describe(self) -> str:
        parts = [self.failpoints] if self.failpoints else []
        if self.kill_after_ms is not None:
            parts.append(f"kill@{self.kill_after_ms:.2f}ms")
        if self.table:
            parts.append(f"table={self.table}")
        if self.after_death:
            parts.append(f"then {self.after_death}")
        return " ".join(parts) or "clean"

    def to_json(self) -> dict[str, Any]:
        # Not "if value": a kill 0.0 ms after ready is a kill, and must replay as one.
        return {key: value for key in _LIFE_KEYS if (value := getattr(self, key)) not in (None, "")}

    @classmethod
    def from_json(cls, item: Any) -> Life:
        """A life from its JSON form, checked whole: ``ValueError`` names the key and the problem.

        Failpoints must parse (known names and actions), a kill time is a
        finite number of milliseconds >= 0, a table one of ``TABLE_VARIANTS``,
        and an after-death fault a spec ``harness.chaos.faults`` knows.
        """
        if not isinstance(item, dict) or set(item) - set(_LIFE_KEYS):
            raise ValueError(f"bad life {item!r}: keys are {', '.join(_LIFE_KEYS)}")
        failpoints = item.get("failpoints", "")
        if not isinstance(failpoints, str):
            raise ValueError(
                f"failpoints: {failpoints!r} is not a string like op.after_effect@3=kill"
            )
        try:
            parse_failpoints(failpoints, source="failpoints")
        except FailpointSpecError as exc:
            raise ValueError(str(exc)) from None
        kill = item.get("kill_after_ms")
        if kill is not None and (
            isinstance(kill, bool)
            or not isinstance(kill, int | float)
            or not math.isfinite(kill)
            or kill < 0
        ):
            raise ValueError(f"kill_after_ms: {kill!r} is not a number of milliseconds >= 0")
        table = item.get("table")
        if table is not None and table not in TABLE_VARIANTS:
            raise ValueError(
                f"table: {table!r} is not a table variant ({', '.join(TABLE_VARIANTS)})"
            )
        after_death = item.get("after_death")
        if after_death is not None:
            if not isinstance(after_death, str):
                raise ValueError(f"after_death: {after_death!r} is not a fault spec string")
            parse_after_death(after_death)
        return cls(failpoints, None if kill is None else float(kill), table, after_death)


@dataclass(frozen=True, slots=True)
class CrashSchedule:
    lives: tuple[Life, ...] = field(default_factory=tuple)

    @property
    def kills(self) -> int:
        return sum(
            ("=kill" in life.failpoints) + (life.kill_after_ms is not None) for life in self.lives
        )

    @property
    def fault_kinds(self) -> frozenset[str]:
        """The kinds of fault this schedule injects (sigkill, power-loss, ...)."""
        kinds = set()
        for life in self.lives:
            if "=kill" in life.failpoints or life.kill_after_ms is not None:
                kinds.add("sigkill")
            if "=enospc" in life.failpoints:
                kinds.add("disk-full")
            if "=lost-reply" in life.failpoints:
                kinds.add("lost-reply")
            if life.after_death:
                kinds.add(life.after_death.split(":", 1)[0])
            if life.table == "unlisted":
                kinds.add("unlisted")
        return frozenset(kinds)

    @property
    def failpoint_names(self) -> frozenset[str]:
        """Every failpoint a life of this schedule arms."""
        return frozenset(
            entry.split("@", 1)[0].split("=", 1)[0]
            for life in self.lives
            for entry in life.failpoints.split(",")
            if entry
        )

    @property
    def needs_journal(self) -> bool:
        """Whether it acts on this project's journal or tool table (power loss, corruption,
        a full disk, a changed table): faults with nothing to act on in another runtime."""
        return bool(self.fault_kinds & JOURNAL_FAULTS) or any(life.table for life in self.lives)

    def describe(self) -> str:
        return " | ".join(life.describe() for life in self.lives) or "no faults"

    def to_json(self) -> str:
        return json.dumps([life.to_json() for life in self.lives], separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> CrashSchedule:
        """A schedule from JSON; ``ValueError`` names the life (from 1) and what is wrong."""
        try:
            data: Any = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"not JSON: {exc}") from None
        if not isinstance(data, list):
            raise ValueError("a crash schedule is a JSON list of lives")
        lives = []
        for number, item in enumerate(data, 1):
            try:
                lives.append(Life.from_json(item))
            except ValueError as exc:
                raise ValueError(f"life {number}: {exc}") from None
        return cls(tuple(lives))


InFlightSafe = Callable[[str, int], "bool | None"]
"""Given a failpoint and a hit: whether the op in flight there is retry-safe (None: unknown)."""


def recovery_points(retry_safe: bool | None) -> tuple[str, ...]:
    """The recovery failpoints a restart hits with one op in flight of that kind.

    A retry-safe op is retried (``recovery.before_retry``), any other is handed
    to the model (``recovery.after_hint``); both are decided first.
    """
    if retry_safe is None:
        return RECOVERY_FAILPOINTS
    kept = "recovery.before_retry" if retry_safe else "recovery.after_hint"
    return tuple(p for p in RECOVERY_FAILPOINTS if p in ("recovery.after_decision", kept))


def exhaustive_schedules(
    hits: Mapping[str, int], in_flight_safe: InFlightSafe | None = None
) -> Iterator[tuple[str, CrashSchedule]]:
    """Every op failpoint at every hit the crash-free run made, then recovery kills.

    Yields (label, schedule). Kills during recovery follow a kill that leaves an
    op in flight (after its intent or its effect), at the recovery points the
    restart will hit for that op (``in_flight_safe`` says which: a kill at a
    point the restart never reaches would not land); a table change follows a
    kill after an intent, so that decisions must come from the snapshot. A kill
    after an effect or a finish is also followed by a power loss, and so is a
    kill between every journal write and its fsync (dropping or tearing it).
    Twice per scenario a kill is followed by a corrupted record, which the next
    start must refuse, and a few appends meet a full disk; and every tool call
    of the run once loses its reply after its effect (``lost-reply``).
    """
    for name in OP_FAILPOINTS:
        for hit in range(1, hits.get(name, 0) + 1):
            first = Life(f"{name}@{hit}=kill")
            yield f"{name}@{hit}", CrashSchedule((first,))
            if name in ("op.after_intent", "op.after_effect", "op.mid_effect"):
                safe = None if in_flight_safe is None else in_flight_safe(name, hit)
                for point in recovery_points(safe):
                    yield (
                        f"{name}@{hit}+{point}@1",
                        CrashSchedule((first, Life(f"{point}@1=kill"))),
                    )
            if name == "op.after_intent":
                yield f"{name}@{hit}+table", CrashSchedule((first, Life(table="reclassified")))
                unlisted = replace(first, table="unlisted")
                yield f"{name}@{hit}+unlisted", CrashSchedule((unlisted, Life(table="unlisted")))
            if name != "op.after_intent":
                lost = Life(first.failpoints, after_death="power-loss:drop")
                yield f"{name}@{hit}+power-loss", CrashSchedule((lost,))
    finishes = hits.get("op.after_finish", 0)
    for hit in sorted({2, finishes} & set(range(2, finishes + 1))):
        broken = Life(f"op.after_finish@{hit}=kill", after_death="corrupt:0.5")
        yield f"op.after_finish@{hit}+corrupt", CrashSchedule((broken,))
        for fault, where in (
            ("corrupt-crc", "corrupt-crc:0.5"),
            ("sector-zero", "sector:zero:0.5"),
            ("sector-stale", "sector:stale:0.9"),
        ):
            damaged = Life(f"op.after_finish@{hit}=kill", after_death=where)
            yield f"op.after_finish@{hit}+{fault}", CrashSchedule((damaged,))
    for hit in range(1, hits.get("op.reply", 0) + 1):
        yield f"op.reply@{hit}+lost-reply", CrashSchedule((Life(f"op.reply@{hit}=lost-reply"),))
    appends = hits.get("journal.append", 0)
    for hit in (hit for hit in DISK_FULL_HITS if hit <= appends):
        full = Life(f"journal.append@{hit}=enospc")
        yield f"journal.append@{hit}+disk-full", CrashSchedule((full,))
    for hit in range(1, hits.get("journal.before_fsync", 0) + 1):
        how = ("drop", "tear", "tear-sector")[hit % 3]
        fault = {
            "drop": "power-loss:drop",
            "tear": f"power-loss:tear:0.5:{hit % 7}",
            "tear-sector": "power-loss:tear-sector",
        }[how]
        lost = Life(f"journal.before_fsync@{hit}=kill", after_death=fault)
        yield f"journal.before_fsync@{hit}+{how}", CrashSchedule((lost,))


START_UP_SHARE = 0.05
"""Of random-time kills aimed at a life's work, this share is drawn over the whole span
(start-up included); the others inside a tool call of the golden run."""


RESTART_SHARE = 0.5
"""A restarted life's start-up and recovery, as a share of a first life's (which also makes
its world and journal): where the calls left to it begin. Measured: in 1,175 restarted
lives of a 1,500-trial random campaign, the first hint or call came at a median 0.47 of
the golden run's first call (deciles 0.26 to 0.80)."""

NEAR_WINDOWS = 3
"""A restarted life aims at one of the next few calls left to it. It runs faster than
the golden run did (its finished calls are only reported again), so an aim far into
what is left overshoots its work and lands at its exit."""

DAMAGE_SHARE = 1 / 8
"""Random trials whose journal is damaged at rest: a kill after a finish (there are
records before the tail), then corruption, checksum-only corruption or a bad sector."""

UNLISTED_SHARE = 1 / 6
"""Random trials whose every life runs with a table that leaves the writing tools out."""

LOST_REPLY_SHARE = 1 / 6
"""Random trials whose first life loses the reply of one call and is killed at a later
call's reply (the effect done, the finish not yet written)."""


def _kill_moment(
    rng: random.Random, span_ms: float, windows: Sequence[tuple[float, float]], after: float
) -> float | None:
    """A moment to kill a life whose work starts where an earlier kill at ``after`` left
    it; None when the golden run's calls all ended before ``after`` (nothing left to hit)."""
    # A restarted life starts over (start-up, recovery) before the calls left to it.
    restart = windows[0][0] * RESTART_SHARE if windows and after > 0 else 0.0
    later = [(a - after + restart, b - after + restart) for a, b in windows if b > after]
    if after > 0 and windows and not later:
        return None
    if not later or rng.random() < START_UP_SHARE:
        return rng.uniform(0.0, max(span_ms - after, span_ms / 4))
    start, end = rng.choice(later[:NEAR_WINDOWS] if after > 0 else later)
    return rng.uniform(max(start, 0.0), max(end, 0.0))


def _after_a_kill(rng: random.Random) -> str | None:
    """What a power cut after a random kill does: drop (1/6), tear (1/6), or nothing."""
    roll = rng.random()
    if roll < 1 / 6:
        return "power-loss:drop"
    if roll < 1 / 3:
        return f"power-loss:tear:{rng.random():.3f}:{rng.randrange(16)}"
    return None


def random_schedule(
    rng: random.Random,
    ready_to_exit_ms: float,
    *,
    journal: bool = True,
    hits: Mapping[str, int] | None = None,
    windows: Sequence[tuple[float, float]] = (),
) -> CrashSchedule:
    """One to three kills at random moments of a crash-free run's working time.

    Kills are aimed at the work: most at a moment inside one of the golden
    run's tool calls (``windows``, ms after ready), the rest
    (``START_UP_SHARE``) anywhere, start-up included. A later life aims at one
    of the next calls the earlier kills left (roughly: its time runs from its
    own start), and none is drawn once no call is left; a moment that comes
    after the life's work lands at its last point (the supervisor holds it there).

    For a runtime that keeps a journal (``journal``): a third of the kills are
    followed by a power loss (drop or tear); ``DAMAGE_SHARE`` of the trials
    instead kill after a random finish and damage the journal at rest (a
    flipped byte, a changed digit only the CRC sees, a zeroed or stale sector,
    at a random record), and ``UNLISTED_SHARE`` run every life with the
    unlisted table. ``LOST_REPLY_SHARE`` of the trials first lose a random
    call's reply and kill at a later reply of the same life (``hits``, the
    golden run's failpoint hits, says how many there are).
    """
    hits = hits or {}
    finishes, replies = hits.get("op.after_finish", 0), hits.get("op.reply", 0)
    if journal and finishes >= 2 and rng.random() < DAMAGE_SHARE:
        where = f"{rng.random():.3f}"
        damage = rng.choice(
            (
                f"corrupt:{where}",
                f"corrupt-crc:{where}",
                f"sector:zero:{where}",
                f"sector:stale:{where}",
            )
        )
        at = f"op.after_finish@{rng.randrange(2, finishes + 1)}=kill"
        return CrashSchedule((Life(at, after_death=damage),))
    table = "unlisted" if journal and rng.random() < UNLISTED_SHARE else None
    lives = []
    done = 0.0  # how far into the golden run's work the earlier kills got, roughly
    kills = rng.choice((1, 1, 2, 3))
    if replies >= 2 and rng.random() < LOST_REPLY_SHARE:
        # The life that lost a reply has at least the golden run's replies (the lost
        # one is verified or retried, both of which reply), so a later one comes.
        lost = rng.randrange(1, replies)
        killed = rng.randrange(lost + 1, replies + 1)
        failpoints = f"op.reply@{lost}=lost-reply,op.reply@{killed}=kill"
        lives.append(
            Life(failpoints, table=table, after_death=_after_a_kill(rng) if journal else None)
        )
        done = windows[min(killed, len(windows)) - 1][1] if windows else 0.0
        kills -= 1
    for _ in range(kills):
        moment = _kill_moment(rng, ready_to_exit_ms, windows, done)
        if moment is None:
            break
        kill = round(moment, 3)
        # A restarted life spends its first moments starting over: not golden-run work.
        done += max(kill - (windows[0][0] * RESTART_SHARE if windows and done > 0 else 0.0), 0.0)
        fault = _after_a_kill(rng) if journal else None
        lives.append(Life(kill_after_ms=kill, table=table, after_death=fault))
    if table and lives:
        lives.append(Life(table=table))  # the life that finishes runs with it too
    return CrashSchedule(tuple(lives))
