"""``python -m harness merge``: shards of one campaign, all of them, or it says which are missing.

Three real shards of one small campaign (``chaos --shard K/3`` on the mini
scenario, no random trials) are run once for the module; tests that need a
damaged or forged shard work on copies, since the merge only reads its inputs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from tests.conftest import run_harness

ROOT = Path(__file__).parent.parent.parent
SCENARIOS = str(ROOT / "tests" / "data" / "scenarios")


def _summary(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "summary.json").read_text("utf-8"))
    return data


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Shard K of 3 of one campaign (seed 5, exhaustive trials of the mini scenario), by K."""
    root = tmp_path_factory.mktemp("shards")
    runs = {}
    for k in (1, 2, 3):
        run = run_harness(
            "chaos",
            *("--scenarios", SCENARIOS, "--seed", "5", "--random", "0", "--workers", "2"),
            *("--shard", f"{k}/3", "--reports", str(root / f"shard{k}")),
        )
        assert run.returncode == 0, run.stdout + run.stderr
        (runs[k],) = (root / f"shard{k}").iterdir()
        assert _summary(runs[k])["shard"] == {"index": k, "count": 3}
    return runs


def _copy(run_dir: Path, target: Path, **summary: Any) -> Path:
    """A copy of a run folder, its summary.json changed by ``summary``."""
    shutil.copytree(run_dir, target, symlinks=True)
    data = _summary(target)
    data.update(summary)
    (target / "summary.json").write_text(json.dumps(data), "utf-8")
    return target


def _set_verdict(run_dir: Path, invariant: str, status: str) -> str:
    """Give the first trial of ``run_dir`` a ``status`` verdict for ``invariant``; its id."""
    trial = sorted((run_dir / "trials").iterdir())[0]
    path = trial / "verdicts.json"
    verdicts = json.loads(path.read_text("utf-8"))
    for verdict in verdicts:
        if verdict["invariant"] == invariant:
            verdict["status"] = status
            verdict["evidence"] = [f"{invariant} set to {status} by the test"]
    path.write_text(json.dumps(verdicts), "utf-8")
    return trial.name


@pytest.mark.long
class TestCompleteSet:
    def test_every_shard_merges_into_a_complete_run(
        self, shards: dict[int, Path], tmp_path: Path
    ) -> None:
        """All three shards merge, exit 0, and the summary says the run is complete."""
        out = tmp_path / "merged"
        run = run_harness("merge", str(out), *(str(shards[k]) for k in (3, 1, 2)))
        assert run.returncode == 0, run.stdout + run.stderr
        summary = _summary(out)
        assert summary["complete"] and summary["passed"] and summary["missing_shards"] == []
        assert summary["audit"]["shard_count"] == 3
        assert summary["trials"] == sum(_summary(s)["trials"] for s in shards.values())
        assert summary.get("commit") == _summary(shards[1]).get("commit")  # the shards' own
        assert run.stdout.startswith("PASS: merged 3 of 3 shards")


class TestMissingShards:
    def test_a_missing_shard_is_refused_by_name(
        self, shards: dict[int, Path], tmp_path: Path
    ) -> None:
        """Shards 1/3 and 3/3 without 2/3 are refused, naming 2/3, and nothing is written."""
        out = tmp_path / "merged"
        run = run_harness("merge", str(out), str(shards[1]), str(shards[3]))
        assert run.returncode == 2, run.stdout + run.stderr
        assert "shard 2/3 is missing" in run.stderr and "--allow-missing" in run.stderr
        assert not out.exists()

    def test_several_missing_shards_are_all_named(
        self, shards: dict[int, Path], tmp_path: Path
    ) -> None:
        """Shard 1/3 alone is refused, naming 2/3 and 3/3."""
        run = run_harness("merge", str(tmp_path / "merged"), str(shards[1]))
        assert run.returncode == 2 and "shards 2/3, 3/3 are missing" in run.stderr

    def test_allow_missing_merges_and_says_what_is_missing(
        self, shards: dict[int, Path], tmp_path: Path
    ) -> None:
        """With --allow-missing the merge runs, and the summary, headline and index say 2/3 is
        missing and the run is not complete."""
        out = tmp_path / "merged"
        run = run_harness("merge", "--allow-missing", str(out), str(shards[1]), str(shards[3]))
        assert run.returncode == 0, run.stdout + run.stderr
        assert run.stdout.startswith("INCOMPLETE (shard 2/3 is missing)")
        assert "merged 2 of 3 shards" in run.stdout
        summary = _summary(out)
        assert summary["missing_shards"] == ["2/3"] and summary["audit"]["missing_shards"] == [
            "2/3"
        ]
        assert summary["complete"] is False and summary["passed"] is False
        assert summary["trials"] == _summary(shards[1])["trials"] + _summary(shards[3])["trials"]
        index = (out / "index.html").read_text("utf-8")
        assert "INCOMPLETE" in index and "<dt>missing shards</dt><dd>2/3" in index


class TestRefusedSets:
    def test_shards_of_different_counts_are_refused(
        self, shards: dict[int, Path], tmp_path: Path
    ) -> None:
        """A shard of 3 and one of 2 are refused, naming both counts."""
        other = _copy(shards[2], tmp_path / "other", shard={"index": 2, "count": 2})
        run = run_harness("merge", str(tmp_path / "m"), str(shards[1]), str(other))
        assert run.returncode == 2 and "different counts" in run.stderr
        assert "shard 1/3" in run.stderr and "shard 2/2" in run.stderr
        assert not (tmp_path / "m").exists()

    def test_an_unsharded_run_and_a_shard_are_refused(
        self, shards: dict[int, Path], tmp_path: Path
    ) -> None:
        """An unsharded run counts as shard 1 of 1, so it does not merge with a shard of 3."""
        whole = _copy(shards[2], tmp_path / "whole", shard=None)
        run = run_harness(
            "merge", "--allow-missing", str(tmp_path / "m"), str(shards[1]), str(whole)
        )
        assert run.returncode == 2 and "shard 1/1" in run.stderr

    def test_a_shard_given_twice_is_refused(self, shards: dict[int, Path], tmp_path: Path) -> None:
        """The same shard twice (two folders of 1/3) is refused."""
        again = _copy(shards[1], tmp_path / "again")
        run = run_harness("merge", str(tmp_path / "m"), str(shards[1]), str(again), str(shards[2]))
        assert run.returncode == 2 and "shard 1/3 is given twice" in run.stderr

    def test_a_run_without_a_shard_field_is_refused(
        self, shards: dict[int, Path], tmp_path: Path
    ) -> None:
        """A summary.json with no shard field cannot be placed in a campaign, so it is refused."""
        old = _copy(shards[1], tmp_path / "old")
        data = _summary(old)
        del data["shard"]
        (old / "summary.json").write_text(json.dumps(data), "utf-8")
        run = run_harness("merge", "--allow-missing", str(tmp_path / "m"), str(old))
        assert run.returncode == 2 and "no shard field" in run.stderr

    def test_overlapping_shards_are_refused(self, shards: dict[int, Path], tmp_path: Path) -> None:
        """A folder that claims to be shard 2/3 but holds shard 1/3's trials is refused."""
        forged = _copy(shards[1], tmp_path / "forged", shard={"index": 2, "count": 3})
        run = run_harness("merge", str(tmp_path / "m"), str(shards[1]), str(forged), str(shards[3]))
        assert run.returncode == 2 and "both" in run.stderr


class TestMergedExitStatus:
    @pytest.mark.parametrize(("status", "code"), [("fail", 1), ("unknown", 3)])
    def test_the_merged_trials_decide_the_exit_status(
        self, shards: dict[int, Path], tmp_path: Path, status: str, code: int
    ) -> None:
        """A shard's failed trial makes the merge exit 1, an unknown one 3 (through exit_status)."""
        damaged = _copy(shards[2], tmp_path / "damaged")
        trial = _set_verdict(damaged, "I8", status)
        out = tmp_path / "merged"
        run = run_harness("merge", str(out), str(shards[1]), str(damaged), str(shards[3]))
        assert run.returncode == code, run.stdout + run.stderr
        summary = _summary(out)
        assert summary["passed"] is False and summary["complete"] is True
        counted = {"fail": summary["failed"], "unknown": summary["unknown"]}
        assert counted[status] == 1
        suite = next(
            s
            for s in ET.parse(out / "junit.xml").getroot().iter("testsuite")
            if s.get("name") == "chaos campaign"
        )
        assert suite.get("failures" if status == "fail" else "errors") == "1"
        headline = {"fail": "FAIL", "unknown": "COULD NOT JUDGE"}[status]
        assert run.stdout.startswith(f"{headline}: merged 3 of 3 shards")
        case = next(c for c in suite.iter("testcase") if c.get("name") == trial)
        assert case.find("failure" if status == "fail" else "error") is not None
