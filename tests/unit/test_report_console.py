"""The console prints data as written: a replay line pasted back must run the same trial."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.trial import TrialResult, TrialSpec
from harness.check.invariants import Verdict
from harness.exits import EXIT_OK
from harness.report.console import (
    PROGRESS_LINE_EVERY_S,
    CampaignSummary,
    print_campaign,
    print_headline,
    print_trial,
    progress_bar,
)


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


def _held(label: str, *verdicts: Verdict) -> TrialResult:
    spec = TrialSpec("scenarios/phone_task.toml", 7, CrashSchedule((Life(f"{label}=kill"),)))
    return TrialResult(spec, Path("/nowhere"), verdicts, 2, 1, (), (), 1.0)


def _idle(key: str) -> Verdict:
    return Verdict(key, key, "pass", ("nothing",), applied=False)


def test_the_headline_names_invariants_that_applied_to_no_trial(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A campaign in which I3 and I9 only passed with nothing to judge says so; I1 held."""
    results = [
        _held("op.after_intent@1", Verdict("I1", "i1", "pass"), _idle("I3"), _idle("I9")),
        _held("op.after_intent@2", _idle("I1"), _idle("I3"), _idle("I9")),
    ]
    print_headline(EXIT_OK, CampaignSummary(results), Path("/runs/x"))
    out = capsys.readouterr().out.replace("\n", "")
    assert out.startswith("PASS: 2 trials")
    assert "; applied to no trial: I3, I9; report /runs/x/index.html" in out
    results.append(
        _held("op.after_intent@3", _idle("I1"), Verdict("I3", "i3", "pass"), _idle("I9"))
    )
    print_headline(EXIT_OK, CampaignSummary(results), Path("/runs/x"))
    assert "applied to no trial: I9; report" in capsys.readouterr().out.replace("\n", "")


def test_the_invariants_table_and_a_trial_show_what_applied(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The campaign's table says to how many trials each applied; a trial marks an idle pass."""
    results = [
        _held("op.after_intent@1", Verdict("I2", "i2", "pass"), _idle("I9")),
        _held("op.after_intent@2", _idle("I2"), _idle("I9")),
    ]
    print_campaign(CampaignSummary(results), "real")
    table = capsys.readouterr().out
    i2 = next(line for line in table.splitlines() if "I2 " in line)
    i9 = next(line for line in table.splitlines() if "I9 " in line)
    assert "1 of 2" in i2 and "0 of 2" in i9
    print_trial(results[0])
    out = capsys.readouterr().out
    assert "I9 I9 (nothing to judge)" in out and "I2 i2 (nothing" not in out


class TestProgress:
    def test_a_campaign_bar_counts_failed_trials(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A campaign's bar counts its failed trials as failed."""
        with progress_bar("campaign") as bar:
            bar.planned(3)
            bar.advanced(failed=0)
            bar.advanced(failed=1)
        out = capsys.readouterr().out
        assert "1 failed" in out and "caught" not in out

    def test_a_self_check_bar_counts_caught_trials(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A broken runtime's bar counts its failed trials as caught: that is the point."""
        with progress_bar("self-check replay-success", catching=True) as bar:
            bar.planned(3)
            bar.advanced(failed=1)
            bar.advanced(failed=2)
        out = capsys.readouterr().out
        assert "2 caught" in out and "failed" not in out


class FakeClock:
    """A clock a test moves by hand: no test waits on, or asserts, wall-clock time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TestProgressLines:
    def test_a_line_every_few_seconds_with_done_failed_rate_and_time_left(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Off a terminal, trials that come back sooner than PROGRESS_LINE_EVERY_S after the
        last line print nothing; then one line says done, failed, rate and time left; the
        end of the block prints the last."""
        clock = FakeClock()
        with progress_bar("campaign", clock=clock) as bar:
            bar.planned(100)
            for done in range(1, 21):
                clock.now += 0.5  # 20 trials in 10 s, 2 a second
                bar.advanced(failed=done // 10)
            clock.now += 1
        lines = capsys.readouterr().out.splitlines()
        assert lines == [
            "campaign: 10/100 done, 1 failed, 2.00 trials/s, about 45 s left",
            "campaign: 20/100 done, 2 failed, 2.00 trials/s, about 40 s left",
            "campaign: 20/100 done, 2 failed, 1.82 trials/s, took 11 s",
        ]
        assert PROGRESS_LINE_EVERY_S == 5.0  # the 10 trials between lines above

    def test_before_the_plan_no_time_left(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Trials that come back before the campaign's size is known print no time left."""
        clock = FakeClock()
        with progress_bar("self-check x", catching=True, clock=clock) as bar:
            clock.now += 6
            bar.advanced(failed=1)
        first = capsys.readouterr().out.splitlines()[0]
        assert first == "self-check x: 1 done, 1 caught, 0.17 trials/s"


BOX = "cmd:/tmp/x/.venv/bin/python /tmp/x/plain_python/agent.py"
NO_JOURNAL = ("the runtime under test offers no journal",)


def _box(runtime: str, windows: tuple[str, ...]) -> TrialResult:
    spec = TrialSpec("scenarios/phone_task.toml", 7, CrashSchedule((Life(),)), runtime, "x")
    verdicts = (
        Verdict("I1", "i1", "pass"),
        Verdict("I3", "i3", "not-judged", NO_JOURNAL),
        Verdict("I9", "i9", "not-judged", NO_JOURNAL),
    )
    return TrialResult(spec, Path("/nowhere"), verdicts, 2, 1, windows, (), 1.0)


class TestBlackBox:
    def test_what_needs_a_journal_is_one_line(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A black box's trial names the invariants it offers nothing to in one line with
        the reason, not a line and the reason each; another runtime's keeps a line each."""
        print_trial(_box(BOX, ()))
        out = capsys.readouterr().out
        assert "not-judged I3 I9: the runtime under test offers no journal" in out
        assert out.count("offers no journal") == 1
        print_trial(_box("module:my_agent", ()))
        assert capsys.readouterr().out.count("offers no journal") == 2

    def test_the_kill_windows_are_a_black_box_s(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A black box's campaign lists the windows the harness's servers place a kill in,
        not the journal's (which would only ever count 0); a runtime's lists the journal's."""
        print_campaign(CampaignSummary([_box(BOX, ("after a tool call",))]), BOX)
        out = capsys.readouterr().out
        assert "after a tool call" in out and "after a model answer" in out
        assert "intent-effect" not in out and "during recovery" not in out
        print_campaign(CampaignSummary([_box("real", ())]), "real")
        out = capsys.readouterr().out
        assert "intent-effect" in out and "after a model answer" not in out
