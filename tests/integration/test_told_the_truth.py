"""I11, told the truth, through real agent processes: one trial each.

Three broken runtimes pass every invariant as it stood before I11 (I2 without its
in-life branch, I7 and I8 excusing a step by its ``info`` alone) and are caught
now: ``gives-up-unknown`` never runs a call of unknown effect and calls it unknown,
``lost-reply-ok`` takes a timed-out non-idempotent call for done, ``wrong-result``
answers a durable success with another result. The real runtime holds under the
lost request: nothing happened, the model verifies, finds the effect absent, redoes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from harness.chaos.trial import TrialResult
from harness.check.evidence import TrialEvidence
from harness.check.invariants import NOT_EFFECTS, SET_TABLES
from harness.exits import EXIT_FAILED
from harness.world.store import EffectRow, read_ledger, step_of
from tests.integration.conftest import TrialRunner

ROOT = Path(__file__).resolve().parents[2]


def _failed(result: TrialResult) -> dict[str, tuple[str, ...]]:
    return {v.invariant: v.evidence for v in result.verdicts if v.status != "pass"}


def _old_i8_holds(result: TrialResult, golden: Path) -> bool:
    """I8 as it was: a step with no check whose last report is ``info`` is left out."""
    ev = TrialEvidence(result.directory, golden)
    last = ev.last_report
    skip = {s.op_id for s in ev.plan.steps if s.verify is None and last.get(s.op_id) == "info"}

    def counted(rows: tuple[EffectRow, ...]) -> Counter[tuple[str, ...]]:
        out: Counter[tuple[str, ...]] = Counter()
        for row in rows:
            if row.table in NOT_EFFECTS or step_of(row.op_id) in skip:
                continue
            key = (row.table, *row.values)
            out[key] = 1 if row.table in SET_TABLES else out[key] + 1
        return out

    assert ev.golden_world is not None
    return counted(ev.world) == counted(ev.golden_world)


class TestGivesUpUnknown:
    def test_it_passed_before_and_is_caught_now(self, run_mini: TrialRunner) -> None:
        """No fault at all: shell_execute (unknown) is never run and told ``info``."""
        result = run_mini("[]", runtime="gives-up-unknown")
        failed = _failed(result)
        assert set(failed) == {"I7", "I8", "I11"}, failed
        assert "s006 was reported unknown (info) in life 1" in failed["I11"][0]
        # Before: I7 counted the resolved op as accounted for, and I8 left the step out.
        assert all("ended unknown (info)" in line for line in failed["I7"])
        assert _old_i8_holds(result, run_mini.golden.directory)
        assert not [e for e in read_ledger(result.directory / "world.db") if e.op_id == "s006"]

    def test_the_command_line_trial_exits_1(self, tmp_path: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
        trial = ["trial", "scenarios/terminal_session.toml", "--seed", "7", "--schedule", "[]"]
        broken = ["--runtime", "gives-up-unknown", "--reports", str(tmp_path)]
        done = subprocess.run(
            [sys.executable, "-m", "harness", *trial, *broken],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
        assert "fail       I11" in done.stdout


class TestLostReplyOk:
    def test_under_a_lost_reply_only_i2_in_life_and_i11_see_it(self, run_mini: TrialRunner) -> None:
        """The tap happened and its reply was lost: the world equals the golden run, and
        only what the model was told (no result, no hint read) gives the runtime away."""
        result = run_mini('[{"failpoints":"op.reply@3=lost-reply"}]', runtime="lost-reply-ok")
        failed = _failed(result)
        assert set(failed) == {"I2", "I11"}, failed
        assert all("before the model read its VERIFY hint" in line for line in failed["I2"])
        assert "s003 was reported done in life 1 with no result" in failed["I11"][0]

    def test_under_a_lost_request_the_ack_matches_no_execution(self, run_mini: TrialRunner) -> None:
        result = run_mini('[{"failpoints":"op.request@3=lost-request"}]', runtime="lost-reply-ok")
        failed = _failed(result)
        assert {"I2", "I11"} <= set(failed), failed
        assert "executions that succeeded: none" in failed["I11"][0]


class TestWrongResult:
    def test_answered_from_the_journal_after_a_kill_only_i11_sees_it(
        self, run_mini: TrialRunner
    ) -> None:
        result = run_mini('[{"failpoints":"op.after_finish@2=kill"}]', runtime="wrong-result")
        failed = _failed(result)
        assert set(failed) == {"I11"}, failed
        told = [line.split(" was ")[0] for line in failed["I11"]]
        assert told == ["s001", "s002"]  # answered from the journal in life 2, both wrong


class TestTheRealRuntimeUnderALostRequest:
    def test_nothing_happened_so_the_model_redoes_it(self, run_mini: TrialRunner) -> None:
        result = run_mini('[{"failpoints":"op.request@3=lost-request"}]')
        assert result.status == "pass", _failed(result)
        ran = [e.op_id for e in read_ledger(result.directory / "world.db")]
        assert "s003" not in ran and ran.count("s003.redo") == 1
        events = [json.loads(line) for line in (result.directory / "events.jsonl").open()]
        order = [e["event"] for e in events if e.get("op", "").startswith("s003") or "at" in e]
        assert order == ["lost-request", "hint", "check", "ack"]
