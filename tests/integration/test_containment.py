"""Containment with real processes: hostile calls are recorded in the world, never performed.

The agent runs ``scenarios/containment.toml`` (``rm -rf /``, a write to
``/etc/passwd``, a POST to a real address, ...) with ``HARNESS_CONTAINMENT=1``,
so an audit hook stops it (AGENT_CONTAINED) at its first attempt to reach outside its
trial directory. The run must finish, the world must hold the calls, and
files outside the trial must be untouched. Negative controls show that the
same hook does stop a process that tries, and a trial with kills shows that
containment and crash recovery live together.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.agent.plan import Plan
from harness.chaos.scenario import compile_plan, load_scenario, write_plan
from harness.chaos.schedule import OP_FAILPOINTS, CrashSchedule, Life
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import Golden, TrialSpec, prepare_golden, run_trial
from harness.exits import AGENT_CONTAINED
from harness.world.store import effect_rows

ROOT = Path(__file__).resolve().parents[2]
CONTAINMENT = ROOT / "scenarios" / "containment.toml"
SEED = 1
MESSAGE = "harness.agent: containment: "
PASSWD = Path("/etc/passwd")
OLD_MTIME_NS = 978_307_200 * 10**9  # 2001-01-01: any write would move it

# The kind of ``calls`` row each UNKNOWN-class tool records instead of acting.
RECORDED_KIND = {
    "shell_execute": "shell",
    "terminal_exec": "terminal_exec",
    "code_runner": "code",
    "http_request": "http",
    "mcp_call": "mcp",
}
# What a finished trial directory may hold (the WAL files only until a checkpoint).
TRIAL_FILES = {"plan.json", "journal", "world.db"}
TRIAL_FILES_ALLOWED = TRIAL_FILES | {"world.db-wal", "world.db-shm"}

Fingerprint = tuple[bytes, int]


def fingerprint(path: Path) -> Fingerprint:
    """A file's content and modification time."""
    return path.read_bytes(), path.stat().st_mtime_ns


def agent_env(*, contained: bool = True, **extra: str) -> dict[str, str]:
    """The test's environment without any harness variable, plus containment and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    if contained:
        env["HARNESS_CONTAINMENT"] = "1"
    env.update(extra)
    return env


def run_agent(trial: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """One incarnation of the agent on ``trial``, started as the supervisor starts it."""
    return subprocess.run(
        [sys.executable, "-I", "-m", "harness.agent", str(trial)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def new_trial(directory: Path) -> Plan:
    """Make ``directory`` a trial of the containment scenario; returns its plan."""
    directory.mkdir(parents=True)
    plan = compile_plan(load_scenario(CONTAINMENT), seed=SEED, source=str(CONTAINMENT))
    write_plan(plan, directory / "plan.json")
    return plan


@dataclass(frozen=True, slots=True)
class Outside:
    """Places outside a trial: a sibling folder with a sentinel, and names in /tmp."""

    sibling: Path
    sentinel: Path
    tmp_sentinel: Path
    tmp_absent: Path

    def guarded(self) -> dict[Path, Fingerprint]:
        return {p: fingerprint(p) for p in (PASSWD, self.sentinel, self.tmp_sentinel)}


def make_outside(sibling: Path) -> Outside:
    """Fill ``sibling`` with a sentinel and an empty folder, and put a sentinel in /tmp."""
    sentinel = sibling / "sentinel.txt"
    sentinel.write_text("left alone\n")
    (sibling / "empty").mkdir()
    name = f"harness-containment-{uuid.uuid4().hex}"
    tmp_sentinel = Path("/tmp") / f"{name}.txt"
    tmp_sentinel.write_text("left alone too\n")
    for path in (sentinel, tmp_sentinel):
        os.utime(path, ns=(OLD_MTIME_NS, OLD_MTIME_NS))
    return Outside(sibling, sentinel, tmp_sentinel, Path("/tmp") / f"{name}-absent")


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outside]:
    """Places outside the trials of this module, shared by its real agent runs."""
    places = make_outside(tmp_path_factory.mktemp("outside"))
    yield places
    places.tmp_sentinel.unlink()


@pytest.fixture
def fresh_outside(tmp_path: Path) -> Iterator[Outside]:
    """Places outside the trial, for one test only (a failing control cannot spoil others)."""
    (tmp_path / "outside").mkdir()
    places = make_outside(tmp_path / "outside")
    yield places
    places.tmp_sentinel.unlink()
    if places.tmp_absent.is_dir():  # only if a control failed to stop a mkdir
        places.tmp_absent.rmdir()
    places.tmp_absent.unlink(missing_ok=True)


@dataclass(frozen=True, slots=True)
class ContainedRun:
    done: subprocess.CompletedProcess[str]
    trial: Path
    plan: Plan
    before: dict[Path, Fingerprint]


@pytest.fixture(scope="module")
def contained_run(tmp_path_factory: pytest.TempPathFactory, outside: Outside) -> ContainedRun:
    """The containment scenario, run once by a contained agent."""
    trial = tmp_path_factory.mktemp("contained") / "trial"
    plan = new_trial(trial)
    before = outside.guarded()
    return ContainedRun(run_agent(trial, agent_env()), trial, plan, before)


class TestContainedAgent:
    def test_finishes(self, contained_run: ContainedRun) -> None:
        """The contained agent runs the whole hostile scenario and exits 0, never stopped."""
        assert contained_run.done.returncode == 0, contained_run.done.stderr
        assert MESSAGE not in contained_run.done.stderr

    def test_world_records_the_hostile_calls(self, contained_run: ContainedRun) -> None:
        """Each shell, terminal, code, HTTP and MCP step is one ``calls`` row with its arguments."""
        calls = [
            row for row in effect_rows(contained_run.trial / "world.db") if row.table == "calls"
        ]
        recorded = {row.op_id: (row.values[0], json.loads(row.values[1])) for row in calls}
        expected = {
            step.op_id: (RECORDED_KIND[step.tool], dict(step.args))
            for step in contained_run.plan.steps
            if step.tool in RECORDED_KIND
        }
        assert len(calls) == len(expected) == 5
        assert recorded == expected
        assert recorded["s001"] == ("shell", {"command": "rm -rf /"})

    def test_passwd_write_lands_in_the_simulated_files(self, contained_run: ContainedRun) -> None:
        """The write to /etc/passwd and the fork bomb's keystrokes are rows of the world."""
        rows = {(row.table, row.values) for row in effect_rows(contained_run.trial / "world.db")}
        written = next(s for s in contained_run.plan.steps if s.tool == "write_file")
        assert ("files", ("/etc/passwd", written.args["content"])) in rows
        assert ("terminal_input", (":(){ :|:& };:",)) in rows

    def test_outside_files_unchanged(self, contained_run: ContainedRun, outside: Outside) -> None:
        """/etc/passwd and the sentinels beside the trial and in /tmp keep content and mtime."""
        assert outside.guarded() == contained_run.before
        assert sorted(p.name for p in outside.sibling.iterdir()) == ["empty", "sentinel.txt"]

    def test_trial_holds_only_its_files(self, contained_run: ContainedRun) -> None:
        """The trial directory holds the plan, the journal and the world, nothing else."""
        names = {p.name for p in contained_run.trial.iterdir()}
        assert TRIAL_FILES <= names <= TRIAL_FILES_ALLOWED
        assert all(p.is_file() for p in contained_run.trial.iterdir())


class TestAgentInstallsTheHook:
    def test_stops_a_write_outside(self, tmp_path: Path, outside: Outside) -> None:
        """Told to write its hit counts outside the trial, a contained agent is stopped."""
        new_trial(tmp_path / "trial")
        counts = outside.sibling / "counts.json"
        env = agent_env(HARNESS_FAILPOINT_COUNTS=str(counts))
        done = run_agent(tmp_path / "trial", env)
        assert done.returncode == AGENT_CONTAINED, done.stderr
        assert f"{MESSAGE}open ('{counts}'" in done.stderr
        assert not counts.exists()

    def test_only_when_asked(self, tmp_path: Path) -> None:
        """Without ``HARNESS_CONTAINMENT=1`` the same write outside goes through."""
        new_trial(tmp_path / "trial")
        counts = tmp_path / "counts.json"
        done = run_agent(
            tmp_path / "trial", agent_env(contained=False, HARNESS_FAILPOINT_COUNTS=str(counts))
        )
        assert done.returncode == 0, done.stderr
        assert counts.exists()

    def test_failpoint_kill_of_itself_is_allowed(self, tmp_path: Path) -> None:
        """A failpoint ``kill`` with no supervisor SIGKILLs the agent's own pid, unhindered."""
        new_trial(tmp_path / "trial")
        env = agent_env(HARNESS_FAILPOINTS="op.after_intent@2=kill")
        done = run_agent(tmp_path / "trial", env)
        assert done.returncode == -signal.SIGKILL, done.stderr
        assert MESSAGE not in done.stderr


# Runs ``install_containment(TRIAL)`` and then one action; argv: trial, sibling, /tmp name.
SCRIPT = """
import os, shutil, socket, sqlite3, subprocess, sys
from pathlib import Path
from harness.agent.audit import install_containment
TRIAL, SIBLING, IN_TMP = (Path(arg) for arg in sys.argv[1:4])
install_containment(TRIAL)
{action}
print("survived", flush=True)
"""

# case -> (the event the message names, the action)
STOPPED: dict[str, tuple[str, str]] = {
    "write-in-tmp": ("open", "open(IN_TMP, 'w')"),
    "write-beside-trial": ("open", "(SIBLING / 'new.txt').write_text('x')"),
    "append-to-passwd": ("open", "open('/etc/passwd', 'a')"),
    "os-open-creat": ("open", "os.open(IN_TMP, os.O_WRONLY | os.O_CREAT)"),
    "write-through-link": (
        "open",
        "os.symlink(SIBLING, TRIAL / 'link')\nopen(TRIAL / 'link' / 'new.txt', 'w')",
    ),
    "connect": ("socket.", "socket.create_connection(('127.0.0.1', 9))"),
    "udp-socket": ("socket.__new__", "socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"),
    "unix-connect": ("socket.connect", "socket.socket(socket.AF_UNIX).connect('/run/x.sock')"),
    "popen": ("subprocess.Popen", "subprocess.run(['true'])"),
    "system": ("os.system", "os.system('true')"),
    "fork": ("os.fork", "os.fork()"),
    "exec": ("os.exec", "os.execv('/bin/true', ['true'])"),
    "posix-spawn": ("os.posix_spawn", "os.posix_spawn('/bin/true', ['true'], os.environ)"),
    "signal-parent": ("os.kill", "os.kill(os.getppid(), 0)"),
    "rmtree": ("shutil.rmtree", "shutil.rmtree(SIBLING)"),
    "remove": ("os.remove", "os.remove(SIBLING / 'sentinel.txt')"),
    "rename-out": ("os.rename", "(TRIAL / 'f').write_text('x')\nos.rename(TRIAL / 'f', IN_TMP)"),
    "rmdir": ("os.rmdir", "os.rmdir(SIBLING / 'empty')"),
    "mkdir": ("os.mkdir", "os.mkdir(IN_TMP)"),
    "sqlite-outside": ("sqlite3.connect", "sqlite3.connect(SIBLING / 'other.db')"),
}

ALLOWED: dict[str, str] = {
    "write-inside": (
        "(TRIAL / 'a').write_text('x')\nos.rename(TRIAL / 'a', TRIAL / 'b')\nos.remove(TRIAL / 'b')"
    ),
    "tree-inside": "os.makedirs(TRIAL / 'd' / 'e')\nshutil.rmtree(TRIAL / 'd')",
    "read-anywhere": "open('/etc/passwd').read()\nimport json",
    "dev-null": "open('/dev/null', 'w').write('x')",
    "signal-itself": "os.kill(os.getpid(), 0)",
    "sqlite-inside": "sqlite3.connect(TRIAL / 'w.db').execute('PRAGMA journal_mode=WAL')",
    # The agent runs a batch of calls on an event loop, which wakes itself through a
    # Unix socket pair, and makes the journal's writes in a thread of its own.
    "event-loop": (
        "import asyncio\nasync def main():\n"
        "    await asyncio.get_running_loop().run_in_executor(None, os.getpid)\n"
        "asyncio.run(main())"
    ),
}


def run_script(action: str, trial: Path, outside: Outside) -> subprocess.CompletedProcess[str]:
    """Run ``action`` in a fresh interpreter contained to ``trial``."""
    trial.mkdir(exist_ok=True)
    args = [str(trial), str(outside.sibling), str(outside.tmp_absent)]
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.format(action=action), *args],
        cwd=ROOT,
        env=agent_env(contained=False),
        capture_output=True,
        text=True,
        timeout=60,
    )


class TestHookStops:
    @pytest.mark.parametrize("case", sorted(STOPPED))
    def test_stopped_before_the_effect(
        self, case: str, tmp_path: Path, fresh_outside: Outside
    ) -> None:
        """An action reaching outside the trial exits 4, names its event, and changes nothing."""
        event, action = STOPPED[case]
        before = fresh_outside.guarded()
        done = run_script(action, tmp_path / "trial", fresh_outside)
        assert done.returncode == AGENT_CONTAINED, done.stderr
        assert f"{MESSAGE}{event}" in done.stderr
        assert "survived" not in done.stdout
        assert fresh_outside.guarded() == before
        assert sorted(p.name for p in fresh_outside.sibling.iterdir()) == ["empty", "sentinel.txt"]
        assert not fresh_outside.tmp_absent.exists()

    @pytest.mark.parametrize("case", sorted(ALLOWED))
    def test_allowed(self, case: str, tmp_path: Path, fresh_outside: Outside) -> None:
        """Reads anywhere, writes inside the trial, /dev/null and signals to itself go through."""
        done = run_script(ALLOWED[case], tmp_path / "trial", fresh_outside)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "survived\n"


@pytest.fixture(scope="module")
def contained_supervisor() -> Supervisor:
    return Supervisor(restart_budget=8, timeout_s=60, extra_env={"HARNESS_CONTAINMENT": "1"})


@pytest.fixture(scope="module")
def contained_golden(
    tmp_path_factory: pytest.TempPathFactory, contained_supervisor: Supervisor
) -> Golden:
    directory = tmp_path_factory.mktemp("contained-golden")
    return prepare_golden(str(CONTAINMENT), SEED, directory, contained_supervisor)


class TestContainedTrial:
    # No step of the containment scenario is a multi-step tool: op.mid_effect is never hit.
    @pytest.mark.parametrize("failpoint", [f for f in OP_FAILPOINTS if f != "op.mid_effect"])
    def test_kill_and_recover_keep_every_invariant(
        self,
        failpoint: str,
        tmp_path: Path,
        contained_golden: Golden,
        contained_supervisor: Supervisor,
        outside: Outside,
    ) -> None:
        """A contained trial killed at a failpoint passes every invariant and stays inside."""
        hits = contained_golden.hits.get(failpoint, 0)
        assert hits > 0, f"the containment scenario never reaches {failpoint}"
        before = outside.guarded()
        schedule = CrashSchedule((Life(f"{failpoint}@{min(2, hits)}=kill"),))
        spec = TrialSpec(str(CONTAINMENT), SEED, schedule, "real", f"contained-{failpoint}")
        result = run_trial(
            spec, tmp_path / "trial", contained_golden.directory, contained_supervisor
        )
        failed = {v.invariant: v.evidence for v in result.verdicts if v.status != "pass"}
        assert failed == {}
        assert result.kills == 1
        lives = json.loads((result.directory / "lives.json").read_text())
        assert [life["returncode"] for life in lives] == [-signal.SIGKILL, 0]
        assert not any(MESSAGE in life["stderr"] for life in lives)
        assert outside.guarded() == before
