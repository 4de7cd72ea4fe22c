"""The warm start of a Python black box (``harness.blackbox.warm``, ``zygote.py``).

A life forked from the zygote sees what a fresh ``python PROGRAM`` sees (its argv, its
``sys.path[0]``, ``__main__``, its folder, environment and standard streams, its exit
status), joins the process group it is given and dies with it; the zygote refuses where a
fork would not start like a fresh interpreter, and dies with its socket. The same seed gives
the same failing trials, warm and plain.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.blackbox import zygote as zygote_module
from harness.blackbox.warm import (
    PLAN_ENV,
    ZYGOTE,
    WarmAgent,
    WarmPlan,
    ZygoteProcess,
    adopt,
    recording_command,
    start_warm,
)
from harness.exits import PYTHON_UNCAUGHT

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "warm"
PROBE = str(DATA / "probe.py")
PYTHON = sys.executable


def life_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.pop("PYTHONPATH", None)
    return {**env, "PYTHONPATH": str(DATA / "lib"), "TMPDIR": str(tmp_path), **extra}


def plan(program: list[str], imports: list[str]) -> WarmPlan:
    folder = (str(Path(program[0]).parent) + os.sep,) if program[0] != "-m" else ()
    return WarmPlan("test", PYTHON, tuple(program), tuple(imports), folder)


@pytest.fixture
def group() -> Iterator[int]:
    """A process group in this session, as a life's host leads one (its leader sleeps)."""
    leader = subprocess.Popen(["sleep", "60"], process_group=0)
    yield leader.pid
    with_group_gone(leader.pid)
    leader.wait()


def with_group_gone(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def run_plain(words: list[str], cwd: Path, env: dict[str, str], out: Path) -> tuple[int, str]:
    with open(out, "wb") as stdout:
        done = subprocess.run(
            [PYTHON, *words],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    return done.returncode, done.stderr.decode()


def run_warm(
    zygote: ZygoteProcess, words: list[str], cwd: Path, env: dict[str, str], out: Path, pgid: int
) -> tuple[int, str]:
    err = out.with_suffix(".err")
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        saved = os.dup(2)
        os.dup2(stderr.fileno(), 2)  # the life's errors go where this process's go
        try:
            started = start_warm(
                zygote.connect(), [PYTHON, *words], cwd, env, stdout.fileno(), pgid=pgid
            )
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    assert isinstance(started, WarmAgent), started
    return started.wait(), err.read_text()


def seen(path: Path) -> dict[str, object]:
    view: dict[str, object] = json.loads(path.read_text())
    return view


class TestFaithful:
    @pytest.mark.parametrize(
        "words",
        [[PROBE, "3"], ["-m", "probe", "0"]],
        ids=["script", "module"],
    )
    def test_a_warm_life_sees_what_a_plain_start_sees(
        self, tmp_path: Path, group: int, words: list[str]
    ) -> None:
        """argv, sys.path[0], __main__, folder, environment, streams and exit status agree."""
        path = {"PYTHONPATH": f"{DATA}:{DATA / 'lib'}"} if words[0] == "-m" else {}
        env = life_env(tmp_path, WARM_PROBE="life", **path)
        cwd = tmp_path / "trial"
        cwd.mkdir()
        plain = run_plain(words, cwd, env, tmp_path / "plain.out")
        zygote = ZygoteProcess(
            plan(words, ["json", "reads_home"]), life_env(tmp_path, WARM_PROBE="zygote", **path)
        )
        try:
            assert zygote.refused is None
            warm = run_warm(zygote, words, cwd, env, tmp_path / "warm.out", group)
        finally:
            zygote.close()
        assert warm == plain
        view, fresh = seen(tmp_path / "warm.out"), seen(tmp_path / "plain.out")
        assert view == fresh
        assert view["marker"] == "life" and view["cwd"] == str(cwd)
        assert view["fds"] == [0, 1, 2, 3]  # and the listing's own: nothing of the zygote's

    def test_a_framework_s_thousands_of_imports_reach_the_zygote(
        self, tmp_path: Path, group: int
    ) -> None:
        """A plan longer than a socket's send buffer (the Anthropic SDK's agent imports some
        4000 modules) reaches the zygote whole, in its own packets and, in a spawn request,
        compressed: it once failed with 'Message too long'."""
        names = ["xml.etree.ElementTree", "json"] * 10000
        assert len(json.dumps(names)) > 212992
        long = plan([PROBE, "0"], names)
        assert WarmPlan.decode(json.loads(json.dumps(long.encode()))) == long
        assert len(json.dumps(long.encode())) < 212992 // 10
        zygote = ZygoteProcess(long, life_env(tmp_path, WARM_PROBE="zygote"))
        try:
            assert zygote.refused is None, zygote.ready
            cwd = tmp_path / "trial"
            cwd.mkdir()
            env = life_env(tmp_path, WARM_PROBE="life")
            status, _ = run_warm(zygote, [PROBE, "0"], cwd, env, tmp_path / "warm.out", group)
        finally:
            zygote.close()
        assert status == 0
        assert seen(tmp_path / "warm.out")["marker"] == "life"

    def test_an_uncaught_exception_exits_1_with_the_program_s_traceback(
        self, tmp_path: Path, group: int
    ) -> None:
        """The traceback shows the program's frames only, as the interpreter prints it."""
        env = life_env(tmp_path)
        plain = run_plain([PROBE, "raise"], tmp_path, env, tmp_path / "plain.out")
        zygote = ZygoteProcess(plan([PROBE], ["json"]), env)
        try:
            warm = run_warm(zygote, [PROBE, "raise"], tmp_path, env, tmp_path / "warm.out", group)
        finally:
            zygote.close()
        assert warm == plain
        assert warm[0] == PYTHON_UNCAUGHT == zygote_module.UNCAUGHT
        assert "RuntimeError: the probe raised" in warm[1]

    def test_the_crash_free_run_records_the_program_s_imports_but_its_own(
        self, tmp_path: Path
    ) -> None:
        """The record lists what the program imported; the plan leaves its own modules out."""
        record = tmp_path / "imports.json"
        words = recording_command([PYTHON, PROBE, "0"], str(record))
        env = life_env(tmp_path)
        done = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        names = [n for n, _ in json.loads(record.read_text())["modules"]]
        assert "threading" in names and "helper" in names
        made = WarmPlan.from_record("test", [PYTHON, PROBE, "0"], record)
        assert isinstance(made, WarmPlan)
        assert "threading" in made.imports and "helper" not in made.imports

    def test_a_venv_in_the_program_s_folder_is_not_the_program_s_own(self, tmp_path: Path) -> None:
        """Its packages stay in the plan (an example agent keeps its .venv beside it)."""
        agent = tmp_path / "agent.py"
        agent.write_text("")
        site = tmp_path / ".venv" / "lib" / "site-packages"
        record = tmp_path / "imports.json"
        modules = [["langgraph", str(site / "langgraph.py")], ["tools", str(tmp_path / "tools.py")]]
        prefixes = [str(tmp_path / ".venv"), sys.base_prefix]
        record.write_text(json.dumps({"modules": modules, "prefixes": prefixes}))
        made = WarmPlan.from_record("test", [PYTHON, str(agent)], record)
        assert isinstance(made, WarmPlan) and made.imports == ("langgraph",)


class TestProcesses:
    def test_a_warm_life_is_in_the_given_group_and_dies_with_it(
        self, tmp_path: Path, group: int
    ) -> None:
        """A SIGKILL of the life's group kills it: its exit status says SIGKILL."""
        script = tmp_path / "sleeper.py"
        script.write_text("import time\ntime.sleep(60)\n")
        env = life_env(tmp_path)
        zygote = ZygoteProcess(plan([str(script)], ["json"]), env)
        try:
            started = start_warm(
                zygote.connect(), [PYTHON, str(script)], tmp_path, env, 1, pgid=group
            )
            assert isinstance(started, WarmAgent)
            assert os.getpgid(started.pid) == group
            os.killpg(group, signal.SIGKILL)
            assert started.wait() == -signal.SIGKILL
        finally:
            zygote.close()

    def test_the_zygote_and_its_lives_die_with_its_socket(self, tmp_path: Path, group: int) -> None:
        """Closing the zygote's socket ends the zygote and every life it still runs."""
        script = tmp_path / "sleeper.py"
        script.write_text("import time\ntime.sleep(60)\n")
        env = life_env(tmp_path)
        zygote = ZygoteProcess(plan([str(script)], ["json"]), env)
        started = start_warm(zygote.connect(), [PYTHON, str(script)], tmp_path, env, 1, pgid=group)
        assert isinstance(started, WarmAgent)
        life = psutil.Process(started.pid)
        zygote.close()
        assert zygote.process.poll() is not None
        assert not life.is_running() or life.status() == psutil.STATUS_ZOMBIE

    def test_a_life_whose_host_died_is_killed(self, tmp_path: Path, group: int) -> None:
        """A host gone before its life (killed outside its group) takes the life with it."""
        script = tmp_path / "sleeper.py"
        script.write_text("import time\ntime.sleep(60)\n")
        env = life_env(tmp_path)
        zygote = ZygoteProcess(plan([str(script)], ["json"]), env)
        try:
            conn = zygote.connect()
            started = start_warm(conn, [PYTHON, str(script)], tmp_path, env, 1, pgid=group)
            assert isinstance(started, WarmAgent)
            life = psutil.Process(started.pid)
            conn.close()
            life.wait(timeout=10)
        finally:
            zygote.close()


class TestRefused:
    @pytest.mark.parametrize(
        ("module", "why"),
        [
            ("starts_thread", "thread(s) run after the imports"),
            ("opens_file", "the imports left open /dev/null"),
        ],
    )
    def test_a_zygote_that_a_fork_would_not_copy_faithfully_refuses(
        self, tmp_path: Path, module: str, why: str
    ) -> None:
        """A thread or an open file after the imports: refused, with the reason."""
        zygote = ZygoteProcess(plan([PROBE], ["json", module]), life_env(tmp_path))
        try:
            assert zygote.refused is not None and why in zygote.refused
        finally:
            zygote.close()

    def test_an_observer_the_interpreter_did_not_load_is_refused(self, tmp_path: Path) -> None:
        """A power-loss life needs the library in the zygote before it forks: checked."""
        missing = str(tmp_path / "fsobserve.so")  # the loader ignores what it cannot load
        env = {**life_env(tmp_path), "LD_PRELOAD": missing}
        zygote = ZygoteProcess(plan([PROBE], ["json"]), env)
        try:
            assert zygote.refused == (
                f"the observer {missing} is not loaded in the agent's interpreter"
            )
        finally:
            zygote.close()

    def test_an_import_that_reads_a_per_life_variable_is_refused(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A module reading OPENAI_BASE_URL at import would freeze the first life's address."""
        record = tmp_path / "imports.json"
        modules = [["json", None], ["reads_base_url", None]]
        record.write_text(json.dumps({"modules": modules, "prefixes": [sys.prefix]}))
        monkeypatch.setenv("PYTHONPATH", str(DATA / "lib"))
        monkeypatch.delenv(PLAN_ENV, raising=False)
        adopted = adopt("test", [PYTHON, PROBE], record)
        assert adopted.plan is None
        assert adopted.line == (
            "warm start refused: reads_base_url read OPENAI_BASE_URL at import, which "
            "differs in each life; plain start"
        )
        assert PLAN_ENV not in os.environ

    def test_a_life_whose_variable_read_at_import_differs_is_refused(
        self, tmp_path: Path, group: int
    ) -> None:
        """Checked again at each fork: the life starts plain, told why."""
        env = life_env(tmp_path, WARM_PROBE="zygote")
        zygote = ZygoteProcess(plan([PROBE], ["json", "reads_home"]), env)
        try:
            other = {**env, "HOME": str(tmp_path)}
            said = start_warm(zygote.connect(), [PYTHON, PROBE], tmp_path, other, 1, pgid=group)
            assert said == "HOME was read at import (reads_home) and this life sets it otherwise"
        finally:
            zygote.close()

    @pytest.mark.parametrize("variable", ["PYTHONPATH", "PYTHONHASHSEED"])
    def test_a_life_whose_interpreter_variable_differs_is_refused(
        self, tmp_path: Path, group: int, variable: str
    ) -> None:
        """What the interpreter read as it started (its path, its flags) a fork cannot change."""
        env = life_env(tmp_path)
        zygote = ZygoteProcess(plan([PROBE], ["json"]), env)
        try:
            other = {**env, variable: "0"}
            said = start_warm(zygote.connect(), [PYTHON, PROBE], tmp_path, other, 1, pgid=group)
            assert said == (
                f"{variable} is read by the interpreter as it starts and this life sets it "
                "otherwise"
            )
        finally:
            zygote.close()

    def test_a_command_that_is_not_a_python_program_is_refused(self, tmp_path: Path) -> None:
        """Node, or Python with interpreter options: said in one line."""
        record = tmp_path / "none.json"
        assert adopt("test", ["node", "agent.js"], record).line == (
            "warm start refused: node is not a Python interpreter; plain start"
        )
        assert adopt("test", [PYTHON, "-u", PROBE], record).line == (
            "warm start refused: interpreter options (-u) are not taken by the warm start; "
            "plain start"
        )


AGENT = "examples/agents/plain_python/agent.py"
RUNTIME = f"cmd:python {AGENT}"
PHONE = "scenarios/phone_task.toml"
FEW = ("op.reply_3", "op.reply_4", "tool.before_reply_3", "model.received_3_power-loss")
"""Kills that make the agent replay a call, and a power loss, for the suite's quick run."""


def failing_trials(
    tmp_path: Path, launch: str, timeout_s: float, only: tuple[str, ...]
) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """The exhaustive campaign of the plain agent on ``phone_task``, seed 7: each failing
    trial's failed invariants, and how each life's agent was started."""
    from harness.chaos.campaign import CampaignConfig, run_trials
    from harness.chaos.trial import TrialSpec

    def keep(spec: TrialSpec) -> bool:
        return not only or spec.trial_id.endswith(tuple(f"-{name}" for name in only))

    config = CampaignConfig(
        tmp_path / launch,
        (PHONE,),
        7,
        random_trials=0,
        workers=2,
        runtime=RUNTIME,
        launch=launch,
        timeout_s=timeout_s,
    )
    config.run_dir.mkdir()
    results = run_trials(config, lambda result: None, select=keep)
    assert results
    starts = [
        json.loads(line)["start"]
        for r in results
        for line in (r.directory / "events.jsonl").read_text().splitlines()
        if json.loads(line)["event"] == "agent"
    ]
    return {r.spec.trial_id: r.failed_invariants for r in results if r.status == "fail"}, starts


class TestSameVerdicts:
    @pytest.mark.parametrize(
        "only",
        [pytest.param(FEW, id="some"), pytest.param((), id="all", marks=pytest.mark.long)],
    )
    def test_the_same_seed_fails_the_same_trials_warm_and_plain(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, only: tuple[str, ...]
    ) -> None:
        """The plain agent's exhaustive trials: the same failing trials and invariants, every
        life forked warm in one campaign and started plain in the other."""
        from harness.commands.options import check_black_box

        monkeypatch.chdir(ROOT)
        monkeypatch.setenv(PLAN_ENV, "")  # whatever check_black_box adopts goes with the test
        timeout_s = check_black_box(RUNTIME, PHONE, "warm")
        assert os.environ[PLAN_ENV]
        plain, started_plain = failing_trials(tmp_path, "fork", timeout_s, only)
        warm, started_warm = failing_trials(tmp_path, "warm", timeout_s, only)
        assert plain  # the agent fails some: the comparison has something to compare
        assert warm == plain
        assert set(started_plain) == {"plain"} and set(started_warm) == {"warm"}


def zygotes_of(harness: int) -> list[psutil.Process]:
    """The zygotes (and the lives they forked, which carry their command line) of the
    fork servers of a harness's workers: their command lines end with its pid."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if str(ZYGOTE) in cmdline and str(harness) in cmdline[-2:]:
            found.append(proc)
    return found


def test_ctrl_c_takes_the_zygotes_and_their_lives_with_the_campaign(tmp_path: Path) -> None:
    """A SIGINT to a warm campaign under way leaves no zygote, no life, no temporary folder."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    harness = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness",
            "chaos",
            "--runtime",
            RUNTIME,
            "--only",
            "phone_task",
            "--seed",
            "7",
            "--launch",
            "warm",
            "--workers",
            "2",
            "--reports",
            str(tmp_path / "r"),
        ],
        cwd=ROOT,
        env={**env, "TMPDIR": str(tmpdir)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not zygotes_of(harness.pid):
            assert harness.poll() is None, harness.communicate()[1].decode()[-2000:]
            assert time.monotonic() < deadline, "no zygote started within 120 s"
            time.sleep(0.05)  # the poll's pace only: the wait ends on the zygote appearing
        os.killpg(harness.pid, signal.SIGINT)
        _, stderr = harness.communicate(timeout=60)
    finally:
        if harness.poll() is None:
            os.killpg(harness.pid, signal.SIGKILL)
            harness.wait()
    assert harness.returncode in (130, 0), stderr.decode()[-2000:]
    assert zygotes_of(harness.pid) == []
    assert list(tmpdir.iterdir()) == []
