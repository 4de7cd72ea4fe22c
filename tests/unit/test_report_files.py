"""The run folder's ``summary.json`` and ``junit.xml``, from results built by hand.

Each result is a ``TrialResult`` with the verdicts a test wants (no process
runs); its folder is an empty directory under the test's run folder, so the
HTML writer that runs beside them has somewhere to put a page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.shard import Shard
from harness.chaos.trial import TrialResult, TrialSpec
from harness.check.invariants import OUTCOMES, TITLES, Status, Verdict
from harness.report.files import write_run_reports
from harness.report.model import RunInfo

SCENARIO = "tests/data/scenarios/mini.toml"


def _verdict(key: str, status: Status, *evidence: str) -> Verdict:
    return Verdict(key, TITLES[key], status, evidence or (f"{key} {status}",))


def _result(run_dir: Path, label: str, *verdicts: Verdict) -> TrialResult:
    spec = TrialSpec(
        SCENARIO, 7, CrashSchedule((Life(f"{label}=kill"),)), "real", label, "exhaustive"
    )
    directory = run_dir / "trials" / spec.trial_id
    directory.mkdir(parents=True)
    return TrialResult(spec, directory, verdicts, 2, 1, (), (), 12.0)


def _passing(run_dir: Path, label: str = "op.after_intent@1") -> TrialResult:
    return _result(run_dir, label, _verdict("I1", "pass"), _verdict("I3", "not-judged"))


def _unknown(run_dir: Path, label: str = "op.after_intent@2") -> TrialResult:
    return _result(
        run_dir,
        label,
        _verdict("I1", "pass"),
        _verdict("F", "unknown", "life 2: the kill at recovery.after_hint@1=kill never fired"),
        _verdict("I8", "unknown", "world.db could not be read", "second line"),
    )


def _failing(run_dir: Path, label: str = "op.after_intent@3") -> TrialResult:
    return _result(
        run_dir,
        label,
        _verdict("I2", "fail", "s003 ran twice"),
        _verdict("F", "unknown", "a kill never fired"),
    )


def _write(
    run_dir: Path, results: list[TrialResult], *, shard: Shard | None = None, **kwargs: Any
) -> dict[str, Any]:
    write_run_reports(RunInfo(run_dir, 7, "real", (SCENARIO,), shard), results, [], **kwargs)
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text("utf-8"))
    return summary


def _suite(run_dir: Path) -> ET.Element:
    root = ET.parse(run_dir / "junit.xml").getroot()
    return next(s for s in root.iter("testsuite") if s.get("name") == "chaos campaign")


def _case(run_dir: Path, result: TrialResult) -> ET.Element:
    return next(
        c for c in _suite(run_dir).iter("testcase") if c.get("name") == result.spec.trial_id
    )


class TestSummaryOutcomes:
    def test_counts_the_four_outcomes_apart_per_invariant(self, tmp_path: Path) -> None:
        """Each invariant lists pass, fail, unknown and not-judged, zeros included."""
        summary = _write(tmp_path, [_passing(tmp_path), _unknown(tmp_path), _failing(tmp_path)])
        invariants = summary["invariants"]
        assert all(
            list(counts)[: len(OUTCOMES)] == list(OUTCOMES) for counts in invariants.values()
        )
        assert invariants["I1"] == {"pass": 2, "fail": 0, "unknown": 0, "not-judged": 0}
        assert invariants["I3"] == {"pass": 0, "fail": 0, "unknown": 0, "not-judged": 1}
        assert invariants["F"] == {"pass": 0, "fail": 0, "unknown": 2, "not-judged": 0}
        assert invariants["I2"]["fail"] == 1

    def test_an_unknown_trial_is_counted_and_the_run_does_not_pass(self, tmp_path: Path) -> None:
        """An unknown trial is counted, listed with its replay, and the run does not pass."""
        unknown = _unknown(tmp_path)
        summary = _write(tmp_path, [_passing(tmp_path), unknown])
        assert (summary["failed"], summary["unknown"], summary["passed"]) == (0, 1, False)
        assert summary["unjudged"] == [
            {
                "trial": unknown.spec.trial_id,
                "invariants": ["F", "I8"],
                "seed": 7,
                "replay": unknown.spec.replay_command(),
            }
        ]
        assert summary["complete"] is True

    def test_a_trial_that_failed_counts_as_failed_not_unknown(self, tmp_path: Path) -> None:
        """A failure outranks an unknown verdict in the same trial."""
        summary = _write(tmp_path, [_failing(tmp_path)])
        assert (summary["failed"], summary["unknown"], summary["passed"]) == (1, 0, False)
        assert summary["failures"][0]["invariants"] == ["I2"]

    def test_not_judged_verdicts_still_pass(self, tmp_path: Path) -> None:
        """A run whose verdicts are pass or not-judged passes."""
        summary = _write(tmp_path, [_passing(tmp_path)])
        assert summary["passed"] is True and summary["unjudged"] == []


class TestSummaryShard:
    def test_records_the_shard_of_a_sharded_run(self, tmp_path: Path) -> None:
        """A shard's summary says which shard of how many it was."""
        summary = _write(tmp_path, [_passing(tmp_path)], shard=Shard(2, 4))
        assert summary["shard"] == {"index": 2, "count": 4}

    def test_an_unsharded_run_records_null(self, tmp_path: Path) -> None:
        """An unsharded run's shard is null."""
        assert _write(tmp_path, [_passing(tmp_path)])["shard"] is None

    def test_missing_shards_make_the_run_incomplete(self, tmp_path: Path) -> None:
        """With shards missing the summary lists them, is not complete, and does not pass."""
        summary = _write(tmp_path, [_passing(tmp_path)], missing_shards=["2/4", "4/4"])
        assert summary["missing_shards"] == ["2/4", "4/4"]
        assert summary["complete"] is False and summary["passed"] is False


class TestJUnit:
    def test_an_unknown_trial_is_an_error_naming_the_invariants(self, tmp_path: Path) -> None:
        """An unknown trial with no failure gets one <error> with the evidence and the replay."""
        unknown = _unknown(tmp_path)
        _write(tmp_path, [_passing(tmp_path), unknown])
        case = _case(tmp_path, unknown)
        (error,) = case.findall("error")
        assert not case.findall("failure")
        message = error.get("message", "")
        assert "F " + TITLES["F"] in message and "I8 " + TITLES["I8"] in message
        assert "I1" not in message
        text = error.text or ""
        assert "the kill at recovery.after_hint@1=kill never fired" in text
        assert "world.db could not be read" in text and "second line" in text
        assert text.rstrip().endswith(f"replay: {unknown.spec.replay_command()}")

    def test_the_suite_counts_errors_apart_from_failures(self, tmp_path: Path) -> None:
        """The testsuite's errors attribute counts unknown trials, failures the failed ones."""
        results = [_passing(tmp_path), _unknown(tmp_path), _failing(tmp_path)]
        results.append(_unknown(tmp_path, "op.after_finish@1"))
        _write(tmp_path, results)
        suite = _suite(tmp_path)
        assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "1", "2")

    def test_a_failed_trial_gets_failures_only(self, tmp_path: Path) -> None:
        """A trial that failed is a <failure>, with no <error> for its unknown verdict."""
        failing = _failing(tmp_path)
        _write(tmp_path, [failing])
        case = _case(tmp_path, failing)
        (failure,) = case.findall("failure")
        assert not case.findall("error")
        assert failure.get("message") == f"I2 {TITLES['I2']}"
        assert f"replay: {failing.spec.replay_command()}" in (failure.text or "")

    def test_a_passing_trial_has_neither(self, tmp_path: Path) -> None:
        """A trial that held, not-judged verdicts included, has no failure and no error."""
        passing = _passing(tmp_path)
        _write(tmp_path, [passing])
        assert len(_case(tmp_path, passing)) == 0
        assert _suite(tmp_path).get("errors") == "0"
