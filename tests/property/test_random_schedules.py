"""Random crash schedules: every fault kind is drawn, and every drawn fault can land.

``random_schedule`` is a pure function of a random generator and the golden
run (its failpoint hits, its tool calls' windows). Whatever its seed, what it
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
    FILE_FAULTS,
    JOURNAL_FAULTS,
    NEAR_WINDOWS,
    RECOVERY_SHARE,
    RESTART_SHARE,
    START_UP_SHARE,
    Call,
    CrashSchedule,
    Window,
    _kill_moment,
    random_schedule,
)

# A golden run like phone_task's: nine calls, each an op and its window in ms after ready.
CALLS = tuple(
    Call(
        f"s{n + 1:03d}",
        6.0 + 1.5 * n,
        7.0 + 1.5 * n,
        (
            Window("op.before_intent", 6.0 + 1.5 * n, 6.2 + 1.5 * n),
            Window("op.after_intent", 6.2 + 1.5 * n, 6.7 + 1.5 * n),
            Window("op.reply", 6.7 + 1.5 * n, 7.0 + 1.5 * n),
        ),
    )
    for n in range(9)
)
HITS = {"op.after_finish": 9, "op.reply": 9, "op.before_intent": 9}
WORKING_MS = 21.0


def _draw(seed: int, *, journal: bool = True) -> CrashSchedule:
    return random_schedule(random.Random(seed), WORKING_MS, journal=journal, hits=HITS, calls=CALLS)


def _hit(spec: str, action: str) -> int:
    return int(next(e for e in spec.split(",") if e.endswith(action)).split("@")[1].split("=")[0])


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.booleans())
def test_every_drawn_fault_can_land(seed: int, journal: bool) -> None:
    schedule = _draw(seed, journal=journal)
    assert CrashSchedule.from_json(schedule.to_json()) == schedule
    assert 1 <= schedule.kills + len(schedule.pauses) <= 3
    for n, life in enumerate(schedule.lives):
        if life.pause_ms is not None:  # a pause instead of a kill: aimed, this project's, last
            assert journal and life.aim is not None and life.after_death is None
            assert not any(later.kill_after_ms for later in schedule.lives[n + 1 :])
        if "=lost-reply" in life.failpoints:
            lost, killed = _hit(life.failpoints, "=lost-reply"), _hit(life.failpoints, "=kill")
            assert 1 <= lost < killed <= HITS["op.reply"]
        kind = (life.after_death or "").split(":", 1)[0]
        if kind in ("corrupt", "corrupt-crc", "sector"):
            assert len(schedule.lives) == 1  # the next start refuses it: nothing after
            assert 2 <= _hit(life.failpoints, "=kill") <= HITS["op.after_finish"]
        if life.kill_after_ms is not None:
            assert 0.0 <= life.kill_after_ms <= WORKING_MS
            if life.aim is not None:  # within the window of the call it is timed from
                point, op = life.aim.split(" ")
                windows = next(call.windows for call in CALLS if call.op == op)
                _, opened, closed = next(w for w in windows if w.point == point)
                assert life.kill_after_ms <= closed - opened + 1e-3  # rounded to a µs
    if not journal:
        assert not schedule.fault_kinds & (JOURNAL_FAULTS | FILE_FAULTS)
        assert not any(life.table for life in schedule.lives)
    tables = {life.table for life in schedule.lives}
    assert len(tables) == 1, "a table variant holds for every life of the trial"


def test_over_many_seeds_every_fault_kind_is_drawn() -> None:
    """Each fault a random trial can meet comes up, none of them rare."""
    kinds = Counter(kind for seed in range(2000) for kind in _draw(seed).fault_kinds)
    for kind in (
        "sigkill",
        "power-loss",
        "lost-reply",
        "corrupt",
        "corrupt-crc",
        "sector",
        "pause",
    ):
        assert kinds[kind] >= 20, kinds
    assert kinds["unlisted"] >= 200, kinds
    assert kinds["disk-full"] == 0  # exhaustive only: at chosen appends


def test_kills_are_aimed_at_the_calls() -> None:
    """Most first-life kills are timed from a point of a golden-run call, each window of
    the protocol about as often as the others; a small share from "ready", over the span."""
    first = [
        life
        for seed in range(2000)
        for life in _draw(seed).lives[:1]
        if life.kill_after_ms is not None
    ]
    aims = [life.aim.split(" ") for life in first if life.aim is not None]
    assert len(aims) / len(first) > 1 - 2 * START_UP_SHARE
    assert {op for _, op in aims} == {call.op for call in CALLS}
    points = Counter(point for point, _ in aims)
    assert set(points) == {"op.before_intent", "op.after_intent", "op.reply"}
    assert min(points.values()) > len(aims) / 4, points


def test_later_lives_aim_at_the_next_calls_left() -> None:
    """A restarted life aims at one of the next few calls after the one the previous kill
    aimed at; past the golden run's last call nothing is left to hit, and no kill is drawn."""
    rng = random.Random(7)
    assert _kill_moment(rng, WORKING_MS, CALLS, done=len(CALLS), restarted=True) is None
    later = [_kill_moment(rng, WORKING_MS, CALLS, done=4, restarted=True) for _ in range(500)]
    ops = [drawn[1] for drawn in later if drawn is not None]
    assert len(ops) == len(later)
    ops = [None if aim is None else aim.split(" ")[1] for aim in ops]
    near = {call.op for call in CALLS[4 : 4 + NEAR_WINDOWS]}
    timed_from_ready = START_UP_SHARE + RECOVERY_SHARE
    assert sum(op in near for op in ops) / len(ops) > 1 - 1.5 * timed_from_ready
    assert all(op in near for op in ops if op is not None)
    recovery = CALLS[0][1] * RESTART_SHARE
    into_recovery = [d for d in later if d is not None and d[1] is None and d[0] <= recovery]
    assert len(into_recovery) / len(later) > RECOVERY_SHARE / 2  # kills in the recovery
    for seed in range(500):
        aimed = [life.aim.split(" ")[1] for life in _draw(seed).lives if life.aim]
        order = [next(n for n, call in enumerate(CALLS) if call.op == op) for op in aimed]
        assert order == sorted(set(order)), "each kill aims past the one before it"


def test_a_runtime_that_keeps_files_but_no_journal_meets_power_cuts_only() -> None:
    """A framework's database in the trial folder (``power_loss``, no journal): a third of
    the kills are followed by a power cut, and no journal fault nor table comes up."""
    kinds: Counter[str] = Counter()
    cuts = kills = 0
    for seed in range(2000):
        schedule = random_schedule(
            random.Random(seed),
            WORKING_MS,
            journal=False,
            hits=HITS,
            calls=CALLS,
            power_loss=True,
        )
        assert not schedule.fault_kinds & JOURNAL_FAULTS
        assert not any(life.table for life in schedule.lives)
        kinds.update(schedule.fault_kinds)
        kills += schedule.kills
        cuts += sum(1 for life in schedule.lives if life.after_death)
        for life in schedule.lives:
            assert life.after_death is None or life.after_death.startswith("power-loss:")
    assert kinds["power-loss"] >= 200, kinds
    assert 0.25 < cuts / kills < 0.42, (cuts, kills)
