"""``python -m harness``: the command line (see ``harness.cli``).

The command line needs the ``harness`` extra (the runtime alone needs nothing):
without it, one line says what to install, instead of a traceback.

SIGINT and SIGTERM wait (blocked) until ``main()`` has imported what it needs
and installed its handlers: a Ctrl-C in the first fraction of a second is then
answered like any other, with everything stopped and exit status 130.
"""

import signal

signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})

import atexit  # noqa: E402 (after the signals wait, on purpose)
import importlib.util  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

from harness.exits import EXIT_BAD_INPUT, EXIT_SIGINT, EXIT_SIGTERM  # noqa: E402

_NEEDED = ("faker", "hypothesis", "multiprocess", "psutil", "pydantic", "rich")

try:
    _missing = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
    if _missing:
        print(
            "harness: the command line needs the harness extra (missing: "
            f"{', '.join(_missing)}); install it with: pip install 'agent-crash-harness[harness]'",
            file=sys.stderr,
        )
        status = EXIT_BAD_INPUT
    else:
        from harness.cli import main

        status = main()
except KeyboardInterrupt:  # a signal main() could not answer itself
    print("harness: interrupted", file=sys.stderr)
    status = EXIT_SIGINT
if status in (EXIT_SIGINT, EXIT_SIGTERM):
    # Everything is stopped and reported. Leave now, without the interpreter's
    # own shutdown: a KeyboardInterrupt that passed through an ``exec`` (a
    # dataclass being made, say) leaves CPython's flag for an unhandled Ctrl-C
    # set even though it was handled, and the process would die by SIGINT.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
raise SystemExit(status)
