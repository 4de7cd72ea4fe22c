"""The console prints data as written: a replay line pasted back must run the same trial."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.trial import TrialResult, TrialSpec
from harness.check.invariants import Verdict
from harness.report.console import CampaignSummary, print_campaign, print_trial


def _failed(evidence: str) -> TrialResult:
    life = Life("op.after_finish@2=kill", after_death="sector:zero:0.5")
    spec = TrialSpec("scenarios/browser_form.toml", 7, CrashSchedule((life,)), label="x")
    verdict = Verdict("I9", "journal integrity", "fail", (evidence,))
    return TrialResult(spec, Path("/nowhere/[bold]x"), (verdict,), 1, 1, (), (), 1.0)


@pytest.mark.parametrize("show", ["campaign", "trial"])
def test_replay_lines_and_evidence_are_not_markup_or_emoji(
    show: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sector:zero:`` is no emoji code and ``[a1, b2]`` no style tag: both print as written."""
    result = _failed("ops [a1, b2] misread at :zero: offset 512")
    if show == "campaign":
        print_campaign(CampaignSummary([result]), "real")
    else:
        print_trial(result)
    out = capsys.readouterr().out
    assert "ops [a1, b2] misread at :zero: offset 512" in out
    if show == "campaign":
        assert '"after_death":"sector:zero:0.5"' in out.replace("\n", "")
    else:
        assert "then sector:zero:0.5" in out and "folder /nowhere/[bold]x;" in out
