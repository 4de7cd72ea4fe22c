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

from harness.adapters import get_adapter
from harness.agent.broken import BROKEN_RUNTIMES
from harness.chaos.campaign import CampaignConfig, golden_dir, run_trials
from harness.chaos.faults import FAULT_KINDS
from harness.chaos.mutations import MUTATIONS
from harness.chaos.schedule import JOURNAL_FAULTS
from harness.chaos.trial import TrialResult
from harness.check.invariants import OUTCOMES, TITLES, check_trial
from harness.check.windows import WINDOWS
from harness.exits import EXIT_FAILED, EXIT_OK, EXIT_UNJUDGED, exit_status
from harness.report.files import MUTATION, SelfCheckRow, write_run_reports
from harness.runtime.failpoints import EXIT_HOLD_POINT

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

    @property
    def unjudged(self) -> list[TrialResult]:
        """Trials with no failure but some invariant that could not be judged."""
        return [r for r in self.results if r.status == "unknown"]


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
        _print_faults(summary, config.runtime)
        _print_failures(summary.failures)
        _print_failures(summary.unjudged, "trials that could not be judged")
        if self_check:
            passing = [r for r in results if r.status == "pass"]
            _self_check(config, checks, self_checked, passing)
            _print_self_check(checks)
        # Inside the try: an interrupt while the reports are written still leaves
        # them, marked interrupted.
        write_run_reports(config, results, checks)
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM) or broken: keep what completed, say so, go on failing.
        discard_incomplete(config.run_dir, results + self_checked)
        write_run_reports(config, results, checks, interrupted=True)
        _console.print(
            f"[bold red]INTERRUPTED[/]: kept {len(results)} completed trials in {config.run_dir}"
        )
        raise
    status = exit_status(
        [r.status for r in results] + ["fail" for c in checks if not c.as_expected]
    )
    kinds = Counter(r.spec.kind for r in results)
    _console.print(
        f"[bold]{HEADLINES[status]}[/]: {len(results)} trials "
        f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}), "
        f"{len(summary.failures)} failed, {len(summary.unjudged)} could not be judged, "
        f"{sum(r.kills for r in results)} kills; report {config.run_dir}/index.html"
    )
    if summary.failures:
        first = summary.failures[0].spec
        _console.print(f"replay the first failure with: {first.replay_command()}")
    return status


HEADLINES = {EXIT_OK: "PASS", EXIT_FAILED: "FAIL", EXIT_UNJUDGED: "COULD NOT JUDGE"}


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
    for column in ("invariant", *OUTCOMES):
        table.add_column(column, justify="left" if column == "invariant" else "right")
    for key, counts in summary.by_invariant().items():
        table.add_row(f"{key} {TITLES[key]}", *(str(counts[o]) for o in OUTCOMES))
    _console.print(table)


def _print_windows(summary: CampaignSummary) -> None:
    counts = summary.windows()
    reached = Counter(
        point
        for res in summary.results
        for r in res.reached
        if (point := r.split(" ")[0]) != EXIT_HOLD_POINT  # counted as "held at exit"
    )
    table = Table(title="where the kills landed")
    table.add_column("random-time kills: window")
    table.add_column("kills", justify="right")
    for window in WINDOWS:
        table.add_row(window, str(counts[window]))
    for point, n in sorted(reached.items()):
        table.add_row(f"failpoint {point}", str(n))
    _console.print(table)


def _print_faults(summary: CampaignSummary, runtime: str) -> None:
    table = Table(title="faults injected")
    for column in ("fault", "what it does", "trials", "failed"):
        table.add_column(column, justify="right" if column in ("trials", "failed") else "left")
    keeps_journal = get_adapter(runtime).journal
    for kind, description in FAULT_KINDS.items():
        if kind in JOURNAL_FAULTS and not keeps_journal:
            table.add_row(kind, description, "not applicable", f"{runtime} keeps no journal")
            continue
        hit = [r for r in summary.results if kind in r.spec.schedule.fault_kinds]
        failed = sum(r.status == "fail" for r in hit)
        table.add_row(kind, description, str(len(hit)), str(failed))
    _console.print(table)


def _print_failures(failures: list[TrialResult], what: str = "failures") -> None:
    """Each failing (or unjudged) trial: the verdicts that made it so, and its replay."""
    for result in failures[:MAX_FAILURES_SHOWN]:
        label = "[red]FAIL[/]" if result.status == "fail" else "[yellow]COULD NOT JUDGE[/]"
        _console.print(f"{label} {result.spec.trial_id} ({result.spec.schedule.describe()})")
        for verdict in result.verdicts:
            if verdict.status == result.status:
                _console.print(f"  {verdict.invariant} {verdict.title}: {verdict.evidence[0]}")
        _console.print(f"  seed {result.spec.seed}; replay: {result.spec.replay_command()}")
    if len(failures) > MAX_FAILURES_SHOWN:
        _console.print(f"... and {len(failures) - MAX_FAILURES_SHOWN} more {what}")


def _self_check(
    config: CampaignConfig,
    rows: list[SelfCheckRow],
    completed: list[TrialResult],
    passing: list[TrialResult],
) -> None:
    """Run each broken runtime until the invariant it breaks catches it, then the mutations.

    A mistake that needs a fault beyond SIGKILL must first escape SIGKILL alone
    (on a smaller campaign), then be caught once that fault is added. Each
    mutation damages a copy of one of the campaign's ``passing`` trials.
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
    rows += _mutation_rows(config, passing)


def _mutation_rows(config: CampaignConfig, passing: list[TrialResult]) -> list[SelfCheckRow]:
    """Damage a copy of a passing trial per mutation; its invariant must fail on the copy."""
    rows = []
    for mutation in MUTATIONS:
        fit = next((r for r in passing if mutation.fits(r)), None)
        caught = None
        if fit is not None:
            copy = mutation.copy_and_apply(fit, config.run_dir / "self-check")
            golden = golden_dir(config.run_dir, fit.spec.scenario, fit.spec.seed)
            verdicts = check_trial(
                copy,
                golden,
                restart_budget=config.restart_budget,
                offers=get_adapter(fit.spec.runtime).evidence,
            )
            mutated = replace(
                fit,
                spec=replace(fit.spec, label=f"{fit.spec.label}+mutation-{mutation.name}"),
                directory=copy,
                verdicts=verdicts,
            )
            caught = mutated if mutation.invariant in mutated.failed_invariants else None
        rows.append(
            SelfCheckRow(
                f"mutation {mutation.name}",
                mutation.damage,
                MUTATION,
                (mutation.invariant,),
                0 if fit is None else 1,
                caught,
            )
        )
    return rows


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
            where = (
                f"a mutated copy {row.caught.directory}"
                if row.needs_fault == MUTATION
                else f"{row.caught.spec.trial_id}; replay: {row.caught.spec.replay_command()}"
            )
            _console.print(
                f"  {row.name}: caught by {', '.join(row.caught.failed_invariants)} in {where}"
            )
    _print_every_invariant_fails(rows)


def _print_every_invariant_fails(rows: list[SelfCheckRow]) -> None:
    """Per invariant, the broken runtimes and mutations it caught: each must have one."""
    table = Table(title="self-check: every invariant can fail")
    for column in ("invariant", "caught", "failing alone in"):
        table.add_column(column)
    for key in TITLES:
        if key == "F":
            continue  # not a promise of the runtime: a fault that did not land
        caught = [r for r in rows if r.caught is not None and key in r.caught.failed_invariants]
        alone = [r.name for r in caught if r.caught and r.caught.failed_invariants == (key,)]
        table.add_row(
            f"{key} {TITLES[key]}",
            ", ".join(r.name for r in caught) or "[red]NOTHING CAUGHT BY IT[/]",
            ", ".join(alone) or "—",
        )
    _console.print(table)


def print_trial(result: TrialResult) -> None:
    _console.print(f"trial {result.spec.trial_id}: {result.spec.schedule.describe()}")
    _console.print(f"folder {result.directory}; {result.lives} lives, {result.kills} kills")
    for verdict in result.verdicts:
        colour = _COLOURS[verdict.status]
        _console.print(f"[{colour}]{verdict.status:10}[/] {verdict.invariant} {verdict.title}")
        for line in verdict.evidence if verdict.status != "pass" else ():
            _console.print(f"             {line}")
    _console.print(f"[bold]{HEADLINES[exit_status([result.status])]}[/]")


_COLOURS = {"pass": "green", "fail": "red", "unknown": "yellow", "not-judged": "dim"}
