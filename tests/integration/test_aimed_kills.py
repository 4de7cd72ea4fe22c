"""Random-time kills aimed at a call: timed from the agent's own invoke of it.

The agent arms a kernel timer when it tells the supervisor it invokes the op
aimed at (``HARNESS_KILL_AIM``); the timer's SIGALRM at its default action
ends the process as SIGKILL does, wherever it then is. These trials run the
real agent and read what the supervisor recorded of each death.
"""

from __future__ import annotations

import json

from harness.chaos.trial import Golden, TrialResult
from harness.failpoints import AIMED_KILL_SIGNAL, EXIT_HOLD_POINT
from tests.integration.conftest import TrialRunner


def _lines(result: TrialResult, name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (result.directory / name).read_text().splitlines()]


def _kills(result: TrialResult) -> list[dict[str, object]]:
    return [e for e in _lines(result, "events.jsonl") if e["event"] == "kill"]


def test_a_kill_aimed_at_a_call_lands_inside_it(run_mini: TrialRunner, mini_golden: Golden) -> None:
    """Killed at once after invoking the second call: it is in flight, and recovery copes."""
    op = mini_golden.calls[1].op
    result = run_mini(json.dumps([{"kill_after_ms": 0, "aim": f"invoke {op}"}]))
    kill = _kills(result)[0]
    assert (kill["how"], kill["since"], kill["after_ms"]) == ("timed", f"invoke {op}", 0)
    assert kill["at"] is None  # not held at any point: the timer struck where the agent was
    exits = [e for e in _lines(result, "events.jsonl") if e["event"] == "exit"]
    assert exits[0]["returncode"] == -AIMED_KILL_SIGNAL  # the timer's own signal
    first_life = [(h["type"], h["op"]) for h in _lines(result, "history.jsonl") if h["life"] == 1]
    assert first_life[-2:] == [("invoke", op), ("info", op)]  # in flight when the life ended
    assert result.status == "pass", result.verdicts


def test_an_aim_at_a_call_never_made_is_killed_at_the_exit(run_mini: TrialRunner) -> None:
    """No invoke of the op aimed at: the life waits at its last point and is killed there."""
    result = run_mini('[{"kill_after_ms": 0, "aim": "op.after_intent s999"}]')
    kill = _kills(result)[0]
    assert kill["how"] == "timed"
    assert str(kill["at"]).startswith(EXIT_HOLD_POINT)
    assert result.status == "pass", result.verdicts


def test_a_kill_timed_from_a_point_lands_in_the_window_it_opens(
    run_mini: TrialRunner, mini_golden: Golden
) -> None:
    """Timed from the first call's reply (its effect committed): the kill lands before
    its finish is written, in the effect-finish window, and the restart copes."""
    op = mini_golden.calls[0].op
    result = run_mini(json.dumps([{"kill_after_ms": 0, "aim": f"op.reply {op}"}]))
    assert result.windows == ("effect-finish",)
    assert _kills(result)[0]["since"] == f"op.reply {op}"
    assert result.status == "pass", result.verdicts
