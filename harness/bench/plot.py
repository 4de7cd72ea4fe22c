"""The PNG plot of the scaling figures, beside the report's JSON.

Three panels from the report's series: trials per second against campaign
size (1 and 2 workers), recovery planning time per record against journal
size (log scale: linear planning is a flat line), and the supervisor's RSS
against campaign size. matplotlib is pinned in the ``bench`` extra, which
``make bench`` installs; without it the plot is skipped with a note.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.bench.figures import median_of

__all__ = ["plot_scaling"]


def plot_scaling(series: Mapping[str, Any], path: Path) -> str | None:
    """Write the plot to ``path``; ``None`` when written, else why it was not."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: write files only
        import matplotlib.pyplot as plt
    except ImportError:
        return "PNG plot skipped: matplotlib is not installed (make bench installs it)"
    campaigns: list[dict[str, Any]] = series.get("campaigns", [])
    planning: list[dict[str, Any]] = series.get("planning", [])
    if not campaigns and not planning:
        return "PNG plot skipped: no scaling figure was measured"
    figure, (rate, plan, memory) = plt.subplots(1, 3, figsize=(15, 4.5))
    for workers in sorted({c["workers"] for c in campaigns}):
        points = _medians(campaigns, workers, "trials_per_s")
        rate.plot(*zip(*points, strict=True), marker="o", label=f"{workers} worker(s)")
        rss = _medians(campaigns, workers, "worker_rss_bytes")
        memory.plot(
            [t for t, _ in rss],
            [b / (1024 * 1024) for _, b in rss],
            marker="o",
            label=f"{workers} worker(s)",
        )
    rate.set(title="Campaign rate", xlabel="trials in the campaign", ylabel="trials / s")
    memory.set(title="Supervisor memory", xlabel="trials in the campaign", ylabel="RSS, MiB")
    for axes in (rate, memory):
        axes.set_xscale("log")
        axes.set_ylim(bottom=0)
        axes.legend()
    if planning:
        sizes = [p["records"] for p in planning]
        for key, label in (
            ("total_us_per_record", "scan + fold + plan"),
            ("scan_us_per_record", "scan"),
            ("fold_plan_us_per_record", "fold + plan"),
        ):
            plan.plot(sizes, [p[key] for p in planning], marker="o", label=label)
        plan.set_xscale("log")
        plan.set_ylim(bottom=0)
        plan.legend()
    plan.set(title="Recovery planning", xlabel="journal records", ylabel="µs / record")
    for axes in (rate, plan, memory):
        axes.grid(True, alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return None


def _medians(campaigns: list[dict[str, Any]], workers: int, key: str) -> list[tuple[int, float]]:
    """(campaign size, median of ``key``) for runs with ``workers``, by size."""
    by_size: dict[int, list[float]] = {}
    for c in campaigns:
        if c["workers"] == workers:
            by_size.setdefault(c["trials"], []).append(float(c[key]))
    return [(size, median_of(values)) for size, values in sorted(by_size.items())]
