"""The fleet's trials on a real PostgreSQL server: worker processes, real signals, a real proxy.

The real runtime holds under the faults of a fleet, and each broken PostgreSQL
journal is caught, under the fault it names, by the invariant it names. Judged by
``harness.check.fleet`` from the world's ledger and the supervisor's observations,
never from what the workers say they did.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.agent.fleet_broken import FLEET_BROKEN
from harness.chaos.fleet import FleetTrialSpec, run_fleet_trial
from harness.chaos.postgres import PostgresServer


@pytest.mark.parametrize(
    "fault",
    ["lease-pause", "redelivery:claim", "redelivery:long-call", "cut:after:intent", "db-crash"],
)
def test_the_real_runtime_holds_under_a_fault_of_a_fleet(
    postgres_server: PostgresServer, tmp_path: Path, fault: str
) -> None:
    """Every invariant passes and the fault landed (the trial could be judged). Paused, the
    worker says it was fenced once woken, and the ledger holds no run of its after the
    takeover."""
    folder = tmp_path / "t"
    result = run_fleet_trial(FleetTrialSpec("postgres", fault, seed=3), folder, postgres_server)
    assert result.landed, result.fault_note
    assert result.status == "pass", [v for v in result.verdicts if v.status != "pass"]
    if fault == "lease-pause":
        said = "".join(p.read_text() for p in folder.glob("worker*.out"))
        assert "held s2" in said and "fenced " in said
        (verdict,) = [v for v in result.verdicts if v.invariant == "no-fenced-write"]
        assert "none by it once woken" in verdict.evidence


@pytest.mark.parametrize("name", list(FLEET_BROKEN))
def test_each_broken_journal_is_caught_by_the_invariant_it_names(
    postgres_server: PostgresServer, tmp_path: Path, name: str
) -> None:
    """With its fault, the invariant the broken journal names fails (that it passes every
    trial without its fault is the self-check's of ``make chaos-fleet``)."""
    journal = FLEET_BROKEN[name]
    caught = run_fleet_trial(
        FleetTrialSpec("postgres", journal.needs_fault, name, 7),
        tmp_path / "caught",
        postgres_server,
    )
    assert caught.landed, caught.fault_note
    assert journal.caught_by in caught.failed, caught.verdicts
