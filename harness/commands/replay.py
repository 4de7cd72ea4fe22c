"""``python -m harness replay TRIAL_DIR``: run again the trial recorded in a trial folder.

Reads the folder's ``trial.json`` (scenario, seed, runtime, schedule) and runs
that trial afresh, as ``trial`` would (``harness.commands.trial``). Its run folder
goes beside the run the trial came from (``reports_of``), wherever the command runs,
unless ``--reports`` says where.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness.commands.trial import run_one_trial
from harness.runtime.errors import HarnessError

__all__ = ["add_parser", "reports_of", "run", "scenario_of"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    replay: argparse.ArgumentParser = sub.add_parser(
        "replay",
        help="run again the trial of a trial folder",
        description="Run again, afresh, the trial a trial folder records (its trial.json: "
        "scenario, seed, runtime, schedule), as trial would.",
    )
    replay.add_argument(
        "trial_dir", metavar="TRIAL_DIR", help="a trial folder (it holds a trial.json)"
    )
    replay.add_argument(
        "--reports",
        default=None,
        metavar="DIR",
        help="the folder the new run folder is made in (default: the one that holds the "
        "trial's own run folder)",
    )
    replay.add_argument(
        "--project",
        default=None,
        help="the folder the trial's scenario path is relative to (default: found from "
        "the trial folder upwards, or the current folder)",
    )
    return replay


def scenario_of(recorded: str, trial_dir: Path, project: str | None) -> str:
    """The recorded scenario path, made usable from any folder.

    An absolute path is kept; a relative one (relative to the project the
    campaign ran in) is looked up under ``--project``, in the current folder,
    then in the folders above the trial folder (a run folder sits in the
    project's ``reports/``).
    """
    path = Path(recorded)
    if path.is_absolute():
        return recorded
    bases = [Path(project)] if project else [Path.cwd(), *trial_dir.resolve().parents]
    for base in bases:
        if (base / path).is_file():
            return str(base / path)
    raise HarnessError(
        f"{trial_dir}/trial.json: its scenario {recorded} is not found under "
        + (f"--project {project}" if project else "this folder or any above the trial folder")
    )


def reports_of(trial_dir: Path) -> Path:
    """The folder that holds the run folder ``trial_dir`` is in: a campaign's trial is
    ``RUN/trials/ID``, a ``trial`` command's ``RUN/trial``, and each run has its ``golden``
    folder. A trial folder found elsewhere (copied out of its run) gets its own parent."""
    folder = trial_dir.resolve()
    run = folder.parent.parent if folder.parent.name == "trials" else folder.parent
    return run.parent if (run / "golden").is_dir() else folder.parent


def run(args: argparse.Namespace) -> int:
    trial_dir = Path(args.trial_dir)
    try:
        spec = json.loads((trial_dir / "trial.json").read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{trial_dir}/trial.json: cannot read the trial: {exc}") from None
    scenario = scenario_of(str(spec["scenario"]), trial_dir, args.project)
    reports = args.reports
    if reports is None:
        reports = str(reports_of(trial_dir))
        print(
            f"harness: the replay's run folder goes in {reports} (--reports DIR elsewhere)",
            file=sys.stderr,
        )
    return run_one_trial(
        scenario,
        spec["seed"],
        spec["runtime"],
        json.dumps(spec["schedule"]),
        reports,
        model=spec.get("model"),
    )
