"""Verdicts through the real command line: an unknown never passes, and says why.

Each case runs ``python -m harness`` as a subprocess from the repository root,
the way a user or CI does, and reads its exit status and output: 3 when some
invariant could not be judged (and none failed), 1 when one failed, never a
traceback.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from harness.exits import EXIT_FAILED, EXIT_UNJUDGED
from tests.conftest import run_harness

ROOT = Path(__file__).resolve().parents[2]
MINI = ROOT / "tests" / "data" / "scenarios" / "mini.toml"


@pytest.fixture
def mini_only(tmp_path: Path) -> Path:
    """A scenarios folder holding only the small integration scenario."""
    folder = tmp_path / "scenarios"
    folder.mkdir()
    shutil.copy(MINI, folder / MINI.name)
    return folder


def _verdicts(reports: Path) -> dict[str, dict[str, object]]:
    path = next(reports.glob("*/trial/verdicts.json"))
    return {str(v["invariant"]): v for v in json.loads(path.read_text())}


class TestUnknownNeverPasses:
    def test_a_kill_that_never_fires_makes_the_trial_unjudged(self, tmp_path: Path) -> None:
        """A scheduled kill at a hit the run never reaches exits 3 and names the kill."""
        done = run_harness(
            "trial",
            str(MINI),
            "--seed",
            "3",
            "--schedule",
            '[{"failpoints":"op.after_intent@99=kill"}]',
            "--reports",
            str(tmp_path),
        )
        assert done.returncode == EXIT_UNJUDGED, done.stdout + done.stderr
        assert "COULD NOT JUDGE" in done.stdout
        assert "op.after_intent@99=kill never fired" in done.stdout
        assert "Traceback" not in done.stdout + done.stderr
        verdicts = _verdicts(tmp_path)
        assert verdicts["F"]["status"] == "unknown"
        assert {v["status"] for k, v in verdicts.items() if k != "F"} <= {"pass", "not-judged"}

    def test_a_checker_that_raises_makes_the_campaign_unjudged(
        self, tmp_path: Path, mini_only: Path
    ) -> None:
        """A runtime that leaves a world no checker can read: chaos exits 3, naming the error."""
        done = run_harness(
            "chaos",
            "--runtime",
            "module:tests.integration.unreadable_world_agent",
            "--scenarios",
            str(mini_only),
            "--random",
            "0",
            "--no-self-check",
            "--workers",
            "1",
            "--seed",
            "5",
            "--reports",
            str(tmp_path),
        )
        assert done.returncode == EXIT_UNJUDGED, done.stdout[-3000:] + done.stderr[-3000:]
        assert "checker error" in done.stdout
        assert "could not be judged" in done.stdout
        assert "Traceback" not in done.stdout + done.stderr
        summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
        assert summary["failed"] == 0 and summary["unknown"] == summary["trials"] > 0
        assert summary["passed"] is False

    def test_the_restart_budget_spent_fails_liveness(self, tmp_path: Path) -> None:
        """Eight lives each killed before their first intent spend the budget: I7 fails."""
        schedule = json.dumps([{"failpoints": "op.before_intent@1=kill"}] * 8)
        done = run_harness(
            "trial", str(MINI), "--seed", "3", "--schedule", schedule, "--reports", str(tmp_path)
        )
        assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
        verdict = _verdicts(tmp_path)["I7"]
        assert verdict["status"] == "fail"
        assert "the restart budget of 8 lives was spent" in str(verdict["evidence"])


class TestRuntimesWithoutOurJournal:
    def test_naive_runs_a_whole_campaign_with_journal_faults_not_applicable(
        self, tmp_path: Path, mini_only: Path
    ) -> None:
        """``chaos --runtime naive`` completes: journal faults not applicable, replays caught."""
        done = run_harness(
            "chaos",
            "--runtime",
            "naive",
            "--scenarios",
            str(mini_only),
            "--random",
            "6",
            "--no-self-check",
            "--seed",
            "5",
            "--reports",
            str(tmp_path),
        )
        output = done.stdout + done.stderr
        assert done.returncode == EXIT_FAILED, output[-3000:]
        assert "Traceback" not in output and "INTERRUPTED" not in output
        assert "not applicable" in done.stdout
        summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
        assert summary["unknown"] == 0, summary
        # No journal: none of its faults; a pause stops any runtime.
        assert set(summary["faults"]) <= {"sigkill", "lost-reply", "lost-request", "pause"}
        judged = summary["invariants"]
        for key in ("I3", "I4", "I5", "I6", "I9"):
            outcomes = {outcome for outcome, n in judged[key].items() if n}
            assert outcomes == {"not-judged"}, (key, judged[key])
        assert judged["I2"].get("fail", 0) > 0  # naive replays every unsafe step it redoes


class TestReadmeSelection:
    @pytest.mark.long
    def test_only_phone_task_passes_listing_what_it_cannot_expose(self, tmp_path: Path) -> None:
        """The README's ``--only phone_task`` example exits 0; the self-check lists the broken
        runtime no phone_task step can expose as not applicable, with what it needs."""
        done = run_harness(
            "chaos",
            "--only",
            "phone_task",
            "--random",
            "5",
            "--seed",
            "7",
            "--reports",
            str(tmp_path),
        )
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        assert "not applicable" in done.stdout  # the table wraps the rest of the cell
        summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
        skipped = [c for c in summary["self_check"] if "not applicable" in c["outcome"]]
        assert [c["runtime"] for c in skipped] == [
            "retry-failed",
            "unawaited-intent",
            "one-current-op",
            "no-op-lock",
            "stale-offset-truncate",
            "cancel-left-running",
            "content-by-tool",
            "compaction-drops-running",
            "compaction-drops-resolution",
            "compaction-unsynced",
            "compaction-no-dir-fsync",
            "key-changes-on-retry",
            "reconcile-new-key",
            "key-window-never-passes",
            "failed-group-write-fails-all",
            "reconciles-at-once",
            "both-apis-at-once",
            "key-from-args",
            "content-one-op",
            "settled-index-one-per-content",
            "content-ignores-volatile",
            "drift-by-tool",
            "forwards-in-doubt",
        ], summary["self_check"]
        assert "fails for good" in skipped[0]["outcome"]
        threaded = {"no-op-lock", "stale-offset-truncate"}
        assert all(
            ("a batch on threads" if c["runtime"] in threaded else "a batch step") in c["outcome"]
            for c in skipped[1:6]
        )
        assert "a scenario of the replan model" in skipped[6]["outcome"]
        assert all("a scenario that compacts its journal" in c["outcome"] for c in skipped[7:11])
        needs_key = ("a keyed tool", "a reconciler looks up by key")
        keyed = skipped[11:14] + skipped[15:16]
        assert all(any(n in c["outcome"] for n in needs_key) for c in keyed)
        assert all("a batch step" in c["outcome"] for c in skipped[14:17:2])
        shapes = ("twice with equal arguments", "repeated with another between", "two equal calls")
        assert all(any(n in c["outcome"] for n in shapes) for c in skipped[17:20])
        assert all("a scenario of the drift model" in c["outcome"] for c in skipped[20:])
        # Each mistake that needs a fault beyond SIGKILL is caught under it only: it
        # escaped every trial without it, and the outcome says so with their number.
        beyond = [
            c
            for c in summary["self_check"]
            if c["needs_fault"] not in ("sigkill", "mutation", "batch")
            and not c["needs_fault"].startswith("threads")
            and c not in skipped
        ]
        assert {c["needs_fault"] for c in beyond} >= {
            "lost-reply",
            "corrupt-crc",
            "sector",
            "unlisted",
        }
        for check in beyond:
            assert check["as_expected"], check
            escaped = re.search(r"only; escapes the (\d+) trials without it", check["outcome"])
            assert escaped and int(escaped[1]) > 0, check
