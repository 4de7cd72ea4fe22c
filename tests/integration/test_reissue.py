"""A model that re-issues its calls under new ids: identity by id fails it, by content holds.

Real trials of the mini scenario (real agent processes, real SIGKILL) under the
re-issuing model: after the restart every plan call comes again as
``s00N~2``. Under identity by id (the default) the journal takes each for a new
call and runs it (I1, I2, I8 fail, judged from the ledger and what the user
was told); under identity by content (``real-content``) each is answered from
the op it stands for, and every invariant holds.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.chaos.schedule import CrashSchedule
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import Golden, TrialResult, TrialSpec, run_trial
from harness.check.evidence import TrialEvidence
from harness.check.windows import kill_windows
from harness.world.store import read_ledger
from tests.conftest import run_harness
from tests.integration.conftest import MINI, MINI_SEED

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = str(ROOT / "tests" / "data" / "scenarios")
KILL_IN_THE_TAP = '[{"failpoints":"op.after_intent@3=kill"}]'
"""Life 1 is killed inside s003 (ui_tap, non-idempotent) after s001 and s002 succeeded."""


def _trial(
    tmp_path: Path,
    golden: Golden,
    supervisor: Supervisor,
    tables: dict[str, Path],
    runtime: str,
    *,
    schedule: str = KILL_IN_THE_TAP,
    model: str | None = "reissue",
    folder: str = "trial",
) -> TrialResult:
    spec = TrialSpec(
        MINI, MINI_SEED, CrashSchedule.from_json(schedule), runtime, "test", "custom", model
    )
    return run_trial(spec, tmp_path / folder, golden.directory, supervisor, tables=tables)


def _history(result: TrialResult) -> list[dict[str, Any]]:
    lines = (result.directory / "history.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]


class TestReissuingModel:
    def test_identity_by_id_replays_successes_and_unsafe_calls(
        self,
        tmp_path: Path,
        mini_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        """Under id identity the re-issued s001~2, s002~2, s003~2 run again: I1, I2, I8 fail."""
        result = _trial(tmp_path, mini_golden, supervisor, tables, "real")
        assert result.status == "fail"
        assert set(result.failed_invariants) == {"I1", "I2", "I8"}
        evidence = {v.invariant: "\n".join(v.evidence) for v in result.verdicts}
        assert "s001 (app_install) ran again as s001~2 in life 2" in evidence["I1"]
        assert "s003 (ui_tap) executed again as s003~2 in life 2" in evidence["I2"]
        assert "s002 (input_text, non_idempotent) ran 2 times in 2 lives" in evidence["I2"]
        ran = {e.op_id for e in read_ledger(result.directory / "world.db")}
        assert {"s001~2", "s002~2", "s003~2"} <= ran

    def test_identity_by_content_holds_the_same_trial(
        self,
        tmp_path: Path,
        mini_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        """Under content identity the re-issues are answered from the journal: all hold."""
        result = _trial(tmp_path, mini_golden, supervisor, tables, "real-content")
        assert result.status == "pass", [v.to_json() for v in result.verdicts]
        told = [(h["type"], h["op"]) for h in _history(result) if h["life"] == 2]
        assert ("ok", "s001~2") in told and ("ok", "s003~2") in told
        ran = {e.op_id for e in read_ledger(result.directory / "world.db")}
        assert not {"s001~2", "s002~2", "s003~2"} & ran
        assert "s003.redo" in ran or "s003.check" in ran  # s003 was verified, not replayed

    def test_the_scripted_model_is_unchanged_under_identity_by_id(
        self,
        tmp_path: Path,
        mini_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        """The default model and runtime (identity by id) hold the same kill, issuing the
        plan's ids again."""
        result = _trial(tmp_path, mini_golden, supervisor, tables, "real", model=None)
        assert result.status == "pass", [v.to_json() for v in result.verdicts]
        assert all("~" not in h["op"] for h in _history(result))

    def test_the_new_ids_are_the_same_when_the_trial_is_replayed(
        self,
        tmp_path: Path,
        mini_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        """Two runs of one re-issuing trial tell the user of the same ids in the same order."""
        runs = [
            _trial(tmp_path, mini_golden, supervisor, tables, "real-content", folder=name)
            for name in ("first", "again")
        ]
        first, again = ([(h["type"], h["op"], h["life"]) for h in _history(r)] for r in runs)
        assert first == again
        assert ("invoke", "s006~2", 2) in first

    def test_a_kill_aimed_at_a_call_lands_in_its_reissue(
        self,
        tmp_path: Path,
        mini_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        """A random-time kill aimed at s005's intent fires inside s005~2, not at the exit."""
        schedule = json.dumps(
            [
                {"failpoints": "op.after_intent@3=kill"},
                {"kill_after_ms": 0.001, "aim": "op.after_intent s005"},
            ]
        )
        result = _trial(
            tmp_path, mini_golden, supervisor, tables, "real-content", schedule=schedule
        )
        assert result.status == "pass", [v.to_json() for v in result.verdicts]
        windows = kill_windows(TrialEvidence(result.directory, mini_golden.directory))
        assert len(windows) == 1 and windows[0] != "held at exit"
        invoked = [h["op"] for h in _history(result) if h["type"] == "invoke" and h["life"] == 2]
        assert invoked[-1] == "s005~2"


def _harness(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_harness(*args, "--reports", str(tmp_path), timeout=900)


class TestReissueCommands:
    @pytest.mark.long
    def test_compare_shows_id_identity_failing_and_content_holding(self, tmp_path: Path) -> None:
        """``compare --model reissue``: real fails I1, I2 and I8; real-content fails nothing."""
        run = _harness(
            tmp_path,
            "compare",
            *("--runtime", "real", "--runtime", "real-content", "--model", "reissue"),
            *("--expect-fail", "real", "--scenarios", SCENARIOS, "--failpoint", "op.after_intent"),
            *("--random", "0", "--seed", "3", "--workers", "2"),
        )
        assert run.returncode == 0, run.stdout + run.stderr
        (run_dir,) = tmp_path.iterdir()
        data = json.loads((run_dir / "compare.json").read_text("utf-8"))
        assert data["outcomes"] == {"real": "failed", "real-content": "held"}
        cells = data["invariants"]
        for key in ("I1", "I2", "I8"):
            assert not cells[key]["real"].startswith("0 /"), (key, cells[key])
        assert all(cell["real-content"].startswith("0 /") for cell in cells.values())
        assert "--model reissue" in (run_dir / "compare.md").read_text("utf-8")

    def test_a_runtime_with_its_own_loop_refuses_the_model(self, tmp_path: Path) -> None:
        """``trial --runtime naive --model reissue`` exits 2 naming the option; nothing runs."""
        run = _harness(
            tmp_path, "trial", MINI, "--seed", "3", "--runtime", "naive", "--model", "reissue"
        )
        assert run.returncode == 2, run.stdout + run.stderr
        assert "--model reissue: runtime naive runs its own agent loop" in run.stderr
        assert list(tmp_path.iterdir()) == []
