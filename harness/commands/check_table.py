"""``python -m harness check-table [TABLE] [--scenario FILE...] [--scenarios DIR]``: audit
a tool table.

Each tool the scenarios use is called twice, at its first call in each
scenario, in a scratch world (``harness.table_audit``), and the table's
class is held against what the calls did. Without TABLE each scenario is held
against the table its trials run with: its own (``tool_table``), else the
shipped one (``harness/runtime/tools.toml``), a report per table; with TABLE,
every scenario against it. ``--scenario`` may be repeated, ``--scenarios`` takes a
folder's; without either, every scenario of ``scenarios/``. A file given twice is audited once.

Everything is read before anything runs: an unreadable or malformed table or
scenario is refused with exit 2, naming the file. Exit 0 when the table agrees
with every call (notes allowed), 1 on an unsafe class (a retried class whose
tool's calls a retry would repeat), 3 when no class is unsafe but some call
could not be judged (its first call failed).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.exits import EXIT_FAILED, EXIT_OK, EXIT_UNJUDGED

__all__ = ["add_parser", "run"]

DEFAULT_SCENARIOS = "scenarios"

_EXIT = {"ok": EXIT_OK, "note": EXIT_OK, "unjudged": EXIT_UNJUDGED, "unsafe": EXIT_FAILED}
_RANK = (EXIT_OK, EXIT_UNJUDGED, EXIT_FAILED)
"""Exit statuses from the least to the worst: the command's is its worst report's."""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        "check-table", help="audit a tool table against what its tools really do"
    )
    parser.add_argument(
        "table", nargs="?", default=None, help="a tool table file (default: the shipped table)"
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        dest="scenario_files",
        metavar="FILE",
        help=f"a scenario file (repeatable; default: every scenario of {DEFAULT_SCENARIOS}/)",
    )
    parser.add_argument(
        "--scenarios",
        default=None,
        metavar="DIR",
        help="a folder of scenario files (with --scenario too, both are taken)",
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="the random seed of the scenarios' Faker arguments"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    from harness.chaos.scenario import compile_plan, load_scenario, load_scenarios
    from harness.report.console import print_table_audit
    from harness.runtime.classes import ToolTable
    from harness.table_audit import audit_table

    if args.scenarios is None and not args.scenario_files:
        scenarios = load_scenarios(Path(DEFAULT_SCENARIOS))
    else:
        folder = [] if args.scenarios is None else load_scenarios(Path(args.scenarios))
        files = [str(s.source) for s in folder] + list(args.scenario_files)
        scenarios = [load_scenario(path) for path in _once(files)]
    # Every table read before anything runs; the shipped one first.
    by_table: dict[Path | None, list[Any]] = {}
    for scenario in scenarios:
        own = None if args.table is not None else scenario.table_path
        by_table.setdefault(own, []).append(scenario)
    tables = {
        path: ToolTable.load(path)
        if path is not None
        else (ToolTable.shipped() if args.table is None else ToolTable.load(args.table))
        for path in sorted(by_table, key=lambda p: (p is not None, str(p)))
    }
    statuses = []
    for path, table in tables.items():
        plans = [compile_plan(s, seed=args.seed, source=s.source) for s in by_table[path]]
        audit = audit_table(table, plans)
        statuses.append(_EXIT[audit.status])
        print_table_audit(audit, statuses[-1])
    return max(statuses, key=_RANK.index)


def _once(paths: list[str]) -> list[str]:
    """Each file once, in the order given (two spellings of one file are one file)."""
    seen: dict[Path, str] = {}
    for path in paths:
        seen.setdefault(Path(path).resolve(), path)
    return list(seen.values())
