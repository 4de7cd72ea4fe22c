"""The command line: ``python -m harness chaos | trial | replay | compare | audit | merge | bench``.

- ``chaos``: the default campaign against the real runtime (every failpoint
  at every hit of every scenario, plus random-time kills), then the self-check
  (every broken runtime must be caught by the invariant it breaks). Exit 0
  only if every trial passes and every broken runtime is caught as expected.
- ``trial``: one trial, given scenario, seed, runtime and schedule (the line a
  failure prints), against a fresh golden run.
- ``replay``: run again the trial recorded in a trial folder.
- ``audit``: a campaign for a time budget, then Hypothesis.
- ``merge``: one report from the run folders of shards.
- ``bench``: the benchmarks (also ``python -m harness.bench``).

Each command is a module of ``harness.commands`` with its parser and its
``run(args)``; this module only assembles them, installs the signal handlers
and maps errors to exit codes.

Exit status (``harness.exits``): 0 all held, 1 an invariant failed or the
self-check missed, 2 bad input (nothing was run), 3 could not judge (some
verdict unknown, none failed), 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from harness.commands import audit, bench, chaos, compare, merge, replay, trial
from harness.exits import EXIT_BAD_INPUT
from harness.runtime.errors import HarnessError

__all__ = ["COMMANDS", "main"]

COMMANDS = (chaos, trial, compare, replay, audit, merge, bench)
"""The sub-commands, in the order ``--help`` lists them."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub).set_defaults(run=command.run)
    return parser


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from harness.chaos.supervisor import kill_all

    # Explicitly, since a shell without job control starts background jobs with
    # SIGINT ignored, and an ignored SIGINT would leave agents running.
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        return int(args.run(args))
    except HarnessError as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130
    finally:
        kill_all()
