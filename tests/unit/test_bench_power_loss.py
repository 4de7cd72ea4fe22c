"""Figure 10 of the benchmarks: a power-loss trial over 1, 4 and 16 crash states, against a
kill-only trial. Only that the figures are measured and written as documented is checked,
never a speed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.bench.run import CRASH_STATES, QUICK, STEPS, Measurements, bench_power_loss
from harness.chaos import observer


def test_the_power_loss_figure(tmp_path: Path) -> None:
    """A trial cut and judged over 1, 4 and 16 crash states against the kill alone, every
    sub-trial passed (a failure there breaks the measurement), its scratch removed."""
    if observer.unavailable() is not None:
        pytest.skip(f"no observer: {observer.unavailable()}")
    measured = Measurements()
    bench_power_loss(QUICK, tmp_path, measured)
    assert CRASH_STATES == (1, 4, 16) and "crash states" in STEPS
    assert [figure.name for figure in measured.figures] == [
        "10 power-loss trial, 1 crash state / kill only",
        "10 power-loss trial, 4 crash states / kill only",
        "10 power-loss trial, 16 crash states / kill only",
    ]
    for figure in measured.figures:
        assert figure.subject > 0 and figure.baseline > 0  # measured, never asserted as a speed
        assert figure.target is None
    samples = measured.series["power_loss_trial_ms"]
    assert sorted(samples) == ["kill", "states-1", "states-16", "states-4"]
    assert all(len(values) == QUICK.power_loss_repeats for values in samples.values())
    (note,) = [n for n in measured.notes if n.startswith("figure 10")]
    assert re.fullmatch(
        r"figure 10: the cut after op\.after_effect@3=kill has \d+ crash states", note
    )
    assert list(tmp_path.iterdir()) == []
