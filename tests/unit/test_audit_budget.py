"""The audit's budget line: the pace it measured, and what a budget holds at that pace."""

from __future__ import annotations

from harness.commands.audit import NIGHTLY_SHARDS, NIGHTLY_TRIALS, budget_line


def test_the_line_says_the_pace_what_the_budget_holds_and_what_the_nightly_needs() -> None:
    # 10 trials/s; a 20-minute budget of which the campaign gets three quarters.
    line = budget_line(100, 10.0, 20, 0.75)
    assert "pace 10.0 trials/s" in line
    assert "holds about 9,000 trials" in line  # 10/s * 1200 s * 0.75
    per_shard_min = NIGHTLY_TRIALS / NIGHTLY_SHARDS / 10 / 60 / 0.75  # 55.6
    assert f"need a budget of {per_shard_min:.0f} min a shard" in line


def test_no_completed_trial_gives_no_rate() -> None:
    assert "no rate" in budget_line(0, 5.0, 20, 0.75)
    assert "no rate" in budget_line(10, 0.0, 20, 0.75)
