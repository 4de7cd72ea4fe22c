"""The command line: ``python -m harness chaos | trial | replay``."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("harness: the chaos harness is not built yet (issue 4); nothing was run.", file=sys.stderr)
    return 2
