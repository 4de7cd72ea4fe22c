"""What ``python -m harness`` shows a person: progress, tables, replay lines.

Functions that take results and print them (with rich); the ``chaos`` and
``trial`` commands (``harness.commands``) run the trials and hand them over.
A progress bar (``progress_bar``) is told what to show: the number of trials
planned, and each one as it comes back. Nothing here runs a campaign or
decides anything the checkers did not decide.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from harness.adapters import get_adapter
from harness.chaos.trial import TrialResult
from harness.check.invariants import OUTCOMES, TITLES
from harness.exits import EXIT_FAILED, EXIT_OK, EXIT_UNJUDGED, exit_status
from harness.failpoints import EXIT_HOLD_POINT
from harness.report.model import (
    MUTATION,
    RunInfo,
    SelfCheckRow,
    applied,
    count_verdicts,
    never_applied,
    trials_with_verdict,
)
from harness.report.tables import fault_rows, invariant_catches, window_counts
from harness.runtime.classes import IdempotencyClass
from harness.table_audit import AuditStatus, TableAudit
from harness.words import duration, many

__all__ = [
    "PROGRESS_LINE_EVERY_S",
    "CampaignSummary",
    "ProgressBar",
    "ProgressLines",
    "print_campaign",
    "print_crash_state",
    "print_headline",
    "print_interrupted",
    "print_self_check",
    "print_self_check_skipped",
    "print_start",
    "print_table_audit",
    "print_took",
    "print_trial",
    "print_unreached",
    "progress_bar",
]

# Data (replay lines, evidence, paths) is escaped where it meets markup, and no
# emoji codes: ``sector:zero:0.5`` must print as written, to be pasted back.
_console = Console(highlight=False, soft_wrap=True, emoji=False)
MAX_FAILURES_SHOWN = 10


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} {task.fields[counted]}"),
        TimeElapsedColumn(),
        console=_console,
        transient=False,
    )


class ProgressBar(Protocol):
    """One bar: told the trials planned, then each trial as it comes back."""

    def planned(self, total: int) -> None: ...

    def advanced(self, failed: int) -> None:
        """One more trial came back; ``failed`` of those so far failed."""


class _Bar:
    """The bar on a terminal: rich's, redrawn in place."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self._progress = progress
        self._task = task

    def planned(self, total: int) -> None:
        self._progress.update(self._task, total=total)

    def advanced(self, failed: int) -> None:
        self._progress.update(self._task, advance=1, failed=failed)


PROGRESS_LINE_EVERY_S = 5.0
"""Where the output is no terminal (a CI log, a file), a progress line at most this often."""


class ProgressLines:
    """The bar where the output is no terminal, where nothing is redrawn: a line at most
    every ``PROGRESS_LINE_EVERY_S`` seconds of ``clock`` (trials done, failed or caught,
    rate, time left), and one when the block ends."""

    def __init__(
        self, title: str, counted: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._title = title
        self._counted = counted
        self._clock = clock
        self._started = self._last = clock()
        self._total: int | None = None
        self._done = 0
        self._failed = 0

    def planned(self, total: int) -> None:
        self._total = total

    def advanced(self, failed: int) -> None:
        self._done += 1
        self._failed = failed
        if self._clock() - self._last >= PROGRESS_LINE_EVERY_S:
            self._say(ended=False)

    def ended(self) -> None:
        self._say(ended=True)

    def _say(self, *, ended: bool) -> None:
        now = self._last = self._clock()
        took = now - self._started
        rate = self._done / took if took > 0 else 0.0
        of = "" if self._total is None else f"/{self._total}"
        line = f"{self._title}: {self._done}{of} done, {self._failed} {self._counted}"
        line += f", {rate:.2f} trials/s"
        if ended:
            line += f", took {duration(took)}"
        elif self._total is not None and rate > 0:
            line += f", about {duration((self._total - self._done) / rate)} left"
        _console.print(line, markup=False)


@contextmanager
def progress_bar(
    title: str, *, catching: bool = False, clock: Callable[[], float] = time.monotonic
) -> Iterator[ProgressBar]:
    """A progress bar titled ``title``, shown while the block runs: rich's on a terminal,
    else ``ProgressLines`` (timed by ``clock``). ``catching``: the trials are a broken
    runtime's, whose failures are it being caught (the point of the self-check), so the
    bar counts them as "caught", not "failed"."""
    counted = "caught" if catching else "failed"
    if not _console.is_terminal:
        lines = ProgressLines(title, counted, clock)
        yield lines
        lines.ended()
        return
    with _progress() as progress:
        yield _Bar(progress, progress.add_task(title, total=None, failed=0, counted=counted))


@dataclass(frozen=True, slots=True)
class CampaignSummary:
    results: list[TrialResult]

    def by_invariant(self) -> dict[str, Counter[str]]:
        """Invariant -> its outcomes, and apart its passes with nothing to judge."""
        return count_verdicts(self.results, TITLES)

    def never_applied(self) -> list[str]:
        """Invariants that passed, but in no trial had anything to judge."""
        return never_applied(self.by_invariant())

    @property
    def failures(self) -> list[TrialResult]:
        return [r for r in self.results if r.status == "fail"]

    @property
    def unjudged(self) -> list[TrialResult]:
        """Trials with no failure but some invariant that could not be judged."""
        return [r for r in self.results if r.status == "unknown"]


def print_start(run: RunInfo, workers: int) -> None:
    """The campaign's first lines: its seed, runtime, size and run folder."""
    _console.print(
        f"[bold]chaos campaign[/] seed {run.seed}, runtime {escape(run.runtime)}, "
        f"{len(run.scenarios)} scenarios, {workers} workers"
    )
    _console.print(f"run folder: {run.run_dir}", markup=False)


def print_campaign(summary: CampaignSummary, runtime: str) -> None:
    """The campaign's tables (invariants, kill windows, faults) and its failures."""
    _print_invariants(summary)
    _print_windows(summary)
    _print_faults(summary, runtime)
    _print_failures(summary.failures)
    _print_failures(
        summary.unjudged, "trial that could not be judged", "trials that could not be judged"
    )


def print_pace(trials: int, seconds: float, workers: int, where: Path | None) -> None:
    """How fast the campaign went: its trials per second of wall time, and where they ran."""
    rate = trials / seconds if seconds > 0 else 0.0
    place = "in the run folder, on disk" if where is None else f"under {where}"
    _console.print(
        f"pace: {many(trials, 'trial')} in {seconds:.1f} s, {rate:.1f} trials/s "
        f"({workers} workers, trials run {escape(place)})"
    )


def print_took(total_s: float, campaign_s: float, self_check_s: float | None) -> None:
    """How long the whole command took, and its campaign and self-check apart."""
    parts = f"campaign {duration(campaign_s)}"
    if self_check_s is not None:
        parts += f", self-check {duration(self_check_s)}"
    _console.print(f"took {duration(total_s)} ({parts})")


def print_unreached(runtime: str, trials: int, points: Collection[str]) -> None:
    """The exhaustive trials left out because they arm a point the runtime's own crash-free
    run never reached (a kill there would never fire), by failpoint."""
    if not trials:
        _console.print(f"every failpoint hit of the golden run was reached by {escape(runtime)}")
        return
    by_name = Counter(point.split("@", 1)[0] for point in points)
    named = ", ".join(f"{name} x{n}" for name, n in sorted(by_name.items()))
    _console.print(
        f"left out {trials} exhaustive trials at {len(points)} failpoint hits "
        f"{escape(runtime)} never reached in its crash-free run ({named})"
    )


def print_folder(run_dir: Path, size_bytes: int, kept: int, trials: int) -> None:
    """The run folder's size on disk, and how many trial folders it kept."""
    _console.print(
        f"run folder: {size_bytes / 1e6:.1f} MB on disk; {kept} of {trials} trials kept "
        f"their folder; every trial has its line in {escape(str(run_dir))}/trials.jsonl"
    )


def print_interrupted(completed: int, run_dir: Path) -> None:
    _console.print(
        f"[bold red]INTERRUPTED[/]: kept {completed} completed trials in {escape(str(run_dir))}"
    )


def print_headline(
    status: int, summary: CampaignSummary, run_dir: Path, *, stopped_after: int | None = None
) -> None:
    """The last line (the run's verdict and counts), and the replay of the first failure.

    ``stopped_after``: the campaign was stopped once that many trials had failed
    (``--maxfail``), so the counts are of the trials that ran (those under way when it
    stopped included)."""
    results = [r for r in summary.results if r.spec.crash_state is None]
    kinds = Counter(r.spec.kind for r in results)
    generated = sum(r.spec.generated for r in results)
    tasks = len({(r.spec.scenario, r.spec.seed) for r in results if r.spec.generated})
    early = ""
    if stopped_after is not None:
        early = f" (stopped early: --maxfail {stopped_after} reached)"
    _console.print(
        f"[bold]{HEADLINES[status]}[/]{early}: {many(len(results), 'trial')} "
        f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}"
        + (f"; {generated} of {many(tasks, 'generated task')}" if generated else "")
        + ")"
        + _crash_states(summary)
        + ", "
        f"{_counted(summary.failures, 'failed')}, "
        f"{_counted(summary.unjudged, 'could not be judged')}, "
        f"{many(sum(r.kills for r in results), 'kill')}"
        + _never_applied(summary)
        + f"; report {escape(str(run_dir))}/index.html"
    )
    if summary.failures:
        first = summary.failures[0].spec
        _console.print(f"replay the first failure with: {first.replay_command()}", markup=False)


def _crash_states(summary: CampaignSummary) -> str:
    """The headline's word on the sub-trials that judged more crash states of power cuts."""
    states = [r for r in summary.results if r.spec.crash_state is not None]
    if not states:
        return ""
    cut = len({_parent(r.spec.trial_id) for r in states})
    return (
        f" and {many(len(states), 'more crash state')} of {many(cut, 'trial')} whose power "
        "cut had them (a sub-trial each)"
    )


def _counted(results: list[TrialResult], what: str) -> str:
    """``N failed`` (or ``could not be judged``), saying how many of them are crash states."""
    states = sum(r.spec.crash_state is not None for r in results)
    return f"{len(results)} {what}" + (f" ({states} of them crash states)" if states else "")


def _parent(trial_id: str) -> str:
    """The trial a crash state's sub-trial judges another state of (its id less
    ``+state-<k>``)."""
    return trial_id.rsplit("_state-", 1)[0]


def _never_applied(summary: CampaignSummary) -> str:
    """The headline's word on invariants that passed only with nothing to judge."""
    idle = summary.never_applied()
    return f"; applied to no trial: {', '.join(idle)}" if idle else ""


HEADLINES = {EXIT_OK: "PASS", EXIT_FAILED: "FAIL", EXIT_UNJUDGED: "COULD NOT JUDGE"}


def _print_invariants(summary: CampaignSummary) -> None:
    table = Table(title="invariants over the campaign")
    for column in ("invariant", *OUTCOMES, "applied"):
        table.add_column(column, justify="left" if column == "invariant" else "right")
    for key, counts in summary.by_invariant().items():
        table.add_row(
            f"{key} {TITLES.get(key, key)}",
            *(str(counts[o]) for o in OUTCOMES),
            f"{applied(counts)} of {trials_with_verdict(counts)}",
        )
    _console.print(table)


def _print_windows(summary: CampaignSummary) -> None:
    reached = Counter(
        point
        for res in summary.results
        for r in res.reached
        if (point := r.split(" ")[0]) != EXIT_HOLD_POINT  # counted as "held at exit"
    )
    table = Table(title="where the kills landed")
    table.add_column("random-time kills: window")
    table.add_column("kills", justify="right")
    for window, count in window_counts(summary.results):
        table.add_row(window, str(count))
    for point, n in sorted(reached.items()):
        table.add_row(f"failpoint {point}", str(n))
    _console.print(table)


def _print_faults(summary: CampaignSummary, runtime: str) -> None:
    table = Table(title="faults injected (trials)")
    counted = ("exhaustive", "random", "failed")
    for column in ("fault", "what it does", *counted):
        table.add_column(column, justify="right" if column in counted else "left")
    for row in fault_rows(summary.results, runtime):
        if row.not_applicable is not None:
            table.add_row(row.kind, row.description, "not applicable", "", row.not_applicable)
            continue
        table.add_row(
            row.kind, row.description, str(row.exhaustive), str(row.random), str(row.failed)
        )
    _console.print(table)


def _print_failures(failures: list[TrialResult], what: str = "failure", plural: str = "") -> None:
    """Each failing (or unjudged) trial: the verdicts that made it so, and its replay."""
    for result in failures[:MAX_FAILURES_SHOWN]:
        label = "[red]FAIL[/]" if result.status == "fail" else "[yellow]COULD NOT JUDGE[/]"
        _console.print(
            f"{label} {escape(result.spec.trial_id)} ({escape(result.spec.schedule.describe())})"
        )
        state = result.spec.crash_state
        if state is not None:
            _console.print(
                f"  crash state {state} of the power cut of trial "
                f"{escape(_parent(result.spec.trial_id))}: {escape(_choices(result))}"
            )
        for verdict in result.verdicts:
            if verdict.status == result.status:
                line = f"  {verdict.invariant} {verdict.title}: {verdict.evidence[0]}"
                _console.print(line, markup=False)
        replay = f"  seed {result.spec.seed}; replay: {result.spec.replay_command()}"
        _console.print(replay, markup=False)
    if len(failures) > MAX_FAILURES_SHOWN:
        rest = len(failures) - MAX_FAILURES_SHOWN
        _console.print(f"... and {many(rest, 'more ' + what, plural and 'more ' + plural)}")


def print_self_check_skipped(why: str) -> None:
    """The self-check was asked for, and not run."""
    _console.print(f"self-check not run: {escape(why)}")


def print_self_check(rows: list[SelfCheckRow]) -> None:
    """The self-check's tables: each broken runtime and mutation, then each invariant."""
    table = Table(title="self-check: each broken runtime must be caught")
    for column in ("broken runtime", "expected", "trials", "outcome"):
        table.add_column(column)
    for row in rows:
        trials = str(row.trials) + (f" + {row.sigkill_trials}" if row.sigkill_trials else "")
        table.add_row(row.name, ", ".join(row.expected), trials, escape(row.outcome))
    _console.print(table)
    for row in rows:
        if row.caught is not None:
            where = (
                f"a mutated copy {row.caught.directory}"
                if row.needs_fault == MUTATION
                else f"{row.caught.spec.trial_id}; replay: {row.caught.spec.replay_command()}"
            )
            _console.print(
                f"  {row.name}: caught by {', '.join(row.caught.failed_invariants)} in {where}",
                markup=False,
            )
    _print_every_invariant_fails(rows)


def _print_every_invariant_fails(rows: list[SelfCheckRow]) -> None:
    """Per invariant, the broken runtimes and mutations it caught: each must have one."""
    table = Table(title="self-check: every invariant can fail")
    for column in ("invariant", "caught", "failing alone in"):
        table.add_column(column)
    for row in invariant_catches(rows):
        table.add_row(
            f"{row.key} {row.title}",
            ", ".join(row.caught) or "[red]NOTHING CAUGHT BY IT[/]",
            ", ".join(row.alone) or "—",
        )
    _console.print(table)


def print_trial(result: TrialResult) -> None:
    _console.print(f"trial {result.spec.trial_id}: {result.spec.schedule.describe()}", markup=False)
    _console.print(
        f"folder {result.directory}; {many(result.lives, 'life', 'lives')}, "
        f"{many(result.kills, 'kill')}",
        markup=False,
    )
    # A black box keeps no journal: the invariants that judge one do not apply to it, and
    # share one line per reason, not one line and the same reason each.
    black_box = get_adapter(result.spec.runtime).black_box
    grouped: dict[tuple[str, ...], list[str]] = {}
    for verdict in result.verdicts:
        if black_box and verdict.status == "not-judged":
            grouped.setdefault(verdict.evidence, []).append(verdict.invariant)
            continue
        colour = _COLOURS[verdict.status]
        idle = " (nothing to judge)" if verdict.status == "pass" and not verdict.applied else ""
        _console.print(
            f"[{colour}]{verdict.status:10}[/] {verdict.invariant} {verdict.title}{idle}"
        )
        for line in verdict.evidence if verdict.status != "pass" else ():
            _console.print(f"             {line}", markup=False)
    for evidence, names in grouped.items():
        why = "; ".join(evidence) or "they do not apply"
        _console.print(
            f"[{_COLOURS['not-judged']}]not-judged[/] {escape(' '.join(names))}: {escape(why)}"
        )
    _console.print(f"[bold]{HEADLINES[exit_status([result.status])]}[/]")


def print_crash_state(
    number: int, count: int, result: TrialResult, cuts: list[dict[str, Any]]
) -> None:
    """One crash state's sub-trial: its verdict, the invariants that did not hold, what
    each cut kept, and the command that replays it alone."""
    status = result.status
    failed = [v.invariant for v in result.verdicts if v.status in ("fail", "unknown")]
    colour = _COLOURS.get(status, "white")
    _console.print(
        f"[{colour}]state {number} of {count}: {status.upper()}[/]"
        + (f" ({', '.join(failed)})" if failed else ""),
    )
    for n, cut in enumerate(cuts, 1):
        told = (
            "; ".join(cut.get("choices", ()))
            if cut.get("landed")
            else f"did not land: {cut.get('why', 'no reason given')}"
        )
        states = cut.get("states")
        drawn = "" if cut.get("enumerated", True) else ", drawn from the trial's seed"
        of = f" (of {states} states{drawn})" if states else ""
        _console.print(f"  cut {n}{of}: {told}", markup=False)
    _console.print(f"  replay: {result.spec.replay_command()}", markup=False)


def _choices(result: TrialResult) -> str:
    """What each power cut of a crash state's sub-trial kept, from its events (when its
    folder is kept)."""
    from harness.chaos.trial import power_cuts

    cuts = power_cuts(result.directory) if result.kept else []
    told = ["; ".join(c.get("choices", ())) for c in cuts if c.get("landed")]
    return " | ".join(told) or "its folder went, its replay runs it again"


_COLOURS = {"pass": "green", "fail": "red", "unknown": "yellow", "not-judged": "dim"}


_AUDIT_LABELS: dict[AuditStatus, str] = {
    "ok": "[green]ok[/]",
    "note": "[cyan]note[/]",
    "unjudged": "[yellow]unjudged[/]",
    "unsafe": "[bold red]UNSAFE[/]",
}


def print_table_audit(audit: TableAudit, status: int) -> None:
    """``check-table``: a table per scenario, a row per audited call; then the evidence
    of each verdict that is not ok (unsafe first), and the headline for the exit ``status``."""
    _console.print(f"[bold]tool table {escape(audit.table)}[/] against what its tools do")
    for source in dict.fromkeys(row.source for row in audit.audits):
        rows = [row for row in audit.audits if row.source == source]
        table = Table(title=f"{escape(rows[0].scenario)} ({escape(source)})")
        # Never cut short with an ellipsis: a tool's name and class must be read whole.
        for column in ("step", "tool", "table class", "first call", "replay", "verdict"):
            table.add_column(column, overflow="fold", no_wrap=column in ("step", "tool"))
        table.columns[2].min_width = len(IdempotencyClass.IDEMPOTENT_WRITE.value)
        for row in rows:
            table.add_row(
                escape(row.op_id),
                escape(row.tool),
                escape(row.class_label),
                escape(row.first.summary()),
                escape(row.replay.summary()),
                _AUDIT_LABELS[row.status],
            )
        _console.print(table)
    for kind in ("unsafe", "unjudged", "note"):
        for row in audit.with_status(kind):
            where = f"{row.scenario} {row.op_id} ({row.source})"
            _console.print(
                f"{_AUDIT_LABELS[kind]} {escape(row.tool)}, {escape(row.class_label)}, "
                f"at {escape(where)}"
            )
            for line in row.reasons:
                _console.print(f"  {line}", markup=False)
            for line in row.evidence():
                _console.print(f"    {line}", markup=False)
    tools = {row.tool for row in audit.audits}
    scenarios = {row.source for row in audit.audits}
    unsafe = sorted({row.tool for row in audit.with_status("unsafe")})
    counts = (
        f"{many(len(audit.audits), 'call')} of {many(len(tools), 'tool')} in "
        f"{many(len(scenarios), 'scenario')}; unsafe: {', '.join(unsafe) or 'none'}; "
        f"{len(audit.with_status('unjudged'))} unjudged, "
        f"{many(len(audit.with_status('note')), 'note')}"
    )
    _console.print(f"[bold]{HEADLINES[status]}[/]: {escape(counts)}")
