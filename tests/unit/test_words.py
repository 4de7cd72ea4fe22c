"""Counts and durations in words: one noun in the singular, any other count in the plural."""

from __future__ import annotations

import pytest

from harness.words import duration, many


@pytest.mark.parametrize(
    ("count", "noun", "plural", "words"),
    [
        (1, "unknown outcome", "", "1 unknown outcome"),
        (2, "unknown outcome", "", "2 unknown outcomes"),
        (0, "scheduled fault", "", "0 scheduled faults"),
        (1, "scheduled fault", "", "1 scheduled fault"),
        (1, "life", "lives", "1 life"),
        (3, "life", "lives", "3 lives"),
    ],
)
def test_many(count: int, noun: str, plural: str, words: str) -> None:
    assert many(count, noun, plural) == words


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(0, "0 s"), (42.4, "42 s"), (59.6, "1 min 0 s"), (185, "3 min 5 s"), (7620, "2 h 7 min")],
)
def test_duration(seconds: float, words: str) -> None:
    """A duration in the largest units a person reads at a glance."""
    assert duration(seconds) == words
