"""The command line as a user meets it: its name and version, ``-x``, your own runtime.

Each case runs ``python -m harness`` as a real subprocess from the repository root.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from harness.chaos.campaign import exhaustive_specs, scenario_seed
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import golden_dir, prepare_golden
from harness.cli import prog_name
from tests.conftest import run_harness

ROOT = Path(__file__).resolve().parents[2]
MINI = "tests/data/scenarios/mini.toml"
EXAMPLES = ROOT / "examples"


def headline(stdout: str) -> str:
    """The campaign's last line of counts (a failing trial's line starts with FAIL too)."""
    return next(
        line
        for line in reversed(stdout.splitlines())
        if line.startswith(("PASS", "FAIL", "COULD")) and "; report " in line
    )


def trial_lines(reports: Path) -> list[dict[str, object]]:
    (run_dir,) = reports.iterdir()
    lines = (run_dir / "trials.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]


class TestNameAndVersion:
    def test_version_is_the_installed_distribution(self) -> None:
        done = run_harness("--version")
        assert done.returncode == 0, done.stderr
        expected = importlib.metadata.version("agent-crash-harness")
        assert done.stdout.split() == ["python", "-m", "harness", expected, "(agent-crash-harness)"]

    def test_usage_names_the_program_as_it_was_run(self) -> None:
        """``harness`` as the console script, ``python -m harness`` as a module."""
        assert prog_name("/venv/bin/harness") == "harness"
        assert prog_name(str(ROOT / "harness" / "__main__.py")) == "python -m harness"
        assert run_harness("--help").stdout.startswith("usage: python -m harness ")

    def test_help_names_every_command(self) -> None:
        from harness.cli import COMMANDS

        shown = run_harness("--help").stdout
        names = [c.add_parser.__module__.rsplit(".", 1)[1].replace("_", "-") for c in COMMANDS]
        assert all(name in shown.split("Commands:", 1)[1] for name in names), shown


class TestStopEarly:
    def test_x_stops_after_the_first_failure(self, tmp_path: Path) -> None:
        """``-x`` against a broken runtime on one scenario: exit 1, fewer trials than the
        campaign lists, the headline says it stopped early, and no self-check ran."""
        reports = tmp_path / "r"
        done = run_harness(
            "chaos",
            "--runtime",
            "retry-non-idempotent",
            "--scenario",
            MINI,
            "--random",
            "0",
            "--seed",
            "3",
            "--reports",
            str(reports),
            "-x",
        )
        assert done.returncode == 1, done.stdout[-3000:] + done.stderr
        line = headline(done.stdout)
        assert line.startswith("FAIL (stopped early: --maxfail 1 reached): "), line
        assert "self-check not run: the campaign stopped early (--maxfail 1)" in done.stdout
        ran = trial_lines(reports)
        assert any(t["status"] == "fail" for t in ran)
        (run_dir,) = reports.iterdir()
        seed = scenario_seed(3, MINI)
        golden = prepare_golden(MINI, seed, golden_dir(run_dir, MINI, seed), Supervisor())
        listed = exhaustive_specs(MINI, seed, golden, "retry-non-idempotent")
        assert len(ran) < len(listed), (len(ran), len(listed))


class TestOwnRuntime:
    def test_a_module_runtime_runs_no_self_check_by_default(self, tmp_path: Path) -> None:
        """``module:`` runs its campaign only (the self-check tests the harness); it says how
        many failpoint hits of the golden run the agent never reached."""
        done = run_harness(
            "chaos",
            "--runtime",
            "module:my_agent",
            "--scenario",
            MINI,
            "--random",
            "0",
            "--seed",
            "3",
            "--reports",
            str(tmp_path / "r"),
            pythonpath=EXAMPLES,
        )
        assert "self-check" not in done.stdout, done.stdout[-3000:]
        assert "module:my_agent never reached" in done.stdout or "every failpoint hit" in (
            done.stdout
        )
        assert {t["spec"]["runtime"] for t in trial_lines(tmp_path / "r")} == {  # type: ignore[index]
            "module:my_agent"
        }

    @pytest.mark.long
    @pytest.mark.slow
    def test_the_documented_campaign_of_my_agent(self, tmp_path: Path) -> None:
        """docs/own-agent.md's command: no trial unknown, no self-check, and every failure
        the re-run of a step killed between its effect and its done-file line (I2, and I8
        for the effect it repeats), never I10; but a pause, which runs two lives at once
        on a done-file nobody locks, also fails I1."""
        reports = tmp_path / "r"
        done = run_harness(
            "chaos",
            "--runtime",
            "module:my_agent",
            "--only",
            "phone_task",
            "--seed",
            "7",
            "--reports",
            str(reports),
            pythonpath=EXAMPLES,
            timeout=900,
        )
        assert done.returncode == 1, done.stdout[-3000:] + done.stderr
        assert "self-check" not in done.stdout
        assert " 0 could not be judged" in headline(done.stdout), headline(done.stdout)
        failed: set[str] = set()
        paused: set[str] = set()
        for trial in trial_lines(reports):
            verdicts = trial["verdicts"]
            assert isinstance(verdicts, list)
            assert trial["status"] != "unknown", trial
            mine = {v["invariant"] for v in verdicts if v["status"] == "fail"}
            if "pause" in json.dumps(trial["spec"]):
                paused |= mine
            else:
                failed |= mine
        assert "I2" in failed and failed <= {"I2", "I8"}, failed
        assert "I1" in paused and paused <= {"I1", "I2", "I8"}, paused
