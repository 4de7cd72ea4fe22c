"""Pictures of the reports for the docs: ``index.png`` and ``timeline.png`` in ``docs/images``.

Runs a small real campaign that fails (the ``replay-success`` broken runtime on
the phone_task scenario, no self-check), then opens its ``index.html`` and the
timeline of a failed trial in the headless Chromium of ``harness.report.browser``,
and saves what a reader sees: the top of each page (``index.png``, ``timeline.png``),
and further down (``index-tables.png``: the faults, self-check and trials tables;
``timeline-lives.png``: the lives). ``make screenshots``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from harness.report.browser import open_page
from harness.report.html import TRIAL_PAGE

__all__ = ["CAMPAIGN", "failing_run", "main", "take"]

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
    top, or from the section whose heading starts with ``heading``."""
    with open_page(page_path, width=width, height=height) as page:
        if heading:
            page.locator("h2", has_text=heading).first.evaluate("h => h.scrollIntoView()")
        page.screenshot(path=str(image))


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.screenshots")
    parser.add_argument("--out", type=Path, default=IMAGES, help="where the PNGs go")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
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
