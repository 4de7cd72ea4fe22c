"""The wire guard (``harness guard``) in front of a real MCP server, for a plain MCP agent.

The agent (``examples/wire_guard/agent.py``) imports nothing of this project; the payments
server (``examples/wire_guard/payments_server.py``) keeps its own ledger, which these tests
read: never a file the guard writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "wire_guard"
AGENT = EXAMPLE / "agent.py"
SERVER = EXAMPLE / "payments_server.py"
WAIT_S = 60.0
"""How long a step may take before the test gives up (a bound, never a measurement)."""


def ledger(folder: Path) -> list[tuple[Any, ...]]:
    """The payments the server made, from its own database."""
    with sqlite3.connect(folder / "payments.db") as db:
        return db.execute("SELECT pay_to, amount, invoice, request_id FROM payments").fetchall()


def told(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def guard_command(folder: Path, *extra: str) -> list[str]:
    upstream = shlex.join([sys.executable, str(SERVER)])
    return [
        sys.executable,
        "-m",
        "harness",
        "guard",
        "--journal",
        str(folder / "guard.journal"),
        "--upstream-cmd",
        upstream,
        *extra,
    ]


def environment(folder: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAYMENTS_", "AGENT_MCP"))}
    env["PAYMENTS_DB"] = str(folder / "payments.db")
    env.update(more)
    return env


def wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if process.poll() is not None:
            pytest.fail(f"the agent exited ({process.returncode}) before the payment paused")
        if time.monotonic() > deadline:
            pytest.fail(f"the payment never paused after its effect ({path} never appeared)")
        time.sleep(0.02)


def kill_tree(root: int) -> None:
    """SIGKILL a process and every process under it (the guard runs in a session of its
    own, as the SDK's stdio client starts every server), then reap what is ours."""
    try:
        tree = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for proc in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(tree, timeout=WAIT_S)


def run_agent(folder: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(AGENT)],
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return told(done.stdout)


def kill_between_effect_and_reply(folder: Path, command: str, **more: str) -> None:
    """Run the agent behind ``command`` until its payment's effect is made, then SIGKILL it
    and its guard before the reply: one payment in the server's ledger, no result told."""
    paused = folder / "paused"
    first = subprocess.Popen(
        [sys.executable, str(AGENT)],
        env=environment(folder, AGENT_MCP_COMMAND=command, PAYMENTS_PAUSE_FILE=str(paused), **more),
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
    assert not [t for t in told(output) if t.get("tool") == "pay"], "no reply came"


def restart_gets_the_verify_result(folder: Path, command: str, **more: str) -> dict[str, Any]:
    """Start the agent again with a new session: its drifted re-issue of the payment gets
    the VERIFY result, it checks and reports the payment present, and nothing more is paid.
    The re-issued call's result."""
    second = run_agent(folder, environment(folder, AGENT_MCP_COMMAND=command, **more))
    pay = next(t for t in second if t["event"] == "result" and t["tool"] == "pay")
    assert pay["args"]["request_id"] != ledger(folder)[0][3]  # a drifted re-issue
    assert pay["error"] and pay["data"]["verify"]  # the VERIFY result, not a payment
    assert "may already have run" in pay["text"] and "report_verification" in pay["text"]
    report = next(t for t in second if t.get("tool") == "report_verification")
    assert report["args"]["found"] == "present" and not report["error"]
    assert len(ledger(folder)) == 1
    return pay


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    # Nothing this test started may outlive it: the guard and the server name the folder.
    left = [
        p
        for p in psutil.process_iter(["cmdline"])
        if any(str(tmp_path) in arg for arg in (p.info["cmdline"] or []))
    ]
    for proc in left:
        proc.kill()
    assert not left, f"processes outlived the test: {[p.pid for p in left]}"


class TestStdioGuard:
    @pytest.mark.long
    def test_kill_between_effect_and_reply(self, folder: Path) -> None:
        """A plain agent killed between a payment's effect and its reply, started again with a
        new session and a new request id, gets a VERIFY result; the payment runs once, and a
        later drifted re-issue is answered from the journal."""
        command = shlex.join(guard_command(folder))
        kill_between_effect_and_reply(folder, command)
        paid_with = ledger(folder)[0][3]
        pay = restart_gets_the_verify_result(folder, command)

        third = run_agent(folder, environment(folder, AGENT_MCP_COMMAND=command))
        again = next(t for t in third if t["event"] == "result" and t["tool"] == "pay")
        assert again["args"]["request_id"] not in (paid_with, pay["args"]["request_id"])
        assert not again["error"] and not any(t["event"] == "verify" for t in third)
        assert len(ledger(folder)) == 1

    @pytest.mark.long
    def test_a_check_after_a_verify_hint_sees_the_world_now(self, folder: Path) -> None:
        """An agent that checked the ledger before paying, and kept that it did, is killed
        between the payment's effect and its reply. Started again, it does not check
        first; its payment gets the VERIFY result and it checks again, with the same
        arguments as its first check: that check runs (answered from the first, from
        before the payment, the payment would read absent and be made twice)."""
        command = shlex.join(guard_command(folder))
        state = str(folder / "agent.state")
        kill_between_effect_and_reply(folder, command, AGENT_STATE=state)
        restart_gets_the_verify_result(folder, command, AGENT_STATE=state)

    @pytest.mark.long
    def test_another_invoice_is_another_payment(self, folder: Path) -> None:
        """A payment of another invoice is not taken for the journaled one: its identity
        (payee, amount, invoice) differs, so it runs."""
        command = shlex.join(guard_command(folder))
        run_agent(folder, environment(folder, AGENT_MCP_COMMAND=command))
        other = environment(folder, AGENT_MCP_COMMAND=command, AGENT_INVOICE="INV-2042")
        second = run_agent(folder, other)
        pay = next(t for t in second if t["event"] == "result" and t["tool"] == "pay")
        assert not pay["error"] and pay["data"]["invoice"] == "INV-2042"
        assert sorted(row[2] for row in ledger(folder)) == ["INV-2041", "INV-2042"]


class TestHttpSidecar:
    def test_sidecar_outlives_the_agent(self, folder: Path) -> None:
        """The guard as a sidecar over HTTP: the agent killed mid-payment and started again
        (a new MCP session, a new life) gets the VERIFY result; the payment ran once."""
        guard, url = serve(folder, PAYMENTS_PAUSE_FILE=str(folder / "paused"))
        try:
            first = subprocess.Popen(
                [sys.executable, str(AGENT)],
                env=environment(folder, AGENT_MCP_URL=url),
                cwd=folder,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                wait_for(folder / "paused", first)  # type: ignore[arg-type]
            finally:
                kill_tree(first.pid)
                first.wait(timeout=WAIT_S)
            assert guard.poll() is None  # the sidecar lives on
            second = run_agent(folder, environment(folder, AGENT_MCP_URL=url))
            pay = next(t for t in second if t["event"] == "result" and t["tool"] == "pay")
            assert pay["error"] and pay["data"]["verify"]
            assert len(ledger(folder)) == 1
        finally:
            stop(guard)

    def test_a_client_that_sends_no_session_id(self, folder: Path) -> None:
        """A hand-written JSON-RPC client that never sends the session id it was given is
        served (the SDK's server alone answers it 400), and its calls keep their lives: after
        its second ``initialize`` the same payment, with a new ``request_id``, is answered
        from the journal."""
        guard, url = serve(folder)
        try:
            paid = []
            for request_id in ("r1", "r2"):
                post(url, "initialize", INITIALIZE)
                names = [t["name"] for t in post(url, "tools/list", {})["tools"]]
                assert "pay" in names
                bill = {"to": "acme", "amount": 5, "invoice": "INV-1", "request_id": request_id}
                paid.append(post(url, "tools/call", {"name": "pay", "arguments": bill}))
            assert not paid[0].get("isError") and paid[1] == paid[0]
            assert len(ledger(folder)) == 1
        finally:
            stop(guard)


def serve(folder: Path, **env: str) -> tuple[subprocess.Popen[str], str]:
    """A guard over HTTP on the folder's journal, in a process group of its own, and its URL
    (``env``: more of the payments server's environment)."""
    guard = subprocess.Popen(
        guard_command(folder, "--http", "0"),
        env=environment(folder, **env),
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert guard.stderr is not None
    url = next(
        (line.split()[-1] for line in guard.stderr if line.startswith("guard: serving ")), ""
    )
    assert url, "the guard never said where it serves"
    return guard, url


def stop(guard: subprocess.Popen[str]) -> None:
    """End a guard as Ctrl-C does (woken first, were it stopped), then make sure of it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(guard.pid, signal.SIGCONT)
        guard.send_signal(signal.SIGINT)
    try:
        guard.wait(timeout=WAIT_S)
    finally:
        kill_tree(guard.pid)


def bill(invoice: str, request_id: str) -> dict[str, Any]:
    args = {"to": "acme", "amount": 5, "invoice": invoice, "request_id": request_id}
    return {"name": "pay", "arguments": args}


class TestHeldJournal:
    def test_a_paused_guard_holds_the_journal(self, folder: Path) -> None:
        """A guard stopped with SIGSTOP keeps its journal's lock. A second guard on that
        journal serves ``initialize`` and the listing, answers a call at once with an error
        result that says it was not run and names the holder's pid, and forwards nothing;
        once the first guard has ended, the same session's next call runs."""
        first, first_url = serve(folder)
        try:
            post(first_url, "initialize", INITIALIZE)
            assert not post(first_url, "tools/call", bill("INV-1", "r1")).get("isError")
            os.killpg(first.pid, signal.SIGSTOP)  # the guard and its server, as a pause does
            second, url = serve(folder)
            try:
                post(url, "initialize", INITIALIZE)
                assert "pay" in [t["name"] for t in post(url, "tools/list", {})["tools"]]
                refused = post(url, "tools/call", bill("INV-2", "r2"))
                assert refused.get("isError")
                text = refused["content"][0]["text"]
                assert text.startswith("pay: not run.") and f"(pid {first.pid})" in text
                assert refused["structuredContent"]["journal_held_by"] == f"pid {first.pid}"
                assert [row[2] for row in ledger(folder)] == ["INV-1"]

                stop(first)
                paid = post(url, "tools/call", bill("INV-2", "r3"))
                assert not paid.get("isError"), paid
                assert sorted(row[2] for row in ledger(folder)) == ["INV-1", "INV-2"]
            finally:
                stop(second)
        finally:
            stop(first)

    def test_a_plain_agent_beside_a_live_guard(self, folder: Path) -> None:
        """A plain agent whose stdio guard finds the journal held by another live guard is
        served: it lists the tools, its payment is answered "not run" (nothing is paid), and
        it ends on its own."""
        holder, url = serve(folder)
        try:
            post(url, "initialize", INITIALIZE)
            assert not post(url, "tools/call", bill("INV-1", "r1")).get("isError")
            command = shlex.join(guard_command(folder))
            said = run_agent(folder, environment(folder, AGENT_MCP_COMMAND=command))
            assert "pay" in next(t for t in said if t["event"] == "tools")["names"]
            pay = next(t for t in said if t["event"] == "result" and t["tool"] == "pay")
            assert pay["error"] and pay["text"].startswith("pay: not run.")
            assert f"(pid {holder.pid})" in pay["text"]
            assert [row[2] for row in ledger(folder)] == ["INV-1"]
        finally:
            stop(holder)


INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "by-hand", "version": "1"},
}


def post(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC request, as a hand-written client sends it: no session id, ever."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=WAIT_S) as response:
        answer: dict[str, Any] = json.loads(response.read())
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


class TestBadInput:
    def run_guard(self, folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            guard_command(folder, *extra),
            env=environment(folder),
            cwd=folder,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=WAIT_S,
            check=False,
        )

    def test_a_rule_naming_an_argument_the_tool_lacks(self, folder: Path) -> None:
        """A table whose content rule names an argument the server's tool does not take is
        one line naming the file, the entry and the problem, exit 2."""
        table = folder / "tools.toml"
        table.write_text('format = 1\n[content.pay]\nidentity = ["to", "invoce"]\n', "utf-8")
        done = self.run_guard(folder, "--table", str(table))
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == [
            f"harness: {table}: entry 'content.pay.identity': unknown argument 'invoce' "
            "(the tool takes: to, amount, invoice, request_id)"
        ]

    def test_an_upstream_that_will_not_start(self, folder: Path) -> None:
        """A real server that cannot be started is one line naming it, exit 2."""
        done = subprocess.run(
            [*guard_command(folder)[:7], str(folder / "no-such-server")],
            cwd=folder,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=WAIT_S,
            check=False,
        )
        assert done.returncode == 2
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "cannot start a session" in lines[0]
        assert "no-such-server" in lines[0]
