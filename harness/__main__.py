"""``python -m harness``: the command line (see ``harness.cli``).

The command line needs the ``harness`` extra (the runtime alone needs nothing):
without it, one line says what to install, instead of a traceback.
"""

import importlib.util
import sys

_NEEDED = ("faker", "hypothesis", "multiprocess", "psutil", "pydantic", "rich")
_missing = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
if _missing:
    print(
        f"harness: the command line needs the harness extra (missing: {', '.join(_missing)}); "
        "install it with: pip install 'agent-crash-harness[harness]'",
        file=sys.stderr,
    )
    raise SystemExit(2)

from harness.cli import main  # noqa: E402  (after the check above, on purpose)

raise SystemExit(main())
