"""The comparison of runtimes side by side (``python -m harness compare``), from their results.

The ``compare`` command (``harness.commands.compare``) runs the same trials
against every runtime (same scenarios, seeds and schedules; the golden runs
are shared), so a row of the table is a like-for-like comparison, and hands
the results here. For each failing trial of a runtime the findings list the
ops the ledger shows replayed and the one command that replays the trial.
Printed, and written to ``compare.md`` and ``compare.json`` in the run folder;
it decides nothing the checkers did not.

Exit status (``harness.exits``): each runtime is expected to hold (no failed
and no unknown trial) unless ``--expect-fail NAME`` says it must fail at least
one trial. 0 when every runtime did what was expected; 1 when one did not (a
runtime failed that should hold, or one expected to fail held everything: "expected
NAME to fail, but it held"); 3 when nothing went against expectation but some
runtime could not be confirmed: it had trials that could not be judged and none
that failed, or it ran no trial. A failure outranks an unknown. A runtime expected
to fail that did fail has what it needs, whatever else it could not judge (the
table still counts those trials).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.chaos.trial import TrialResult
from harness.check.invariants import TITLES, Status
from harness.exits import EXIT_FAILED, EXIT_OK, EXIT_UNJUDGED, exit_status

__all__ = [
    "RuntimeOutcome",
    "announce_campaign",
    "compare_status",
    "final_line",
    "outcomes",
    "report_comparison",
]

HEADLINES = {EXIT_OK: "PASS", EXIT_FAILED: "FAIL", EXIT_UNJUDGED: "COULD NOT JUDGE"}

_console = Console(highlight=False, soft_wrap=True, emoji=False)  # data printed as written
_REPLAYED = re.compile(r"^(\S+) \((\w+), (\w+)\) ran (\d+) times")


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


@dataclass(frozen=True, slots=True)
class RuntimeOutcome:
    """How one runtime came out of the comparison, against what was expected of it."""

    runtime: str
    trials: int
    failed: int
    unknown: int
    expected_to_fail: bool = False

    @property
    def outcome(self) -> str:
        """``failed`` (some trial failed), ``could not be judged`` (none failed, but some
        could not be judged, or no trial ran) or ``held``."""
        if self.failed:
            return "failed"
        if self.unknown or not self.trials:
            return "could not be judged"
        return "held"

    @property
    def status(self) -> Status:
        """``pass`` when it did what was expected, ``fail`` when it did not, ``unknown``
        when it cannot be told."""
        outcome = self.outcome
        if outcome == "could not be judged":
            return "unknown"
        return "pass" if (outcome == "failed") == self.expected_to_fail else "fail"

    @property
    def problem(self) -> str | None:
        """The line that says what went against expectation, or None."""
        if self.status == "fail" and self.expected_to_fail:
            return f"expected {self.runtime} to fail, but it held ({self.trials} trials)"
        if self.status == "fail":
            return (
                f"expected {self.runtime} to hold, but it failed {self.failed} of "
                f"{self.trials} trials"
            )
        if self.status == "unknown" and not self.trials:
            return f"{self.runtime} ran no trial, so it could not be judged"
        if self.status == "unknown":
            return (
                f"{self.runtime}: {self.unknown} of {self.trials} trials could not be judged "
                f"and none failed, so whether it {'fails' if self.expected_to_fail else 'holds'}"
                " is unknown"
            )
        return None


def outcomes(
    by_runtime: dict[str, list[TrialResult]], expect_fail: Iterable[str] = ()
) -> list[RuntimeOutcome]:
    """Each runtime's trials counted, in the order given."""
    expected = set(expect_fail)
    return [
        RuntimeOutcome(
            runtime,
            len(results),
            sum(r.status == "fail" for r in results),
            sum(r.status == "unknown" for r in results),
            runtime in expected,
        )
        for runtime, results in by_runtime.items()
    ]


def compare_status(came_out: Sequence[RuntimeOutcome]) -> int:
    """The exit status of a comparison: 0 as expected, 1 not as expected, 3 could not judge."""
    return exit_status(o.status for o in came_out)


def final_line(came_out: Sequence[RuntimeOutcome], stopped: Sequence[str] = ()) -> str:
    """Which runtimes held, failed or could not be judged, and what was expected; a runtime
    that failed or could not be judged with its trials counted as the table counts them
    (a failed one's trials that could not be judged too). ``stopped``: the runtimes whose
    campaign stopped early (``--maxfail``), said after the verdict."""

    def counted(o: RuntimeOutcome) -> str:
        if o.outcome == "failed":
            more = f"; {o.unknown} more could not be judged" if o.unknown else ""
            return f"{o.runtime} ({o.failed} of {o.trials} trials{more})"
        if o.outcome == "could not be judged" and o.trials:
            return f"{o.runtime} ({o.unknown} of {o.trials} trials)"
        return o.runtime

    def named(outcome: str) -> str:
        return ", ".join(counted(o) for o in came_out if o.outcome == outcome) or "none"

    expected = ", ".join(o.runtime for o in came_out if o.expected_to_fail)
    early = f" (stopped early: {', '.join(stopped)})" if stopped else ""
    return (
        f"{HEADLINES[compare_status(came_out)]}{early}: held: {named('held')}; "
        f"failed: {named('failed')}; "
        f"could not be judged: {named('could not be judged')}; expected to fail: "
        f"{expected or 'none'} (every other runtime expected to hold)"
    )


def _cell(counts: Counter[str]) -> str:
    """``failed / judged`` (judged: pass or fail), and how many could not be judged."""
    judged = counts["pass"] + counts["fail"]
    unknown = f"{counts['unknown']} could not be judged" if counts["unknown"] else ""
    if not judged:
        return unknown or "not judged"
    return f"{counts['fail']} / {judged}" + (f" ({unknown})" if unknown else "")


def announce_campaign(runtime: str) -> None:
    """The line printed before the campaign of one runtime runs."""
    _console.print(f"[bold]{runtime}[/]: running the campaign")


def report_comparison(
    run_dir: Path,
    runtimes: list[str],
    by_runtime: dict[str, list[TrialResult]],
    expect_fail: Sequence[str] = (),
    stopped: Sequence[str] = (),
) -> int:
    """Print and write (into ``run_dir``) the side-by-side table of each runtime's results.

    ``stopped`` names the runtimes whose campaign stopped early (``--maxfail``).

    Returns the exit status (``compare_status``); ``expect_fail`` names the
    runtimes that must fail at least one trial.
    """
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
            counts: Counter[str] = Counter(
                v.status for r in by_runtime[runtime] for v in r.verdicts if v.invariant == key
            )
            cells.append(_cell(counts))
        rows[key] = dict(zip(runtimes, cells, strict=True))
        table.add_row(f"{key} {title}", *cells)
    came_out = outcomes(by_runtime, expect_fail)
    failed = [o.failed for o in came_out]
    unknown = [o.unknown for o in came_out]
    table.add_row("[bold]trials failed[/]", *[str(n) for n in failed])
    table.add_row("[bold]trials that could not be judged[/]", *[str(n) for n in unknown])
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
                f"replay: {finding['replay']}",
                markup=False,
            )
    for runtime in runtimes:
        for result in [r for r in by_runtime[runtime] if r.status == "unknown"][:5]:
            _console.print(
                f"  {runtime} {result.spec.trial_id}: could not judge "
                f"{', '.join(result.unknown_invariants)}; replay: {result.spec.replay_command()}",
                markup=False,
            )
    _write(run_dir, runtimes, rows, came_out, findings, replays, stopped)
    _console.print(f"written: {run_dir / 'compare.md'}", markup=False)
    for o in came_out:
        if o.problem is not None:
            _console.print(f"[{'red' if o.status == 'fail' else 'yellow'}]{escape(o.problem)}[/]")
    _console.print(f"[bold]{escape(final_line(came_out, stopped))}[/]")
    return compare_status(came_out)


def _write(
    run_dir: Path,
    runtimes: list[str],
    rows: dict[str, dict[str, str]],
    came_out: list[RuntimeOutcome],
    findings: dict[str, list[dict[str, Any]]],
    replays: Counter[tuple[str, str, str]],
    stopped: Sequence[str] = (),
) -> None:
    failed = [o.failed for o in came_out]
    (run_dir / "compare.json").write_text(
        json.dumps(
            {
                "runtimes": runtimes,
                "expected_to_fail": [o.runtime for o in came_out if o.expected_to_fail],
                "invariants": rows,
                "failed": {o.runtime: o.failed for o in came_out},
                "unknown": {o.runtime: o.unknown for o in came_out},
                "outcomes": {o.runtime: o.outcome for o in came_out},
                "problems": [o.problem for o in came_out if o.problem is not None],
                "exit_status": compare_status(came_out),
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
    lines.append(
        "| trials that could not be judged | " + " | ".join(str(o.unknown) for o in came_out) + " |"
    )
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
    problems = (o.problem for o in came_out if o.problem is not None)
    lines += ["", *problems, final_line(came_out, stopped)]
    (run_dir / "compare.md").write_text("\n".join(lines) + "\n", "utf-8")
