"""Every exit status of the project, in two sets that share no value but 0 (the table is
``docs/reference/exit-codes.md``).

The command line's (``python -m harness``, every command) are ``EXIT_*``; an agent
program's (``harness.agent``, the adapters, a black box's host), which only the supervisor
and the checkers read, are ``AGENT_*``, in a range of their own, so that a status in a
report or a log says which process gave it. Stdlib only: the agent program imports it.

The command line: 0 everything held (every verdict pass or not-judged, every check as
expected); 1 an invariant failed, or the self-check missed a broken runtime; 2 bad input
(nothing was run); 3 could not judge (no failure, but some verdict is ``unknown``);
128 + the signal when interrupted (130 SIGINT, 143 SIGTERM). A failure outranks an
unknown: a run with both exits 1.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable

__all__ = [
    "AGENT_CANNOT_START",
    "AGENT_CONTAINED",
    "AGENT_DONE",
    "AGENT_ERROR",
    "AGENT_FAILPOINT_EXIT",
    "AGENT_REFUSED",
    "AGENT_STATUSES",
    "AGENT_WRITE_FAILED",
    "CLI_STATUSES",
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "EXIT_UNJUDGED",
    "PYTHON_UNCAUGHT",
    "exit_status",
]

# The command line's.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_UNJUDGED = 3
EXIT_INTERRUPTED = 128
"""Plus the number of the signal that interrupted the run, as a shell reports it."""
EXIT_SIGINT = EXIT_INTERRUPTED + signal.SIGINT
EXIT_SIGTERM = EXIT_INTERRUPTED + signal.SIGTERM

# An agent program's.
AGENT_DONE = 0
"""The plan is done (the one value both sets share, with the same meaning)."""
AGENT_FAILPOINT_EXIT = 70
"""A failpoint's ``exit`` action with no status of its own (``exit(N)`` gives N); as
sysexits' ``EX_SOFTWARE``."""
AGENT_ERROR = 81
"""An adapter's framework stopped on an error that is not the runtime's (or, over MCP,
the tool server's)."""
AGENT_REFUSED = 82
"""Refused before any tool ran: a corrupt or locked journal, a bad failpoint spec, an
unknown runtime, model or identity."""
AGENT_WRITE_FAILED = 83
"""An append could not be made durable (a full disk): the op was not run."""
AGENT_CONTAINED = 84
"""Stopped by containment (``harness.agent.audit``) at its first reach outside the trial."""
AGENT_CANNOT_START = 127
"""A black box's host could not start the agent's command (the shell's own value)."""

PYTHON_UNCAUGHT = 1
"""Not one of ours: Python's status for an uncaught exception (a bug), which a forked
agent gives too."""

CLI_STATUSES = {
    "EXIT_OK": EXIT_OK,
    "EXIT_FAILED": EXIT_FAILED,
    "EXIT_BAD_INPUT": EXIT_BAD_INPUT,
    "EXIT_UNJUDGED": EXIT_UNJUDGED,
    "EXIT_SIGINT": EXIT_SIGINT,
    "EXIT_SIGTERM": EXIT_SIGTERM,
}
AGENT_STATUSES = {
    "AGENT_DONE": AGENT_DONE,
    "AGENT_FAILPOINT_EXIT": AGENT_FAILPOINT_EXIT,
    "AGENT_ERROR": AGENT_ERROR,
    "AGENT_REFUSED": AGENT_REFUSED,
    "AGENT_WRITE_FAILED": AGENT_WRITE_FAILED,
    "AGENT_CONTAINED": AGENT_CONTAINED,
    "AGENT_CANNOT_START": AGENT_CANNOT_START,
}


def exit_status(statuses: Iterable[str]) -> int:
    """The status for a run whose trials (or checks) came out as ``statuses``."""
    seen = set(statuses)
    if "fail" in seen:
        return EXIT_FAILED
    if "unknown" in seen:
        return EXIT_UNJUDGED
    return EXIT_OK
