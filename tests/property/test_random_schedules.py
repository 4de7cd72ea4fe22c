"""Random crash schedules: every fault kind is drawn, and every drawn fault can land.

``random_schedule`` is a pure function of a random generator and the golden
run (its failpoint hits, its tool calls' windows). Whatever the seed, what it
draws must be a schedule the supervisor can carry out: a lost reply comes
before the reply its life is killed at, both within the golden run's replies;
journal damage follows a kill after a finish that has records before it;
a runtime without a journal meets no journal fault and no table; the
schedule replays from its JSON. And over many seeds each fault kind appears.
"""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.chaos.schedule import (
    JOURNAL_FAULTS,
    NEAR_WINDOWS,
    RESTART_SHARE,
    CrashSchedule,
    _kill_moment,
    random_schedule,
)

# A golden run like phone_task's: nine calls, each a window in ms after ready.
WINDOWS = tuple((6.0 + 1.5 * n, 7.0 + 1.5 * n) for n in range(9))
HITS = {"op.after_finish": 9, "op.reply": 9, "op.before_intent": 9}
WORKING_MS = 21.0


def _draw(seed: int, *, journal: bool = True) -> CrashSchedule:
    return random_schedule(
        random.Random(seed), WORKING_MS, journal=journal, hits=HITS, windows=WINDOWS
    )


def _hit(spec: str, action: str) -> int:
    return int(next(e for e in spec.split(",") if e.endswith(action)).split("@")[1].split("=")[0])


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.booleans())
def test_every_drawn_fault_can_land(seed: int, journal: bool) -> None:
    schedule = _draw(seed, journal=journal)
    assert CrashSchedule.from_json(schedule.to_json()) == schedule
    assert 1 <= schedule.kills <= 3
    for life in schedule.lives:
        if "=lost-reply" in life.failpoints:
            lost, killed = _hit(life.failpoints, "=lost-reply"), _hit(life.failpoints, "=kill")
            assert 1 <= lost < killed <= HITS["op.reply"]
        kind = (life.after_death or "").split(":", 1)[0]
        if kind in ("corrupt", "corrupt-crc", "sector"):
            assert len(schedule.lives) == 1  # the next start refuses it: nothing after
            assert 2 <= _hit(life.failpoints, "=kill") <= HITS["op.after_finish"]
        if life.kill_after_ms is not None:
            assert 0.0 <= life.kill_after_ms <= WORKING_MS
    if not journal:
        assert not schedule.fault_kinds & JOURNAL_FAULTS
        assert not any(life.table for life in schedule.lives)
    tables = {life.table for life in schedule.lives}
    assert len(tables) == 1, "a table variant holds for every life of the trial"


def test_over_many_seeds_every_fault_kind_is_drawn() -> None:
    """Each fault a random trial can meet comes up, none of them rare."""
    kinds = Counter(kind for seed in range(2000) for kind in _draw(seed).fault_kinds)
    for kind in ("sigkill", "power-loss", "lost-reply", "corrupt", "corrupt-crc", "sector"):
        assert kinds[kind] >= 20, kinds
    assert kinds["unlisted"] >= 200, kinds
    assert kinds["disk-full"] == 0  # exhaustive only: at chosen appends


def test_kills_are_aimed_at_the_calls() -> None:
    """Most first-life kills fall inside a golden-run call; a small share anywhere."""
    first = [
        life.kill_after_ms
        for seed in range(2000)
        for life in _draw(seed).lives[:1]
        if life.kill_after_ms is not None
    ]
    inside = sum(any(a <= t <= b for a, b in WINDOWS) for t in first)
    assert inside / len(first) > 0.9


def test_no_kill_is_drawn_once_no_call_is_left() -> None:
    """Past the golden run's last call a restarted life has nothing to hit: no moment."""
    rng = random.Random(7)
    assert _kill_moment(rng, WORKING_MS, WINDOWS, after=WINDOWS[-1][1] + 0.1) is None
    later = [_kill_moment(rng, WORKING_MS, WINDOWS, after=WINDOWS[4][0]) for _ in range(500)]
    assert all(t is not None for t in later)
    # Aimed at the next few calls left (the 5th to the 7th, as shifted), but for the
    # small share drawn anywhere.
    shift = WINDOWS[4][0] - WINDOWS[0][0] * RESTART_SHARE
    near = sum(t is not None and t <= WINDOWS[4 + NEAR_WINDOWS - 1][1] - shift for t in later)
    assert near / len(later) > 0.9
