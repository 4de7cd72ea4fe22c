"""The command line: ``harness COMMAND`` (or ``python -m harness COMMAND``); its commands:

- ``init``: a scenario skeleton for an agent's tools (read from its MCP server's
  listing, when given one), then the commands that test the agent on it.
- ``chaos``: the default campaign (every failpoint at every hit of every scenario,
  plus random-time kills), then the self-check; exit 0 only if everything held.
- ``chaos-fleet``: the faults of a fleet (workers, a queue, PostgreSQL), its self-check.
- ``trial``: one trial, given scenario, seed, runtime and schedule (the line a
  failure prints), against a fresh golden run.
- ``replay``: run again the trial recorded in a trial folder.
- ``audit``: a campaign for a time budget, then Hypothesis.
- ``merge``: one report from the run folders of shards.
- ``table``: a tool table (``tools.toml``) from an MCP server's tool
  annotations (``--from-mcp -- CMD ARGS...``; needs the ``mcp`` extra).
- ``guard``: an MCP proxy that runs every tool call through the runtime.
- ``bench``: the benchmarks (also ``python -m harness.bench``).
- ``check-table``: audit a tool table against what its tools really do (each
  tool called twice in a scratch world); exit 1 on a class a retry makes unsafe.

Each command is a module of ``harness.commands`` with its parser and its
``run(args)``; this module only assembles them, installs the signal handlers
and maps errors to exit codes.

The full note: docs/reference/modules.md (``harness/cli.py``).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.metadata
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from harness.commands import (
    audit,
    bench,
    chaos,
    chaos_fleet,
    check_table,
    compare,
    guard,
    init,
    interrupts,
    merge,
    replay,
    table,
    trial,
)
from harness.commands.options import prog_name
from harness.exits import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_SIGINT
from harness.runtime.errors import HarnessError

__all__ = ["COMMANDS", "main", "prog_name", "version"]

COMMANDS = (
    init,
    chaos,
    chaos_fleet,
    trial,
    compare,
    replay,
    audit,
    merge,
    table,
    check_table,
    guard,
    bench,
)
"""The sub-commands, in the order ``--help`` lists them."""


DISTRIBUTION = "agent-crash-harness"

DESCRIPTION = (
    "A chaos harness for AI-agent tool calls: it runs an agent as a real process, kills it "
    "inside its tool calls, restarts it, and judges the outcome from evidence the runtime "
    "cannot forge. Each command has its own --help."
)


def version() -> str:
    """The installed distribution's version (``unknown`` when run from a tree that was
    never installed)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog_name(), description=DESCRIPTION)
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {version()} ({DISTRIBUTION})"
    )
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    for command in COMMANDS:
        command_parser = command.add_parser(sub)
        command_parser.set_defaults(run=command.run, command_parser=command_parser)
    parser.description = f"{DESCRIPTION} Commands: {', '.join(sub.choices)}."
    return parser


def _unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> NoReturn:
    """Exit 2 with ``parser``'s usage and the options it does not know, and the close ones."""
    known = [o for action in parser._actions for o in action.option_strings]
    close = [
        match
        for word in extras
        if word.startswith("-")
        for match in difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.7)
    ]
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    parser.error(f"unrecognized arguments: {' '.join(extras)}{hint}")


_WARM = (
    "harness.adapters",
    "harness.chaos.campaign",
    "harness.chaos.scenario",
    "harness.chaos.supervisor",
    "harness.chaos.trial",
    "harness.report.console",
)
"""What the commands import lazily, imported while the signals wait: a
``KeyboardInterrupt`` raised inside an import can be swallowed by the import
machinery ("Exception ignored in ... _get_module_lock") or, raised inside the
``exec`` a dataclass runs, leave CPython's flag for an unhandled Ctrl-C set, so
that the process dies by SIGINT after handling it."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. The caller should hold SIGINT and SIGTERM blocked
    (``python -m harness`` does); they are unblocked once the handlers are in."""
    signal.pthread_sigmask(signal.SIG_BLOCK, interrupts.SIGNALS)
    interrupts.start()
    try:
        args, extras = _parser().parse_known_args(argv)
        if extras:  # told by the command's own parser, with its usage, not the top-level one
            _unrecognized(args.command_parser, extras)
        for name in _WARM:
            importlib.import_module(name)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, interrupts.SIGNALS)
        raise
    from harness.chaos.supervisor import kill_all

    # Explicitly, since a shell without job control starts background jobs with
    # SIGINT ignored, and an ignored SIGINT would leave agents running.
    signal.signal(signal.SIGINT, interrupts.on_signal)
    signal.signal(signal.SIGTERM, interrupts.on_signal)
    try:
        # A waiting signal lands here.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, interrupts.SIGNALS)
        status = int(args.run(args))
    except HarnessError as exc:
        print(f"harness: {exc}", file=sys.stderr)
        status = EXIT_BAD_INPUT
    except KeyboardInterrupt:
        status = EXIT_SIGINT
    finally:
        # A second Ctrl-C waits for the sweep.
        signal.pthread_sigmask(signal.SIG_BLOCK, interrupts.SIGNALS)
        kill_all()
        interrupts.drop_held()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, interrupts.SIGNALS)
    if interrupts.received:  # even if some library swallowed the exception the handler raised
        print("harness: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED + interrupts.received[0]
    return status
