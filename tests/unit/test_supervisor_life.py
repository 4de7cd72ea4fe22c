"""A life as the supervisor follows it: the channel read a line at a time, and the state
machine its lines drive (``harness.chaos.supervisor``), without starting a process."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.supervisor import (
    ChannelReader,
    History,
    LedgerWatch,
    LifeState,
    LifeWatch,
    Seen,
    time_limit,
)


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    for fd in (read_fd, write_fd):
        with contextlib.suppress(OSError):  # the agent's end is closed once it "exited"
            os.close(fd)


def _channel(pipe: tuple[int, int], *chunks: bytes) -> ChannelReader:
    read_fd, write_fd = pipe
    for chunk in chunks:
        os.write(write_fd, chunk)
    os.close(write_fd)  # the agent is gone: every line it wrote is in the pipe
    return ChannelReader(read_fd, deadline=time.monotonic() + 60)


def _watch(tmp_path: Path) -> tuple[LifeWatch, io.StringIO, io.StringIO]:
    events, history = io.StringIO(), io.StringIO()
    ledger = LedgerWatch(tmp_path / "no-world.db")  # no ledger yet: acks carry None
    return LifeWatch(1, time.monotonic(), events, History(history), ledger), events, history


def _records(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


class TestTheChannel:
    def test_lines_come_whole_across_chunks_and_the_rest_keeps_a_cut_one(
        self, pipe: tuple[int, int]
    ) -> None:
        channel = _channel(pipe, b"rea", b"dy\nreached op.reply 1 s001\nack s0", b"01")
        assert channel.next() == "ready"
        assert channel.next() == "reached op.reply 1 s001"
        assert channel.next() is Seen.CLOSED  # "ack s001" has no newline yet
        assert channel.rest() == ["ack s001"]

    def test_a_deadline_passed_is_a_timeout(self, pipe: tuple[int, int]) -> None:
        channel = ChannelReader(pipe[0], deadline=time.monotonic() - 1)
        assert channel.next() is Seen.TIMEOUT


class TestTheLife:
    def test_a_reached_point_is_a_failpoint_kill_and_later_acks_still_count(
        self, pipe: tuple[int, int], tmp_path: Path
    ) -> None:
        channel = _channel(
            pipe, b"ready\ninvoke s001\nreached op.after_effect 1 s001\nack s001 d1\n"
        )
        watch, events, history = _watch(tmp_path)
        watch.follow(channel, timed=False)
        assert watch.state is LifeState.FAILPOINT and watch.killed == "failpoint"
        assert watch.reached == "op.after_effect 1 s001" and watch.ready_ms is not None
        assert [r["type"] for r in _records(history)] == ["invoke"]
        watch.after_kill(channel, 4242, Life())
        assert [(r["type"], r["op"]) for r in _records(history)] == [
            ("invoke", "s001"),
            ("ok", "s001"),
        ]
        kill = _records(events)[-1]
        assert (kill["event"], kill["how"], kill["at"]) == (
            "kill",
            "failpoint",
            "op.after_effect 1 s001",
        )

    @pytest.mark.parametrize(
        ("timed", "state"), [(True, LifeState.TIMED), (False, LifeState.FAILPOINT)]
    )
    def test_the_exit_hold_point_ends_a_timed_life_only_as_timed(
        self, pipe: tuple[int, int], tmp_path: Path, timed: bool, state: LifeState
    ) -> None:
        channel = _channel(pipe, b"ready\nreached agent.before_exit 1\n")
        watch, _, _ = _watch(tmp_path)
        watch.follow(channel, timed=timed)
        assert watch.state is state

    def test_a_closed_channel_is_an_exit_and_the_aimed_signal_makes_it_timed(
        self, pipe: tuple[int, int], tmp_path: Path
    ) -> None:
        channel = _channel(pipe, b"ready\n")
        watch, _, _ = _watch(tmp_path)
        watch.follow(channel, timed=True)
        seen = [(watch.state, watch.killed)]
        watch.on(Seen.AIMED_SIGNAL)
        seen.append((watch.state, watch.killed))
        assert seen == [(LifeState.EXITED, None), (LifeState.TIMED, "timed")]

    def test_a_change_the_table_does_not_list_is_refused(self, tmp_path: Path) -> None:
        watch, _, _ = _watch(tmp_path)
        watch.on(Seen.TIMEOUT)
        assert watch.killed == "timeout"
        with pytest.raises(KeyError):
            watch.on(Seen.CLOSED)  # a life already killed does not exit again


def test_a_trial_has_its_time_for_each_life_its_kills_make() -> None:
    """Three planned kills (a failpoint and two timers) make four lives: four times the
    time; a lost reply is no kill, and a crash-free trial has its time once."""
    killed = CrashSchedule(
        (
            Life(failpoints="op.reply@3=kill"),
            Life(kill_after_ms=900),
            Life(failpoints="tool.received@1=lost-reply", kill_after_ms=400),
            Life(),
        )
    )
    assert time_limit(60, killed) == 240
    assert time_limit(60, CrashSchedule((Life(failpoints="op.reply@1=lost-reply"),))) == 60
    assert time_limit(60, CrashSchedule()) == 60
