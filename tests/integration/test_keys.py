"""Keyed tools and reconcilers in real trials of ``scenarios/payment_flow.toml``.

Life 1 is killed right after the provider made the first charge (``op.after_effect``
of s001), before its finish was journaled. The real runtime retries the charge with
the same key (inside the provider's window) and the provider drops the repeat: one
charge. ``key-changes-on-retry`` retries it under a new key: a second charge, which
the ledger shows (I2) and the end state too (I8). Under a table that lists nothing
(every tool unknown: VERIFY), the charge's reconciler asks the provider by key and
closes the op without a hint; killed mid-reconcile, the next life asks again.

The trial's clock moves an hour per restart (``clock_step``), so a hold (a 30-minute
key) left running is past its window at the next start: VERIFY, and its reconciler
answers. The receipt is not keyed but its channel records the key it carried: left
running, it is verified and reconciled too. Each branch is one trial: present (killed
after the effect), absent (killed after the intent: redone in the same key chain),
killed at ``recovery.reconcile``, and killed inside the reconciler's redo, where
``reconcile-new-key`` (the redo under a new key) sends a second receipt (I8).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.chaos.schedule import CrashSchedule
from harness.chaos.supervisor import Supervisor
from harness.chaos.tables import scenario_tables
from harness.chaos.trial import Golden, TrialResult, TrialSpec, prepare_golden, run_trial
from harness.check.evidence import TrialEvidence
from harness.check.invariants import check_safe_outcome_retried, check_unknown_outcome_verified
from harness.check.journal import read_journal
from harness.world.store import read_key_replays, read_ledger, world_digest

ROOT = Path(__file__).resolve().parents[2]
PAYMENT = str(ROOT / "scenarios" / "payment_flow.toml")
SEED = 3
AFTER_THE_CHARGE = '[{"failpoints":"op.after_effect@1=kill"},{}]'


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The scenario's own table and its variants (``unlisted``: every tool unknown)."""
    return scenario_tables(tmp_path_factory.mktemp("tables"), PAYMENT)


@pytest.fixture(scope="module")
def payment_golden(
    tmp_path_factory: pytest.TempPathFactory, supervisor: Supervisor, tables: dict[str, Path]
) -> Golden:
    return prepare_golden(
        PAYMENT, SEED, tmp_path_factory.mktemp("golden"), supervisor, tables=tables
    )


def _trial(
    tmp_path: Path,
    golden: Golden,
    supervisor: Supervisor,
    tables: dict[str, Path],
    runtime: str,
    schedule: str,
) -> TrialResult:
    spec = TrialSpec(PAYMENT, SEED, CrashSchedule.from_json(schedule), runtime, "test", "custom")
    return run_trial(spec, tmp_path / runtime, golden.directory, supervisor, tables=tables)


def _failed(result: TrialResult) -> list[dict[str, object]]:
    return [v.to_json() for v in result.verdicts if v.status != "pass"]


def _charges(result: TrialResult) -> list[tuple[str, int]]:
    ledger = read_ledger(result.directory / "world.db")
    return [(e.op_id, e.attempt) for e in ledger if e.tool == "charge"]


class TestKeyedRetry:
    def test_the_real_runtime_retries_with_the_same_key_and_charges_once(
        self,
        tmp_path: Path,
        payment_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        result = _trial(tmp_path, payment_golden, supervisor, tables, "real", AFTER_THE_CHARGE)
        assert result.status == "pass", _failed(result)
        decisions = [
            (e.op_id, e.payload["decision"], e.payload.get("age"))
            for e in read_journal(result.directory / "journal").entries
            if e.kind == "decision" and e.op_id == "s001" and e.payload["state"] == "running"
        ]
        assert decisions == [("s001", "retry", 3600.0)]  # an hour old: inside its 24 h
        assert _charges(result) == [("s001", 1), ("s008", 1)]  # s008: the second order
        assert read_key_replays(result.directory / "world.db") == [("charge", "s001", "s001", 2)]

    def test_a_new_key_on_retry_charges_twice_and_is_caught(
        self,
        tmp_path: Path,
        payment_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        result = _trial(
            tmp_path, payment_golden, supervisor, tables, "key-changes-on-retry", AFTER_THE_CHARGE
        )
        assert result.failed_invariants == ("I2", "I8"), _failed(result)
        assert _charges(result) == [("s001", 1), ("s001", 2), ("s008", 1)]
        i2 = "\n".join(next(v for v in result.verdicts if v.invariant == "I2").evidence)
        assert "s001 (charge, non_idempotent) ran 2 times in 2 lives" in i2


class TestReconciler:
    @pytest.mark.parametrize(
        "schedule",
        [
            '[{"failpoints":"op.after_effect@1=kill","table":"unlisted"},{"table":"unlisted"}]',
            '[{"failpoints":"op.after_effect@1=kill","table":"unlisted"},'
            '{"failpoints":"recovery.reconcile@1=kill","table":"unlisted"},{"table":"unlisted"}]',
        ],
        ids=["reconciled", "killed-mid-reconcile"],
    )
    def test_an_unknown_charge_is_closed_by_asking_the_provider(
        self,
        tmp_path: Path,
        payment_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
        schedule: str,
    ) -> None:
        result = _trial(tmp_path, payment_golden, supervisor, tables, "real", schedule)
        assert result.status == "pass", _failed(result)
        entries = read_journal(result.directory / "journal").entries
        resolved = [
            (e.op_id, e.payload["resolution"], e.payload.get("note"))
            for e in entries
            if e.kind == "resolved"
        ]
        assert resolved == [("s001", "effect present", "reconciled: present")]
        assert not [e for e in entries if e.kind == "hint" and e.op_id == "s001"]
        assert _charges(result) == [("s001", 1), ("s008", 1)]  # s008: the second order


def _effects(result: TrialResult, tool: str) -> list[str]:
    return [e.op_id for e in read_ledger(result.directory / "world.db") if e.tool == tool]


def _reconciled(result: TrialResult, op_id: str) -> list[tuple[object, ...]]:
    """The op's decisions at each start (decision, age) and how it was closed."""
    found: list[tuple[object, ...]] = []
    for e in read_journal(result.directory / "journal").entries:
        if e.op_id != op_id:
            continue
        if e.kind == "decision" and e.payload["state"] == "running":
            found.append(("decision", e.payload["decision"], e.payload.get("age"), None))
        elif e.kind in ("resolved", "hint"):
            found.append((e.kind, e.payload.get("resolution"), e.payload.get("note"), None))
    return found


def _clocks(result: TrialResult) -> list[float]:
    events = (result.directory / "events.jsonl").read_text("utf-8").splitlines()
    return [e["clock"] for e in map(json.loads, events) if e["event"] == "spawn"]


class TestPastTheWindow:
    """The hold (s004, a 30-minute key): an hour later its key is past the window."""

    def test_left_after_its_effect_it_is_found_present_by_key(
        self,
        tmp_path: Path,
        payment_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        schedule = '[{"failpoints":"op.after_effect@4=kill"},{}]'
        result = _trial(tmp_path, payment_golden, supervisor, tables, "real", schedule)
        assert result.status == "pass", _failed(result)
        assert _clocks(result) == [3600.0, 7200.0]
        assert _reconciled(result, "s004") == [
            ("decision", "verify", 3600.0, None),
            ("resolved", "effect present", "reconciled: present", None),
        ]
        assert _effects(result, "place_hold") == ["s004"]

    def test_left_after_its_intent_it_is_redone_under_the_same_key(
        self,
        tmp_path: Path,
        payment_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        schedule = '[{"failpoints":"op.after_intent@4=kill"},{}]'
        result = _trial(tmp_path, payment_golden, supervisor, tables, "real", schedule)
        assert result.status == "pass", _failed(result)
        assert _reconciled(result, "s004") == [
            ("decision", "verify", 3600.0, None),
            ("resolved", "redone", "reconciled: absent", None),
        ]
        assert _effects(result, "place_hold") == ["s004.redo"]
        assert read_key_replays(result.directory / "world.db") == []

    def test_a_runtime_whose_window_never_passes_retries_it_and_is_caught(
        self,
        tmp_path: Path,
        payment_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """key-window-never-passes retries the hold an hour later. Killed before its effect,
        it holds once: only the window measured on the supervisor's clocks tells (I2); with
        every keyed op taken as retried, as before the clock moved, I2 and I3 pass."""
        schedule = '[{"failpoints":"op.after_intent@4=kill"},{}]'
        runtime = "key-window-never-passes"
        result = _trial(tmp_path, payment_golden, supervisor, tables, runtime, schedule)
        assert result.failed_invariants == ("I2",), _failed(result)
        i2 = "\n".join(next(v for v in result.verdicts if v.invariant == "I2").evidence)
        assert "s004 (place_hold) was RUNNING at the start of life 2 and got retry" in i2
        assert _effects(result, "place_hold") == ["s004"]
        real = TrialEvidence.op_retry_safe
        monkeypatch.setattr(TrialEvidence, "op_retry_safe", lambda ev, op, life=None: real(ev, op))
        before = TrialEvidence(result.directory, payment_golden.directory)
        assert check_unknown_outcome_verified(before).status == "pass"
        assert check_safe_outcome_retried(before).status == "pass"


class TestAReceiptLookedUpByKey:
    """The receipt (s003): not keyed, so VERIFY at every start; its reconciler answers."""

    @pytest.mark.parametrize(
        ("schedule", "closed", "sent"),
        [
            ('[{"failpoints":"op.after_effect@3=kill"},{}]', "effect present", ["s003"]),
            ('[{"failpoints":"op.after_intent@3=kill"},{}]', "redone", ["s003.redo"]),
            (
                '[{"failpoints":"op.after_intent@3=kill"},'
                '{"failpoints":"recovery.reconcile@1=kill"},{}]',
                "redone",
                ["s003.redo"],
            ),
        ],
        ids=["present", "absent", "killed-at-reconcile"],
    )
    def test_it_is_closed_by_its_reconciler_without_a_hint(
        self,
        tmp_path: Path,
        payment_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
        schedule: str,
        closed: str,
        sent: list[str],
    ) -> None:
        result = _trial(tmp_path, payment_golden, supervisor, tables, "real", schedule)
        assert result.status == "pass", _failed(result)
        lives = len(CrashSchedule.from_json(schedule).lives)
        # One VERIFY per start that found it open (a kill at reconcile: two), one close.
        decisions = [("decision", "verify", None, None)] * (lives - 1)
        note = "reconciled: present" if closed == "effect present" else "reconciled: absent"
        assert _reconciled(result, "s003") == [*decisions, ("resolved", closed, note, None)]
        assert _effects(result, "send_receipt") == sent

    def test_a_redo_under_a_new_key_sends_twice_and_is_caught(
        self,
        tmp_path: Path,
        payment_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        """Killed inside the reconciler's redo: the real runtime finds the redo by the
        chain's key; reconcile-new-key sent it under another, so it finds nothing and
        sends the receipt again."""
        schedule = (
            '[{"failpoints":"op.after_intent@3=kill"},{"failpoints":"op.after_effect@1=kill"}]'
        )
        real = _trial(tmp_path, payment_golden, supervisor, tables, "real", schedule)
        assert real.status == "pass", _failed(real)
        assert _effects(real, "send_receipt") == ["s003.redo"]
        assert world_digest(real.directory / "world.db") == world_digest(
            payment_golden.directory / "world.db"
        )
        broken = _trial(tmp_path, payment_golden, supervisor, tables, "reconcile-new-key", schedule)
        assert broken.failed_invariants == ("I8",), _failed(broken)
        assert _effects(broken, "send_receipt") == ["s003.redo", "s003.redo.redo"]
