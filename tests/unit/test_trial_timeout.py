"""A trial's time limit: ``--timeout`` when given, else 60 s, else (for a black box) a
multiple of its own crash-free run, measured before any trial."""

from __future__ import annotations

import argparse

import pytest

from harness.commands import options
from harness.commands.options import (
    BLACK_BOX_TIMES,
    DEFAULT_TIMEOUT_S,
    check_black_box,
    positive_seconds,
)

MINI = "tests/data/scenarios/mini.toml"


def test_a_runtime_of_ours_gets_the_default_or_what_is_asked() -> None:
    assert check_black_box("real", MINI, "fork") == DEFAULT_TIMEOUT_S
    assert check_black_box("real", MINI, "fork", 7.5) == 7.5


@pytest.mark.parametrize(("took", "expected"), [(2.0, DEFAULT_TIMEOUT_S), (40.0, 40.0 * 5)])
def test_a_black_box_gets_a_multiple_of_its_crash_free_run(
    monkeypatch: pytest.MonkeyPatch, took: float, expected: float
) -> None:
    import harness.blackbox.preflight as preflight

    asked: list[float] = []

    def measured(runtime: str, scenario: str, *, launch: str, timeout_s: float) -> float:
        asked.append(timeout_s)
        return took

    monkeypatch.setattr(preflight, "check_agent", measured)
    assert BLACK_BOX_TIMES == 5
    assert check_black_box("cmd:python3 agent.py", MINI, "fork") == expected
    assert check_black_box("cmd:python3 agent.py", MINI, "fork", 9.0) == 9.0  # asked: kept
    assert asked == [preflight.PREFLIGHT_TIMEOUT_S, 9.0]  # the crash-free run within it too


@pytest.mark.parametrize("text", ["0", "-1", "inf", "nan", "soon"])
def test_a_time_limit_is_a_positive_number_of_seconds(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        positive_seconds(text)
    assert positive_seconds("90") == 90.0
    assert options.positive_seconds("0.5") == 0.5
