"""``python -m harness replay TRIAL_DIR``: run again the trial recorded in a trial folder.

Reads the folder's ``trial.json`` (scenario, seed, runtime, schedule) and runs
that trial afresh, as ``trial`` would (``harness.commands.trial``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness.commands.trial import run_one_trial
from harness.runtime.errors import HarnessError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    replay: argparse.ArgumentParser = sub.add_parser(
        "replay", help="run again the trial of a trial folder"
    )
    replay.add_argument("trial_dir")
    replay.add_argument("--reports", default="reports")
    return replay


def run(args: argparse.Namespace) -> int:
    trial_dir = Path(args.trial_dir)
    try:
        spec = json.loads((trial_dir / "trial.json").read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{trial_dir}/trial.json: cannot read the trial: {exc}") from None
    return run_one_trial(
        spec["scenario"], spec["seed"], spec["runtime"], json.dumps(spec["schedule"]), args.reports
    )
