"""Benchmarks: every figure a ratio against a baseline measured in the same run.

``python -m harness.bench`` (``make bench``) measures, prints a table of each
figure beside its target with "holds" or "misses", and writes
``reports/bench/<run-id>.json`` and a PNG plot of the scaling figures beside
it (``harness.bench.plot``). A missed target is a finding, not a failure:
the command exits 0 whatever the figures say, and 2 on bad arguments.
Subjects and baselines are interleaved (A B A B ...) and each figure is a
ratio of medians, timed with ``time.perf_counter_ns``.

The full note: docs/reference/modules.md (``harness/bench/__init__.py``).
"""

from harness.bench.figures import (
    BenchError,
    BenchReport,
    Figure,
    Target,
    figures_table,
    interleave,
    machine_info,
    median_of,
)
from harness.bench.run import FULL, QUICK, BenchSettings, Measurements, run_bench

__all__ = [
    "FULL",
    "QUICK",
    "BenchError",
    "BenchReport",
    "BenchSettings",
    "Figure",
    "Measurements",
    "Target",
    "figures_table",
    "interleave",
    "machine_info",
    "median_of",
    "run_bench",
]
