"""``python -m harness.audit ARGS`` is ``python -m harness audit ARGS``.

Kept so that the nightly job's command line goes on working; the audit itself,
its options and its exit status are those of the ``audit`` command
(``harness.commands.audit``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    from harness.cli import main as cli_main

    return cli_main(["audit", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
