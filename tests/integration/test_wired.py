"""The scoreboard's proxy-guarded run: a black box, unchanged, behind the wire guard.

``harness.blackbox.wired`` points the agent's MCP address at the guard: over stdio the
guard is the MCP server's command the agent starts (``examples/agents/plain_python``);
with ``--http`` it is a sidecar at ``HARNESS_MCP_URL`` (a stateless agent on the MCP SDK's
client, ``sdk_http_agent.py``). Killed between an unsafe tap's effect and its reply, the
bare agents run the tap again; behind the guard, the restarted agent's re-issued calls are
answered from the guard's journal, the tap in doubt gets a VERIFY result, and nothing runs
twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WIRED = f"{sys.executable} -m harness.blackbox.wired"
PLAIN = "python examples/agents/plain_python/agent.py"
SDK = f"{sys.executable} {Path(__file__).parent / 'sdk_http_agent.py'}"
KILL = '[{"failpoints": "op.reply@3=kill"}]'
TAP_TWICE = "s003 (ui_tap, non_idempotent) ran 2 times in 2 lives (ledger #3, #6)"


def trial(
    reports: Path, runtime: str, schedule: str = KILL, *extra: str
) -> tuple[int, dict[str, dict[str, object]], Path]:
    """phone_task, seed 7, killed after s003's effect (or ``schedule``): exit status,
    verdicts, trial folder (``extra``: more of the command's options)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "AGENT_"))}
    ran = subprocess.run(
        [
            *(sys.executable, "-m", "harness", "trial", "scenarios/phone_task.toml"),
            *("--seed", "7", "--runtime", runtime, "--schedule", schedule),
            *("--reports", str(reports), *extra),
        ],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (folder,) = reports.glob("*-trial/trial")
    (folder / "harness.stderr").write_text(ran.stderr)
    verdicts = json.loads((folder / "verdicts.json").read_text())
    return ran.returncode, {v["invariant"]: v for v in verdicts}, folder


def told(folder: Path, op: str) -> list[tuple[str, int, bool]]:
    """What the user was told of ``op``: (type, life, whether the supervisor said it)."""
    lines = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]
    return [(h["type"], h["life"], "why" in h) for h in lines if h["op"] == op]


def test_behind_a_stdio_guard_the_tap_in_doubt_is_verified_not_run_again(tmp_path: Path) -> None:
    status, verdicts, folder = trial(tmp_path, f"cmd:{WIRED} -- {PLAIN}")
    assert status == 0, verdicts
    for key in ("I1", "I2", "I7", "I8", "I11"):
        assert verdicts[key]["status"] == "pass", verdicts[key]
    # Life 2 re-issues s001..s003: the guard answers the first two from its journal, and the
    # tap it found in flight with a VERIFY result the model reads as an unknown outcome.
    assert told(folder, "s003") == [
        ("invoke", 1, False),
        ("info", 1, True),
        ("invoke", 2, False),
        ("info", 2, False),
        ("ok", 2, False),
    ]
    assert (folder / "guard.journal").stat().st_size > 0


def test_behind_the_guard_a_lost_reply_is_an_unknown_outcome(tmp_path: Path) -> None:
    """The tool server drops s003's reply after its effect: the bridge the guard reaches it
    through turns that into a timeout's error, the guard journals an unknown outcome and
    answers VERIFY, the model checks, and the life goes on (it once hung to the trial's
    time, the guard's HTTP client having lost its session)."""
    lost = '[{"failpoints": "op.reply@3=lost-reply"}]'
    status, verdicts, folder = trial(tmp_path, f"cmd:{WIRED} -- {PLAIN}", lost)
    assert status == 0, verdicts
    assert told(folder, "s003") == [("invoke", 1, False), ("info", 1, False), ("ok", 1, False)]


def test_behind_an_http_sidecar_a_stateless_agent_runs_nothing_twice(tmp_path: Path) -> None:
    """Bare, the agent starts over after the kill and runs all three calls again (I1, I2);
    behind the sidecar the same restart is answered from the journal."""
    status, verdicts, _ = trial(tmp_path / "bare", f"cmd:{SDK}")
    assert status == 1
    assert TAP_TWICE in str(verdicts["I2"]["evidence"])
    assert verdicts["I1"]["status"] == "fail"
    status, verdicts, folder = trial(tmp_path / "wired", f"cmd:{WIRED} --http -- {SDK}")
    assert status == 0, verdicts
    for key in ("I1", "I2", "I7", "I8", "I11"):
        assert verdicts[key]["status"] == "pass", verdicts[key]
    assert "guard: serving http://127.0.0.1:" in (folder / "guard.log").read_text()


def test_behind_the_guard_the_agent_itself_starts_warm(tmp_path: Path) -> None:
    """With ``--launch warm`` the host wires the guard and forks the agent's own program
    from its zygote (the launcher would exec it, and a warm start could not record it):
    every life is warm, and the guard holds as with a plain start."""
    status, verdicts, folder = trial(tmp_path, f"cmd:{WIRED} -- {PLAIN}", KILL, "--launch", "warm")
    assert "warm start: each life forks from a zygote" in (folder / "harness.stderr").read_text()
    assert status == 0, verdicts
    for key in ("I1", "I2", "I7", "I8", "I11"):
        assert verdicts[key]["status"] == "pass", verdicts[key]
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    starts = [e["start"] for e in events if e["event"] == "agent"]
    assert starts == ["warm", "warm"], starts
    assert (folder / "guard.journal").stat().st_size > 0


def test_without_a_command_or_an_mcp_address_it_says_so_and_runs_nothing() -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    for words, env in (([], {"HARNESS_MCP_COMMAND": "true"}), (["--", "true"], {})):
        ran = subprocess.run(
            [sys.executable, "-m", "harness.blackbox.wired", *words],
            env={**environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ran.returncode == 2
        (line,) = ran.stderr.strip().splitlines()
        assert line.startswith("harness.blackbox.wired: usage: wired [--http] -- COMMAND...")
