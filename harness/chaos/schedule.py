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
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
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

TABLE_VARIANTS = ("reclassified",)
"""Tool-table variants a life may run with (built by ``harness.chaos.tables``)."""


@dataclass(frozen=True, slots=True)
class Life:
    """The faults one incarnation meets."""

    failpoints: str = ""
    kill_after_ms: float | None = None
    table: str | None = None

    def describe(self) -> str:
        parts = [self.failpoints] if self.failpoints else []
        if self.kill_after_ms is not None:
            parts.append(f"kill@{self.kill_after_ms:.2f}ms")
        if self.table:
            parts.append(f"table={self.table}")
        return " ".join(parts) or "clean"


@dataclass(frozen=True, slots=True)
class CrashSchedule:
    lives: tuple[Life, ...] = field(default_factory=tuple)

    @property
    def kills(self) -> int:
        return sum(
            ("=kill" in life.failpoints) + (life.kill_after_ms is not None) for life in self.lives
        )

    def describe(self) -> str:
        return " | ".join(life.describe() for life in self.lives) or "no faults"

    def to_json(self) -> str:
        return json.dumps(
            [
                {
                    k: v
                    for k, v in (
                        ("failpoints", life.failpoints),
                        ("kill_after_ms", life.kill_after_ms),
                        ("table", life.table),
                    )
                    if v
                }
                for life in self.lives
            ],
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> CrashSchedule:
        data: Any = json.loads(text)
        if not isinstance(data, list):
            raise ValueError("a crash schedule is a JSON list of lives")
        lives = []
        for item in data:
            if not isinstance(item, dict) or set(item) - {"failpoints", "kill_after_ms", "table"}:
                raise ValueError(f"bad life {item!r}: keys are failpoints, kill_after_ms, table")
            kill = item.get("kill_after_ms")
            lives.append(
                Life(
                    str(item.get("failpoints", "")),
                    None if kill is None else float(kill),
                    item.get("table"),
                )
            )
        return cls(tuple(lives))


def exhaustive_schedules(hits: Mapping[str, int]) -> Iterator[tuple[str, CrashSchedule]]:
    """Every op failpoint at every hit the crash-free run made, then recovery kills.

    Yields (label, schedule). Kills during recovery follow a kill that leaves an
    op in flight (after its intent or its effect); a table change follows a
    kill after an intent, so that decisions must come from the snapshot.
    """
    for name in OP_FAILPOINTS:
        for hit in range(1, hits.get(name, 0) + 1):
            first = Life(f"{name}@{hit}=kill")
            yield f"{name}@{hit}", CrashSchedule((first,))
            if name in ("op.after_intent", "op.after_effect", "op.mid_effect"):
                for point in RECOVERY_FAILPOINTS:
                    yield (
                        f"{name}@{hit}+{point}@1",
                        CrashSchedule((first, Life(f"{point}@1=kill"))),
                    )
            if name == "op.after_intent":
                yield (f"{name}@{hit}+table", CrashSchedule((first, Life(table="reclassified"))))


def random_schedule(rng: random.Random, ready_to_exit_ms: float) -> CrashSchedule:
    """One to three kills at random moments of a crash-free run's working time."""
    lives = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        lives.append(Life(kill_after_ms=round(rng.uniform(0.0, ready_to_exit_ms), 3)))
    return CrashSchedule(tuple(lives))
