"""How many crash states a campaign judges a trial's power cuts over, and their sub-trials."""

from __future__ import annotations

from typing import Any

import pytest

from harness.chaos.campaign import crash_state_specs, crash_states_to_judge
from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.trial import TrialSpec

KILL = "op.after_effect@2=kill"


def _spec(*cuts: str) -> TrialSpec:
    lives = tuple(Life(KILL, after_death=cut) for cut in cuts)
    return TrialSpec("s.toml", 7, CrashSchedule(lives), label="op.after_effect@2+power-loss")


def _cut(states: int, *, landed: bool = True, model: str = "ordered") -> dict[str, Any]:
    return {"fault": "power-loss:drop", "landed": landed, "crash_states": {model: states}}


class TestCrashStatesToJudge:
    @pytest.mark.parametrize(
        ("cuts", "wanted", "judged"),
        [
            ([_cut(2)], 3, 2),  # one cut of two states: both, no state again
            ([_cut(12)], 3, 3),  # more than asked: as many as asked
            ([_cut(1)], 3, 1),  # nothing unsynced to choose from: the cut alone
            ([_cut(5, landed=False)], 3, 1),  # a cut that did not land has no states
            ([_cut(12)], 1, 1),  # one asked for: the cut alone
            ([_cut(1), _cut(1)], 3, 1),
            ([_cut(1), _cut(2)], 3, 3),  # two cuts: state k of each, all asked for
        ],
    )
    def test_a_dropping_cut_is_judged_over_the_states_it_has(
        self, cuts: list[dict[str, Any]], wanted: int, judged: int
    ) -> None:
        spec = _spec(*("power-loss:drop" for _ in cuts))
        assert crash_states_to_judge(spec, cuts, wanted) == judged

    def test_a_cut_that_tears_is_a_state_of_its_own(self) -> None:
        assert crash_states_to_judge(_spec("power-loss:tear:0.5:3"), [_cut(9)], 3) == 1

    def test_the_states_are_counted_in_the_model_asked_for(self) -> None:
        cut = {"landed": True, "crash_states": {"ordered": 1, "weak": 9}}
        spec = _spec("power-loss:drop")
        assert crash_states_to_judge(spec, [cut], 3) == 1
        assert crash_states_to_judge(spec, [cut], 3, "weak") == 3


class TestCrashStateSpecs:
    def test_each_sub_trial_judges_one_state_of_every_cut(self) -> None:
        spec = _spec("power-loss:drop", "power-loss:drop")
        first, *subs = crash_state_specs(spec, 3, "weak")
        assert first is spec and spec.crash_state is None
        assert [s.crash_state for s in subs] == [1, 2]
        assert [s.label for s in subs] == [f"{spec.label}+state-{k}" for k in (1, 2)]
        assert all(life.after_death == "power-loss:state:2:weak" for life in subs[1].schedule.lives)
        assert all(life.failpoints == KILL for life in subs[1].schedule.lives)
        assert "power-loss:state:1:weak" in subs[0].replay_command()

    def test_a_schedule_cuts_drop_only_when_every_cut_drops(self) -> None:
        assert _spec("power-loss:drop").schedule.cuts_drop
        assert not _spec("power-loss:drop", "power-loss:tear-sector").schedule.cuts_drop
        assert not CrashSchedule((Life(KILL),)).cuts_drop
