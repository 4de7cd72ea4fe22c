"""``python -m harness merge OUT RUN_DIR...``: one report from the run folders of several shards.

The merge itself (what it copies, what it refuses, how the report is rebuilt)
is ``harness.report.merge.merge_runs``; this prints its headline and exits
with the merged trials' status: 0 held, 1 failed, 3 could not judge, 2 when
the run folders cannot be merged (nothing is written).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness.exits import EXIT_FAILED, EXIT_OK, EXIT_UNJUDGED
from harness.report.merge import describe_missing, merge_runs

__all__ = ["add_parser", "run"]

HEADLINES = {EXIT_OK: "PASS", EXIT_FAILED: "FAIL", EXIT_UNJUDGED: "COULD NOT JUDGE"}


def add_parser(sub: Any) -> argparse.ArgumentParser:
    merge: argparse.ArgumentParser = sub.add_parser(
        "merge", help="join the run folders of shards into one report"
    )
    merge.add_argument("out", help="the merged run folder (created; must be empty)")
    merge.add_argument("run_dirs", nargs="+", help="the shards' run folders")
    merge.add_argument(
        "--allow-missing",
        action="store_true",
        help="merge an incomplete set of shards (the report says which are missing)",
    )
    return merge


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    run_dirs = [Path(d) for d in args.run_dirs]
    outcome = merge_runs(out, run_dirs, allow_missing=args.allow_missing)
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    headline = HEADLINES[outcome.status]
    if not outcome.complete:
        headline = f"INCOMPLETE ({describe_missing(outcome.missing)}), {headline} so far"
    print(
        f"{headline}: merged {len(run_dirs)} of {outcome.shards} shards: "
        f"{summary['trials']} trials, {summary['failed']} failed, "
        f"{summary['unknown']} could not be judged; report {out}/index.html"
    )
    return outcome.status
