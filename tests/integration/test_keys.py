"""Keyed tools and reconcilers in real trials of ``scenarios/payment_flow.toml``.

Life 1 is killed right after the provider made the first charge (``op.after_effect``
of s001), before its finish was journaled. The real runtime retries the charge with
the same key (inside the provider's window) and the provider drops the repeat: one
charge. ``key-changes-on-retry`` retries it under a new key: a second charge, which
the ledger shows (I2) and the end state too (I8). Under a table that lists nothing
(every tool unknown: VERIFY), the charge's reconciler asks the provider by key and
closes the op without a hint; killed mid-reconcile, the next life asks again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.chaos.schedule import CrashSchedule
from harness.chaos.supervisor import Supervisor
from harness.chaos.tables import scenario_tables
from harness.chaos.trial import Golden, TrialResult, TrialSpec, prepare_golden, run_trial
from harness.check.journal import read_journal
from harness.world.store import read_key_replays, read_ledger

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
        assert decisions == [("s001", "retry", 0.0)]
        assert _charges(result) == [("s001", 1)]
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
        assert _charges(result) == [("s001", 1), ("s001", 2)]
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
        assert _charges(result) == [("s001", 1)]
