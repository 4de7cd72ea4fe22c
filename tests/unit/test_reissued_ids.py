"""Re-issued ids: each names its plan call and life, and folds back to the call by id alone."""

from __future__ import annotations

import pytest

from harness.agent.plan import plan_id, reissued_id
from harness.failpoints import _as_first_issued
from harness.world.store import step_of


class TestReissuedIds:
    def test_the_first_life_issues_the_plans_ids(self) -> None:
        """Life 1 issues ``s003`` itself; a later life ``s003~<life>``."""
        assert reissued_id("s003", 1) == "s003"
        assert [reissued_id("s003", life) for life in (2, 3, 8)] == ["s003~2", "s003~3", "s003~8"]

    @pytest.mark.parametrize(
        ("op_id", "call"),
        [
            ("s003", "s003"),
            ("s003~2", "s003"),
            ("s003~2.redo", "s003.redo"),
            ("s003~2.check", "s003.check"),
            ("s003.redo.redo", "s003.redo.redo"),
            ("step~x", "step~x"),
            ("my~op~", "my~op~"),
        ],
    )
    def test_plan_id_folds_only_a_life_number(self, op_id: str, call: str) -> None:
        """A ``~<digits>`` after the plan's id is dropped; any other id is left as it is."""
        assert plan_id(op_id) == call

    @pytest.mark.parametrize("op_id", ["s003", "s003~2", "s003.redo", "s003~4.redo.check"])
    def test_every_id_of_a_step_is_of_that_step(self, op_id: str) -> None:
        """The world's ``step_of`` puts a re-issued call, its redoes and checks under its step."""
        assert step_of(op_id) == "s003"

    def test_an_aim_at_a_call_is_an_aim_at_its_reissues(self) -> None:
        """``op.after_intent s004~2`` is aimed at as ``op.after_intent s004``; others unchanged."""
        assert _as_first_issued("op.after_intent s004~2") == "op.after_intent s004"
        assert _as_first_issued("invoke s004~3") == "invoke s004"
        assert _as_first_issued("invoke s004") == "invoke s004"
        assert _as_first_issued("ready") == "ready"
        assert _as_first_issued("invoke s004~x") == "invoke s004~x"
