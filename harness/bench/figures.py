"""Figures: a measured ratio, its target, and the report that carries them.

A ``Figure`` is a subject and a baseline measured in the same run, in the same
unit, and the ratio ``subject / baseline``; its ``Target`` says which ratios
hold. The helpers here are pure (no clock, no process), so the unit tests can
check the arithmetic without timing anything:

- ``median_of`` refuses an empty list instead of inventing a number;
- ``interleave`` runs measurements round-robin (A B C, A B C, ...), so that a
  slow moment of the machine lands on every subject alike;
- ``BenchReport.write`` writes ``<out>/<run-id>.json`` whole or not at all.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import JustifyMethod
from rich.table import Table

from harness.runtime.errors import HarnessError

__all__ = [
    "BenchError",
    "BenchReport",
    "Figure",
    "Target",
    "figures_table",
    "interleave",
    "machine_info",
    "median_of",
]


class BenchError(HarnessError):
    """A benchmark could not measure what it claims (a process did not behave, no samples).

    Remedy: read the message; it names the measurement and what went wrong. A
    missed target is never an error: it is a figure that says "misses".
    """


def median_of(samples: Sequence[float]) -> float:
    """The median of the samples; an empty list is an error, not zero."""
    if not samples:
        raise BenchError("no samples to take the median of")
    return float(statistics.median(samples))


@dataclass(frozen=True, slots=True)
class Target:
    """Which ratios hold: at least ``low``, at most ``high``, or both (a band)."""

    low: float | None = None
    high: float | None = None
    moonshot: bool = False

    def __post_init__(self) -> None:
        if self.low is None and self.high is None:
            raise ValueError("a target needs a lower or an upper bound")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"empty target band {self.low}..{self.high}")

    def holds(self, ratio: float) -> bool:
        if math.isnan(ratio):
            return False
        if self.low is not None and ratio < self.low:
            return False
        return not (self.high is not None and ratio > self.high)

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            text = f"{_num(self.low)}-{_num(self.high)}x"
        elif self.low is not None:
            text = f"≥ {_num(self.low)}x"
        else:
            text = f"≤ {_num(self.high or 0.0)}x"
        return f"{text} (moonshot)" if self.moonshot else text


def _num(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True, slots=True)
class Figure:
    """One benchmark figure: ``subject / baseline``, both in ``unit``, against ``target``.

    ``target`` None is a figure reported for information only (it neither
    holds nor misses).
    """

    name: str
    subject: float
    baseline: float
    unit: str
    target: Target | None = None
    note: str = ""

    @property
    def ratio(self) -> float:
        if self.baseline == 0:
            return math.nan
        return self.subject / self.baseline

    @property
    def holds(self) -> bool | None:
        return None if self.target is None else self.target.holds(self.ratio)

    @property
    def verdict(self) -> str:
        return {None: "—", True: "holds", False: "misses"}[self.holds]

    def to_json(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "name": self.name,
            "subject": self.subject,
            "baseline": self.baseline,
            "unit": self.unit,
            "ratio": None if math.isnan(ratio) else ratio,
            "target": None if self.target is None else self.target.describe(),
            "holds": self.holds,
            "note": self.note,
        }


def machine_info() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "executable": sys.executable,
    }


@dataclass(frozen=True, slots=True)
class BenchReport:
    """A whole run: its figures, plus series and notes that explain them."""

    run_id: str
    machine: Mapping[str, Any]
    figures: tuple[Figure, ...]
    series: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    broken: tuple[str, ...] = ()
    """Measurements that could not be made, with why: their figures are missing."""

    @property
    def misses(self) -> tuple[Figure, ...]:
        return tuple(f for f in self.figures if f.holds is False)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "machine": dict(self.machine),
            "figures": [f.to_json() for f in self.figures],
            "series": dict(self.series),
            "notes": list(self.notes),
            "broken": list(self.broken),
        }

    def write(self, out_dir: Path) -> Path:
        """Write ``<out_dir>/<run_id>.json`` (temporary file, then rename); returns the path."""
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / f"{self.run_id}.json"
        temporary = out_dir / f".{self.run_id}.json.tmp"
        temporary.write_text(json.dumps(self.to_json(), indent=1) + "\n", "utf-8")
        os.replace(temporary, target)
        return target


def interleave(subjects: Mapping[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Call each subject once per round, in order, for ``repeats`` rounds: A B A B ..."""
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    samples: dict[str, list[float]] = {name: [] for name in subjects}
    for _ in range(repeats):
        for name, measure in subjects.items():
            samples[name].append(measure())
    return samples


def figures_table(figures: Sequence[Figure], *, title: str = "Benchmarks") -> Table:
    table = Table(title=title)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("figure", "left"),
        ("subject", "right"),
        ("baseline", "right"),
        ("unit", "left"),
        ("ratio", "right"),
        ("target", "left"),
        ("verdict", "left"),
    )
    for header, justify in columns:
        table.add_column(header, justify=justify)
    for figure in figures:
        ratio = figure.ratio
        verdict = figure.verdict
        style = {"holds": "green", "misses": "red"}.get(verdict, "dim")
        table.add_row(
            figure.name,
            _quantity(figure.subject),
            _quantity(figure.baseline),
            figure.unit,
            "n/a" if math.isnan(ratio) else f"{ratio:.2f}x",
            "—" if figure.target is None else figure.target.describe(),
            f"[{style}]{verdict}[/{style}]",
        )
    return table


def _quantity(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.4f}"
