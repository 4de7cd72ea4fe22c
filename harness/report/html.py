"""``index.html``: the run at a glance (placeholder until the timeline view lands)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any


def write_index_html(run_dir: Path, results: list[Any], checks: list[Any]) -> None:
    rows = "".join(
        f"<tr><td>{html.escape(r.spec.trial_id)}</td><td>{r.status}</td></tr>" for r in results
    )
    (run_dir / "index.html").write_text(
        f"<!doctype html><title>chaos run</title><table>{rows}</table>", "utf-8"
    )
