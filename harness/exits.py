"""The exit statuses of ``python -m harness``, one table for every command.

| status | meaning                                                                 |
|--------|-------------------------------------------------------------------------|
| 0      | everything held: every verdict pass or not-judged, every check as expected |
| 1      | an invariant failed, or the self-check missed a broken runtime          |
| 2      | bad input: nothing was run                                              |
| 3      | could not judge: no failure, but some verdict is ``unknown``            |
| 130/143| interrupted (SIGINT / SIGTERM)                                          |

A failure outranks an unknown: a run with both exits 1.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_OK", "EXIT_UNJUDGED", "exit_status"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_UNJUDGED = 3


def exit_status(statuses: Iterable[str]) -> int:
    """The status for a run whose trials (or checks) came out as ``statuses``."""
    seen = set(statuses)
    if "fail" in seen:
        return EXIT_FAILED
    if "unknown" in seen:
        return EXIT_UNJUDGED
    return EXIT_OK
