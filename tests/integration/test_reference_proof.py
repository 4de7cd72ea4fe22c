"""The reference proves itself: a scenario whose crash-free run fails its own checks is refused.

Every step's ``verify`` check is run right after the step in a crash-free run of
its own before any trial; one that does not hold stops the campaign with exit 2
and one line naming the file, the step and the check, and leaves no run folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.agent.plan import load_plan
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import prove_checks, write_plan_for

ROOT = Path(__file__).resolve().parents[2]
MINI = ROOT / "tests" / "data" / "scenarios" / "mini.toml"


def _chaos(scenarios: Path, reports: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "chaos",
            "--scenarios",
            str(scenarios),
            "--seed",
            "3",
            "--random",
            "0",
            "--no-self-check",
            "--reports",
            str(reports),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


class TestTheReferenceProvesItsChecks:
    def test_a_check_that_does_not_hold_refuses_the_scenario(self, tmp_path: Path) -> None:
        """A check asking for text the step never types: exit 2, the step and check named."""
        scenarios = tmp_path / "scenarios"
        scenarios.mkdir()
        text = MINI.read_text("utf-8")
        wrong = text.replace(
            'path = "fields.title", equals = "{text}"',
            'path = "fields.title", equals = "not typed"',
        )
        assert wrong != text
        (scenarios / "mini_wrong.toml").write_text(wrong, "utf-8")
        done = _chaos(scenarios, tmp_path / "reports")
        assert done.returncode == 2, done.stderr
        (line,) = [x for x in done.stderr.splitlines() if x.startswith("harness:")]
        assert "mini_wrong.toml: step 2, tool 'input_text', field 'verify'" in line
        assert "fields.title equals 'not typed'" in line and "does not hold" in line
        assert "Traceback" not in done.stderr
        assert not any((tmp_path / "reports").glob("*/"))

    def test_checks_that_hold_let_the_campaign_run(self, tmp_path: Path) -> None:
        scenarios = tmp_path / "scenarios"
        scenarios.mkdir()
        (scenarios / "mini.toml").write_text(MINI.read_text("utf-8"), "utf-8")
        done = _chaos(scenarios, tmp_path / "reports")
        assert done.returncode == 0, done.stderr
        assert "PASS:" in done.stdout


SHIPPED = sorted((ROOT / "scenarios").glob("*.toml"))


@pytest.mark.parametrize("scenario", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_scenario_proves_its_checks(scenario: Path, tmp_path: Path) -> None:
    """Each shipped scenario's checks hold right after their steps in a crash-free run
    (threaded batches included: a proof takes the world's turn like a tool)."""
    # A refused check raises ScenarioError; a step that failed in the run has no effect to
    # prove, so the count is of the checks of steps told ack: some, if the plan has any.
    proved = prove_checks(str(scenario), 7, tmp_path / "proof", Supervisor(timeout_s=120), None)
    write_plan_for(str(scenario), 7, tmp_path)  # the proof run's folder is gone
    plan = load_plan(tmp_path / "plan.json")
    checks = sum(1 for step in plan.steps if step.verify is not None)
    assert proved <= checks and (proved > 0) == (checks > 0), (proved, checks)
