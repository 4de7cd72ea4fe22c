"""I11 and what it rests on, on evidence written by hand: an ``ack`` carries the digest of
the result the model was handed, and it must be what an execution returned (or a check
found the effect); an ``info`` needs a cause the supervisor saw, and the hint read since.
I2 holds an unsafe op whose reply or request was lost to its hint before any ack, and
I7 and I8 no longer excuse a step by its ``info`` alone. Also the lost request itself:
the failpoint action and where the exhaustive campaign schedules it."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.chaos.schedule import exhaustive_schedules
from harness.chaos.trial import write_plan_for
from harness.check.evidence import LifeSeen, TrialEvidence
from harness.check.invariants import (
    check_faults_landed,
    check_told_the_truth,
    check_unknown_outcome_verified,
    unknown_excused,
)
from harness.check.journal import JournalEntry
from harness.failpoints import parse_failpoints
from harness.runtime.errors import TransientToolError
from harness.world.store import LedgerEntry, result_digest

MINI = str(Path(__file__).parent.parent / "data" / "scenarios" / "mini.toml")
# mini: s001 app_install (idempotent), s002 input_text, s003 ui_tap, s004 app_uninstall
# (non-idempotent), s005 ask_user, s006 shell_execute (unknown, no check).
RESULT = {"element": "submit", "submitted": "note-1"}
CHECKED = {"fields": {}, "taps": ["submit"], "submissions": ["note-1"]}


def _run(seq: int, op_id: str, tool: str, result: object, pid: int = 101) -> LedgerEntry:
    return LedgerEntry(seq, op_id, tool, 1, 1, pid, 0, None, op_id[:4], "ok", result_digest(result))


def _evidence(
    tmp_path: Path,
    events: Sequence[dict[str, Any]],
    history: Sequence[dict[str, Any]] = (),
    ledger: Sequence[LedgerEntry] = (),
    lives: Sequence[LifeSeen] = (LifeSeen(1, 101, 0, None, None, ""),),
) -> TrialEvidence:
    write_plan_for(MINI, 3, tmp_path)
    ev = TrialEvidence(tmp_path, None)
    # What a trial's files would give, written straight into the evidence.
    ev.__dict__.update(events=tuple(events), history=tuple(history), ledger=tuple(ledger))
    ev.__dict__["lives"] = tuple(lives)
    return ev


def _ack(op: str, result: object, life: int = 1, seq: int = 9) -> dict[str, Any]:
    digest = result_digest(result)
    return {"event": "ack", "life": life, "op": op, "ledger_seq": seq, "result": digest}


def _info(op: str, life: int = 1, **why: str) -> dict[str, Any]:
    return {"type": "info", "op": op, "life": life, **why}


class TestAnAck:
    def test_the_result_an_execution_returned_holds(self, tmp_path: Path) -> None:
        ev = _evidence(tmp_path, [_ack("s003", RESULT)], ledger=[_run(3, "s003", "ui_tap", RESULT)])
        assert check_told_the_truth(ev).status == "pass"

    def test_another_result_fails_naming_the_op(self, tmp_path: Path) -> None:
        ev = _evidence(
            tmp_path, [_ack("s003", {"bogus": True})], ledger=[_run(3, "s003", "ui_tap", RESULT)]
        )
        verdict = check_told_the_truth(ev)
        assert verdict.status == "fail"
        assert "s003 was reported done in life 1" in verdict.evidence[0]

    def test_a_redo_or_a_reissued_id_stands_for_the_step(self, tmp_path: Path) -> None:
        ledger = [_run(3, "s003.redo", "ui_tap", RESULT), _run(4, "s002~2", "input_text", {})]
        ev = _evidence(tmp_path, [_ack("s003", RESULT), _ack("s002~3", {})], ledger=ledger)
        assert check_told_the_truth(ev).status == "pass"

    def test_an_execution_committed_after_the_ack_does_not_count(self, tmp_path: Path) -> None:
        ev = _evidence(
            tmp_path, [_ack("s003", RESULT, seq=2)], ledger=[_run(3, "s003", "ui_tap", RESULT)]
        )
        assert check_told_the_truth(ev).status == "fail"

    def test_an_ack_without_a_digest_fails(self, tmp_path: Path) -> None:
        ack = {"event": "ack", "life": 1, "op": "s003", "ledger_seq": 3, "result": None}
        ev = _evidence(tmp_path, [ack], ledger=[_run(3, "s003", "ui_tap", RESULT)])
        assert "without the digest" in check_told_the_truth(ev).evidence[0]


class TestAnAckHandedNothing:
    """The model closed the op after its check found the effect (EFFECT_PRESENT)."""

    def _check(self, found: str, seen: object = CHECKED) -> dict[str, Any]:
        return {"event": "check", "life": 1, "op": "s003", "result": result_digest(seen)} | {
            "found": found
        }

    def test_holds_after_a_check_that_found_the_effect(self, tmp_path: Path) -> None:
        ledger = [_run(4, "s003.check", "ui_dump", CHECKED)]
        ev = _evidence(tmp_path, [self._check("present"), _ack("s003", None)], ledger=ledger)
        assert check_told_the_truth(ev).status == "pass"

    @pytest.mark.parametrize(
        ("found", "seen"), [("absent", CHECKED), ("present", {"taps": ["forged"]})]
    )
    def test_fails_after_an_absent_or_unmatched_check(
        self, tmp_path: Path, found: str, seen: object
    ) -> None:
        ledger = [_run(4, "s003.check", "ui_dump", CHECKED)]
        ev = _evidence(tmp_path, [self._check(found, seen), _ack("s003", None)], ledger=ledger)
        assert "with no result" in check_told_the_truth(ev).evidence[0]

    def test_a_check_reported_after_the_ack_is_too_late(self, tmp_path: Path) -> None:
        ledger = [_run(4, "s003.check", "ui_dump", CHECKED)]
        ev = _evidence(tmp_path, [_ack("s003", None), self._check("present")], ledger=ledger)
        assert check_told_the_truth(ev).status == "fail"


def _fault(kind: str, op: str, life: int = 1) -> dict[str, Any]:
    point = "op.reply" if kind == "lost-reply" else "op.request"
    return {"event": kind, "life": life, "at": f"{point} 3 {op}"}


def _hint(op: str, life: int = 1) -> dict[str, Any]:
    return {"event": "hint", "life": life, "op": op}


class TestAnInfo:
    def test_with_nothing_to_cause_it_fails(self, tmp_path: Path) -> None:
        ev = _evidence(tmp_path, [_hint("s006")], [_info("s006"), _info("s006")])
        verdict = check_told_the_truth(ev)
        assert verdict.status == "fail" and len(verdict.evidence) == 1
        assert unknown_excused(ev, "s006", 1) is None

    def test_a_lost_request_and_the_hint_read_since_cause_it(self, tmp_path: Path) -> None:
        ev = _evidence(tmp_path, [_fault("lost-request", "s006"), _hint("s006")], [_info("s006")])
        assert check_told_the_truth(ev).status == "pass"
        assert unknown_excused(ev, "s006", 1) == "lost-request of s006 in life 1"

    def test_an_unsafe_op_needs_its_hint_read_after_the_fault(self, tmp_path: Path) -> None:
        ev = _evidence(tmp_path, [_hint("s006"), _fault("lost-reply", "s006")], [_info("s006")])
        assert check_told_the_truth(ev).status == "fail"

    def test_in_flight_at_a_kill_then_hinted_in_the_next_life(self, tmp_path: Path) -> None:
        lives = (
            LifeSeen(1, 101, -9, "failpoint", "op.after_intent 6 s006", ""),
            LifeSeen(2, 102, 0, None, None, ""),
        )
        history = [_info("s006", why="in flight when the life ended"), _info("s006", life=2)]
        ev = _evidence(tmp_path, [_hint("s006", life=2)], history, lives=lives)
        assert check_told_the_truth(ev).status == "pass"
        assert unknown_excused(ev, "s006", 2) is not None

    def test_paused_inside_the_call_then_hinted_in_the_life_that_took_over(
        self, tmp_path: Path
    ) -> None:
        """An engine tells the life that took over that the paused life's call timed out."""
        lives = (LifeSeen(2, 102, 0, None, None, ""), LifeSeen(1, 101, 0, None, None, ""))
        pause = {"event": "pause", "life": 1, "at": "tool.received 6 s006", "stopped": True}
        ev = _evidence(
            tmp_path, [pause, _hint("s006", life=2)], [_info("s006", life=2)], lives=lives
        )
        assert check_told_the_truth(ev).status == "pass"
        assert (
            unknown_excused(ev, "s006", 2) == "paused in its flight in life 1, taken over by life 2"
        )
        unhinted = _evidence(tmp_path, [_hint("s006", life=2), pause], [_info("s006", life=2)])
        assert check_told_the_truth(unhinted).status == "fail"  # the hint came before it

    def test_a_life_that_ended_cleanly_left_nothing_in_flight(self, tmp_path: Path) -> None:
        lives = (LifeSeen(1, 101, 0, None, None, ""), LifeSeen(2, 102, 0, None, None, ""))
        history = [_info("s006", why="in flight when the life ended"), _info("s006", life=2)]
        ev = _evidence(tmp_path, [_hint("s006", life=2)], history, lives=lives)
        assert check_told_the_truth(ev).status == "fail"


class TestI2InLife:
    def test_an_ack_before_the_hint_after_a_lost_reply_fails(self, tmp_path: Path) -> None:
        ev = _evidence(tmp_path, [_fault("lost-reply", "s003"), _ack("s003", None)])
        verdict = check_unknown_outcome_verified(ev)
        assert verdict.status == "fail"
        assert "before the model read its VERIFY hint" in verdict.evidence[0]

    def test_the_hint_then_the_ack_holds(self, tmp_path: Path) -> None:
        ev = _evidence(tmp_path, [_fault("lost-request", "s003"), _hint("s003"), _ack("s003", 1)])
        assert check_unknown_outcome_verified(ev).status == "pass"

    def test_a_retry_safe_op_needs_no_hint(self, tmp_path: Path) -> None:
        ev = _evidence(tmp_path, [_fault("lost-reply", "s001"), _ack("s001", 1)])
        assert check_unknown_outcome_verified(ev).status == "pass"


class TestTheDigest:
    def test_key_order_and_a_json_round_trip_do_not_change_it(self) -> None:
        result = {"b": [1, 2.5, "é"], "a": {"y": None, "x": True}}
        assert result_digest(result) == result_digest(json.loads(json.dumps(result)))
        assert result_digest(result) == result_digest(dict(reversed(list(result.items()))))
        assert result_digest(result) != result_digest({**result, "a": {}})


class TestTheLostRequest:
    def test_it_raises_the_timeout_a_lost_reply_raises(
        self, armed: Callable[[str], None], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from harness import failpoints

        told: list[str] = []
        monkeypatch.setattr(failpoints, "tell_supervisor", told.append)
        armed("op.request@2=lost-request")
        failpoints.failpoint("op.request", "s001")
        with pytest.raises(TransientToolError, match="the request was lost"):
            failpoints.failpoint("op.request", "s002")
        assert told == ["fault lost-request op.request 2 s002"]

    @pytest.mark.parametrize(("seen", "status"), [([], "unknown"), (["s003"], "pass")])
    def test_f_says_whether_it_landed(self, tmp_path: Path, seen: list[str], status: str) -> None:
        ev = _evidence(tmp_path, [_fault("lost-request", op) for op in seen])
        ev.__dict__["schedule"] = ({"failpoints": "op.request@3=lost-request"},)
        verdict = check_faults_landed(ev)
        assert verdict.status == status, verdict.evidence
        if not seen:
            assert "the lost request at op.request@3=lost-request never happened" in str(verdict)

    @pytest.mark.parametrize(
        ("life", "lost", "status"),
        [
            (LifeSeen(1, 101, 1, None, None, ""), True, "pass"),  # the agent stopped on it
            (LifeSeen(1, 101, 0, None, None, ""), True, "unknown"),  # it finished: fewer replies?
            (LifeSeen(1, 101, 1, None, None, ""), False, "unknown"),  # nothing was lost
        ],
        ids=["ended by its lost reply", "exit 0", "no loss landed"],
    )
    def test_a_kill_after_a_lost_reply_that_ended_the_life_does_not_apply(
        self, tmp_path: Path, life: LifeSeen, lost: bool, status: str
    ) -> None:
        """A lost reply, then a kill at a later reply of the same life: an agent whose answer
        to the loss is to exit (status 1) never comes to the kill, which is said, not left
        unjudged; a life that ended 0 before it, or lost nothing, leaves F unknown."""
        ev = _evidence(tmp_path, [_fault("lost-reply", "s003")] if lost else [], lives=(life,))
        ev.__dict__["schedule"] = ({"failpoints": "op.reply@3=lost-reply,op.reply@5=kill"},)
        verdict = check_faults_landed(ev)
        assert verdict.status == status, verdict.evidence
        if status == "pass":
            assert verdict.evidence == (
                "1 scheduled fault landed",
                "life 1: the kill at op.reply@5=kill did not apply: the lost reply at "
                "op.reply@3=lost-reply before it ended the life (it ended with exit status 1), "
                "as the agent's answer to it",
            )

    def test_it_parses(self) -> None:
        (spec,) = parse_failpoints("op.request@3=lost-request")
        assert (spec.name, spec.hit, spec.action) == ("op.request", 3, "lost-request")
        assert spec.at == "op.request 3"  # as the agent names the hit on its channel

    def test_f_cannot_judge_a_schedule_it_cannot_read(self, tmp_path: Path) -> None:
        """F reads the schedule with the agent's own grammar: an entry it refuses leaves
        the trial unknown, instead of a fault counted as asked for or not."""
        ev = _evidence(tmp_path, [_fault("lost-request", "s003")])
        ev.__dict__["schedule"] = ({"failpoints": "op.request@0=lost-request"},)
        verdict = check_faults_landed(ev)
        assert verdict.status == "unknown"
        assert "its schedule cannot be read: life 1: entry 'op.request@0=lost-request'" in str(
            verdict
        )

    def test_the_campaign_loses_the_request_of_each_unsafe_call_once(self) -> None:
        served = ["s001", "s002", "s003", "s004"]  # s001 and s003 retry-safe
        schedules = dict(
            exhaustive_schedules(
                {"op.request": len(served)},
                unsafe_call=lambda point, hit: served[hit - 1] in ("s002", "s004"),
            )
        )
        lost = {k: s for k, s in schedules.items() if "lost-request" in s.fault_kinds}
        assert sorted(lost) == ["op.request@2+lost-request", "op.request@4+lost-request"]
        assert all(not s.needs_journal for s in lost.values())


PAYMENT = str(Path(__file__).parent.parent.parent / "scenarios" / "payment_flow.toml")
# payment_flow: s001 charge, a tool whose provider can be asked by key (a reconciler).


class TestAnAckOfAReissuedCallClosedByAReconciler:
    """A re-issued call (``s001~2``) answered from an op a reconciler found present: the
    resolution is journaled under the op's own id (``s001``)."""

    def _evidence(self, tmp_path: Path, resolution: str) -> TrialEvidence:
        write_plan_for(PAYMENT, 3, tmp_path)
        ev = TrialEvidence(tmp_path, None)
        resolved = {"op_id": "s001", "resolution": resolution, "note": "reconciled"}
        ev.__dict__.update(
            events=(_ack("s001~2", None, life=2),),
            history=(),
            ledger=(_run(1, "s001", "charge", {"id": "ch_1"}),),
            entries=(JournalEntry(0, 1, "resolved", resolved),),
        )
        ev.__dict__["lives"] = (LifeSeen(1, 101, 0, None, None, ""),)
        return ev

    def test_holds_when_the_op_it_stands_for_was_found_present(self, tmp_path: Path) -> None:
        assert check_told_the_truth(self._evidence(tmp_path, "effect present")).status == "pass"

    def test_fails_when_it_was_not(self, tmp_path: Path) -> None:
        found = check_told_the_truth(self._evidence(tmp_path, "unverifiable"))
        assert "s001~2 was reported done in life 2 with no result" in found.evidence[0]
