"""Counts in words: ``many(1, "kill")`` is "1 kill", ``many(2, "kill")`` "2 kills"."""

from __future__ import annotations

__all__ = ["many"]


def many(count: int, noun: str, plural: str = "") -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is one (``plural``
    for a noun whose plural is not the noun and an "s"); words after the noun's last
    word stay as they are: ``many(2, "unknown outcome")`` is "2 unknown outcomes"."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
