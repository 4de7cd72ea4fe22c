"""``python -m harness compare``: the same campaign against several runtimes, side by side.

Every runtime meets the same trials (same scenarios, seeds and schedules; the
golden runs are shared), so a row of the table is a like-for-like comparison.
For each failing trial of a runtime the findings list the ops the ledger shows
replayed and the one command that replays the trial. Written to
``compare.md`` and ``compare.json`` in the run folder; it decides nothing the
checkers did not.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from harness.chaos.campaign import CampaignConfig, run_trials
from harness.chaos.trial import TrialResult, TrialSpec
from harness.check.invariants import TITLES

__all__ = ["run_compare"]

_console = Console(highlight=False, soft_wrap=True)
_REPLAYED = re.compile(r"^(\S+) \((\w+), (\w+)\) ran (\d+) times")


def _select(failpoints: tuple[str, ...]) -> Any:
    def keep(spec: TrialSpec) -> bool:
        if spec.kind != "exhaustive":
            return True
        return not failpoints or spec.label.split("@", 1)[0] in failpoints

    return keep


def _findings(results: list[TrialResult]) -> list[dict[str, Any]]:
    found = []
    for result in results:
        if result.status != "fail":
            continue
        replayed = []
        for verdict in result.verdicts:
            for line in verdict.evidence if verdict.invariant == "I2" else ():
                if (match := _REPLAYED.match(line)) is not None:
                    replayed.append(
                        {
                            "op": match[1],
                            "tool": match[2],
                            "class": match[3],
                            "executions": int(match[4]),
                        }
                    )
        found.append(
            {
                "trial": result.spec.trial_id,
                "schedule": result.spec.schedule.describe(),
                "failed": list(result.failed_invariants),
                "replayed": replayed,
                "replay": result.spec.replay_command(),
            }
        )
    return found


def run_compare(config: CampaignConfig, runtimes: list[str], failpoints: tuple[str, ...]) -> int:
    """Run the campaign once per runtime; print and write the side-by-side table."""
    by_runtime: dict[str, list[TrialResult]] = {}
    for runtime in runtimes:
        _console.print(f"[bold]{runtime}[/]: running the campaign")
        by_runtime[runtime] = run_trials(
            replace(config, runtime=runtime), lambda r: None, select=_select(failpoints)
        )
    table = Table(
        title=f"the same {len(next(iter(by_runtime.values())))} trials, by runtime "
        "(failed / judged)"
    )
    table.add_column("invariant")
    for runtime in runtimes:
        table.add_column(runtime, justify="right")
    rows: dict[str, dict[str, str]] = {}
    for key, title in TITLES.items():
        cells = []
        for runtime in runtimes:
            counts = Counter(
                v.status for r in by_runtime[runtime] for v in r.verdicts if v.invariant == key
            )
            judged = counts["pass"] + counts["fail"]
            cells.append(f"{counts['fail']} / {judged}" if judged else "not judged")
        rows[key] = dict(zip(runtimes, cells, strict=True))
        table.add_row(f"{key} {title}", *cells)
    failed = [sum(r.status == "fail" for r in by_runtime[rt]) for rt in runtimes]
    table.add_row("[bold]trials failed[/]", *[str(n) for n in failed])
    _console.print(table)
    findings = {rt: _findings(by_runtime[rt]) for rt in runtimes}
    replays: Counter[tuple[str, str, str]] = Counter()
    for runtime, found in findings.items():
        for finding in found:
            for op in finding["replayed"]:
                replays[runtime, op["tool"], op["class"]] += 1
    if replays:
        tools = Table(title="ops the ledger shows replayed (trials)")
        for column in ("runtime", "tool", "class", "trials"):
            tools.add_column(column)
        for (runtime, tool, cls), n in sorted(replays.items()):
            tools.add_row(runtime, tool, cls, str(n))
        _console.print(tools)
    for runtime, found in findings.items():
        for finding in found[:5]:
            _console.print(
                f"  {runtime} {finding['trial']}: {', '.join(finding['failed'])}; "
                f"replay: {finding['replay']}"
            )
    _write(config.run_dir, runtimes, rows, failed, findings, replays)
    _console.print(f"written: {config.run_dir / 'compare.md'}")
    return 0


def _write(
    run_dir: Path,
    runtimes: list[str],
    rows: dict[str, dict[str, str]],
    failed: list[int],
    findings: dict[str, list[dict[str, Any]]],
    replays: Counter[tuple[str, str, str]],
) -> None:
    (run_dir / "compare.json").write_text(
        json.dumps(
            {
                "runtimes": runtimes,
                "invariants": rows,
                "failed": dict(zip(runtimes, failed, strict=True)),
                "findings": findings,
            },
            indent=1,
        ),
        "utf-8",
    )
    lines = ["| invariant | " + " | ".join(runtimes) + " |", "|---|" + "---|" * len(runtimes)]
    lines += [
        f"| {key} {TITLES[key]} | " + " | ".join(cells[rt] for rt in runtimes) + " |"
        for key, cells in rows.items()
    ]
    lines.append("| trials failed | " + " | ".join(str(n) for n in failed) + " |")
    lines += ["", "| runtime | tool | class | trials with a replay |", "|---|---|---|---|"]
    lines += [f"| {rt} | {tool} | {cls} | {n} |" for (rt, tool, cls), n in sorted(replays.items())]
    lines += ["", "Replay commands (first of each tool):", ""]
    seen = set()
    for runtime, found in findings.items():
        for finding in found:
            for op in finding["replayed"]:
                if (runtime, op["tool"]) not in seen:
                    seen.add((runtime, op["tool"]))
                    lines.append(f"- {runtime}, {op['tool']}: `{finding['replay']}`")
    (run_dir / "compare.md").write_text("\n".join(lines) + "\n", "utf-8")
