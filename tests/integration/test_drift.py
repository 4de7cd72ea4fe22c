"""A model that re-issues its calls with drifted fields: real trials of drift_payments.

``scenarios/drift_payments.toml`` pays two invoices that differ only in their invoice, with
a request id that the drifting model changes in every life after the first; its table
declares what makes two payments the same one. The real runtime holds every invariant;
each of the three broken runtimes that only a drifted re-issue exposes fails the one it
breaks, judged from the world's ledger, never from the runtime's own journal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.chaos.schedule import CrashSchedule
from harness.chaos.supervisor import Supervisor
from harness.chaos.tables import scenario_tables
from harness.chaos.trial import Golden, TrialResult, TrialSpec, prepare_golden, run_trial

ROOT = Path(__file__).resolve().parents[2]
DRIFT = str(ROOT / "scenarios" / "drift_payments.toml")
SEED = 7

AFTER_FIRST_PAYMENT = '[{"failpoints":"op.after_finish@1=kill"}]'
"""Life 1 is killed once the first payment is journaled a success."""
IN_FIRST_PAYMENT = '[{"failpoints":"op.after_effect@1=kill"}]'
"""Life 1 is killed between the first payment's effect and its finish: it is in doubt."""


@pytest.fixture(scope="module")
def drift_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return scenario_tables(tmp_path_factory.mktemp("tables"), DRIFT)


@pytest.fixture(scope="module")
def drift_golden(
    tmp_path_factory: pytest.TempPathFactory,
    supervisor: Supervisor,
    drift_tables: dict[str, Path],
) -> Golden:
    return prepare_golden(
        DRIFT, SEED, tmp_path_factory.mktemp("golden"), supervisor, tables=drift_tables
    )


def _trial(
    tmp_path: Path,
    golden: Golden,
    supervisor: Supervisor,
    tables: dict[str, Path],
    runtime: str,
    schedule: str,
) -> TrialResult:
    spec = TrialSpec(DRIFT, SEED, CrashSchedule.from_json(schedule), runtime, "test", "custom")
    return run_trial(spec, tmp_path / runtime, golden.directory, supervisor, tables=tables)


def _failed(result: TrialResult) -> list[dict[str, object]]:
    return [v.to_json() for v in result.verdicts if v.status != "pass"]


class TestDrift:
    @pytest.mark.parametrize("schedule", [AFTER_FIRST_PAYMENT, IN_FIRST_PAYMENT])
    def test_the_real_runtime_matches_a_drifted_reissue(
        self,
        tmp_path: Path,
        drift_golden: Golden,
        supervisor: Supervisor,
        drift_tables: dict[str, Path],
        schedule: str,
    ) -> None:
        """Every invariant holds; the second life's payment went out with another request
        id and was answered by the first life's op, never run again."""
        result = _trial(tmp_path, drift_golden, supervisor, drift_tables, "real", schedule)
        assert result.status == "pass", _failed(result)
        lines = (result.directory / "history.jsonl").read_text("utf-8").splitlines()
        told = [json.loads(line) for line in lines]
        assert any(t["op"] == "s001~2" and t.get("answered_by") == "s001" for t in told)

    @pytest.mark.parametrize(
        ("runtime", "schedule", "invariant"),
        [
            ("content-ignores-volatile", AFTER_FIRST_PAYMENT, "I1"),
            ("drift-by-tool", AFTER_FIRST_PAYMENT, "I11"),
            ("forwards-in-doubt", IN_FIRST_PAYMENT, "I2"),
        ],
    )
    def test_a_broken_runtime_is_caught(
        self,
        tmp_path: Path,
        drift_golden: Golden,
        supervisor: Supervisor,
        drift_tables: dict[str, Path],
        runtime: str,
        schedule: str,
        invariant: str,
    ) -> None:
        """Each mistake that only a drifted re-issue exposes fails the invariant it breaks."""
        result = _trial(tmp_path, drift_golden, supervisor, drift_tables, runtime, schedule)
        assert invariant in result.failed_invariants, _failed(result)
