"""``trial --crash-states N``: one power-loss trial judged over N crash states of its cut."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from harness.chaos import observer
from harness.exits import EXIT_FAILED
from tests.conftest import run_harness
from tests.integration.test_cli import MINI

pytestmark = pytest.mark.skipif(
    observer.unavailable() is not None or not sys.platform.startswith("linux"),
    reason=f"no observer: {observer.unavailable()}",
)

UNSYNCED = '[{"failpoints":"op.before_intent@3=kill","after_death":"power-loss:drop"}]'
"""Killed before the third call: the first two calls' records were appended, never synced."""
_STATE = re.compile(r"^state (\d+) of \d+: (PASS|FAIL|UNKNOWN)", re.MULTILINE)


def _states(stdout: str) -> list[tuple[int, str, str]]:
    """(state, status, replay command) of each sub-trial printed."""
    replays = re.findall(r"^  replay: (.+)$", stdout, re.MULTILINE)
    found = _STATE.findall(stdout)
    assert len(replays) == len(found), stdout
    return [(int(n), status, replay) for (n, status), replay in zip(found, replays, strict=True)]


def test_eight_states_eight_verdicts_each_replayable_alone(tmp_path: Path) -> None:
    """A runtime that never fsyncs its appends: the states that keep them all pass, those
    that lose any fail; each state's replay command, run alone, reaches its verdict."""
    done = run_harness(
        "trial", MINI, "--seed", "1", "--runtime", "pwritev-no-fsync", "--schedule", UNSYNCED,
        "--crash-states", "8", "--reports", str(tmp_path),
    )  # fmt: skip
    states = _states(done.stdout)
    assert [n for n, _, _ in states] == list(range(8)), done.stdout
    assert states[0][1] == "FAIL"  # state 0 loses every unsynced append, as drop does
    assert {status for _, status, _ in states} == {"PASS", "FAIL"}, done.stdout
    assert done.returncode == EXIT_FAILED
    for n, status, replay in (states[0], next(s for s in states if s[1] == "PASS")):
        assert f"power-loss:state:{n}" in replay
        args = shlex.split(replay)
        alone = run_harness(*args[args.index("trial") :], "--reports", str(tmp_path))
        assert alone.stdout.rstrip().splitlines()[-1] == status, alone.stdout


def test_fewer_states_than_asked_runs_each_once(tmp_path: Path) -> None:
    """The real runtime killed between a write and its fsync: few states, each run, all
    holding."""
    schedule = '[{"failpoints":"journal.before_fsync@4=kill","after_death":"power-loss:drop"}]'
    done = run_harness(
        "trial", MINI, "--seed", "1", "--schedule", schedule, "--crash-states", "50",
        "--reports", str(tmp_path),
    )  # fmt: skip
    states = _states(done.stdout)
    assert 1 < len(states) < 50 and "crash states in all: each is run" in done.stdout
    assert {status for _, status, _ in states} == {"PASS"}, done.stdout
    assert done.returncode == 0


def test_a_schedule_without_power_loss_is_refused(tmp_path: Path) -> None:
    done = run_harness(
        "trial", MINI, "--seed", "1", "--schedule", '[{"failpoints":"op.after_effect@1=kill"}]',
        "--crash-states", "4", "--reports", str(tmp_path),
    )  # fmt: skip
    assert done.returncode != 0 and "no power loss" in done.stderr


def test_with_two_cuts_every_state_asked_for_is_run(tmp_path: Path) -> None:
    """Each cut takes state k of its own: no count of the whole, so all N are run."""
    cut = '{"failpoints":"journal.before_fsync@%d=kill","after_death":"power-loss:drop"}'
    schedule = f"[{cut % 4},{cut % 3}]"
    done = run_harness(
        "trial", MINI, "--seed", "1", "--schedule", schedule, "--crash-states", "6",
        "--reports", str(tmp_path),
    )  # fmt: skip
    states = _states(done.stdout)
    assert [n for n, _, _ in states] == list(range(6)), done.stdout
    assert done.stdout.count("  cut 2 ") == 6
