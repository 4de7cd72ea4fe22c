"""Nightly audits end to end: the time budget, JUnit XML, shards and their merge."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from harness.chaos.campaign import CampaignConfig
from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.shard import Shard
from harness.chaos.trial import TrialResult, TrialSpec
from harness.check.invariants import TITLES, Status, Verdict
from harness.commands import audit
from harness.commands.audit import AuditConfig, HypothesisOutcome, run_audit
from harness.report.merge import load_trial_result
from tests.conftest import run_harness, subprocess_env
from tests.integration.conftest import MINI, TrialRunner

ROOT = Path(__file__).parent.parent.parent
SCENARIOS = str(ROOT / "tests" / "data" / "scenarios")

PASSING_PROPERTY = """
from hypothesis import given, strategies as st


@given(st.integers())
def test_an_integer_equals_itself(n):
    assert n == n
"""


def _trial_ids(run_dir: Path) -> set[str]:
    """Every trial of the run, from its ``trials.jsonl`` (most passing folders are not kept)."""
    lines = (run_dir / "trials.jsonl").read_text("utf-8").splitlines()
    return {json.loads(line)["trial"] for line in lines}


def _junit_cases(path: Path) -> dict[str, list[ET.Element]]:
    """Test cases of a JUnit XML file by suite name (parsing it is the check that it is XML)."""
    root = ET.parse(path).getroot()
    return {s.get("name", ""): list(s.iter("testcase")) for s in root.iter("testsuite")}


class TestShard:
    def test_shards_are_disjoint_and_cover_the_campaign(self) -> None:
        """Every trial and every batch belongs to exactly one shard of N."""
        specs = [TrialSpec(MINI, seed, CrashSchedule(), "real", "x") for seed in range(300)]
        shards = [Shard(k, 3) for k in (1, 2, 3)]
        for spec in specs:
            assert sum(shard.keeps(spec) for shard in shards) == 1
        assert all(sum(s.owns_batch(b) for s in shards) == 1 for b in range(10))
        assert all(any(shard.keeps(spec) for spec in specs) for shard in shards)

    @pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0", "-1/2"])
    def test_bad_shard_is_refused(self, text: str) -> None:
        """A shard that is not K/N with 1 <= K <= N is refused."""
        with pytest.raises(ValueError):
            Shard.parse(text)


class TestLoader:
    def test_a_trial_folder_rebuilds_its_result(self, run_mini: TrialRunner) -> None:
        """``load_trial_result`` gives back the spec, verdicts, lives and kills of a trial."""
        result = run_mini('[{"failpoints":"op.after_intent@3=kill"}]')
        loaded = load_trial_result(result.directory)
        assert loaded.spec == result.spec and loaded.verdicts == result.verdicts
        assert (loaded.lives, loaded.kills, loaded.reached) == (
            result.lives,
            result.kills,
            result.reached,
        )


class TestAuditBudget:
    @pytest.mark.long
    def test_stops_at_its_budget_writes_junit_and_passes(self, tmp_path: Path) -> None:
        """With a tiny AUDIT_MINUTES the audit stops early, writes JUnit XML and exits 0."""
        prop = tmp_path / "test_prop.py"
        prop.write_text(PASSING_PROPERTY)
        out = tmp_path / "run"
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.audit",
                "--scenarios",
                SCENARIOS,
                "--seed",
                "3",
                "--batch",
                "10",
                "--workers",
                "2",
                "--out",
                str(out),
                "--hypothesis-tests",
                str(prop),
                # Three quarters of 12 s: pytest's own start loads every installed plugin
                # (langsmith's among them) and took over 6 s on a busy machine.
                "--hypothesis-share",
                "0.75",
            ],
            cwd=ROOT,
            env=subprocess_env(AUDIT_MINUTES="0.2"),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        audit = json.loads((out / "summary.json").read_text())["audit"]
        assert audit["budget_minutes"] == 0.2
        assert audit["cut_by_budget"], "batches are unbounded: only the budget can stop them"
        assert audit["hypothesis"]["passed"] and audit["passed"]
        rate = audit["trials_per_s"]
        # The summary keeps the rate to two decimals, the line prints it to one: 27.05
        # in the summary may be 27.1 on the line (it was 27.0512...), so compare numbers.
        printed = re.search(r"audit: pace (\d+\.\d) trials/s", run.stdout)
        assert rate > 0 and printed is not None, run.stdout
        assert abs(float(printed[1]) - rate) <= 0.05 + 1e-9
        suites = _junit_cases(out / "junit.xml")
        assert len(suites["chaos campaign"]) == len(_trial_ids(out)) > 0
        assert any(name.startswith("hypothesis: ") for name in suites)
        assert _junit_cases(out / "hypothesis-junit.xml")
        assert (out / "index.html").exists()

    @pytest.mark.long
    def test_a_failing_trial_fails_the_audit(self, tmp_path: Path) -> None:
        """An audit of a broken runtime exits 1 and its JUnit XML holds the failures."""
        out = tmp_path / "run"
        run = run_harness(
            "audit",
            "--minutes",
            "5",
            "--scenarios",
            SCENARIOS,
            "--seed",
            "3",
            "--batches",
            "0",
            "--runtime",
            "retry-non-idempotent",
            "--no-hypothesis",
            "--out",
            str(out),
        )
        assert run.returncode == 1, run.stdout + run.stderr
        failed = [c for c in _junit_cases(out / "junit.xml")["chaos campaign"] if len(c)]
        assert failed and "I2" in run.stdout

    @pytest.mark.parametrize(
        ("args", "says"),
        [
            (("--shard", "1/2"), "--seed"),
            (("--shard", "3/2", "--seed", "1"), "--shard"),
            (("--minutes", "0"), "--minutes"),
            (("--runtime", "nope"), "nope"),
        ],
    )
    def test_bad_input_runs_nothing(self, args: tuple[str, ...], says: str, tmp_path: Path) -> None:
        """Bad options exit 2, name the option, and leave no run folder."""
        run = run_harness("audit", "--scenarios", SCENARIOS, "--reports", str(tmp_path), *args)
        assert run.returncode == 2 and says in run.stderr
        assert not any(tmp_path.iterdir())


def _fake_trials(run_dir: Path, statuses: tuple[Status, ...]) -> list[TrialResult]:
    """One result per status, each with an I1 pass and an F verdict of that status."""
    results = []
    for n, status in enumerate(statuses, 1):
        label = f"op.after_intent@{n}"
        spec = TrialSpec(MINI, 3, CrashSchedule((Life(f"{label}=kill"),)), "real", label)
        directory = run_dir / "trials" / spec.trial_id
        directory.mkdir(parents=True)
        verdicts = (
            Verdict("I1", TITLES["I1"], "pass", ("fine",)),
            Verdict("F", TITLES["F"], status, (f"F is {status}",)),
        )
        results.append(TrialResult(spec, directory, verdicts, 2, 1, (), (), 1.0))
    return results


class TestAuditExitStatus:
    @pytest.mark.parametrize(
        ("statuses", "hypothesis_fails", "code"),
        [
            (("pass", "pass"), False, 0),
            (("pass", "unknown"), False, 3),
            (("unknown", "fail"), False, 1),
            (("pass", "unknown"), True, 1),
        ],
    )
    def test_exit_status_follows_the_trials_and_hypothesis(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        statuses: tuple[Status, ...],
        hypothesis_fails: bool,
        code: int,
    ) -> None:
        """The audit exits 0 when all held, 3 when some trial is unknown, 1 when a trial or
        Hypothesis failed (a failure outranks an unknown)."""
        campaign = CampaignConfig(tmp_path, (MINI,), 3, random_trials=1)
        results = _fake_trials(tmp_path, statuses)

        def fake_run_trials(config: CampaignConfig, on_result: Any, **kwargs: Any) -> list[Any]:
            for result in results:
                on_result(result)
            return results

        hypothesis = HypothesisOutcome(("t",), returncode=1 if hypothesis_fails else 0)
        monkeypatch.setattr(audit, "run_trials", fake_run_trials)
        monkeypatch.setattr(audit, "_run_hypothesis", lambda *args: hypothesis)
        assert run_audit(AuditConfig(campaign, 1.0, max_batches=0)) == code
        summary = json.loads((tmp_path / "summary.json").read_text())
        assert summary["unknown"] == statuses.count("unknown")
        assert summary["passed"] is (code == 0)


@dataclass(frozen=True)
class ShardedRuns:
    whole: Path
    shards: tuple[Path, Path]
    merged: Path
    merge: subprocess.CompletedProcess[str]


@pytest.fixture(scope="class")
def sharded_audit(tmp_path_factory: pytest.TempPathFactory) -> ShardedRuns:
    """One audit of a fixed campaign, the same in two shards, and the shards merged."""
    root = tmp_path_factory.mktemp("sharded")
    # One scenario: a shard's split and a merge's sum need no more, and three tripled the cost.
    common = ["audit", "--minutes", "10", "--scenarios", SCENARIOS, "--only", "mini", "--seed", "9"]
    common += ["--batch", "6", "--batches", "2", "--no-hypothesis"]
    runs = []
    shards = {"whole": [], "shard1": ["--shard", "1/2"], "shard2": ["--shard", "2/2"]}
    for name, shard in shards.items():
        run = run_harness(*common, *shard, "--out", str(root / name))
        assert run.returncode == 0, run.stdout + run.stderr
        runs.append(root / name)
    merged = root / "merged"
    merge = run_harness("merge", str(merged), str(runs[1]), str(runs[2]))
    return ShardedRuns(runs[0], (runs[1], runs[2]), merged, merge)


@pytest.mark.long
class TestShardsAndMerge:
    def test_two_shards_merged_are_one_run(self, sharded_audit: ShardedRuns) -> None:
        """Two shards of a seed share no trial, and merged they hold exactly one run's trials."""
        first, second = (_trial_ids(shard) for shard in sharded_audit.shards)
        assert first and second and not first & second
        whole = _trial_ids(sharded_audit.whole)
        assert first | second == whole
        assert sharded_audit.merge.returncode == 0, sharded_audit.merge.stderr
        assert _trial_ids(sharded_audit.merged) == whole

    def test_merged_report_counts_every_trial(self, sharded_audit: ShardedRuns) -> None:
        """The merged summary and JUnit XML count the whole campaign, random trials included."""
        summary = json.loads((sharded_audit.merged / "summary.json").read_text())
        whole = json.loads((sharded_audit.whole / "summary.json").read_text())
        assert summary["trials"] == whole["trials"] and summary["kinds"] == whole["kinds"]
        # 12 random trials (2 batches of 6), and a sub-trial per other crash state of a cut.
        states = {t for t in _trial_ids(sharded_audit.whole) if "_state-" in t}
        assert (
            summary["kinds"]["random"] == 12 + len([t for t in states if "random" in t])
            and summary["passed"]
        )
        cases = _junit_cases(sharded_audit.merged / "junit.xml")["chaos campaign"]
        assert {c.get("name") for c in cases} == _trial_ids(sharded_audit.whole)
        assert (sharded_audit.merged / "index.html").exists()

    def test_overlapping_runs_are_refused(self, sharded_audit: ShardedRuns, tmp_path: Path) -> None:
        """A shard merged with the unsharded run that holds its trials is refused, and nothing
        is written."""
        first = sharded_audit.shards[0]
        run = run_harness("merge", str(tmp_path / "m"), str(first), str(sharded_audit.whole))
        assert run.returncode == 2 and "different counts" in run.stderr
        assert "shard 1/2" in run.stderr and "shard 1/1" in run.stderr
        assert not (tmp_path / "m").exists()

    def test_each_shard_records_which_it_is(self, sharded_audit: ShardedRuns) -> None:
        """An audit shard's summary.json records its shard; the unsharded run's is null."""
        assert json.loads((sharded_audit.whole / "summary.json").read_text())["shard"] is None
        for k, shard in enumerate(sharded_audit.shards, 1):
            summary = json.loads((shard / "summary.json").read_text())
            assert summary["shard"] == {"index": k, "count": 2}


@pytest.mark.long
class TestChaosShard:
    def test_chaos_shards_split_the_campaign(self, tmp_path: Path) -> None:
        """``chaos --shard`` splits exhaustive and random trials alike, without a self-check."""
        ids = {}
        for shard in ("1/2", "2/2", None):
            name = "whole" if shard is None else shard.replace("/", "of")
            run = run_harness(
                "chaos",
                *("--scenarios", SCENARIOS, "--only", "mini", "--seed", "5", "--random", "6"),
                *(("--no-self-check",) if shard is None else ("--shard", shard)),
                *("--reports", str(tmp_path / name)),
            )
            assert run.returncode == 0, run.stdout + run.stderr
            (run_dir,) = (tmp_path / name).iterdir()
            assert json.loads((run_dir / "summary.json").read_text())["self_check"] == []
            ids[name] = _trial_ids(run_dir)
        assert ids["1of2"] and ids["2of2"] and not ids["1of2"] & ids["2of2"]
        assert ids["1of2"] | ids["2of2"] == ids["whole"]
        assert any("random" in name for name in ids["whole"])
