"""An unmodified agent program tested as a black box (``--runtime cmd:...``), through the CLI.

The example agent (``examples/agents/plain_python/agent.py``) keeps its conversation in
a file appended after each tool result: a kill between an unsafe call's effect and
that write makes it run the call again, which I2 catches from the ledger alone. A
command that cannot take part in a trial is refused with one line and exit 2, before
any trial, with no process left.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import psutil
import pytest

from tests.conftest import run_harness

ROOT = Path(__file__).resolve().parents[2]
AGENT = "examples/agents/plain_python/agent.py"
RUNTIME = f"cmd:python {AGENT}"
PHONE = "scenarios/phone_task.toml"
JOURNAL_INVARIANTS = ("I3", "I4", "I5", "I6", "I9", "I12")


def harness(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_harness(*args, timeout=300, env=env)


def trial(
    tmp_path: Path,
    schedule: str,
    *,
    runtime: str | None = RUNTIME,
    scenario: str = PHONE,
    **env: str,
) -> tuple[int, dict[str, dict[str, object]]]:
    """Run one trial of the example agent (or ``runtime``: None, the scenario's own), its
    reports in ``tmp_path``; its exit status and its verdicts by invariant."""
    ran = harness(
        "trial",
        scenario,
        "--seed",
        "7",
        *(["--runtime", runtime] if runtime is not None else []),
        "--schedule",
        schedule,
        "--reports",
        str(tmp_path),
        **env,
    )
    (folder,) = tmp_path.glob("*-trial/trial")
    verdicts = json.loads((folder / "verdicts.json").read_text())
    return ran.returncode, {v["invariant"]: v for v in verdicts}


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_crash_free_run_holds_and_journal_invariants_are_not_judged(
    tmp_path: Path, transport: str
) -> None:
    status, verdicts = trial(tmp_path, "[]", AGENT_MCP=transport)
    assert status == 0
    for key in ("I1", "I7", "I8", "I11"):
        assert verdicts[key]["status"] == "pass", verdicts[key]
        assert verdicts[key]["applied"], verdicts[key]
    for key in JOURNAL_INVARIANTS:
        assert verdicts[key]["status"] == "not-judged", verdicts[key]
        assert verdicts[key]["evidence"] == ["the runtime under test offers no journal"]
    (folder,) = tmp_path.glob("*-trial/trial")
    vias = {json.loads(line)["via"] for line in (folder / "tools.jsonl").read_text().splitlines()}
    assert vias == {"http"}  # the stdio bridge posts to the same endpoint


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_kill_after_an_unsafe_effect_is_caught_replaying_it(
    tmp_path: Path, transport: str
) -> None:
    """s003 is a ui_tap (non-idempotent): killed after its effect, before its reply reached
    the agent, the agent asks the model again with a conversation that lacks it, and runs
    it again."""
    status, verdicts = trial(tmp_path, '[{"failpoints": "op.reply@3=kill"}]', AGENT_MCP=transport)
    assert status == 1
    assert verdicts["I2"]["status"] == "fail"
    assert verdicts["I2"]["evidence"] == [
        "s003 (ui_tap, non_idempotent) ran 2 times in 2 lives (ledger #3, #4): a non_idempotent "
        "call was replayed"
    ]
    assert verdicts["F"]["status"] == "pass" and verdicts["I7"]["status"] == "pass"


def test_a_lost_reply_of_an_unsafe_call_is_verified_not_replayed(tmp_path: Path) -> None:
    """The response is dropped after the effect: the agent shows the model the outcome is
    unknown, the model asks for the step's check, finds the effect, and goes on."""
    status, verdicts = trial(tmp_path, '[{"failpoints": "op.reply@3=lost-reply"}]')
    assert status == 0, verdicts
    assert verdicts["I11"]["evidence"] == [
        "9 acks matching what the world returned, 1 unknown with a cause"
    ]
    (folder,) = tmp_path.glob("*-trial/trial")
    told = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]
    assert [h["type"] for h in told if h["op"] == "s003"] == ["invoke", "info", "ok"]


BAD_AGENTS = {
    "exits.py": ("import sys\nsys.exit(3)\n", "exited at once with status 3, before calling"),
    "silent.py": ("print('hello')\n", "exited 0 without calling the model at OPENAI_BASE_URL"),
    "no_tools.py": (
        "import json, os, urllib.request\n"
        "url = os.environ['OPENAI_BASE_URL'] + '/chat/completions'\n"
        "body = json.dumps({'messages': [{'role': 'user', 'content': 'hi'}]}).encode()\n"
        "request = urllib.request.Request(url, body, {'Content-Type': 'application/json'})\n"
        "urllib.request.urlopen(request).read()\n",
        "called the model but no tool, at neither HARNESS_MCP_URL nor HARNESS_MCP_COMMAND",
    ),
}


@pytest.mark.parametrize("command", ["no-such-agent-program", *BAD_AGENTS])
@pytest.mark.parametrize("subcommand", ["chaos", "trial"])
def test_a_command_that_cannot_take_part_is_refused_before_any_trial(
    tmp_path: Path, command: str, subcommand: str
) -> None:
    if command in BAD_AGENTS:
        script, missing = BAD_AGENTS[command]
        (tmp_path / command).write_text(script)
        line = f"python {tmp_path / command}"
    else:
        line, missing = command, "the command does not start: 'no-such-agent-program' is not found"
    reports = tmp_path / "reports"
    where = ["--only", "phone_task", "--random", "0"] if subcommand == "chaos" else [PHONE]
    ran = harness(
        subcommand,
        *where,
        "--seed",
        "7",
        "--runtime",
        f"cmd:{line}",
        "--reports",
        str(reports),
    )
    assert ran.returncode == 2, ran.stderr
    (said,) = ran.stderr.strip().splitlines()
    assert said.startswith(f"harness: --runtime {shlex.quote(f'cmd:{line}')}: ")
    assert missing in said
    assert not reports.exists()
    left = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline"])
        if str(tmp_path) in " ".join(p.info["cmdline"] or ())
    ]
    assert left == []


CRASHES_AFTER_A_KILL = """\
import os, pathlib, sys
starts = pathlib.Path("starts")
starts.write_text(starts.read_text() + "x" if starts.exists() else "x")
if len(starts.read_text()) >= 2 and (len(starts.read_text()) == 2 or {always}):
    sys.exit(1)  # a restart that fails, as a program whose start-up trips on its own state
os.execv(sys.executable, [sys.executable, {agent!r}])
"""


@pytest.mark.parametrize("always", [False, True])
def test_a_black_box_that_exits_non_zero_is_restarted_until_the_budget(
    tmp_path: Path, always: bool
) -> None:
    """Killed before any effect, the agent fails to start once (or every time) after it: a
    supervisor restarts a program that failed, so the trial goes on to a third life (or
    spends the restart budget of 8 lives, which I7 names)."""
    script = tmp_path / "agent.py"
    script.write_text(CRASHES_AFTER_A_KILL.format(always=always, agent=str(ROOT / AGENT)))
    kill = '[{"failpoints": "tool.received@2=kill"}]'
    code, verdicts = trial(tmp_path / "reports", kill, runtime=f"cmd:python {script}")
    if always:
        assert code == 1
        assert verdicts["I7"]["status"] == "fail"
        spent = "life 8 of 8 ended exit status 1: the restart budget of 8 lives was spent"
        assert spent in str(verdicts["I7"]["evidence"])
    else:
        assert code == 0, verdicts
        assert "['done in 3 lives," in str(verdicts["I7"]["evidence"]), verdicts["I7"]


SAYS_ITS_GREETING = """\
import os, pathlib, sys, tempfile
pathlib.Path("greeting").write_text(os.environ["GREETING"])  # in the trial folder
tempfile.NamedTemporaryFile(suffix=".lock", delete=False).close()  # as CrewAI leaves locks
os.execv(sys.executable, [sys.executable, {agent!r}])
"""


def test_a_scenario_s_agent_table_is_the_runtime_when_none_is_given(tmp_path: Path) -> None:
    """``[agent]``: its command found from its folder, run in the trial folder with its
    variables (and its ``TMPDIR`` in that folder), and named whole in the replay command;
    the plain agent's replay is caught."""
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "wrapper.py").write_text(SAYS_ITS_GREETING.format(agent=str(ROOT / AGENT)))
    phone = (ROOT / PHONE).read_text()
    first_step = phone.index("[[steps]]")
    table = '[agent]\ncommand = "python wrapper.py"\nfolder = "bot"\n'
    table += 'env = { GREETING = "hello there" }\n\n'
    scenario = tmp_path / "mine.toml"
    scenario.write_text(phone[:first_step] + table + phone[first_step:])
    kill = '[{"failpoints":"op.reply@3=kill"}]'
    code, verdicts = trial(tmp_path / "reports", kill, runtime=None, scenario=str(scenario))
    assert code == 1, verdicts
    (folder,) = (tmp_path / "reports").glob("*-trial/trial")
    assert (folder / "greeting").read_text() == "hello there"
    assert len(list((folder / "tmp").glob("*.lock"))) == 2  # one a life, none left in /tmp
    assert "s003 (ui_tap, non_idempotent) ran 2 times" in str(verdicts["I2"]["evidence"])
    runtime = f"cmd:env 'GREETING=hello there' python {tmp_path}/bot/wrapper.py"
    recorded = json.loads((folder / "trial.json").read_text())
    assert recorded["runtime"] == runtime
    assert f"--runtime {shlex.quote(runtime)}" in recorded["replay"]
