"""``python -m harness``: the command line (see ``harness.cli``)."""

from harness.cli import main

raise SystemExit(main())
