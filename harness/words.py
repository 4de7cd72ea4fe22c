"""Counts in words: ``many(1, "kill")`` is "1 kill", ``many(2, "kill")`` "2 kills";
durations too: ``duration(185)`` is "3 min 5 s"."""

from __future__ import annotations

__all__ = ["duration", "many"]


def many(count: int, noun: str, plural: str = "") -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is one (``plural``
    for a noun whose plural is not the noun and an "s"); words after the noun's last
    word stay as they are: ``many(2, "unknown outcome")`` is "2 unknown outcomes"."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def duration(seconds: float) -> str:
    """``seconds`` in words a person reads at a glance: ``42 s``, ``3 min 5 s``, ``2 h 7 min``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
