"""The ``mcp`` adapter: our runtime with its tools in an MCP server child process.

Every trial here runs the real agent, which starts the real tool server
(``harness.adapters.mcp_tools_server``) and calls it over an MCP session; the
supervisor kills the agent's process group, server included. Each test reads
what the world, the journal and the supervisor recorded, and looks for server
processes with psutil.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from harness.adapters import (
    ADAPTERS,
    JOURNAL_POINTS,
    MODEL_POINTS,
    OP_POINTS,
    UnknownAdapterError,
    get_adapter,
)
from harness.adapters.mcp_agent import SERVER_MODULE, server_command
from harness.chaos.campaign import CampaignConfig, run_trials
from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import Golden, TrialResult, write_plan_for
from harness.check.evidence import TrialEvidence
from harness.exits import AGENT_REFUSED
from harness.failpoints import AIMED_KILL_SIGNAL
from harness.world.store import read_ledger
from tests.integration.conftest import MINI, MINI_SEED, TrialRunner

ROOT = Path(__file__).resolve().parents[2]

TAP_REPLY = '[{"failpoints":"op.reply@3=kill"}]'  # s003: ui_tap, non-idempotent
TAP_LOST_REPLY = '[{"failpoints":"op.reply@3=lost-reply"}]'


def tool_servers(under: Path) -> list[psutil.Process]:
    """Tool server processes alive (zombies aside) whose trial folder lies under ``under``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if SERVER_MODULE in cmdline and any(arg.startswith(str(under)) for arg in cmdline):
            found.append(proc)
    return found


def my_tool_servers() -> list[psutil.Process]:
    """Tool servers among this process's descendants."""
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if SERVER_MODULE in (p.cmdline() if p.is_running() else [])
    ]


def _events(result: TrialResult) -> list[dict[str, object]]:
    lines = (result.directory / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


class TestRegistration:
    def test_the_adapter_is_listed(self) -> None:
        """``mcp`` is a registered adapter, keeps our journal, and offers every failpoint."""
        adapter = ADAPTERS["mcp"]
        assert adapter.module == "harness.adapters.mcp_agent"
        assert adapter.journal
        # the journal's points, and those of harness.agent's loop, which it runs
        assert adapter.failpoints == OP_POINTS | JOURNAL_POINTS | MODEL_POINTS
        with pytest.raises(UnknownAdapterError, match=r"registered one: .*\bmcp\b"):
            get_adapter("no-such-runtime")


class TestLostReply:
    def test_a_kill_after_the_servers_commit_is_verified_not_replayed(
        self, run_mini: TrialRunner, tmp_path: Path
    ) -> None:
        """Killed in the server once the tap committed, before its reply reached the agent:
        the next life verifies the tap, finds it, and does not tap again."""
        result = run_mini(TAP_REPLY, runtime="mcp")
        assert result.status == "pass", result.verdicts
        evidence = TrialEvidence(result.directory, None)
        first, second = evidence.lives[:2]
        assert (first.killed, first.reached) == ("failpoint", "op.reply 3 s003")  # the server's
        taps = [e for e in read_ledger(result.directory / "world.db") if e.op_id == "s003"]
        assert [e.pid for e in taps] == [first.pid]  # once, and in the killed life
        assert evidence.decisions_in(second.life)["s003"].payload["decision"] == "verify"
        assert "s003" in evidence.hinted_in(second.life)
        assert not tool_servers(tmp_path)

    def test_a_reply_lost_inside_a_life_comes_back_as_a_transient_error(
        self, run_mini: TrialRunner, tmp_path: Path
    ) -> None:
        """The server commits the tap and answers with a timeout: the agent raises the same
        TransientToolError, does not retry the tap, and verifies it in the same life."""
        result = run_mini(TAP_LOST_REPLY, runtime="mcp")
        assert result.status == "pass", result.verdicts
        assert [e["event"] for e in _events(result)].count("lost-reply") == 1
        taps = [e for e in read_ledger(result.directory / "world.db") if e.op_id == "s003"]
        assert len(taps) == 1
        assert "s003" in TrialEvidence(result.directory, None).hinted_in(1)
        assert not tool_servers(tmp_path)

    def test_a_kill_timed_from_the_servers_reply_ends_the_life(
        self, run_mini: TrialRunner, mini_golden: Golden, tmp_path: Path
    ) -> None:
        """A random-time kill timed from a point the server hits ends agent and server alike:
        the agent dies of the timer's signal, in the effect-finish window, and the restart
        copes."""
        op = mini_golden.calls[0].op
        result = run_mini(json.dumps([{"kill_after_ms": 0, "aim": f"op.reply {op}"}]), "mcp")
        exits = [e for e in _events(result) if e["event"] == "exit"]
        assert exits[0]["returncode"] == -AIMED_KILL_SIGNAL
        assert result.windows == ("effect-finish",)
        assert result.status == "pass", result.verdicts
        assert not tool_servers(tmp_path)


class TestCampaign:
    def test_a_random_time_campaign_holds(self, tmp_path: Path) -> None:
        """A few random-time trials of the mcp adapter hold every invariant, as the real
        runtime's do, and leave no server behind."""
        config = CampaignConfig(tmp_path / "run", (MINI,), seed=11, random_trials=3, runtime="mcp")
        results = run_trials(config, lambda r: None, select=lambda spec: spec.kind == "random")
        assert len(results) == 3
        assert all(r.status == "pass" for r in results), [
            (r.spec.label, r.failed_invariants) for r in results
        ]
        assert sum(r.kills for r in results) >= 3
        assert not tool_servers(tmp_path)

    def test_a_counted_run_reports_the_servers_points(self, tmp_path: Path) -> None:
        """The points hit in the server (op.mid_effect, op.reply) are counted with the agent's,
        in the order and at the moments they were hit: a golden run of mcp plans like real's."""
        counts = {}
        for runtime in ("real", "mcp"):
            directory = tmp_path / runtime
            directory.mkdir()
            write_plan_for(MINI, MINI_SEED, directory)
            hits = directory / "hits.json"
            every = ",".join(f"{p}=count" for p in sorted(OP_POINTS))
            lives = Supervisor().run(
                directory, CrashSchedule((Life(every),)), runtime=runtime, counts_file=hits
            )
            assert lives[-1].done, lives[-1].stderr
            ops = json.loads(Path(f"{hits}.ops").read_text())
            counts[runtime] = (json.loads(hits.read_text()), ops["ops"])
            replies = ops["ms"]["op.reply"]
            assert replies == sorted(replies) and replies[0] > 0  # after the agent's ready
        assert counts["mcp"] == counts["real"]
        assert counts["mcp"][0]["op.reply"] > 0 and counts["mcp"][0]["op.mid_effect"] > 0
        assert not (tmp_path / "mcp" / "mcp-server-hits.json").exists()


class TestServerProcess:
    def test_no_server_outlives_its_trials(self, run_mini: TrialRunner, tmp_path: Path) -> None:
        """After a killed trial and a clean one, no tool server is alive: neither a descendant
        of this process nor any process naming the trial folders."""
        run_mini(TAP_REPLY, runtime="mcp")
        run_mini("[]", runtime="mcp")
        assert not tool_servers(tmp_path)
        assert not my_tool_servers()

    def test_a_server_exits_when_its_stdin_ends(self, tmp_path: Path) -> None:
        """An agent that dies without a word (its stdin closes) leaves a server that exits."""
        write_plan_for(MINI, MINI_SEED, tmp_path)
        command = server_command(tmp_path)  # names this process as its agent
        with subprocess.Popen(command, stdin=subprocess.PIPE, stderr=subprocess.PIPE) as server:
            assert server.stdin is not None and server.stderr is not None
            server.stdin.close()
            returncode = server.wait(timeout=60)
            assert returncode == 0, server.stderr.read()
        assert not my_tool_servers()

    def test_a_server_refuses_a_parent_that_is_not_its_agent(self, tmp_path: Path) -> None:
        """Executions are ledgered under the agent's pid, so it must be the server's parent."""
        command = server_command(tmp_path)
        at = command.index("--agent-pid")
        command[at + 1] = str(os.getppid())  # not the parent of the process started here
        done = subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == AGENT_REFUSED
        assert "is not this process's parent" in done.stderr
        assert not (tmp_path / "world.db").exists()


def test_the_core_agent_does_not_import_the_sdk() -> None:
    """The mcp SDK is the mcp adapter's: the core agent program's start-up never loads it."""
    code = (
        "import sys, harness.agent.__main__\n"
        "loaded = {m.partition('.')[0] for m in sys.modules}\n"
        "third = loaded & {'mcp', 'mcp_types', 'anyio', 'starlette'}\n"
        "assert not third, sorted(third)\n"
    )
    subprocess.run([sys.executable, "-I", "-c", code], check=True, timeout=60)


def test_declared_tools_are_served_and_a_lost_ticket_reply_is_verified(tmp_path: Path) -> None:
    """The billing scenario's declared tools run in the tool server: killed there once
    create_ticket committed, the next life verifies the ticket and makes no second one."""
    schedule = '[{"failpoints": "op.reply@3=kill"}]'
    command = ["trial", "scenarios/support_billing.toml", "--seed", "1", "--runtime", "mcp"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            *command,
            "--schedule",
            schedule,
            "--reports",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    trial = next(tmp_path.glob("*/trial"))
    tickets = [e for e in read_ledger(trial / "world.db") if e.op_id == "s003"]
    assert len(tickets) == 1
    evidence = TrialEvidence(trial, None)
    assert evidence.decisions_in(2)["s003"].payload["decision"] == "verify"
    assert not tool_servers(tmp_path)
