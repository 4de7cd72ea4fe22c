"""Faults shaped like real damage, through real agent processes (docs/reference/faults.md).

A lost reply: the effect commits, then the caller gets a timeout. For a call
that may not run twice the outcome is unknown, not a failure: the runtime
never retries it in-process, hands it to the model at once, and the model
verifies it and does not redo an effect it finds. Unlisted tools are UNKNOWN,
so an interrupted call of one is verified, never retried.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.chaos.trial import TrialResult
from harness.check.journal import read_journal
from tests.integration.conftest import TrialRunner


def _history(result: TrialResult, op_id: str) -> list[str]:
    lines = (result.directory / "history.jsonl").read_text().splitlines()
    return [entry["type"] for entry in map(json.loads, lines) if entry["op"] == op_id]


def _failed(result: TrialResult) -> str:
    return "; ".join(
        f"{v.invariant} {v.status}: {v.evidence[0]}" for v in result.verdicts if v.status != "pass"
    )


class TestKilledRedoes:
    def test_a_redo_killed_again_and_again_is_still_done_once(self, run_mini: TrialRunner) -> None:
        """ui_tap killed after its intent, then each redo killed after its own: every
        life finds the effect absent and redoes it; the last redo runs, once."""
        redo_killed = '{"failpoints":"op.after_intent@2=kill"}'  # @1 is the check's
        lives = ['{"failpoints":"op.after_intent@3=kill"}', *[redo_killed] * 3]
        result = run_mini(f"[{','.join(lives)}]")
        assert result.status == "pass", _failed(result)
        intents = [
            e.op_id
            for e in read_journal(result.directory / "journal").entries
            if e.kind == "intent" and e.op_id is not None
        ]
        chain = [op for op in intents if op.startswith("s003") and not op.endswith(".check")]
        assert chain == [
            "s003",
            "s003.redo",
            "s003.redo.redo",
            "s003.redo.redo.redo",
            "s003.redo.redo.redo.redo",
        ]
        assert _history(result, "s003")[-1] == "ok"


class TestLostReply:
    def test_a_non_idempotent_call_is_verified_not_retried(self, run_mini: TrialRunner) -> None:
        """ui_tap's reply is lost after it submitted: VERIFY now, effect found, no redo;
        the user is told info, then ok."""
        result = run_mini('[{"failpoints":"op.reply@3=lost-reply"}]')
        assert result.status == "pass", _failed(result)
        ledger = [
            e.op_id
            for e in read_journal(result.directory / "journal").entries
            if e.kind == "intent"
        ]
        assert ledger.count("s003") == 1 and "s003.redo" not in ledger
        assert "s003.check" in ledger  # the model looked, with a read-only tool
        entries = read_journal(result.directory / "journal").entries
        finish = next(e for e in entries if e.kind == "finish" and e.op_id == "s003")
        assert finish.payload["unknown"] and finish.payload["transient"]
        resolved = next(e for e in entries if e.kind == "resolved" and e.op_id == "s003")
        assert resolved.payload["resolution"] == "effect present"
        assert _history(result, "s003") == ["invoke", "info", "ok"]

    def test_a_retry_safe_call_is_retried_in_process(self, run_mini: TrialRunner) -> None:
        """app_install's lost reply is retried at once under its id (an idempotent write)."""
        result = run_mini('[{"failpoints":"op.reply@1=lost-reply"}]')
        assert result.status == "pass", _failed(result)
        attempts = [
            e.payload["attempt"]
            for e in read_journal(result.directory / "journal").entries
            if e.kind == "intent" and e.op_id == "s001"
        ]
        assert attempts == [1, 2]
        assert _history(result, "s001") == ["invoke", "ok"]

    def test_a_runtime_that_retries_it_is_caught_by_i10(self, run_mini: TrialRunner) -> None:
        """The same lost reply under a runtime that retries whatever the class: I10 fails."""
        result = run_mini('[{"failpoints":"op.reply@3=lost-reply"}]', runtime="retry-lost-reply")
        assert "I10" in result.failed_invariants, _failed(result)


class TestUnlistedTools:
    def test_an_unlisted_tool_left_running_gets_verify(self, run_mini: TrialRunner) -> None:
        """app_install (idempotent, so retried when listed) is UNKNOWN when unlisted: VERIFY."""
        result = run_mini(
            '[{"failpoints":"op.after_intent@1=kill","table":"unlisted"},{"table":"unlisted"}]'
        )
        assert result.status == "pass", _failed(result)
        entries = read_journal(result.directory / "journal").entries
        intent = next(e for e in entries if e.kind == "intent" and e.op_id == "s001")
        assert intent.payload["snapshot"]["class"] == "unknown"
        [decision] = [
            e
            for e in entries
            if e.kind == "decision" and e.op_id == "s001" and e.payload["state"] == "running"
        ]
        assert decision.payload["decision"] == "verify"

    def test_a_runtime_that_calls_them_safe_is_caught(
        self, run_mini: TrialRunner, tmp_path: Path
    ) -> None:
        """A runtime giving unlisted tools the read-only class fails I5 (and retries them)."""
        result = run_mini(
            '[{"failpoints":"op.after_intent@2=kill","table":"unlisted"},{"table":"unlisted"}]',
            runtime="unlisted-as-read-only",
        )
        assert "I5" in result.failed_invariants, _failed(result)


class TestReusedOpId:
    def test_the_runtime_refuses_and_the_step_runs_under_its_own_id(
        self, run_mini: TrialRunner
    ) -> None:
        """The model issues step 3 under step 2's id: refused (other content), then issued
        under its own id; the world is the golden run's."""
        result = run_mini('[{"failpoints":"model.issue@3=reuse-id"}]')
        assert result.status == "pass", _failed(result)
        intents = [
            e.op_id
            for e in read_journal(result.directory / "journal").entries
            if e.kind == "intent"
        ]
        assert intents.count("s002") == 1 and "s003" in intents
        assert _history(result, "s003") == ["invoke", "ok"]

    def test_a_runtime_that_answers_it_from_the_other_op_is_caught(
        self, run_mini: TrialRunner
    ) -> None:
        """A runtime that answers the reused id from step 2's op: step 3's effect never
        happens (I8) and the model was told a result no run of step 3 gave (I11)."""
        result = run_mini('[{"failpoints":"model.issue@3=reuse-id"}]', runtime="answers-reused-id")
        assert {"I8", "I11"} <= set(result.failed_invariants), _failed(result)


class TestAsyncToolOnTheSyncApi:
    def test_the_runtime_refuses_it_before_anything_is_journaled(
        self, run_mini: TrialRunner
    ) -> None:
        """The model hands step 3 an async tool: refused with nothing journaled, then run
        with its plain tool; one intent for the step."""
        result = run_mini('[{"failpoints":"model.issue@3=async-tool"}]')
        assert result.status == "pass", _failed(result)
        intents = [
            e.op_id
            for e in read_journal(result.directory / "journal").entries
            if e.kind == "intent"
        ]
        assert intents.count("s003") == 1
        assert _history(result, "s003") == ["invoke", "ok"]

    def test_a_runtime_that_takes_the_coroutine_for_a_result_is_caught(
        self, run_mini: TrialRunner
    ) -> None:
        """A runtime that journals the unawaited coroutine as a success: the step's effect
        never happens (I8), and the model was told a result nothing returned (I11)."""
        result = run_mini('[{"failpoints":"model.issue@3=async-tool"}]', runtime="awaits-nothing")
        assert {"I8", "I11"} <= set(result.failed_invariants), _failed(result)


class TestRecoverWhileACallIsInFlight:
    def test_the_runtime_refuses_and_the_call_runs_once(self, run_mini: TrialRunner) -> None:
        """The agent calls recover() once step 2's intent is durable: refused, so nothing
        is decided of a call still running, and the step's effect happens once."""
        result = run_mini('[{"failpoints":"op.after_intent@2=recover"}]')
        assert result.status == "pass", _failed(result)
        decided = [
            (e.payload["state"], e.payload["decision"])
            for e in read_journal(result.directory / "journal").entries
            if e.kind == "decision" and e.op_id == "s002"
        ]
        assert decided == [("not_started", "skip")]  # the start's, before the call was made

    def test_a_runtime_that_recovers_anyway_is_caught(self, run_mini: TrialRunner) -> None:
        """A runtime that recovers while the call runs decides it as a crash's leftover: the
        model verifies it (absent yet), redoes it, and then the call itself runs too."""
        result = run_mini(
            '[{"failpoints":"op.after_intent@2=recover"}]', runtime="recovers-in-flight"
        )
        assert {"I1", "I4", "I8"} & set(result.failed_invariants), _failed(result)

    def test_on_an_event_loop_the_recover_is_refused_too(self, run_mini_batch: TrialRunner) -> None:
        """In a batch on an event loop recover() runs as a task beside the calls: refused
        while they are in flight, so each call of the batch runs once."""
        result = run_mini_batch('[{"failpoints":"op.after_intent@3=recover"}]')
        assert result.status == "pass", _failed(result)

    def test_on_an_event_loop_a_runtime_that_recovers_anyway_is_caught(
        self, run_mini_batch: TrialRunner
    ) -> None:
        """A recovery beside the batch retries its retry-safe calls still in flight: each
        runs again once its success is durable (I1)."""
        result = run_mini_batch(
            '[{"failpoints":"op.after_intent@3=recover"}]', runtime="recovers-in-flight"
        )
        assert "I1" in result.failed_invariants, _failed(result)


class TestLaggingLookup:
    """payment_flow's receipt (sent every time, its key recorded) loses its reply, and its
    reconciler's lookup trails the provider's writes by 150 ms."""

    SCHEDULE = '[{"failpoints":"op.reply@3=lost-reply,reconcile.lookup=lag(150)"}]'

    def test_the_runtime_waits_before_it_asks_and_sends_once(
        self, run_payment: TrialRunner
    ) -> None:
        """Asked after the backoff, the lookup sees the receipt: closed as present."""
        result = run_payment(self.SCHEDULE)
        assert result.status == "pass", _failed(result)
        resolved = [
            e.payload["resolution"]
            for e in read_journal(result.directory / "journal").entries
            if e.kind == "resolved" and e.op_id == "s003"
        ]
        assert resolved == ["effect present"]

    def test_a_runtime_that_asks_at_once_sends_it_twice(self, run_payment: TrialRunner) -> None:
        """Asked at once, the lookup misses the receipt: redone, and sent twice (I8)."""
        result = run_payment(self.SCHEDULE, runtime="reconciles-at-once")
        assert "I8" in result.failed_invariants, _failed(result)


class TestBothApisAtOnce:
    @pytest.mark.parametrize("hit", [2, 3], ids=["unsafe", "retry-safe"])
    def test_the_sync_api_is_refused_while_a_batch_runs(
        self, run_mini_batch: TrialRunner, hit: int
    ) -> None:
        """A batch call in flight on the event loop is called again through the synchronous
        API: refused, so the call runs once and its caller is told only its own outcome."""
        result = run_mini_batch(f'[{{"failpoints":"op.after_intent@{hit}=sync-call"}}]')
        assert result.status == "pass", _failed(result)

    @pytest.mark.parametrize(
        ("hit", "caught"), [(2, "I11"), (3, "I1")], ids=["unsafe", "retry-safe"]
    )
    def test_a_runtime_that_lets_both_apis_call_is_caught(
        self, run_mini_batch: TrialRunner, hit: int, caught: str
    ) -> None:
        """Let through, the sync call answers the unsafe op in flight 'info' with no cause
        (I11), and runs the retry-safe one again beside itself, after its success (I1)."""
        result = run_mini_batch(
            f'[{{"failpoints":"op.after_intent@{hit}=sync-call"}}]', runtime="both-apis-at-once"
        )
        assert caught in result.failed_invariants, _failed(result)


class TestDiskFullMidGroupWrite:
    """mini_batch's three intents go out in one write (journal.append@4); a full disk cuts
    it short, the first frame (s002a) whole, the others cut."""

    SCHEDULE = '[{"failpoints":"journal.append@4=enospc-mid"}]'

    def test_a_caller_whose_intent_is_whole_is_not_told_failed(
        self, run_mini_batch: TrialRunner
    ) -> None:
        """The callers whose frames were cut are told failed and run once the model calls
        them again; the one whose frame is whole is left unknown, its op handed on at the
        next start by its class (input_text: verified, then redone)."""
        result = run_mini_batch(self.SCHEDULE)
        assert result.status == "pass", _failed(result)
        assert _history(result, "s002a")[:2] == ["invoke", "info"]
        assert _history(result, "s002b")[:2] == ["invoke", "fail"]
        assert _history(result, "s002c")[:2] == ["invoke", "fail"]
        intents = [
            e.op_id
            for e in read_journal(result.directory / "journal").entries
            if e.kind == "intent"
        ]
        assert intents.count("s002a") == 1 and "s002a.redo" in intents

    def test_a_runtime_that_tells_every_caller_failed_is_caught(
        self, run_mini_batch: TrialRunner
    ) -> None:
        """Told failed, s002a is still found running at the next start and redone before
        the model calls it again (I10)."""
        result = run_mini_batch(self.SCHEDULE, runtime="failed-group-write-fails-all")
        assert "I10" in result.failed_invariants, _failed(result)
        assert _history(result, "s002a")[:2] == ["invoke", "fail"]
