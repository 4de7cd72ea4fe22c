"""A pause: a life stopped inside a call, the next one started beside it, then resumed.

The runtime's journal lock is what stands between the two: the life that takes over
finds the journal held by the stopped process and is refused before any tool runs, so
the trial passes; a runtime that does not take the lock (``no-journal-lock``) recovers
the stopped call beside it, and both lives run it. The evidence is the supervisor's
(its events, the take-over's exit status and stderr) and the world's ledger.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.exits import AGENT_REFUSED
from tests.integration.test_blackbox import AGENT, PHONE, harness

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

AT_AN_INTENT = '[{"failpoints":"op.after_intent@3=pause(300)"}]'
AT_A_RANDOM_MOMENT = '[{"kill_after_ms":0.05,"aim":"op.after_intent s003","pause_ms":300}]'


def _trial(tmp_path: Path, schedule: str, runtime: str = "real") -> tuple[int, Path]:
    reports = tmp_path / "reports"
    ran = harness(
        "trial",
        PHONE,
        "--seed",
        "7",
        "--runtime",
        runtime,
        "--schedule",
        schedule,
        "--reports",
        str(reports),
    )
    assert ran.returncode in (0, 1), ran.stdout + ran.stderr
    (folder,) = reports.glob("*-trial/trial")
    return ran.returncode, folder


def _events(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "events.jsonl").read_text().splitlines()
    kinds = ("spawn", "pause", "resume", "exit")
    return [e for e in map(json.loads, lines) if e["event"] in kinds]


def _verdicts(folder: Path) -> dict[str, str]:
    return {v["invariant"]: v["status"] for v in json.loads((folder / "verdicts.json").read_text())}


@pytest.mark.parametrize("schedule", [AT_AN_INTENT, AT_A_RANDOM_MOMENT], ids=["failpoint", "timer"])
def test_the_life_that_takes_over_is_refused_while_the_first_is_stopped(
    tmp_path: Path, schedule: str
) -> None:
    """Life 1 is seen stopped; life 2 starts beside it and exits refused, naming life 1's
    pid as the journal's holder; life 1 is resumed and finishes; every invariant holds."""
    status, folder = _trial(tmp_path, schedule)
    events = _events(folder)
    order = [(e["event"], e["life"]) for e in events]
    assert order == [
        ("spawn", 1),
        ("pause", 1),
        ("spawn", 2),
        ("exit", 2),
        ("resume", 1),
        ("exit", 1),
    ], order
    pause = events[1]
    assert pause["stopped"] and pause["hold_ms"] == 300
    first_pid = events[0]["pid"]
    assert events[3]["returncode"] == AGENT_REFUSED
    assert events[3]["journal_size"] == events[2]["journal_size"]  # it wrote nothing
    said = (folder / "agent-2.stderr").read_text()
    assert f"journal is held by another live process (pid {first_pid})" in said
    assert events[5]["returncode"] == 0
    lives = json.loads((folder / "lives.json").read_text())
    assert [life["life"] for life in lives] == [2, 1]  # in the order they ended
    assert status == 0, _verdicts(folder)
    assert set(_verdicts(folder).values()) == {"pass"}


def test_a_runtime_that_drops_the_lock_runs_the_stopped_call_twice(tmp_path: Path) -> None:
    """Without the lock, life 2 recovers the call life 1 is stopped in and finishes the
    task; life 1, resumed, makes its effect and runs every later step again: I1 catches
    it. The same runtime passes when life 1 is killed there instead."""
    _, folder = _trial(tmp_path / "paused", AT_AN_INTENT, runtime="no-journal-lock")
    events = _events(folder)
    assert [(e["event"], e["life"]) for e in events][2:5] == [
        ("spawn", 2),
        ("exit", 2),
        ("resume", 1),
    ]
    assert events[3]["returncode"] == 0  # it took the task over and finished it
    verdicts = _verdicts(folder)
    assert verdicts["I1"] == "fail" and verdicts["F"] == "pass", verdicts
    killed = '[{"failpoints":"op.after_intent@3=kill"}]'
    status, folder = _trial(tmp_path / "killed", killed, runtime="no-journal-lock")
    assert status == 0, _verdicts(folder)


def test_a_black_box_is_paused_in_a_call_and_a_second_life_runs_beside_it(
    tmp_path: Path,
) -> None:
    """The plain example agent, stopped in its first call with its effect made: another
    life of it runs the task to its end, then the first goes on and runs it again."""
    status, folder = _trial(
        tmp_path, '[{"failpoints":"op.reply@1=pause(300)"}]', runtime=f"cmd:python {AGENT}"
    )
    events = _events(folder)
    assert [(e["event"], e["life"]) for e in events] == [
        ("spawn", 1),
        ("pause", 1),
        ("spawn", 2),
        ("exit", 2),
        ("resume", 1),
        ("exit", 1),
    ]
    assert events[1]["stopped"]
    verdicts = _verdicts(folder)
    assert status == 1 and verdicts["I8"] == "fail" and verdicts["F"] == "pass", verdicts
