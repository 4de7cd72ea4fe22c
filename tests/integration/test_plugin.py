"""The pytest plugin: registered by entry point, its fixture, its sampling, the example suite."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import harness
from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.trial import TrialResult, TrialSpec
from harness.check.invariants import Verdict
from harness.pytest_plugin import DEFAULT_SCENARIO, Chaos, assert_survives, sample_trials
from tests.conftest import subprocess_env

ROOT = Path(__file__).parent.parent.parent


def _pytest_examples(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``pytest examples`` in a real subprocess, as a user would run it."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "examples",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'base'}",
            *options,
        ],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _spec(label: str, kind: str = "exhaustive") -> TrialSpec:
    return TrialSpec("s.toml", 1, CrashSchedule((Life(f"{label}=kill"),)), "real", label, kind)


def _result(status: str, label: str = "op.after_intent@3") -> TrialResult:
    verdict = Verdict("I2", "unsafe op verified", "fail", ("s003 was retried",))
    verdicts = (verdict,) if status == "fail" else (Verdict("I1", "ok", "pass"),)
    return TrialResult(_spec(label), Path("/nowhere"), verdicts, 2, 1, (), (), 1.0)


def _unjudged(label: str = "op.after_intent@4") -> TrialResult:
    """A trial with no failure whose fault-landing and end-state checks could not decide."""
    verdicts = (
        Verdict("I1", "ok", "pass", ("2 successes",)),
        Verdict("I3", "safe op retried", "not-judged", ("no journal of ours",)),
        Verdict("F", "every scheduled fault landed", "unknown", ("the kill never fired", "more")),
        Verdict("I8", "end state", "unknown", ("world.db could not be read",)),
    )
    return TrialResult(_spec(label), Path("/nowhere"), verdicts, 2, 1, (), (), 1.0)


class TestRegistration:
    def test_the_plugin_is_an_entry_point(self) -> None:
        """Installing the package registers ``harness.pytest_plugin`` with pytest."""
        plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
        assert plugins.get("agent_chaos") == "harness.pytest_plugin"

    def test_default_scenario_ships_in_the_package(self) -> None:
        """The default scenario is a file inside the package, so it exists once installed."""
        assert DEFAULT_SCENARIO.is_file()
        assert DEFAULT_SCENARIO.is_relative_to(Path(harness.__file__).parent)

    def test_unknown_runtime_is_a_usage_error(self, tmp_path: Path) -> None:
        """An unknown ``--chaos-runtime`` stops pytest before any test, naming the option."""
        run = _pytest_examples(tmp_path, "--chaos-runtime", "no-such-runtime")
        assert run.returncode == pytest.ExitCode.USAGE_ERROR
        assert "--chaos-runtime" in run.stderr and "no-such-runtime" in run.stderr


class TestFixture:
    def test_run_trial_returns_verdicts_from_tmp_path(self, chaos: Chaos, tmp_path: Path) -> None:
        """``chaos.run_trial()`` kills the real runtime once in tmp_path; every invariant holds."""
        result = chaos.run_trial()
        assert result.directory.is_relative_to(tmp_path)
        assert result.kills == 1 and result.verdicts
        chaos.assert_survives([result])


class TestSampleTrials:
    def test_every_family_before_any_twice(self) -> None:
        """A small sample kills at every failpoint family before it takes a second of any."""
        specs = [_spec(f"{family}@{hit}") for family in ("a", "b", "c") for hit in range(1, 6)]
        chosen = sample_trials(specs, 3, seed=1)
        assert sorted(s.label.split("@")[0] for s in chosen) == ["a", "b", "c"]

    def test_keeps_order_size_and_random_trials(self) -> None:
        """The sample keeps the campaign's order, has n trials and keeps the random ones."""
        specs = [_spec(f"x@{hit}") for hit in range(1, 20)] + [_spec("r1", "random")]
        chosen = sample_trials(specs, 5, seed=2)
        assert len(chosen) == 5 and _spec("r1", "random") in chosen
        assert chosen == [s for s in specs if s in chosen]

    def test_the_seed_fixes_the_sample(self) -> None:
        """The same seed samples the same trials; the whole list when n covers it."""
        specs = [_spec(f"{family}@{hit}") for family in "abcd" for hit in range(1, 30)]
        assert sample_trials(specs, 10, seed=3) == sample_trials(specs, 10, seed=3)
        assert sample_trials(specs, len(specs), seed=3) == specs


class TestAssertSurvives:
    def test_passing_trials_pass(self) -> None:
        """Trials that kept every invariant raise nothing."""
        assert_survives([_result("pass"), _result("pass")])

    def test_failure_names_invariant_and_replay(self) -> None:
        """A failing trial's message names the invariant and the command that replays it."""
        failing = _result("fail")
        with pytest.raises(AssertionError) as raised:
            assert_survives([_result("pass"), failing])
        message = str(raised.value)
        assert "1 of 2 trials" in message and "I2" in message
        assert f"replay: {failing.spec.replay_command()}" in message

    def test_not_judged_verdicts_pass(self) -> None:
        """A trial whose verdicts are pass or not-judged raises nothing."""
        verdicts = (Verdict("I1", "ok", "pass"), Verdict("I9", "journal", "not-judged"))
        assert_survives([TrialResult(_spec("x@1"), Path("/n"), verdicts, 1, 0, (), (), 1.0)])

    def test_an_unknown_trial_fails_naming_each_unjudged_invariant(self) -> None:
        """A trial that could not be judged fails, listing each such invariant, its first
        evidence line and the replay command."""
        unknown = _unjudged()
        with pytest.raises(AssertionError) as raised:
            assert_survives([_result("pass"), unknown])
        message = str(raised.value)
        assert "1 of 2 trials did not hold: 0 broke an invariant, 1 could not be judged" in message
        assert "F every scheduled fault landed COULD NOT BE JUDGED: the kill never fired" in message
        assert "I8 end state COULD NOT BE JUDGED: world.db could not be read" in message
        assert "more" not in message and "I1 " not in message and "I3 " not in message
        assert f"replay: {unknown.spec.replay_command()}" in message

    def test_failed_and_unknown_trials_are_both_listed(self) -> None:
        """Failed and unknown trials each appear with their own verdicts and replay."""
        failing, unknown = _result("fail"), _unjudged()
        with pytest.raises(AssertionError) as raised:
            assert_survives([failing, unknown, _result("pass", "op.after_finish@1")])
        message = str(raised.value)
        assert "2 of 3 trials did not hold: 1 broke an invariant, 1 could not be judged" in message
        assert "I2 unsafe op verified FAILED: s003 was retried" in message
        for result in (failing, unknown):
            assert f"- {result.spec.trial_id} " in message
            assert f"replay: {result.spec.replay_command()}" in message

    def test_no_trial_is_a_failure(self) -> None:
        """An empty campaign proves nothing, so it fails."""
        with pytest.raises(AssertionError, match="no trial ran"):
            assert_survives([])


@pytest.mark.long
class TestExampleSuite:
    def test_passes_against_the_real_runtime(self, tmp_path: Path) -> None:
        """``pytest examples --chaos-runtime real`` passes."""
        run = _pytest_examples(tmp_path, "--chaos-runtime", "real")
        assert run.returncode == 0, run.stdout + run.stderr
        assert "2 passed" in run.stdout

    def test_fails_against_a_broken_runtime(self, tmp_path: Path) -> None:
        """Against retry-non-idempotent it fails, naming I2 and a replay command."""
        run = _pytest_examples(tmp_path, "--chaos-runtime", "retry-non-idempotent")
        assert run.returncode == 1, run.stdout + run.stderr
        assert "I2 " in run.stdout
        assert "replay: " in run.stdout and "-m harness trial" in run.stdout
        assert "--runtime retry-non-idempotent" in run.stdout
