"""What ``python -m harness chaos`` shows a person: progress, tables, replay lines.

It runs the campaign and the self-check through ``harness.chaos.campaign``,
hands every result to the file writers, and prints; it decides nothing that
the checkers did not decide.
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.agent.broken import BROKEN_RUNTIMES
from harness.chaos.campaign import CampaignConfig, run_trials
from harness.chaos.faults import FAULT_KINDS
from harness.chaos.trial import TrialResult
from harness.check.invariants import TITLES
from harness.check.windows import WINDOWS
from harness.report.files import SelfCheckRow, write_run_reports

__all__ = ["print_trial", "run_chaos"]

_console = Console(highlight=False, soft_wrap=True)
MAX_FAILURES_SHOWN = 10


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        console=_console,
        transient=False,
    )


def _run_with_progress(
    config: CampaignConfig,
    title: str,
    results: list[TrialResult] | None = None,
    *,
    completed: list[TrialResult] | None = None,
    **kwargs: object,
) -> list[TrialResult]:
    """Run trials with a progress bar; results land in ``results`` (and ``completed``)
    as they come, so that an interrupt keeps every completed one."""
    results = [] if results is None else results
    with _progress() as progress:
        task = progress.add_task(title, total=None, failed=0)

        def on_result(result: TrialResult) -> None:
            results.append(result)
            if completed is not None:
                completed.append(result)
            failed = sum(r.status == "fail" for r in results)
            progress.update(task, advance=1, failed=failed)

        run_trials(config, on_result, on_plan=lambda n: progress.update(task, total=n), **kwargs)  # type: ignore[arg-type]
    return results


@dataclass(frozen=True, slots=True)
class CampaignSummary:
    results: list[TrialResult]

    def by_invariant(self) -> dict[str, Counter[str]]:
        table: dict[str, Counter[str]] = {key: Counter() for key in TITLES}
        for result in self.results:
            for verdict in result.verdicts:
                table[verdict.invariant][verdict.status] += 1
        return table

    def windows(self) -> Counter[str]:
        return Counter(w for r in self.results for w in r.windows)

    @property
    def failures(self) -> list[TrialResult]:
        return [r for r in self.results if r.status == "fail"]


def run_chaos(config: CampaignConfig, *, self_check: bool) -> int:
    """The campaign, then the self-check; an interrupt still leaves a report of what completed."""
    _console.print(
        f"[bold]chaos campaign[/] seed {config.seed}, runtime {config.runtime}, "
        f"{len(config.scenarios)} scenarios, {config.workers} workers"
    )
    _console.print(f"run folder: {config.run_dir}")
    results: list[TrialResult] = []
    checks: list[SelfCheckRow] = []
    self_checked: list[TrialResult] = []
    try:
        _run_with_progress(config, "campaign", results)
        summary = CampaignSummary(results)
        _print_invariants(summary)
        _print_windows(summary)
        _print_faults(summary)
        _print_failures(summary.failures)
        if self_check:
            _self_check(config, checks, self_checked)
            _print_self_check(checks)
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM) or broken: keep what completed, say so, go on failing.
        discard_incomplete(config.run_dir, results + self_checked)
        write_run_reports(config, results, checks, interrupted=True)
        _console.print(
            f"[bold red]INTERRUPTED[/]: kept {len(results)} completed trials in {config.run_dir}"
        )
        raise
    write_run_reports(config, results, checks)
    ok = not summary.failures and all(c.as_expected for c in checks)
    kinds = Counter(r.spec.kind for r in results)
    _console.print(
        f"[bold]{'PASS' if ok else 'FAIL'}[/]: {len(results)} trials "
        f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}), "
        f"{len(summary.failures)} failed, "
        f"{sum(r.kills for r in results)} kills; report {config.run_dir}/index.html"
    )
    if summary.failures:
        first = summary.failures[0].spec
        _console.print(f"replay the first failure with: {first.replay_command()}")
    return 0 if ok else 1


def discard_incomplete(run_dir: Path, results: list[TrialResult]) -> None:
    """Remove the folders of trials an interrupt cut short, and of unfinished golden runs.

    A trial counts as completed once its result reached this process: one whose
    worker finished but was stopped before handing it over is not in the report,
    so its folder goes too.
    """
    kept = {result.directory for result in results}
    for trial in (run_dir / "trials").glob("*"):
        if trial not in kept:
            shutil.rmtree(trial, ignore_errors=True)
    for golden in (run_dir / "golden").glob("*"):
        if not (golden / "golden.json").exists():
            shutil.rmtree(golden, ignore_errors=True)


def _print_invariants(summary: CampaignSummary) -> None:
    table = Table(title="invariants over the campaign")
    for column in ("invariant", "pass", "fail", "unknown"):
        table.add_column(column, justify="left" if column == "invariant" else "right")
    for key, counts in summary.by_invariant().items():
        table.add_row(
            f"{key} {TITLES[key]}", str(counts["pass"]), str(counts["fail"]), str(counts["unknown"])
        )
    _console.print(table)


def _print_windows(summary: CampaignSummary) -> None:
    counts = summary.windows()
    reached = Counter(r.split(" ")[0] for res in summary.results for r in res.reached)
    table = Table(title="where the kills landed")
    table.add_column("random-time kills: window")
    table.add_column("kills", justify="right")
    for window in WINDOWS:
        table.add_row(window, str(counts[window]))
    for point, n in sorted(reached.items()):
        table.add_row(f"failpoint {point}", str(n))
    _console.print(table)


def _print_faults(summary: CampaignSummary) -> None:
    table = Table(title="faults injected")
    for column in ("fault", "what it does", "trials", "failed"):
        table.add_column(column, justify="right" if column in ("trials", "failed") else "left")
    for kind, description in FAULT_KINDS.items():
        hit = [r for r in summary.results if kind in r.spec.schedule.fault_kinds]
        failed = sum(r.status == "fail" for r in hit)
        table.add_row(kind, description, str(len(hit)), str(failed))
    _console.print(table)


def _print_failures(failures: list[TrialResult]) -> None:
    for result in failures[:MAX_FAILURES_SHOWN]:
        _console.print(f"[red]FAIL[/] {result.spec.trial_id} ({result.spec.schedule.describe()})")
        for verdict in result.verdicts:
            if verdict.status == "fail":
                _console.print(f"  {verdict.invariant} {verdict.title}: {verdict.evidence[0]}")
        _console.print(f"  seed {result.spec.seed}; replay: {result.spec.replay_command()}")
    if len(failures) > MAX_FAILURES_SHOWN:
        _console.print(f"... and {len(failures) - MAX_FAILURES_SHOWN} more failures")


def _self_check(
    config: CampaignConfig, rows: list[SelfCheckRow], completed: list[TrialResult]
) -> None:
    """Run each broken runtime until the invariant it breaks catches it.

    A mistake that needs a fault beyond SIGKILL must first escape SIGKILL alone
    (on a smaller campaign), then be caught once that fault is added.
    """
    for name, runtime in BROKEN_RUNTIMES.items():
        expected = set(runtime.caught_by)
        broken = replace(config, runtime=name, random_trials=0)

        def caught_as_expected(result: TrialResult, e: set[str] = expected) -> bool:
            return bool(e & set(result.failed_invariants))

        fault = runtime.needs_fault
        alone: list[TrialResult] = []
        if fault != "sigkill":
            alone = _run_with_progress(
                replace(broken, scenarios=config.scenarios[:2]),
                f"self-check {name} (SIGKILL alone)",
                completed=completed,
                stop=caught_as_expected,
                select=lambda spec, f=fault: f not in spec.schedule.fault_kinds,
            )
        results = _run_with_progress(
            broken,
            f"self-check {name}" + ("" if fault == "sigkill" else f" ({fault})"),
            completed=completed,
            stop=caught_as_expected,
            select=None
            if fault == "sigkill"
            else lambda spec, f=fault: f in spec.schedule.fault_kinds,
        )
        rows.append(
            SelfCheckRow(
                name,
                runtime.mistake,
                fault,
                tuple(sorted(expected)),
                len(results),
                next((r for r in results if caught_as_expected(r)), None),
                len(alone),
                next((r for r in alone if caught_as_expected(r)), None),
            )
        )


def _print_self_check(rows: list[SelfCheckRow]) -> None:
    table = Table(title="self-check: each broken runtime must be caught")
    for column in ("broken runtime", "expected", "trials", "outcome"):
        table.add_column(column)
    for row in rows:
        trials = str(row.trials) + (f" + {row.sigkill_trials}" if row.sigkill_trials else "")
        table.add_row(row.name, ", ".join(row.expected), trials, row.outcome)
    _console.print(table)
    for row in rows:
        if row.caught is not None:
            _console.print(
                f"  {row.name}: caught by {', '.join(row.caught.failed_invariants)} "
                f"in {row.caught.spec.trial_id}; replay: "
                f"{row.caught.spec.replay_command()}"
            )


def print_trial(result: TrialResult) -> None:
    _console.print(f"trial {result.spec.trial_id}: {result.spec.schedule.describe()}")
    _console.print(f"folder {result.directory}; {result.lives} lives, {result.kills} kills")
    for verdict in result.verdicts:
        colour = {"pass": "green", "fail": "red", "unknown": "yellow"}[verdict.status]
        _console.print(f"[{colour}]{verdict.status:7}[/] {verdict.invariant} {verdict.title}")
        for line in verdict.evidence if verdict.status != "pass" else ():
            _console.print(f"          {line}")
    _console.print(f"[bold]{result.status.upper()}[/]")
