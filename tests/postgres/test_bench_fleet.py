"""Figure 13 of ``make bench`` on a server of its own: every figure measured, side by side."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from harness.bench.run import QUICK, Measurements, bench_fleet


def test_figure_13_measures_both_stores_side_by_side(tmp_path: Path) -> None:
    """A rate per worker count, a claim and a takeover: each PostgreSQL over the file
    journal, with the p50 and p99 of both in the notes (no time is asserted)."""
    settings = replace(QUICK, fleet_workers=(1, 2), fleet_calls=3, claim_repeats=1)
    out = Measurements()
    with tempfile.TemporaryDirectory(dir=tmp_path) as scratch:
        bench_fleet(settings, Path(scratch), out)
    names = [f.name for f in out.figures]
    assert names == [
        "13 journaled calls/s, 1 worker: PostgreSQL / file journal",
        "13 journaled calls/s, 2 workers: PostgreSQL / file journal",
        "13 claim: PostgreSQL / file journal",
        "13 takeover: PostgreSQL / file journal",
    ]
    assert all(f.subject > 0 and f.baseline > 0 for f in out.figures)
    assert sum("p99" in note and "PostgreSQL" in note for note in out.notes) == 2
    assert len(out.series["fleet_calls_per_s"]["postgres-2"]) == 1
