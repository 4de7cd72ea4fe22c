"""``python -m harness check-table [TABLE] --scenario FILE...``: audit a tool table.

Each tool the scenarios use is called twice, at its first call in each
scenario, in a scratch world (``harness.check.table_audit``), and the table's
class is held against what the calls did. TABLE defaults to the shipped table
(``harness/runtime/tools.toml``); ``--scenario`` may be repeated and defaults
to every scenario of ``scenarios/``. A file given twice is audited once.

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
        default=None,
        dest="scenarios",
        metavar="FILE",
        help=f"a scenario file (repeatable; default: every scenario of {DEFAULT_SCENARIOS}/)",
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="the seed the scenarios' Faker arguments are drawn from"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    from harness.chaos.scenario import compile_plan, load_scenario, load_scenarios
    from harness.check.table_audit import audit_table
    from harness.report.console import print_table_audit
    from harness.runtime.classes import ToolTable

    table = ToolTable.default() if args.table is None else ToolTable.load(args.table)
    if args.scenarios is None:
        scenarios = load_scenarios(Path(DEFAULT_SCENARIOS))
    else:
        scenarios = [load_scenario(path) for path in _once(args.scenarios)]
    plans = [compile_plan(s, seed=args.seed, source=s.source) for s in scenarios]
    audit = audit_table(table, plans)
    status = _EXIT[audit.status]
    print_table_audit(audit, status)
    return status


def _once(paths: list[str]) -> list[str]:
    """Each file once, in the order given (two spellings of one file are one file)."""
    seen: dict[Path, str] = {}
    for path in paths:
        seen.setdefault(Path(path).resolve(), path)
    return list(seen.values())
