"""The self-check hands each stage of a broken runtime to its runner as catching: the bar
then counts the trials that fail as caught, which is the point, not as failed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.agent.broken import BROKEN_RUNTIMES
from harness.chaos.campaign import CampaignConfig
from harness.chaos.selfcheck import BrokenCheck, Stage, _run_check
from harness.chaos.trial import TrialResult, TrialSpec


class TestRunner:
    def test_every_stage_is_run_as_catching(self, tmp_path: Path) -> None:
        """The stages a broken runtime must escape and the one that must catch it are each
        run with catching=True."""
        calls: list[tuple[str, bool]] = []

        def run(
            config: CampaignConfig,
            title: str,
            results: list[TrialResult] | None = None,
            *,
            completed: list[TrialResult] | None = None,
            stop: Callable[[TrialResult], bool] | None = None,
            select: Callable[[TrialSpec], bool] | None = None,
            catching: bool = False,
        ) -> list[TrialResult]:
            calls.append((title, catching))
            return []

        escape = (Stage("self-check replay-success (without x)", ("a.toml",)),)
        check = BrokenCheck(
            "replay-success",
            BROKEN_RUNTIMES["replay-success"],
            "sigkill",
            escape,
            Stage("self-check replay-success", ("a.toml",)),
        )
        _run_check(CampaignConfig(tmp_path, ("a.toml",), 1), check, [], run)
        assert calls == [
            ("self-check replay-success (without x)", True),
            ("self-check replay-success", True),
        ]
