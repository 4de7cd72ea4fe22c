"""Bad options and schedules through the real command line: exit 2, one line, nothing run.

Each case runs ``python -m harness`` as a subprocess watched by the observer
of ``test_bad_input`` (it reports every process the interpreter starts): the
refusal must name the option or the schedule entry and the problem, print no
traceback, start no process and create no reports folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.chaos.scenario import load_scenario
from tests.conftest import run_harness
from tests.integration.test_bad_input import SPAWNED, observer

__all__ = ["observer"]  # the fixture, imported for its use below

MINI = "tests/data/scenarios/mini.toml"
WITH_AGENT = "tests/data/agent_scenarios/phone_agent.toml"

CASES: list[tuple[str, list[str], str]] = [
    ("unknown module", ["chaos", "--runtime", "module:nosuchmod"], "cannot import nosuchmod"),
    ("module without main", ["chaos", "--runtime", "module:os.path"], "has no main(argv)"),
    ("unknown runtime", ["chaos", "--runtime", "nosuch"], "unknown runtime 'nosuch'"),
    ("no workers", ["chaos", "--workers", "0"], "--workers: 0 is not at least 1"),
    ("negative workers", ["chaos", "--workers", "-1"], "--workers: -1 is not at least 1"),
    ("negative random", ["chaos", "--random", "-5"], "--random: -5 is not a count"),
    ("compare no workers", ["compare", "--workers", "0"], "--workers: 0 is not at least 1"),
    ("no time", ["chaos", "--timeout", "0"], "--timeout: 0 is not a positive number of seconds"),
    ("words for time", ["trial", MINI, "--timeout", "soon"], "'soon' is not a number of seconds"),
    (
        "compare a black box with a runtime",
        ["compare", "--runtime", "cmd:python3 agent.py", "--runtime", "real"],
        "--runtime cmd:python3 agent.py: a black box is compared only with black boxes, "
        "not with real",
    ),
    (
        "bogus power loss",
        ["trial", MINI, "--seed", "1", "--schedule", '[{"after_death":"power-loss:bogus"}]'],
        "life 1: 'power-loss:bogus': power-loss is drop",
    ),
    (
        "unknown failpoint",
        ["trial", MINI, "--seed", "1", "--schedule", '[{"failpoints":"op.nonsense@3=kill"}]'],
        "life 1: failpoints: entry 'op.nonsense@3=kill': unknown failpoint",
    ),
    (
        "unknown action",
        [
            "trial",
            MINI,
            "--seed",
            "1",
            "--schedule",
            '[{"failpoints":"op.after_effect@3=explode"}]',
        ],
        "unknown action 'explode'",
    ),
    (
        "negative kill time",
        ["trial", MINI, "--seed", "1", "--schedule", '[{"kill_after_ms":-3}]'],
        "life 1: kill_after_ms: -3 is not a number of milliseconds >= 0",
    ),
    (
        "aim without a kill time",
        ["trial", MINI, "--seed", "1", "--schedule", '[{"aim":"invoke s002"}]'],
        "life 1: aim: 'invoke s002' must be 'invoke <op>' or '<failpoint> <op>'",
    ),
    (
        "unknown table",
        ["trial", MINI, "--seed", "1", "--schedule", '[{"table":"mine"}]'],
        "life 1: table: 'mine' is not a table variant",
    ),
    (
        "schedule not json",
        ["trial", MINI, "--seed", "1", "--schedule", "[{"],
        "--schedule: not JSON",
    ),
    (
        "runtime agent without an [agent] table",
        ["trial", MINI, "--seed", "1", "--runtime", "agent"],
        f"--runtime agent: {MINI} has no [agent] table",
    ),
    (
        "one scenario with an [agent] table and one without",
        ["chaos", "--scenario", MINI, "--scenario", WITH_AGENT],
        f"{MINI} has no [agent] table and {WITH_AGENT} has one: give --runtime",
    ),
    (
        "runtime typo",
        ["chaos", "--runtime", "rael"],
        "unknown runtime 'rael' (did you mean 'real'?): give cmd:\"<command line>\" (any "
        "agent program, as a black box), module:<dotted.module>",
    ),
    (
        "unknown option of chaos",
        ["chaos", "--seeds", "7"],
        "python -m harness chaos: error: unrecognized arguments: --seeds 7 (did you mean --seed?)",
    ),
    (
        "trial with an unknown module",
        ["trial", MINI, "--seed", "1", "--runtime", "module:nosuchmod"],
        "cannot import nosuchmod",
    ),
]


ONLY_TYPO = (
    "only typo",
    ["chaos", "--scenarios", "tests/data/scenarios", "--only", "mnii"],
    "--only mnii: no scenario of that name in tests/data/scenarios (did you mean 'mini'?)",
)
CASES.append(ONLY_TYPO)


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder nothing can be made in: read-only by its mode, or for root (whom a mode
    does not stop) a folder of sysfs, where making one is refused to root too."""
    if os.geteuid() != 0:
        folder = tmp_path / "read-only"
        folder.mkdir(mode=0o555)
        return folder
    return Path("/sys/kernel")


REPORTS_CASES: list[tuple[str, str, str]] = [
    ("read-only reports", "unwritable/r", "not writable"),
    ("reports is a file", "a-file", "is not a folder"),
    ("reports under a file", "a-file/r", "a-file is not a folder"),
]


class TestBadReports:
    @pytest.mark.parametrize("command", ["chaos", "trial"])
    @pytest.mark.parametrize(
        ("case", "where", "says"), REPORTS_CASES, ids=[c[0] for c in REPORTS_CASES]
    )
    def test_refused_in_one_line_before_anything_runs(
        self, command: str, case: str, where: str, says: str, tmp_path: Path, observer: Path
    ) -> None:
        """A --reports no run folder can be made in exits 2 with one line naming it; no
        process starts and nothing is left in it."""
        (tmp_path / "a-file").write_text("not a folder\n")
        if where.startswith("unwritable"):
            reports = unwritable_folder(tmp_path) / "r"
        else:
            reports = tmp_path / where
        target = [MINI, "--seed", "1"] if command == "trial" else ["--scenario", MINI]
        done = run_harness(command, *target, "--reports", str(reports), pythonpath=observer)
        assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr)
        assert done.stderr.startswith(f"harness: --reports {reports}: "), done.stderr
        assert says in done.stderr, done.stderr
        assert len(done.stderr.splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr + done.stdout
        assert SPAWNED not in done.stderr
        assert not reports.is_dir()


class TestBadOptions:
    @pytest.mark.parametrize(("case", "args", "says"), CASES, ids=[c[0] for c in CASES])
    def test_refused_before_anything_runs(
        self, case: str, args: list[str], says: str, tmp_path: Path, observer: Path
    ) -> None:
        """The bad option or schedule entry exits 2 naming it; no process, no run folder."""
        reports = tmp_path / "r"
        done = run_harness(*args, "--reports", str(reports), pythonpath=observer)
        assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr)
        assert says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr + done.stdout
        assert SPAWNED not in done.stderr
        assert not reports.exists()


INIT_AGENT = f"{sys.executable} examples/agents/plain_python/agent.py"


class TestInitOut:
    def test_out_in_another_folder_is_taken(self, tmp_path: Path, observer: Path) -> None:
        """init --out in a folder far from the one it runs in is not refused (its agent's
        folder, relative to the scenario, is checked where it resolves): the scenario is
        written and loads, and no process starts."""
        out = tmp_path / "elsewhere" / "w.toml"
        out.parent.mkdir()
        done = run_harness("init", "--agent", INIT_AGENT, "--out", str(out), pythonpath=observer)
        assert done.returncode == 0, done.stderr
        assert SPAWNED not in done.stderr
        assert load_scenario(out).agent is not None

    def test_out_in_a_missing_folder_is_refused(self, tmp_path: Path, observer: Path) -> None:
        """init --out in a folder that does not exist exits 2 with one line naming it, and
        makes nothing."""
        out = tmp_path / "missing" / "w.toml"
        done = run_harness("init", "--agent", INIT_AGENT, "--out", str(out), pythonpath=observer)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr == f"harness: --out {out}: no folder {out.parent}\n"
        assert done.stdout == "" and SPAWNED not in done.stderr
        assert list(tmp_path.iterdir()) == []
