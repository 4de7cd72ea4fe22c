"""Pause schedules as data: where the exhaustive trials pause, how long, and how a life
says it (the processes are in tests/integration/test_pause.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.chaos.schedule import (
    PAUSE_HOLD_MS,
    CrashSchedule,
    Life,
    black_box_schedules,
    exhaustive_schedules,
    not_applicable,
    pause_schedules,
)
from harness.chaos.supervisor import time_limit
from harness.check.evidence import TrialEvidence


class TestPauseSchedules:
    def test_the_first_intent_and_the_middle_reply_are_paused(self) -> None:
        """A pause at the first op.after_intent and at the middle op.reply, held 200 ms."""
        found = dict(
            pause_schedules({"op.after_intent": 5, "op.reply": 5}, ("op.after_intent", "op.reply"))
        )
        assert found == {
            "op.after_intent@1+pause": CrashSchedule(
                (Life(f"op.after_intent@1=pause({PAUSE_HOLD_MS})"),)
            ),
            "op.reply@3+pause": CrashSchedule((Life(f"op.reply@3=pause({PAUSE_HOLD_MS})"),)),
        }

    def test_a_point_never_hit_is_not_paused(self) -> None:
        assert list(pause_schedules({"op.reply": 0}, ("op.after_intent", "op.reply"))) == []

    def test_every_runtime_and_black_box_gets_its_pauses(self) -> None:
        """Our runtime's exhaustive trials pause twice, a black box's once, at its first reply."""
        ours = [label for label, _ in exhaustive_schedules({"op.after_intent": 4, "op.reply": 4})]
        assert [label for label in ours if "pause" in label] == [
            "op.after_intent@1+pause",
            "op.reply@2+pause",
        ]
        theirs = [label for label, _ in black_box_schedules({"op.reply": 3, "tool.received": 3})]
        assert [label for label in theirs if "pause" in label] == ["op.reply@1+pause"]


class TestPauseLife:
    def test_a_pause_is_its_own_fault_not_a_kill(self) -> None:
        """A pause is counted as a pause: no kill, its hold in the trial's time."""
        failpoint = CrashSchedule((Life("op.after_intent@2=pause(300)"),))
        timer = CrashSchedule.from_json('[{"kill_after_ms":1.5,"pause_ms":400}]')
        for schedule, hold in ((failpoint, 300), (timer, 400)):
            assert schedule.fault_kinds == {"pause"}
            assert schedule.kills == 0
            assert schedule.pauses == (hold,)
            assert time_limit(10.0, schedule) == pytest.approx(20.0 + hold / 1000)

    def test_the_hold_is_read_for_the_hit_the_agent_names(self) -> None:
        life = Life("op.after_intent@2=pause(300),op.reply@4=pause(700)")
        assert life.hold_ms("op.after_intent 2 s002") == 300
        assert life.hold_ms("op.reply 4 s004") == 700
        assert Life(kill_after_ms=1.0, pause_ms=250).hold_ms("timer invoke s003") == 250

    @pytest.mark.parametrize(
        "item",
        [
            '{"pause_ms":300}',
            '{"kill_after_ms":1,"pause_ms":-1}',
            '{"kill_after_ms":1,"pause_ms":true}',
        ],
        ids=["no-moment", "negative", "not-a-number"],
    )
    def test_a_bad_random_pause_is_refused(self, item: str) -> None:
        """pause_ms is a whole number of ms beside a kill_after_ms, else refused by name."""
        with pytest.raises(ValueError, match="pause_ms"):
            CrashSchedule.from_json(f"[{item}]")

    def test_it_replays_as_written(self) -> None:
        text = '[{"kill_after_ms":1.5,"aim":"invoke s003","pause_ms":400}]'
        assert CrashSchedule.from_json(text).to_json() == text

    def test_it_applies_to_every_runtime(self) -> None:
        from harness.adapters import get_adapter

        for runtime in ("real", "cmd:python agent.py"):
            assert not_applicable("pause", get_adapter(runtime)) is None


class TestPausedHistory:
    @staticmethod
    def _history(tmp_path: Path, lines: list[dict[str, object]]) -> TrialEvidence:
        (tmp_path / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in lines))
        return TrialEvidence(tmp_path, None)

    def test_a_call_answered_beside_a_paused_life_is_not_left_unknown(self, tmp_path: Path) -> None:
        """Life 1 stopped in s001, life 2 took over and told the user ok: life 1's end, with
        s001 still in flight, does not turn the user's last word into info."""
        ev = self._history(
            tmp_path,
            [
                {"type": "invoke", "op": "s001", "life": 1},
                {"type": "invoke", "op": "s001", "life": 2},
                {"type": "ok", "op": "s001", "life": 2},
                {"type": "info", "op": "s001", "life": 1, "why": "in flight when the life ended"},
            ],
        )
        assert ev.last_report == {"s001": "ok"}
        assert ev.last_told == {"s001": ("ok", 2)}

    def test_a_call_no_other_life_answered_stays_unknown(self, tmp_path: Path) -> None:
        ev = self._history(
            tmp_path,
            [
                {"type": "ok", "op": "s001", "life": 1},
                {"type": "invoke", "op": "s001", "life": 2},
                {"type": "info", "op": "s001", "life": 2, "why": "in flight when the life ended"},
            ],
        )
        assert ev.last_report == {"s001": "info"}
