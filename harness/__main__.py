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

try:
    from harness.cli import main  # after the check above, on purpose

    status = main()
except KeyboardInterrupt:  # a Ctrl-C before main() took the signals over, or after
    print("harness: interrupted", file=sys.stderr)
    status = 130
raise SystemExit(status)
