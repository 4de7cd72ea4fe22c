"""The self-check hands every stage of every broken runtime to its runner at once, as one
batch each (the pool runs them side by side), each stopped once the runtime is caught
as expected; the rows come back in the plan's order, from each check's own batches."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from harness.agent.broken import BROKEN_RUNTIMES
from harness.chaos import selfcheck
from harness.chaos.campaign import Batch, CampaignConfig
from harness.chaos.schedule import CrashSchedule
from harness.chaos.selfcheck import BrokenCheck, Stage, run_self_check
from harness.chaos.trial import TrialResult, TrialSpec
from harness.check.invariants import Verdict
from harness.report.model import SelfCheckRow


def _result(runtime: str, failed: str | None = None) -> TrialResult:
    verdict = Verdict(failed or "I1", "", "fail" if failed else "pass")
    spec = TrialSpec("a.toml", 1, CrashSchedule(()), runtime)
    return TrialResult(spec, Path("t"), (verdict,), 1, 0, (), (), 1.0)


class TestRunner:
    def test_every_stage_is_one_batch_of_one_run(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Both checks' stages go to the runner in one call, each stopped when its runtime
        is caught as expected, and the rows are built from each check's own batches."""
        config = CampaignConfig(tmp_path, ("a.toml", "b.toml"), 1)
        checks = [
            BrokenCheck(
                "replay-success",
                BROKEN_RUNTIMES["replay-success"],
                "sigkill",
                (Stage("self-check replay-success (without x)", ("a.toml",)),),
                Stage("self-check replay-success", ("a.toml", "b.toml")),
            ),
            BrokenCheck(
                "retry-failed",
                BROKEN_RUNTIMES["retry-failed"],
                "sigkill",
                not_applicable="it needs a step that fails for good",
            ),
            BrokenCheck(
                "wrong-snapshot",
                BROKEN_RUNTIMES["wrong-snapshot"],
                "sigkill",
                catch=Stage("self-check wrong-snapshot", ("b.toml",)),
            ),
        ]
        monkeypatch.setattr(selfcheck, "plan_self_check", lambda config: checks)
        monkeypatch.setattr(selfcheck, "_mutation_rows", lambda config, passing: [])
        calls: list[list[Batch]] = []

        def run(
            config: CampaignConfig,
            title: str,
            batches: Sequence[Batch],
            *,
            completed: list[TrialResult],
            on_done: Callable[[int, list[TrialResult]], None] | None = None,
        ) -> list[list[TrialResult]]:
            calls.append(list(batches))
            ran = [
                [_result(batches[0].config.runtime)],
                [_result(batches[1].config.runtime, "I1")],
                [_result(batches[2].config.runtime, "I5")],
            ]
            assert on_done is not None
            for n in reversed(range(len(ran))):  # in any order: the rows stay in the plan's
                on_done(n, ran[n])
            return ran

        rows: list[SelfCheckRow] = []
        run_self_check(config, rows, [], [], run)
        (batches,) = calls
        assert [(b.config.runtime, b.config.scenarios) for b in batches] == [
            ("replay-success", ("a.toml",)),
            ("replay-success", ("a.toml", "b.toml")),
            ("wrong-snapshot", ("b.toml",)),
        ]
        assert all(b.config.random_trials == 0 and b.config.model is None for b in batches)
        stop = batches[0].stop
        assert stop is not None
        assert stop(_result("replay-success", "I1"))
        assert not stop(_result("replay-success", "I2"))
        assert [row.name for row in rows] == ["replay-success", "retry-failed", "wrong-snapshot"]
        assert [(row.trials, row.sigkill_trials) for row in rows] == [(1, 1), (0, 0), (1, 0)]
        assert rows[0].caught is not None and rows[2].caught is not None
        assert rows[1].not_applicable is not None
