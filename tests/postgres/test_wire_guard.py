"""The wire guard on a PostgreSQL journal: the guard killed with its agent, its lease left
behind, and the next life's guard taking the journal over once the lease ends.

The agent (``examples/wire_guard/agent.py``) imports nothing of this project and reaches the
guard as its MCP server's command; the payments server keeps its own ledger, which the test
reads.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from tests.integration.test_wire_guard import (
    AGENT,
    SERVER,
    WAIT_S,
    environment,
    folder,  # noqa: F401  (the fixture: nothing the test started outlives it)
    kill_tree,
    ledger,
    run_agent,
    told,
    wait_for,
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
    paused = folder / "paused"
    first = subprocess.Popen(
        [sys.executable, str(AGENT)],
        env=environment(folder, AGENT_MCP_COMMAND=command, PAYMENTS_PAUSE_FILE=str(paused)),
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(paused, first)
        assert len(ledger(folder)) == 1  # the effect is there; its reply is not
    finally:
        kill_tree(first.pid)
    output, _ = first.communicate(timeout=WAIT_S)
    assert not [t for t in told(output) if t["event"] == "result"], "no reply came"

    second = run_agent(folder, environment(folder, AGENT_MCP_COMMAND=command))
    pay = next(t for t in second if t["event"] == "result" and t["tool"] == "pay")
    assert pay["args"]["request_id"] != ledger(folder)[0][3]  # a drifted re-issue
    assert pay["error"] and pay["data"]["verify"]  # the VERIFY result, not a payment
    report = next(t for t in second if t.get("tool") == "report_verification")
    assert report["args"]["found"] == "present" and not report["error"]
    assert len(ledger(folder)) == 1
