"""``python -m harness init`` as a real subprocess: against the example MCP server over stdio
and over HTTP, then the trial it prints, run with the plain example agent on the written
scenario; and bad input: one line, exit 2, no file, no server left, no temporary folder.

Every server is started with the test's own folder on its command line, and after each test
no process naming that folder may be alive, nor any new child of the test process.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.chaos.scenario import load_scenario
from harness.runtime.classes import IdempotencyClass, ToolTable
from tests.integration.test_mcp_table import EXAMPLE_CLASSES, FAKE, ROOT, children, servers_naming

EXAMPLE = ROOT / "examples" / "mcp_server.py"
AGENT = f"{sys.executable} {ROOT / 'examples' / 'agents' / 'plain_python' / 'agent.py'}"
NAME = "plain_python"

HTTP_SERVER = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import mcp_server
world = mcp_server.World(Path(sys.argv[2]) / "world.db")
mcp_server.build_server(world).run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
"""
"""The example server's tools over streamable HTTP (the SDK's server, uvicorn)."""


def harness(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m harness ARGS`` as a real subprocess, from ``cwd``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env={**base, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """The test's folder; afterwards no server naming it is alive, and the test process has
    no child it did not have before."""
    before = children()
    yield tmp_path
    assert not servers_naming(tmp_path), "a server outlived the test"
    assert children() <= before, "the test process has a new child"


def example_server(folder: Path) -> str:
    """The example server's command line, its database in ``folder`` (the marker)."""
    return shlex.join([sys.executable, str(EXAMPLE), "--db", str(folder / "world.db")])


def test_init_then_the_trial_it_prints(folder: Path) -> None:
    """init writes a scenario of the example server's six tools and their classes; the trial
    command it prints, run as printed with the plain agent, is judged and passes."""
    work = folder / "project"
    work.mkdir()
    done = harness("init", "--agent", AGENT, "--mcp", example_server(folder), cwd=work)
    assert done.returncode == 0, done.stderr
    out = Path("scenarios") / f"{NAME}.toml"
    trial_line, first_line, chaos_line = done.stdout.splitlines()
    assert trial_line.endswith(f" trial {out} --seed 1")
    assert first_line.endswith(f" chaos --scenario {out} --random 10")
    assert chaos_line.endswith(f" chaos --scenario {out}")
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "6 tools from the MCP server" in done.stderr
    assert sorted(str(p.relative_to(work)) for p in work.rglob("*")) == sorted(
        ["scenarios", str(out), f"scenarios/{NAME}", f"scenarios/{NAME}/tools.toml"]
    )
    scenario = load_scenario(work / out)
    assert list(scenario.declared_tools) == list(EXAMPLE_CLASSES)
    assert [call.spec.tool for call in scenario.calls] == list(EXAMPLE_CLASSES)
    table = ToolTable.load(work / "scenarios" / NAME / "tools.toml")
    assert {t: c.idempotency for t, c in table.entries.items()} == EXAMPLE_CLASSES

    command = shlex.split(trial_line)
    command = command[command.index("trial") :]  # after "python -m harness" (or "harness")
    trial = harness(*command, "--reports", str(folder / "reports"), cwd=work)
    assert trial.returncode == 0, trial.stdout[-3000:] + trial.stderr
    assert trial.stdout.splitlines()[-1] == "PASS"
    for invariant in ("I1", "I2", "I7", "I8", "I10", "I11"):
        assert f"pass       {invariant} " in trial.stdout, invariant
    # A lost reply of an unsafe call no check can tell (the skeleton declares no verify):
    # the model is shown its outcome is unknown, and the step is accounted for as such.
    lost = '[{"failpoints":"op.reply@3=lost-reply"}]'
    trial = harness(*command, "--schedule", lost, "--reports", str(folder / "lost"), cwd=work)
    assert trial.returncode == 0, trial.stdout[-3000:] + trial.stderr
    assert "pass       I7 " in trial.stdout and "pass       I11 " in trial.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_the_same_tools_over_http(folder: Path) -> None:
    """--mcp-url reads the same tools, arguments and classes from the server running over
    streamable HTTP as --mcp does over stdio."""
    script = folder / "http_server.py"
    script.write_text(HTTP_SERVER)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(script), str(EXAMPLE.parent), str(folder), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "no HTTP server"
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"
        by_url = harness("init", "--agent", AGENT, "--mcp-url", url, "--out", "h.toml", cwd=folder)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert by_url.returncode == 0, by_url.stderr
    by_stdio = harness(
        "init", "--agent", AGENT, "--mcp", example_server(folder), "--out", "s.toml", cwd=folder
    )
    assert by_stdio.returncode == 0, by_stdio.stderr
    http, stdio = load_scenario(folder / "h.toml"), load_scenario(folder / "s.toml")
    assert dict(http.declared_tools) == dict(stdio.declared_tools)
    assert http.steps == stdio.steps
    tables = [ToolTable.load(folder / f"{n}/tools.toml").entries for n in ("h", "s")]
    assert tables[0] == tables[1]
    assert f"from the MCP server at {url} (support-billing 1.0)" in by_url.stderr


def unwritable(folder: Path) -> Path:
    """A folder nothing can be made in: read-only by its mode, or for root (whom a mode does
    not stop) a folder of sysfs."""
    if os.geteuid() != 0:
        read_only = folder / "read-only"
        read_only.mkdir(mode=0o555)
        return read_only
    return Path("/sys/kernel")


@pytest.mark.parametrize(
    "case", ["no such server", "not an MCP server", "exits at once", "existing out", "unwritable"]
)
def test_bad_input_is_one_line_and_nothing_left(folder: Path, case: str) -> None:
    """Exit 2, one line on stderr naming the place and the problem, no file written, no
    server left running (the folder fixture), no temporary folder left."""
    work = folder / "work"
    work.mkdir()
    scratch = folder / "tmp"
    scratch.mkdir()
    out = work / "agent.toml"
    server = example_server(folder)
    says = {
        "no such server": f"MCP server `{folder}/no-such-server`: cannot start it",
        "not an MCP server": "printed a line on stdout that is not JSON-RPC during initialize",
        "exits at once": "closed its stdout (exited?) before it answered initialize",
        "existing out": f"--out {out}: {out} exists (--force replaces it)",
        "unwritable": "cannot write in",
    }[case]
    if case == "no such server":
        server = str(folder / "no-such-server")
    elif case == "not an MCP server":
        server = shlex.join([sys.executable, str(FAKE), "garbage", str(folder)])
    elif case == "exits at once":
        server = shlex.join([sys.executable, str(FAKE), "crash", str(folder)])
    elif case == "existing out":
        out.write_text("mine\n")
    else:
        out = unwritable(folder) / "agent.toml"
    before = sorted(folder.rglob("*"))
    done = harness(
        "init", "--agent", AGENT, "--mcp", server, "--out", str(out), cwd=work,
        env={"TMPDIR": str(scratch)},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("harness: ") and says in done.stderr, done.stderr
    assert sorted(folder.rglob("*")) == before
    if case == "existing out":
        assert out.read_text() == "mine\n"


def test_ctrl_c_while_the_server_hangs(folder: Path) -> None:
    """Ctrl-C while the server never answers: exit 130, the server is gone, and neither a
    file nor the server's scratch folder is left."""
    scratch = folder / "tmp"
    scratch.mkdir()
    server = shlex.join([sys.executable, str(FAKE), "hang", str(folder)])
    command = [sys.executable, "-m", "harness", "init", "--agent", AGENT, "--mcp", server]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    run = subprocess.Popen(
        [*command, "--out", str(folder / "a.toml")],
        cwd=folder,
        env={**env, "TMPDIR": str(scratch)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not servers_naming(folder, besides=run.pid):
            assert run.poll() is None and time.monotonic() < deadline, "no server started"
            time.sleep(0.05)
        (hung,) = servers_naming(folder, besides=run.pid)
        run.send_signal(signal.SIGINT)
        _, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 130, stderr
    assert stderr.splitlines()[-1] == "harness: interrupted"
    assert not hung.is_running() or hung.status() == psutil.STATUS_ZOMBIE
    assert list(scratch.iterdir()) == []
    assert not (folder / "a.toml").exists() and not (folder / "a").exists()


def test_the_classes_are_the_table_commands(folder: Path) -> None:
    """The tool table init writes classes the tools as ``table --from-mcp`` does."""
    done = harness(
        "init", "--agent", AGENT, "--mcp", example_server(folder), "--out", "x.toml", cwd=folder
    )
    assert done.returncode == 0, done.stderr
    table = harness("table", "--from-mcp", "--", *shlex.split(example_server(folder)), cwd=folder)
    assert table.returncode == 0, table.stderr
    theirs = ToolTable.parse(table.stdout, source="<stdout>").entries
    assert ToolTable.load(folder / "x" / "tools.toml").entries == theirs
    assert theirs["run_report"].idempotency is IdempotencyClass.UNKNOWN


def test_out_in_another_folder(folder: Path) -> None:
    """--out in a folder beside the one init runs in: the scenario loads there, and its
    agent's folder is the one init ran in, written relative to the scenario."""
    work = folder / "project"
    elsewhere = folder / "elsewhere" / "deeper"
    work.mkdir()
    elsewhere.mkdir(parents=True)
    out = elsewhere / "w.toml"
    done = harness("init", "--agent", AGENT, "--out", str(out), cwd=work)
    assert done.returncode == 0, done.stderr
    scenario = load_scenario(out)
    assert scenario.agent is not None
    assert scenario.agent.folder == "../../project"
    assert (out.parent / scenario.agent.folder).resolve() == work.resolve()
    assert (elsewhere / "w" / "tools.toml").is_file()
    assert f" trial {out} --seed 1" in done.stdout


def test_the_default_campaign_still_runs_after_init(folder: Path) -> None:
    """init into a scenarios folder whose scenarios name no agent says the folder's campaign
    leaves its scenario out; chaos with no --scenario then runs the others on the real
    runtime and says which it left out, in one line."""
    work = folder / "project"
    (work / "scenarios").mkdir(parents=True)
    shutil.copyfile(
        ROOT / "tests" / "data" / "scenarios" / "mini.toml", work / "scenarios" / "mini.toml"
    )
    done = harness("init", "--agent", AGENT, cwd=work)
    assert done.returncode == 0, done.stderr
    out = Path("scenarios") / f"{NAME}.toml"
    assert (work / out).is_file()
    (note,) = [line for line in done.stderr.splitlines() if "name no [agent]" in line]
    assert note.startswith("harness: scenarios/ holds scenarios that name no [agent]"), note
    assert "leaves this one out" in note
    chaos = harness(
        "chaos", "--random", "0", "--no-self-check", "--workers", "1", "--reports",
        str(folder / "reports"), cwd=work,
    )  # fmt: skip
    assert chaos.returncode == 0, chaos.stdout[-3000:] + chaos.stderr
    assert chaos.stderr.splitlines()[0] == (
        f"harness: left out {out}, which names an [agent]: a campaign of a folder runs the "
        f"scenarios that name none on real; run the agent's with --scenario {out}"
    )
    assert "runtime real, 1 scenarios" in chaos.stdout
    (run,) = (folder / "reports").iterdir()
    scenarios = {json.loads(line)["spec"]["scenario"] for line in (run / "trials.jsonl").open()}
    assert scenarios == {"scenarios/mini.toml"}


def test_the_agent_s_own_venv_is_chosen(folder: Path) -> None:
    """--agent "python DIR/agent.py" with a venv in DIR: init writes the agent's command with
    that venv's python, says so, and the trial it prints runs the agent under it and passes;
    without one, init keeps the command and says which python that is."""
    work = folder / "project"
    agent_dir = work / "my_agent"
    agent_dir.mkdir(parents=True)
    shutil.copyfile(
        ROOT / "examples" / "agents" / "plain_python" / "agent.py", agent_dir / "agent.py"
    )
    bare = harness("init", "--agent", "python my_agent/agent.py", "--out", "bare.toml", cwd=work)
    assert bare.returncode == 0, bare.stderr
    assert "harness: the agent runs under python" in bare.stderr
    assert ", as given: no venv (.venv/ or venv/) nor uv project beside it" in bare.stderr
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(agent_dir / ".venv")], check=True
    )
    done = harness("init", "--agent", "python my_agent/agent.py", cwd=work)
    assert done.returncode == 0, done.stderr
    venv_python = "my_agent/.venv/bin/python"
    assert f"harness: the agent runs under {venv_python} (a venv beside it;" in done.stderr
    scenario = load_scenario(work / "scenarios" / "my_agent.toml")
    assert scenario.agent is not None
    assert scenario.agent.command == f"{venv_python} my_agent/agent.py"
    command = shlex.split(done.stdout.splitlines()[0])
    trial = harness(*command[command.index("trial") :], "--reports", str(folder / "r"), cwd=work)
    assert trial.returncode == 0, trial.stdout[-3000:] + trial.stderr
    assert trial.stdout.splitlines()[-1] == "PASS"
