"""A batch call cancelled inside a life (failpoint action ``cancel``), in real processes.

``mini_batch`` issues a batch of three calls after one step of one call: a
non-idempotent typed text (``s002a``), a read-only screen read (``s002b``) and
an idempotent install (``s002c``). A cancel at a call's ``op.after_intent``
lands before its tool runs: the real runtime journals the call's outcome as
unknown and hands it on, the model issues it again, and the trial passes. The
broken runtime ``cancel-left-running`` leaves the cancelled op running with
no finish and no hint, and an invariant names it.
"""

from __future__ import annotations

import json

import pytest

from harness.agent.broken import BROKEN_RUNTIMES
from harness.chaos.trial import Golden, TrialResult
from harness.check.journal import read_journal
from tests.integration.conftest import TrialRunner

TEXT, READ, INSTALL = "s002a", "s002b", "s002c"


def _history(result: TrialResult, op_id: str) -> list[str]:
    lines = (result.directory / "history.jsonl").read_text().splitlines()
    return [entry["type"] for entry in map(json.loads, lines) if entry["op"] == op_id]


def _failed(result: TrialResult) -> str:
    return "; ".join(
        f"{v.invariant} {v.status}: {v.evidence[0]}" for v in result.verdicts if v.status != "pass"
    )


def _cancel_at(golden: Golden, point: str, op_id: str) -> str:
    """A schedule that cancels ``op_id`` at its first hit of ``point`` in the golden run."""
    hit = next(h for h in range(1, golden.hits[point] + 1) if golden.op_at(point, h) == op_id)
    return json.dumps([{"failpoints": f"{point}@{hit}=cancel"}])


class TestRealRuntime:
    def test_an_unsafe_call_cancelled_before_its_tool_is_verified_and_redone(
        self, run_mini_batch: TrialRunner, mini_batch_golden: Golden
    ) -> None:
        """The typed text is cancelled after its intent: journaled unknown, hinted, found
        absent by its check, redone once; the user hears info, then ok."""
        result = run_mini_batch(_cancel_at(mini_batch_golden, "op.after_intent", TEXT))
        assert result.status == "pass", _failed(result)
        assert result.lives == 1
        entries = read_journal(result.directory / "journal").entries
        finish = next(e for e in entries if e.kind == "finish" and e.op_id == TEXT)
        assert finish.payload["unknown"] and "CancelledError" in finish.payload["error"]
        assert any(e.kind == "hint" and e.op_id == TEXT for e in entries)
        intents = [e.op_id for e in entries if e.kind == "intent"]
        assert intents.count(TEXT) == 1 and f"{TEXT}.check" in intents
        assert intents.count(f"{TEXT}.redo") == 1  # the tool never ran: the effect was absent
        events = (result.directory / "events.jsonl").read_text().splitlines()
        cancels = [e for e in map(json.loads, events) if e["event"] == "cancel"]
        assert [e["at"] for e in cancels] == [f"op.after_intent 2 {TEXT}"]
        assert _history(result, TEXT) == ["invoke", "info", "invoke", "info", "ok"]
        assert _history(result, READ) == ["invoke", "ok"]  # the others of the batch finished

    def test_a_retry_safe_call_cancelled_before_its_tool_runs_again(
        self, run_mini_batch: TrialRunner, mini_batch_golden: Golden
    ) -> None:
        """The install is cancelled after its intent: issued again, it runs as attempt 2."""
        result = run_mini_batch(_cancel_at(mini_batch_golden, "op.after_intent", INSTALL))
        assert result.status == "pass", _failed(result)
        entries = read_journal(result.directory / "journal").entries
        attempts = [
            e.payload["attempt"] for e in entries if e.kind == "intent" and e.op_id == INSTALL
        ]
        assert attempts == [1, 2]
        assert not any(e.kind == "hint" and e.op_id == INSTALL for e in entries)
        assert _history(result, INSTALL) == ["invoke", "info", "invoke", "ok"]

    def test_a_call_cancelled_after_its_effect_is_answered_from_its_finish(
        self, run_mini_batch: TrialRunner, mini_batch_golden: Golden
    ) -> None:
        """Cancelled while its finish is written: the finish is durable, the call is not
        run again, and issuing it again answers ok from the journal."""
        result = run_mini_batch(_cancel_at(mini_batch_golden, "op.after_effect", TEXT))
        assert result.status == "pass", _failed(result)
        entries = read_journal(result.directory / "journal").entries
        finishes = [e for e in entries if e.kind == "finish" and e.op_id == TEXT]
        assert len(finishes) == 1 and finishes[0].payload["succeeded"]
        assert [e.op_id for e in entries if e.kind == "intent"].count(TEXT) == 1
        assert _history(result, TEXT) == ["invoke", "info", "invoke", "ok"]


class TestCancelLeftRunning:
    @pytest.mark.parametrize("op_id", [TEXT, INSTALL])
    def test_caught_when_a_batch_call_is_cancelled_after_its_intent(
        self, op_id: str, run_mini_batch: TrialRunner, mini_batch_golden: Golden
    ) -> None:
        """The cancelled op keeps its intent alone (no finish, no hint), later calls answer
        info without a hint, and the invariant the runtime names fails."""
        name = "cancel-left-running"
        schedule = _cancel_at(mini_batch_golden, "op.after_intent", op_id)
        result = run_mini_batch(schedule, runtime=name)
        entries = read_journal(result.directory / "journal").entries
        assert not any(e.kind in ("finish", "hint") and e.op_id == op_id for e in entries)
        assert set(BROKEN_RUNTIMES[name].caught_by) <= set(result.failed_invariants), _failed(
            result
        )

    def test_escapes_the_same_batch_without_a_cancel(self, run_mini_batch: TrialRunner) -> None:
        """Killed in the batch instead of cancelled, it passes as the real runtime does."""
        result = run_mini_batch(
            '[{"failpoints":"op.after_intent@3=kill"}]', runtime="cancel-left-running"
        )
        assert result.status == "pass", _failed(result)
