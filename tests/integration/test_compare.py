"""``python -m harness compare``: exit 0 only when every runtime did what was expected of it.

Real comparisons run tiny campaigns (the mini scenario, the exhaustive trials
of one failpoint, no random trials) against ``real``, which holds, and
``retry-non-idempotent``, which fails I2. The unknown case is unit-tested on
results built by hand, through ``run_compare`` with the campaign replaced.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.chaos.campaign import CampaignConfig
from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.trial import TrialResult, TrialSpec
from harness.check.invariants import TITLES, Status, Verdict
from harness.commands import compare
from harness.commands.compare import run_compare
from harness.report.compare import RuntimeOutcome, compare_status, final_line
from tests.conftest import subprocess_env

ROOT = Path(__file__).parent.parent.parent
SCENARIOS = str(ROOT / "tests" / "data" / "scenarios")
MINI = str(ROOT / "tests" / "data" / "scenarios" / "mini.toml")
BROKEN = "retry-non-idempotent"


def _compare(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m harness compare`` on one failpoint of the mini scenario, in a subprocess."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "compare",
            *("--scenarios", SCENARIOS, "--failpoint", "op.after_intent", "--random", "0"),
            *("--seed", "3", "--workers", "2", "--reports", str(tmp_path)),
            *args,
        ],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _last_line(run: subprocess.CompletedProcess[str]) -> str:
    return run.stdout.strip().splitlines()[-1]


def _compare_json(tmp_path: Path) -> dict[str, Any]:
    (run_dir,) = tmp_path.iterdir()
    data: dict[str, Any] = json.loads((run_dir / "compare.json").read_text("utf-8"))
    return data


class TestCompareCommand:
    def test_a_runtime_that_holds_exits_0(self, tmp_path: Path) -> None:
        """Comparing only real, which holds every trial, exits 0 and says it held."""
        run = _compare(tmp_path, "--runtime", "real")
        assert run.returncode == 0, run.stdout + run.stderr
        assert _last_line(run).startswith("PASS: held: real; failed: none;")
        assert "trials that could not be judged" in run.stdout
        assert _compare_json(tmp_path)["outcomes"] == {"real": "held"}

    @pytest.mark.long
    def test_an_unexpected_failure_exits_1(self, tmp_path: Path) -> None:
        """A runtime that fails without --expect-fail makes compare exit 1, saying so."""
        run = _compare(tmp_path, "--runtime", "real", "--runtime", BROKEN)
        assert run.returncode == 1, run.stdout + run.stderr
        assert f"expected {BROKEN} to hold, but it failed" in run.stdout
        assert _last_line(run).startswith(f"FAIL: held: real; failed: {BROKEN} (")
        assert _last_line(run).endswith(
            "expected to fail: none (every other runtime expected to hold)"
        )

    @pytest.mark.long
    def test_an_expected_failure_exits_0(self, tmp_path: Path) -> None:
        """With --expect-fail, a runtime that fails while the other holds exits 0."""
        run = _compare(tmp_path, "--runtime", "real", "--runtime", BROKEN, "--expect-fail", BROKEN)
        assert run.returncode == 0, run.stdout + run.stderr
        assert _last_line(run).startswith(f"PASS: held: real; failed: {BROKEN} (")
        assert f"expected to fail: {BROKEN}" in _last_line(run)
        data = _compare_json(tmp_path)
        assert data["expected_to_fail"] == [BROKEN] and data["exit_status"] == 0
        (run_dir,) = tmp_path.iterdir()
        markdown = (run_dir / "compare.md").read_text("utf-8")
        assert "| trials that could not be judged |" in markdown
        assert markdown.rstrip().splitlines()[-1] == _last_line(run)

    @pytest.mark.long
    def test_an_expected_failure_that_held_exits_1(self, tmp_path: Path) -> None:
        """A runtime expected to fail that held everything makes compare exit 1, saying so."""
        run = _compare(tmp_path, "--runtime", "real", "--expect-fail", "real")
        assert run.returncode == 1, run.stdout + run.stderr
        assert "expected real to fail, but it held" in run.stdout
        assert _last_line(run).startswith("FAIL: held: real;")

    def test_expect_fail_of_a_runtime_not_compared_is_bad_input(self, tmp_path: Path) -> None:
        """--expect-fail naming a runtime that is not compared exits 2 and runs nothing."""
        run = _compare(tmp_path, "--runtime", "real", "--expect-fail", "dbos")
        assert run.returncode == 2
        assert "--expect-fail dbos: not a compared runtime" in run.stderr
        assert not any(tmp_path.iterdir())


def _outcome(failed: int, unknown: int, *, expect_fail: bool = False) -> RuntimeOutcome:
    return RuntimeOutcome("rt", 10, failed, unknown, expect_fail)


class TestExitLogic:
    @pytest.mark.parametrize(
        ("failed", "unknown", "expect_fail", "status"),
        [
            (0, 0, False, "pass"),
            (2, 0, False, "fail"),
            (0, 3, False, "unknown"),
            (2, 3, False, "fail"),
            (2, 0, True, "pass"),
            (2, 3, True, "pass"),
            (0, 0, True, "fail"),
            (0, 3, True, "unknown"),
        ],
    )
    def test_each_runtime_against_its_expectation(
        self, failed: int, unknown: int, expect_fail: bool, status: Status
    ) -> None:
        """A runtime passes when it did what was expected, fails when not, and is unknown when it
        had unknown trials and no failure."""
        assert _outcome(failed, unknown, expect_fail=expect_fail).status == status

    def test_unknown_gives_3(self) -> None:
        """A runtime with unknown trials and no failure makes the comparison exit 3."""
        assert compare_status([_outcome(0, 0), _outcome(0, 1)]) == 3

    def test_a_failure_outranks_unknown(self) -> None:
        """An unexpected failure anywhere makes the comparison exit 1, unknown trials or not."""
        assert compare_status([_outcome(0, 1), _outcome(1, 0)]) == 1
        assert compare_status([_outcome(0, 1), _outcome(0, 0, expect_fail=True)]) == 1

    def test_a_runtime_with_no_trial_could_not_be_judged(self) -> None:
        """A runtime that ran no trial proves nothing, so it is unknown."""
        empty = RuntimeOutcome("rt", 0, 0, 0)
        assert empty.status == "unknown" and empty.outcome == "could not be judged"
        assert empty.problem == "rt ran no trial, so it could not be judged"

    def test_the_final_line_names_every_outcome_and_expectation(self) -> None:
        """The final line lists the runtimes that held, failed and could not be judged."""
        found = [
            RuntimeOutcome("real", 5, 0, 0),
            RuntimeOutcome("dbos", 5, 2, 0, True),
            RuntimeOutcome("naive", 5, 0, 1),
        ]
        assert final_line(found) == (
            "COULD NOT JUDGE: held: real; failed: dbos (2 of 5 trials); could not be judged: "
            "naive (1 of 5 trials); expected to fail: dbos (every other runtime expected to hold)"
        )

    def test_the_final_line_counts_what_the_table_counts(self) -> None:
        """A runtime that failed with trials that could not be judged says how many: the
        last line never says none could be judged under a table that counts some."""
        found = [RuntimeOutcome("real", 5, 0, 0), RuntimeOutcome("dbos", 9, 2, 3, True)]
        assert final_line(found).startswith(
            "PASS: held: real; failed: dbos (2 of 9 trials; 3 more could not be judged); "
        )


def _result(runtime: str, label: str, status: Status) -> TrialResult:
    spec = TrialSpec(MINI, 3, CrashSchedule((Life(f"{label}=kill"),)), runtime, label, "exhaustive")
    verdicts = (
        Verdict("I1", TITLES["I1"], "pass", ("fine",)),
        Verdict("F", TITLES["F"], status, (f"F is {status}",)),
    )
    return TrialResult(spec, Path("/nowhere"), verdicts, 2, 1, (), (), 1.0)


class TestRunCompareUnknown:
    def test_unknown_trials_exit_3_and_are_counted(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A runtime whose only doubt is an unknown trial exits 3, and the table counts it apart
        from the judged ones."""
        statuses: dict[str, tuple[Status, ...]] = {
            "real": ("pass", "pass"),
            "naive": ("pass", "unknown"),
        }

        def fake_run_trials(config: CampaignConfig, on_result: Any, **kwargs: Any) -> list[Any]:
            return [
                _result(config.runtime, f"op.after_intent@{n}", status)
                for n, status in enumerate(statuses[config.runtime], 1)
            ]

        monkeypatch.setattr(compare, "run_trials", fake_run_trials)
        config = CampaignConfig(tmp_path, (MINI,), 3, random_trials=0)
        assert run_compare(config, ["real", "naive"], ()) == 3
        data = json.loads((tmp_path / "compare.json").read_text("utf-8"))
        assert data["unknown"] == {"real": 0, "naive": 1}
        assert data["invariants"]["F"] == {
            "real": "0 / 2",
            "naive": "0 / 1 (1 could not be judged)",
        }
        out = capsys.readouterr().out
        assert "naive: 1 of 2 trials could not be judged" in out
        assert "could not judge F; replay:" in out
        markdown = (tmp_path / "compare.md").read_text("utf-8")
        assert "| trials that could not be judged | 0 | 1 |" in markdown
