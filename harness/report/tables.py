"""The rows of the tables that the console and ``index.html`` both show.

Each table is worked out here once, as plain rows; ``harness.report.console``
prints them with rich and ``harness.report.html`` writes them as HTML, so the
two never disagree.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from harness.adapters import get_adapter
from harness.blackbox.windows import BLACK_BOX_WINDOWS
from harness.chaos.faults import FAULT_KINDS
from harness.chaos.scenario import load_scenario
from harness.chaos.schedule import not_applicable
from harness.chaos.services import ServiceSpec
from harness.chaos.trial import TrialResult
from harness.check.invariants import TITLES
from harness.check.windows import WINDOWS
from harness.errors import ScenarioError
from harness.report.model import SelfCheckRow

__all__ = ["FaultRow", "InvariantCatch", "fault_rows", "invariant_catches", "window_counts"]


def window_counts(results: list[TrialResult]) -> list[tuple[str, int]]:
    """The random-time kills per window, in the order of the windows the trials' runtime
    has: a black box's (``BLACK_BOX_WINDOWS``, by what the harness's servers saw) when
    every trial is of one, whose journal windows would only ever count 0; else the
    journal's (``WINDOWS``). Any other window a trial landed in follows."""
    counts = Counter(w for r in results for w in r.windows)
    black_box = bool(results) and all(get_adapter(r.spec.runtime).black_box for r in results)
    known = BLACK_BOX_WINDOWS if black_box else WINDOWS
    return [(w, counts[w]) for w in (*known, *sorted(set(counts) - set(known)))]


@dataclass(frozen=True, slots=True)
class FaultRow:
    """One fault kind: the trials that injected it, by kind, and how many of them failed;
    or why the runtime under test cannot be given it."""

    kind: str
    description: str
    exhaustive: int = 0
    random: int = 0
    failed: int = 0
    not_applicable: str | None = None


def fault_rows(results: list[TrialResult], runtime: str) -> list[FaultRow]:
    """A row per fault kind of ``FAULT_KINDS``, in its order. A kind is not applicable
    when it is not to the runtime with the services of any scenario the trials ran on."""
    adapter = get_adapter(runtime)
    services = [_services(s) for s in sorted({r.spec.scenario for r in results})] or [()]
    rows = []
    for kind, description in FAULT_KINDS.items():
        reasons = [not_applicable(kind, adapter, each) for each in services]
        if all(reasons) and (why := reasons[0]) is not None:
            rows.append(FaultRow(kind, description, not_applicable=why))
            continue
        hit = [r for r in results if kind in r.spec.schedule.fault_kinds]
        by_kind = Counter(r.spec.kind for r in hit)
        failed = sum(r.status == "fail" for r in hit)
        rows.append(FaultRow(kind, description, by_kind["exhaustive"], by_kind["random"], failed))
    return rows


def _services(scenario: str) -> tuple[ServiceSpec, ...]:
    """The services a scenario declares (none when it cannot be read any more)."""
    try:
        return load_scenario(scenario).services
    except ScenarioError:
        return ()


@dataclass(frozen=True, slots=True)
class InvariantCatch:
    """One invariant: the broken runtimes and mutations of the self-check that it caught,
    and those it caught failing alone. Each invariant must catch one."""

    key: str
    title: str
    caught: tuple[str, ...]
    alone: tuple[str, ...]


def invariant_catches(rows: list[SelfCheckRow]) -> list[InvariantCatch]:
    """A row per invariant of ``TITLES`` but F (not a promise of the runtime: a fault
    that did not land)."""
    catches = []
    for key, title in TITLES.items():
        if key == "F":
            continue
        caught = [r for r in rows if r.caught is not None and key in r.caught.failed_invariants]
        alone = [r.name for r in caught if r.caught and r.caught.failed_invariants == (key,)]
        catches.append(InvariantCatch(key, title, tuple(r.name for r in caught), tuple(alone)))
    return catches
