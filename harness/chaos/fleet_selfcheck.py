"""The fleet's self-check: every broken PostgreSQL journal must be caught as expected.

For each broken journal of ``harness.agent.fleet_broken.FLEET_BROKEN``,
``plan_fleet_self_check`` lists the trials it must escape (the fleet's
campaign without a fault of a fleet: plain and SIGKILL, on the file journal and
on PostgreSQL) and the one that must catch it (PostgreSQL with the fault it
names). A row (``FleetSelfCheckRow``) is as expected when every escape passed
and the catching trial failed the invariant the broken journal names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from harness.agent.fleet_broken import FLEET_BROKEN
from harness.chaos.fleet import FleetTrialResult, FleetTrialSpec, trial_seed

__all__ = ["FleetSelfCheck", "FleetSelfCheckRow", "plan_fleet_self_check", "run_fleet_self_check"]


@dataclass(frozen=True, slots=True)
class FleetSelfCheck:
    """What runs for one broken journal: the trials it must escape, the one that catches."""

    name: str
    escape: tuple[FleetTrialSpec, ...]
    catch: FleetTrialSpec


@dataclass(frozen=True, slots=True)
class FleetSelfCheckRow:
    """One broken journal's trials and whether it was caught as expected."""

    name: str
    mistake: str
    needs_fault: str
    expected: str
    escaped: tuple[FleetTrialResult, ...]
    caught: FleetTrialResult

    @property
    def as_expected(self) -> bool:
        return (
            all(r.status == "pass" for r in self.escaped)
            and self.caught.status == "fail"
            and self.expected in self.caught.failed
        )

    @property
    def outcome(self) -> str:
        flagged = [r for r in self.escaped if r.status != "pass"]
        if flagged:
            return "SEEN WITHOUT ITS FAULT: " + ", ".join(
                f"{r.spec.name} {r.status} ({', '.join(r.failed) or 'not judged'})" for r in flagged
            )
        if self.caught.status != "fail":
            return f"NOT CAUGHT by {self.caught.spec.name} ({self.caught.status})"
        if self.expected not in self.caught.failed:
            return f"caught by {', '.join(self.caught.failed)}, not by {self.expected}"
        others = [key for key in self.caught.failed if key != self.expected]
        also = f" (also {', '.join(others)})" if others else ""
        return f"caught by {self.expected}{also} in {self.caught.spec.name}"


def plan_fleet_self_check(seed: int, *, postgres: bool = True) -> list[FleetSelfCheck]:
    """Every broken journal's trials, in ``FLEET_BROKEN``'s order."""
    checks = []
    for name, journal in FLEET_BROKEN.items():
        stores: tuple[Literal["file", "postgres"], ...] = (
            ("file", "postgres") if postgres else ("file",)
        )
        escape = tuple(
            FleetTrialSpec(store, fault, name, trial_seed(seed, store, fault))
            for store in stores
            for fault in (None, "sigkill")
        )
        fault = journal.needs_fault
        catch = FleetTrialSpec("postgres", fault, name, trial_seed(seed, "postgres", fault))
        checks.append(FleetSelfCheck(name, escape, catch))
    return checks


def run_fleet_self_check(
    seed: int, run: Callable[[FleetTrialSpec], FleetTrialResult]
) -> list[FleetSelfCheckRow]:
    """Run every check's trials with ``run``, a row per broken journal."""
    rows = []
    for check in plan_fleet_self_check(seed):
        journal = FLEET_BROKEN[check.name]
        escaped = tuple(run(spec) for spec in check.escape)
        rows.append(
            FleetSelfCheckRow(
                check.name,
                journal.mistake,
                journal.needs_fault,
                journal.caught_by,
                escaped,
                run(check.catch),
            )
        )
    return rows
