"""``python -m harness check-table`` through the real command line, as real subprocesses.

Each run has its own TMPDIR, which must be empty once the command is done (the
scratch worlds are removed), and an observer (``sitecustomize``, as in
``test_bad_input``) that reports any process the command starts: it needs none.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.chaos.scenario import compile_plan, load_scenario
from harness.runtime.classes import IdempotencyClass, ToolClass, ToolTable
from harness.world import CATALOG
from tests.integration.test_bad_input import OBSERVER, SPAWNED

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
RO, IW, NI = (
    IdempotencyClass.READ_ONLY,
    IdempotencyClass.IDEMPOTENT_WRITE,
    IdempotencyClass.NON_IDEMPOTENT,
)


@dataclass(frozen=True)
class Run:
    status: int
    stdout: str
    stderr: str
    tmpdir: Path

    @property
    def last_line(self) -> str:
        return self.stdout.strip().splitlines()[-1]


CheckTable = Callable[..., Run]


@pytest.fixture(scope="module")
def observer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("observer")
    (folder / "sitecustomize.py").write_text(OBSERVER)
    return folder


@pytest.fixture
def check_table(tmp_path: Path, observer: Path) -> CheckTable:
    """Run ``python -m harness check-table ARGS`` from the repository root."""

    def run(*args: str) -> Run:
        tmpdir = tmp_path / "tmpdir"
        tmpdir.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
        env.update(PYTHONPATH=str(observer), TMPDIR=str(tmpdir))
        done = subprocess.run(
            [sys.executable, "-m", "harness", "check-table", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert SPAWNED not in done.stderr, done.stderr
        return Run(done.returncode, done.stdout, done.stderr, tmpdir)

    return run


def table_file(path: Path, moves: dict[str, ToolClass]) -> Path:
    """The shipped table with some tools moved to another class, as a table file."""
    entries = {**ToolTable.shipped().entries, **moves}
    sections: dict[bool, dict[str, list[str]]] = {False: {}, True: {}}
    for tool, cls in sorted(entries.items()):
        sections[cls.ask_user].setdefault(cls.idempotency.value, []).append(tool)
    lines = ["format = 1", "[classes]"]
    lines += [f"{name} = {tools!r}" for name, tools in sections[False].items()]
    lines += ["[ask_user]"]
    lines += [f"{name} = {tools!r}" for name, tools in sections[True].items()]
    path.write_text("\n".join(lines).replace("'", '"') + "\n", "utf-8")
    assert ToolTable.load(path).classify(next(iter(moves))) == next(iter(moves.values()))
    return path


class TestCheckTable:
    def test_the_shipped_table_passes_on_the_shipped_scenarios(
        self, check_table: CheckTable
    ) -> None:
        """Exit 0, every catalog tool in the table, nothing unsafe, the scratch removed; a
        scenario with a table of its own is held against it, in a report of its own."""
        run = check_table()
        assert run.status == 0, run.stdout + run.stderr
        for tool in CATALOG:
            assert tool in run.stdout
        assert "UNSAFE" not in run.stdout
        lines = run.stdout.splitlines()
        assert lines.index("tool table harness/runtime/tools.toml against what its tools do") < (
            lines.index(
                "PASS: 83 calls of 25 tools in 14 scenarios; unsafe: none; 0 unjudged, 0 notes"
            )
        )
        assert "tool table scenarios/support_billing/tools.toml against what its tools do" in lines
        keyed = lines.index(
            "tool table scenarios/payment_flow/tools.toml against what its tools do"
        )
        assert (
            "PASS: 7 calls of 7 tools in 1 scenario; unsafe: none; 0 unjudged, 0 notes"
            in (lines[keyed:])
        )
        assert run.last_line == (
            "PASS: 10 calls of 10 tools in 1 scenario; unsafe: none; 0 unjudged, 0 notes"
        )
        assert list(run.tmpdir.iterdir()) == []

    def test_ui_tap_as_idempotent_write_fails_with_the_rows_its_replay_changed(
        self,
        check_table: CheckTable,
        tmp_path: Path,
    ) -> None:
        """Exit 1, ui_tap named as unsafe, and the tap its replay added printed as evidence;
        a scenario given twice (two spellings) is audited once."""
        table = table_file(tmp_path / "tap-idempotent.toml", {"ui_tap": ToolClass(IW)})
        phone = "scenarios/phone_task.toml"
        run = check_table(str(table), "--scenario", phone, "--scenario", f"./{phone}")
        assert run.status == 1, run.stdout + run.stderr
        assert "UNSAFE ui_tap, idempotent_write, at phone_task s003" in run.stdout
        assert (
            "classed idempotent_write, which recovery retries after a crash, but its replay "
            "changed the world" in run.stdout
        )
        assert "replay: + ui_taps(element='com.example.todo:id/new_item_button')" in run.stdout
        assert run.last_line.startswith("FAIL: 6 calls of 6 tools in 1 scenario; unsafe: ui_tap;")
        assert list(run.tmpdir.iterdir()) == []

    def test_a_writing_tool_as_read_only_fails(
        self, check_table: CheckTable, tmp_path: Path
    ) -> None:
        """Exit 1: write_file classed read_only, and the file its first call wrote is shown."""
        table = table_file(tmp_path / "write-read-only.toml", {"write_file": ToolClass(RO)})
        run = check_table(str(table))
        assert run.status == 1, run.stdout + run.stderr
        assert "UNSAFE write_file, read_only, at repo_edit s002" in run.stdout
        assert "its first call changed the world" in run.stdout
        assert "first call: + files(path='/etc/passwd', content=" in run.stdout
        assert "unsafe: write_file;" in run.last_line
        assert list(run.tmpdir.iterdir()) == []

    def test_an_idempotent_tool_classed_non_idempotent_is_a_note(
        self,
        check_table: CheckTable,
        tmp_path: Path,
    ) -> None:
        """Exit 0 with a note: write_file's replay changed nothing, it could be retried."""
        table = table_file(tmp_path / "write-non-idempotent.toml", {"write_file": ToolClass(NI)})
        run = check_table(str(table))
        assert run.status == 0, run.stdout + run.stderr
        assert "note write_file, non_idempotent, at containment s002" in run.stdout
        assert "its replay changed nothing: could be idempotent_write" in run.stdout
        # One note per shipped scenario whose plan (of check-table's seed, 1) writes a file:
        # each audits a tool once; the generated one's task is drawn from that seed.
        plans = [
            compile_plan(load_scenario(p), seed=1, source=str(p)) for p in SCENARIOS.glob("*.toml")
        ]
        writers = [p for p in plans if any(s.tool == "write_file" for s in p.steps)]
        assert run.stdout.count("note write_file, non_idempotent") == len(writers) >= 3
        assert run.last_line.startswith("PASS")


class TestDeclaredTools:
    BILLING = "scenarios/support_billing.toml"
    OWN_TABLE = "scenarios/support_billing/tools.toml"

    def test_the_billing_scenarios_own_table_passes(self, check_table: CheckTable) -> None:
        """Its declared tools run in the scratch world, seeded with its records."""
        run = check_table(self.OWN_TABLE, "--scenario", self.BILLING)
        assert run.status == 0, run.stdout + run.stderr
        assert run.last_line.startswith("PASS: 10 calls of 10 tools in 1 scenario; unsafe: none")
        assert list(run.tmpdir.iterdir()) == []

    @pytest.mark.parametrize(("tool", "step"), [("create_ticket", "s003"), ("send_email", "s008")])
    def test_a_declared_tool_with_an_effect_classed_idempotent_fails_naming_it(
        self, tool: str, step: str, check_table: CheckTable, tmp_path: Path
    ) -> None:
        """A table that lets recovery retry create_ticket or send_email: its replay made a
        second ticket, or sent the mail again."""
        table = tmp_path / f"{tool}-idempotent.toml"
        entries = {**ToolTable.load(ROOT / self.OWN_TABLE).entries, tool: ToolClass(IW)}
        lines = ["format = 1", "[classes]"]
        by_class: dict[str, list[str]] = {}
        for name, cls in sorted(entries.items()):
            by_class.setdefault(cls.idempotency.value, []).append(name)
        lines += [f"{name} = {tools!r}".replace("'", '"') for name, tools in by_class.items()]
        table.write_text("\n".join(lines) + "\n", "utf-8")
        run = check_table(str(table), "--scenario", self.BILLING)
        assert run.status == 1, run.stdout + run.stderr
        assert f"UNSAFE {tool}, idempotent_write, at support_billing {step}" in run.stdout
        assert "its replay changed the world" in run.stdout


class TestBadInput:
    def test_a_malformed_table_is_refused_naming_the_file(
        self,
        check_table: CheckTable,
        tmp_path: Path,
    ) -> None:
        """Exit 2, the file and the entry named, nothing audited."""
        table = tmp_path / "bad.toml"
        table.write_text('format = 1\n[classes]\nread_only = "ui_dump"\n', "utf-8")
        run = check_table(str(table))
        assert run.status == 2
        assert run.stderr.strip() == (
            f"harness: {table}: entry 'classes.read_only': must be a list of tool names"
        )
        assert run.stdout == ""
        assert list(run.tmpdir.iterdir()) == []

    def test_an_unknown_scenario_path_is_refused_before_anything_runs(
        self,
        check_table: CheckTable,
    ) -> None:
        """Exit 2 naming the missing scenario, even after a good one: nothing is audited."""
        run = check_table("--scenario", "scenarios/phone_task.toml", "--scenario", "nope.toml")
        assert run.status == 2
        assert run.stderr.strip() == "harness: nope.toml: cannot read: No such file or directory"
        assert run.stdout == ""
        assert list(run.tmpdir.iterdir()) == []

    def test_a_missing_table_file_is_refused_naming_it(self, check_table: CheckTable) -> None:
        """Exit 2: the table file that is not there is named, nothing audited."""
        run = check_table("no-such-table.toml", "--scenario", "scenarios/phone_task.toml")
        assert run.status == 2
        assert run.stderr.strip() == (
            "harness: no-such-table.toml: entry '<file>': cannot read: No such file or directory"
        )
        assert run.stdout == ""
        assert list(run.tmpdir.iterdir()) == []

    @pytest.mark.parametrize(
        ("name", "problem"),
        [
            ("unknown_tool", "step 2, field 'tool': unknown tool 'app_instal' (did you mean"),
            ("bad_toml_syntax", "not valid TOML: Invalid value (at line 5, column 7)"),
        ],
    )
    def test_a_bad_scenario_is_refused_naming_the_file_and_problem(
        self, check_table: CheckTable, name: str, problem: str
    ) -> None:
        """Exit 2 for a scenario calling a tool the world does not have, or one that is not
        TOML, even after a good scenario: the file and the problem named, nothing audited."""
        bad = f"tests/data/bad_scenarios/{name}.toml"
        run = check_table("--scenario", "scenarios/phone_task.toml", "--scenario", bad)
        assert run.status == 2
        assert run.stderr.strip().startswith(f"harness: {bad}: {problem}"), run.stderr
        assert run.stdout == ""
        assert list(run.tmpdir.iterdir()) == []
