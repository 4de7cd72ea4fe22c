"""``python -m harness bench [--quick] [--cycles N] [--only STEP] [--out DIR]``: measure,
print, write.

Also ``python -m harness.bench`` (``make bench``), the same options under its own name.
The measurements are ``harness.bench`` (``run_bench``); this parses the
options, prints the figures and tables, and writes ``<out>/<run-id>.json``
(and the scaling plot).

Exit status: 0 once the report is written, whether or not every target holds
(a benchmark is a report); 2 on bad arguments; 1 when a measurement itself
broke (``BenchError``: a process misbehaved): the report is still written,
with the other figures and what broke.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from harness.bench.figures import BenchReport, figures_table
from harness.bench.plot import plot_scaling
from harness.bench.run import FULL, QUICK, STEPS, run_bench
from harness.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

__all__ = ["EXIT_BAD_ARGUMENTS", "add_parser", "main", "print_report", "run"]

EXIT_BROKEN = EXIT_FAILED
EXIT_BAD_ARGUMENTS = EXIT_BAD_INPUT
DEFAULT_OUT = Path("reports") / "bench"
DESCRIPTION = "Benchmarks: each figure a ratio against a baseline of the same run."

# The supervisor's events in a life's order. ready->ack: opening the journal
# and the world, recovery, the first step the journal answers; ack->kill: the
# one new call and the hand-shake; ready->kill: both, in a trial's first life.
_PHASES = (
    "spawn->ready",
    "ready->ack",
    "ack->ack",
    "ack->kill",
    "ready->kill",
    "kill->exit",
    "exit->spawn",
)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def _add_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test, CI)")
    parser.add_argument(
        "--cycles", type=_positive, metavar="N", help="crash-restart cycles per cycle-rate sample"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=STEPS,
        metavar="STEP",
        help=f"measure only this step (repeatable): {', '.join(STEPS)}",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"where <run-id>.json goes (default {DEFAULT_OUT})",
    )
    parser.set_defaults(bench_parser=parser)  # names the command in the --out error
    return parser


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        "bench",
        help="benchmarks: each figure a ratio against a baseline",
        description=DESCRIPTION,
    )
    return _add_options(parser)


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.bench ARGS``: parse ``argv`` under that name, then ``run``."""
    parser = _add_options(
        argparse.ArgumentParser(prog="python -m harness.bench", description=DESCRIPTION)
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse's own exit: 0 for --help, 2 for a bad argument
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_ARGUMENTS
    return run(args)


def run(args: argparse.Namespace) -> int:
    out_dir: Path = args.out
    if out_dir.exists() and not out_dir.is_dir():
        parser: argparse.ArgumentParser = args.bench_parser
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: --out {out_dir} is not a directory", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    settings = QUICK if args.quick else FULL
    if args.cycles is not None:
        settings = dataclasses.replace(settings, cycles=args.cycles)
    # Under make the output is not a terminal and rich would wrap at 80 columns.
    console = Console(highlight=False, emoji=False, width=None if sys.stdout.isatty() else 120)
    progress = Console(highlight=False, emoji=False, stderr=True)
    only = None if args.only is None else frozenset(args.only)
    report = run_bench(settings, out_dir, progress, only=only)
    plot = out_dir / f"{report.run_id}.png"
    skipped = plot_scaling(report.series, plot)
    if skipped is not None:
        report = dataclasses.replace(report, notes=(*report.notes, skipped))
    path = report.write(out_dir)
    print_report(report, console)
    console.print(f"written to {path}" + ("" if skipped else f" and {plot}"))
    return EXIT_BROKEN if report.broken else EXIT_OK


def print_report(report: BenchReport, console: Console) -> None:
    console.print(figures_table(report.figures, title=f"Benchmarks {report.run_id}"))
    planning = report.series.get("planning")
    if planning:
        table = Table(title="Recovery planning by journal size (µs per record)")
        for header in ("records", "scan", "fold + plan", "total"):
            table.add_column(header, justify="right")
        for point in planning:
            table.add_row(
                f"{point['records']:,}",
                f"{point['scan_us_per_record']:.3f}",
                f"{point['fold_plan_us_per_record']:.3f}",
                f"{point['total_us_per_record']:.3f}",
            )
        console.print(table)
    top = report.series.get("agent_importtime_top")
    if top:
        table = Table(title="Agent start-up missed: top -X importtime entries (cumulative)")
        for header in ("module", "cumulative ms", "self ms"):
            table.add_column(header, justify="left" if header == "module" else "right")
        for entry in top:
            table.add_row(
                entry["module"],
                f"{entry['cumulative_us'] / 1000:.1f}",
                f"{entry['self_us'] / 1000:.1f}",
            )
        console.print(table)
    phases = report.series.get("cycle_phases_ms")
    if phases:
        table = Table(title="Where a harness cycle goes: median ms between supervisor events")
        seen = {gap for by_gap in phases.values() for gap in by_gap}
        gaps = [g for g in _PHASES if g in seen] + sorted(seen - set(_PHASES))
        table.add_column("launcher")
        for gap in gaps:
            table.add_column(gap, justify="right")
        for launch, by_gap in phases.items():
            table.add_row(launch, *(f"{by_gap[g]:.2f}" if g in by_gap else "" for g in gaps))
        console.print(table)
    misses = report.misses
    verdict = (
        "every target holds"
        if not misses
        else f"{len(misses)} missed: " + "; ".join(f.name for f in misses)
    )
    console.print(verdict)
    for note in report.notes:
        console.print(f"note: {note}")
    for broken in report.broken:
        console.print(f"[red]broken: {broken}[/red]")
