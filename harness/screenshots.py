"""Pictures of the reports for the docs: ``index.png`` and ``timeline.png`` in ``docs/images``.

Runs a small real campaign that fails (the ``replay-success`` broken runtime on
the phone_task scenario, no self-check), then opens its ``index.html`` and the
timeline of a failed trial in the headless Chromium of ``harness.report.browser``,
and saves what a reader sees: the top of each page (``index.png``, ``timeline.png``),
and further down (``index-tables.png``: the faults, self-check and trials tables;
``timeline-lives.png``: the lives). ``make screenshots``.

``--black-box``: the same for a black box that fails (the plain-Python example agent,
``cmd:``, on phone_task): ``blackbox-index.png`` and ``blackbox-trials.png``, each
refused if its page is wider than the window (a trial id too long to fit, say).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from harness.report.browser import open_page
from harness.report.html import TRIAL_PAGE

__all__ = ["BLACK_BOX_CAMPAIGN", "CAMPAIGN", "failing_run", "main", "take"]

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
CAMPAIGN = (
    "chaos",
    "--runtime",
    "replay-success",
    "--only",
    "phone_task",
    "--no-self-check",
    "--random",
    "2",
    "--seed",
    "7",
)
"""The campaign shown: one scenario under a runtime that replays durable successes."""
BLACK_BOX = f"cmd:{os.path.relpath(sys.executable, ROOT)} examples/agents/plain_python/agent.py"
BLACK_BOX_CAMPAIGN = (
    "chaos",
    "--runtime",
    BLACK_BOX,
    "--only",
    "phone_task",
    "--random",
    "2",
    "--seed",
    "7",
)
"""A black box's campaign: the example agent that runs a call again after a kill (I2)."""


def failing_run(reports: Path, campaign: Sequence[str] = CAMPAIGN) -> Path:
    """Run ``campaign`` (``python -m harness ...``) into ``reports``; its run folder.
    The campaign must fail: a picture of a passing run would show no failure list."""
    done = subprocess.run(
        [sys.executable, "-m", "harness", *campaign, "--reports", str(reports)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        check=False,
    )
    runs = sorted(p for p in reports.iterdir() if (p / "index.html").is_file())
    if done.returncode != 1 or not runs:
        raise SystemExit(f"the campaign did not fail as it should (exit {done.returncode})")
    return runs[-1]


def _shortest_failed_page(run_dir: Path) -> Path:
    """The page of a failed trial with the least to show: the easiest one to read."""
    failed = [
        page
        for page in run_dir.glob(f"trials/*/{TRIAL_PAGE}")
        if "badge fail" in page.read_text("utf-8").split("<h2>", 1)[0]
    ]
    if not failed:
        raise SystemExit(f"{run_dir}: no failed trial has a page")
    return min(failed, key=lambda page: (page.stat().st_size, page.as_posix()))


def take(
    page_path: Path, image: Path, *, heading: str = "", width: int = 1280, height: int = 1300
) -> None:
    """Save what a reader sees of ``page_path`` in a window ``width`` x ``height``: its
    top, or from the section whose heading starts with ``heading``. A page wider than the
    window (it would scroll sideways) is refused, its picture not saved."""
    with open_page(page_path, width=width, height=height) as page:
        wide = int(page.evaluate("document.documentElement.scrollWidth"))
        if wide > width:
            raise SystemExit(f"{page_path}: {wide} pixels wide, wider than the {width} shown")
        if heading:
            starts = re.compile(f"^{re.escape(heading)}")
            page.locator("h2", has_text=starts).first.evaluate("h => h.scrollIntoView()")
        page.screenshot(path=str(image))


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.screenshots")
    parser.add_argument("--out", type=Path, default=IMAGES, help="where the PNGs go")
    parser.add_argument(
        "--black-box", action="store_true", help="a black box's failing run instead"
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.black_box:
        with tempfile.TemporaryDirectory(prefix="screenshots-") as scratch:
            run_dir = failing_run(Path(scratch), BLACK_BOX_CAMPAIGN)
            for name, heading in (("blackbox-index.png", ""), ("blackbox-trials.png", "Trials")):
                take(run_dir / "index.html", args.out / name, heading=heading)
                print(args.out / name)
        return 0
    with tempfile.TemporaryDirectory(prefix="screenshots-") as scratch:
        run_dir = failing_run(Path(scratch))
        trial = _shortest_failed_page(run_dir)
        shots = (
            (run_dir / "index.html", "index.png", ""),
            (run_dir / "index.html", "index-tables.png", "Faults injected"),
            (trial, "timeline.png", ""),
            (trial, "timeline-lives.png", "Timeline"),
        )
        for page, name, heading in shots:
            take(page, args.out / name, heading=heading)
            print(args.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
