"""The run folder's ``summary.json`` and ``junit.xml``, from results built by hand.

Each result is a ``TrialResult`` with the verdicts a test wants (no process
runs); its folder is an empty directory under the test's run folder, so the
HTML writer that runs beside them has somewhere to put a page.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from harness.chaos.keep import read_trial_records, result_from_record
from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.shard import Shard
from harness.chaos.trial import TrialResult, TrialSpec
from harness.check.invariants import OUTCOMES, TITLES, Status, Verdict
from harness.report import files
from harness.report.files import write_run_reports
from harness.report.model import SOURCE, RunInfo, source_commit

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


def _idle(key: str) -> Verdict:
    """A pass of ``key`` that had nothing to judge."""
    return Verdict(key, TITLES[key], "pass", (f"0 things of {key} to judge",), applied=False)


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
        zero = {"not-applied": 0}
        assert invariants["I1"] == {"pass": 2, "fail": 0, "unknown": 0, "not-judged": 0, **zero}
        assert invariants["I3"] == {"pass": 0, "fail": 0, "unknown": 0, "not-judged": 1, **zero}
        assert invariants["F"] == {"pass": 0, "fail": 0, "unknown": 2, "not-judged": 0, **zero}
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


class TestSummaryNotApplied:
    def test_passes_with_nothing_to_judge_are_counted_apart(self, tmp_path: Path) -> None:
        """``not-applied`` counts the passes that judged nothing, within ``pass``."""
        results = [
            _result(tmp_path, "op.after_intent@1", _verdict("I1", "pass"), _idle("I2")),
            _result(tmp_path, "op.after_intent@2", _idle("I1"), _idle("I2")),
            _result(tmp_path, "op.after_intent@3", _idle("I1"), _verdict("I2", "fail")),
        ]
        invariants = _write(tmp_path, results)["invariants"]
        assert (invariants["I1"]["pass"], invariants["I1"]["not-applied"]) == (3, 2)
        assert (invariants["I2"]["pass"], invariants["I2"]["not-applied"]) == (2, 2)
        assert invariants["I2"]["fail"] == 1

    def test_an_invariant_that_applied_to_no_trial_is_named(self, tmp_path: Path) -> None:
        """``never_applied`` names an invariant every pass of which judged nothing, and not
        one that judged something in a trial, nor one only not-judged."""
        results = [
            _result(tmp_path, "op.after_intent@1", _verdict("I1", "pass"), _idle("I9")),
            _result(tmp_path, "op.after_intent@2", _idle("I1"), _idle("I9")),
            _result(tmp_path, "op.after_intent@3", _verdict("I3", "not-judged"), _idle("I9")),
        ]
        summary = _write(tmp_path, results)
        assert summary["never_applied"] == ["I9"]
        assert summary["passed"] is True

    def test_a_real_pass_everywhere_names_none(self, tmp_path: Path) -> None:
        assert _write(tmp_path, [_passing(tmp_path)])["never_applied"] == []


class TestTrialRecords:
    def test_a_record_keeps_whether_each_pass_applied(self, tmp_path: Path) -> None:
        """``trials.jsonl`` carries ``applied: false`` for an idle pass only, and reads back;
        a line written before verdicts said so reads as applied."""
        result = _result(tmp_path, "op.after_intent@1", _verdict("I1", "pass"), _idle("I2"))
        _write(tmp_path, [result])
        (record,) = read_trial_records(tmp_path)
        assert [v.get("applied") for v in record["verdicts"]] == [None, False]
        again = result_from_record(record, tmp_path)
        assert [(v.invariant, v.applied) for v in again.verdicts] == [("I1", True), ("I2", False)]
        del record["verdicts"][1]["applied"]
        assert result_from_record(record, tmp_path).verdicts[1].applied is True


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

    def test_an_interrupted_run_is_an_error_of_its_own(self, tmp_path: Path) -> None:
        """An interrupted run adds one case, an <error> that says INTERRUPTED, counted in the
        suite's errors; a run that finished has no such case."""
        _write(tmp_path, [_passing(tmp_path)], interrupted=True)
        suite = _suite(tmp_path)
        assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "0", "1")
        (case,) = [c for c in suite.iter("testcase") if c.get("name") == files.INTERRUPTED_CASE]
        (error,) = case.findall("error")
        assert error.get("type") == "interrupted"
        assert error.get("message", "").startswith("INTERRUPTED after 1 completed trials")
        finished = tmp_path / "finished"
        finished.mkdir()
        _write(finished, [_passing(finished)])
        names = {c.get("name") for c in _suite(finished).iter("testcase")}
        assert files.INTERRUPTED_CASE not in names and _suite(finished).get("errors") == "0"

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

    def test_the_suite_says_to_how_many_trials_each_invariant_applied(self, tmp_path: Path) -> None:
        """A suite property per invariant: ``applied I2`` = ``N of M``."""
        results = [
            _result(tmp_path, "op.after_intent@1", _verdict("I1", "pass"), _idle("I2")),
            _result(tmp_path, "op.after_intent@2", _idle("I1"), _verdict("I2", "fail")),
            _result(tmp_path, "op.after_intent@3", _idle("I1"), _idle("I2")),
        ]
        _write(tmp_path, results)
        properties = {
            p.get("name"): p.get("value") for p in _suite(tmp_path).findall("properties/property")
        }
        assert properties == {"applied I1": "1 of 3", "applied I2": "1 of 3"}

    def test_a_trial_names_the_invariants_that_judged_nothing(self, tmp_path: Path) -> None:
        """A passing trial lists its passes with nothing to judge as a property."""
        idle = _result(tmp_path, "op.after_intent@1", _verdict("I1", "pass"), _idle("I2"))
        idle = replace(idle, verdicts=(*idle.verdicts, _idle("I9")))
        _write(tmp_path, [idle])
        case = _case(tmp_path, idle)
        (prop,) = case.findall("properties/property")
        assert (prop.get("name"), prop.get("value")) == ("not-applied", "I2 I9")
        assert not case.findall("failure") and not case.findall("error")


class TestSummaryFacts:
    def test_states_when_it_started_how_long_and_what_ran_it(self, tmp_path: Path) -> None:
        """The start (ISO 8601, UTC), the duration in seconds, the installed version, and
        the commit of this checkout (the tests run in one)."""
        info = RunInfo(tmp_path, 7, "real", (SCENARIO,), started=1_767_225_600.0)
        write_run_reports(info, [_passing(tmp_path)], [])
        summary = json.loads((tmp_path / "summary.json").read_text("utf-8"))
        assert summary["started"] == "2026-01-01T00:00:00Z"
        assert isinstance(summary["duration_s"], float) and summary["duration_s"] > 0
        assert summary["version"] == version(files.DISTRIBUTION)
        head = subprocess.run(
            ["git", "-C", str(SOURCE), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        if head.returncode == 0:
            assert summary["commit"] == head.stdout.strip()

    def test_no_commit_outside_git(self, tmp_path: Path) -> None:
        """A folder that is no git checkout has no commit, and that is no error."""
        assert source_commit(tmp_path) is None

    def test_the_commit_is_read_when_the_run_starts(self, tmp_path: Path) -> None:
        """A checkout moved on during a long run does not relabel it: the commit is the
        one its ``RunInfo`` was made with, not the one checked out when it is written."""
        info = RunInfo(tmp_path, 7, "real", (SCENARIO,), commit="0" * 40)
        write_run_reports(info, [_passing(tmp_path)], [])
        summary = json.loads((tmp_path / "summary.json").read_text("utf-8"))
        assert summary["commit"] == "0" * 40

    def test_no_commit_without_git(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("PATH", str(tmp_path))  # no git to be found
        assert source_commit() is None
        summary = _write(tmp_path, [_passing(tmp_path)])
        assert "commit" not in summary and summary["trials"] == 1
