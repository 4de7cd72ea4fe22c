"""The wire guard on a PostgreSQL journal: the guard killed with its agent, its lease left
behind, and the next life's guard taking the journal over once the lease ends.

The agent (``examples/wire_guard/agent.py``) imports nothing of this project and reaches the
guard as its MCP server's command; the payments server keeps its own ledger, which the test
reads.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tests.integration.test_wire_guard import (
    SERVER,
    folder,  # noqa: F401  (the fixture: nothing the test started outlives it)
    kill_between_effect_and_reply,
    restart_gets_the_verify_result,
)

LEASE_S = 20
"""The claim's lease: longer than the restarted agent takes to reach its guard, which then
finds the killed guard's lease still held and waits it out (at most this long)."""


def test_kill_between_effect_and_reply_on_postgres(folder: Path, database: str) -> None:  # noqa: F811
    """Killed between a payment's effect and its reply with the guard's lease held, the
    restarted agent's guard takes the journal over once the lease ends and answers the
    drifted re-issue with the VERIFY result: the payment runs once."""
    journal = f"{database}{'&' if '?' in database else '?'}journal=wire-agent&lease={LEASE_S}"
    upstream = shlex.join([sys.executable, str(SERVER)])
    guard = [sys.executable, "-m", "harness", "guard", "--journal", journal]
    command = shlex.join([*guard, "--upstream-cmd", upstream])
    kill_between_effect_and_reply(folder, command)
    restart_gets_the_verify_result(folder, command)
