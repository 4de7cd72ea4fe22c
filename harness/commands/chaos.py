"""``python -m harness chaos``: the default campaign, then the self-check.

The campaign runs, against the runtime under test, every failpoint at every
hit of every scenario plus random-time kills (``harness.chaos.campaign``).
The self-check is the data of two tables: every broken runtime of
``harness.agent.broken`` (each with ``caught_by``, the invariants expected to
catch it, ``needs_fault``, the fault that can expose it, and its ``mistake``)
and every mutation of ``harness.chaos.mutations`` (each with its invariant).
Each broken runtime is run until the invariant it breaks catches it; one
that needs a fault beyond SIGKILL must first escape every trial without that
fault (SIGKILL and every other fault, on a smaller campaign), then be caught
once that fault is added; one that only calls run at once can expose
(``needs_batch``) must escape the scenarios without batches, then be caught in
one with them; one that only a batch on threads can expose (``needs_threads``)
must escape the scenarios without threads, then be caught in one with them
(under its fault, which the threaded scenario's other trials must not show it
without); one that only a scripted model can expose (``needs_model``: a model that
re-orders its calls) must escape every trial of the scenarios that know calls by
content under another model, then be caught in one of that model; one of calls
at once that also needs a fault (a cancel) must escape
every trial without that fault, in the scenarios with batches too. Each mutation
damages a copy of one of the campaign's passing trials, and its invariant
must fail on the copy.

The results go to the console (``harness.report.console``) and to the run
folder's files (``harness.report.files``). Exit 0 only if every trial passes
and every broken runtime is caught as expected; an interrupt still leaves a
report of what completed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from harness.adapters import get_adapter
from harness.agent.broken import BROKEN_RUNTIMES, BrokenRuntime
from harness.agent.plan import load_plan
from harness.chaos.campaign import CampaignConfig, run_trials, scenario_seed
from harness.chaos.mutations import MUTATIONS, Mutation
from harness.chaos.pool import WorkerRefusal
from harness.chaos.scenario import BatchStep, load_scenario
from harness.chaos.supervisor import Supervisor, sweep_agents
from harness.chaos.tables import scenario_tables
from harness.chaos.trial import TrialResult, TrialSpec, golden_dir, run_trial
from harness.check.invariants import check_trial
from harness.check.journal import read_journal, settles
from harness.commands.options import (
    add_keep_option,
    add_model_option,
    add_shard_option,
    add_workdir_option,
    campaign_config,
    count,
    positive_int,
    run_info,
)
from harness.exits import exit_status
from harness.report.console import (
    CampaignSummary,
    print_campaign,
    print_folder,
    print_headline,
    print_interrupted,
    print_pace,
    print_self_check,
    print_start,
    progress_bar,
)
from harness.report.files import discard_incomplete, folder_bytes, write_run_reports
from harness.report.model import BATCH, MODEL, MUTATION, THREADS, SelfCheckRow

__all__ = ["add_parser", "run", "run_chaos", "run_with_progress"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    chaos: argparse.ArgumentParser = sub.add_parser(
        "chaos", help="run the default campaign and the self-check"
    )
    chaos.add_argument("--scenarios", default="scenarios", help="folder of scenario files")
    chaos.add_argument("--seed", type=int, default=None, help="campaign seed (default: random)")
    chaos.add_argument(
        "--random",
        type=count,
        default=200,
        dest="random_trials",
        help="number of random-time trials",
    )
    chaos.add_argument("--workers", type=positive_int, default=os.cpu_count() or 2)
    chaos.add_argument("--runtime", default="real", help="runtime under test")
    chaos.add_argument("--reports", default="reports", help="where run folders go")
    chaos.add_argument("--no-self-check", action="store_true")
    chaos.add_argument(
        "--whole",
        action="store_true",
        help="every exhaustive trial of a scenario that caps them (its 'sample'), as audit runs",
    )
    chaos.add_argument(
        "--self-check",
        action="store_true",
        help="run the self-check after a black box's campaign too (a cmd: runtime's "
        "campaign leaves it out: it tests the harness, not the agent)",
    )
    chaos.add_argument(
        "--launch",
        choices=("fork", "exec"),
        default="fork",
        help="start incarnations by forking a warm worker, or by exec",
    )
    chaos.add_argument(
        "--only", action="append", default=[], help="limit to scenarios with this name (repeatable)"
    )
    add_shard_option(chaos)
    add_workdir_option(chaos)
    add_keep_option(chaos)
    add_model_option(chaos)
    return chaos


def run(args: argparse.Namespace) -> int:
    config = campaign_config(args)
    wanted = args.self_check or not get_adapter(config.runtime).black_box
    try:
        return run_chaos(
            config, self_check=wanted and not args.no_self_check and config.shard is None
        )
    finally:
        sweep_agents(config.run_dir)


def run_chaos(config: CampaignConfig, *, self_check: bool) -> int:
    """The campaign, then the self-check; an interrupt still leaves a report of what completed."""
    info = run_info(config)
    print_start(info, config.workers)
    results: list[TrialResult] = []
    checks: list[SelfCheckRow] = []
    self_checked: list[TrialResult] = []
    try:
        started = time.monotonic()
        run_with_progress(config, "campaign", results)
        print_pace(len(results), time.monotonic() - started, config.workers, config.workdir)
        summary = CampaignSummary(results)
        print_campaign(summary, config.runtime)
        if self_check:
            passing = [r for r in results if r.status == "pass"]
            _self_check(config, checks, self_checked, passing)
            print_self_check(checks)
        # Inside the try: an interrupt while the reports are written still leaves
        # them, marked interrupted.
        write_run_reports(info, results, checks)
    except WorkerRefusal:
        if results:
            raise
        # Refused before any trial (a scenario whose checks do not hold): bad input,
        # one line from the command line, and no run folder left behind.
        shutil.rmtree(config.run_dir, ignore_errors=True)
        raise
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM) or broken: keep what completed, say so, go on failing.
        discard_incomplete(config.run_dir, results + self_checked)
        write_run_reports(info, results, checks, interrupted=True)
        print_interrupted(len(results), config.run_dir)
        raise
    status = exit_status(
        [r.status for r in results] + ["fail" for c in checks if not c.as_expected]
    )
    kept = sum(r.kept for r in results)
    print_folder(config.run_dir, folder_bytes(config.run_dir), kept, len(results))
    print_headline(status, summary, config.run_dir)
    return status


def run_with_progress(
    config: CampaignConfig,
    title: str,
    results: list[TrialResult] | None = None,
    *,
    completed: list[TrialResult] | None = None,
    stop: Callable[[TrialResult], bool] | None = None,
    select: Callable[[TrialSpec], bool] | None = None,
) -> list[TrialResult]:
    """Run trials with a progress bar; results land in ``results`` (and ``completed``)
    as they come, so that an interrupt keeps every completed one."""
    results = [] if results is None else results
    with progress_bar(title) as bar:

        def on_result(result: TrialResult) -> None:
            results.append(result)
            if completed is not None:
                completed.append(result)
            bar.advanced(failed=sum(r.status == "fail" for r in results))

        run_trials(config, on_result, on_plan=bar.planned, stop=stop, select=select)
    return results


def _golden_finishes(config: CampaignConfig) -> list[tuple[str, bool]]:
    """Every settling finish of the selected scenarios' golden runs, as (kind, succeeded),
    ``("compacts", True)`` for each whose plan compacts the journal (``compact_at``) and
    ``("keyed", True)`` for each with a tool whose provider deduplicates by key."""
    found = []
    for scenario in config.scenarios:
        journal = golden_dir(config.run_dir, scenario, scenario_seed(config.seed, scenario))
        for entry in read_journal(journal / "journal").entries:
            if entry.kind == "finish" and settles(entry):
                found.append(("finish", bool(entry.payload["succeeded"])))
        plan = load_plan(journal / "plan.json")
        if plan.compact_at is not None:
            found.append(("compacts", True))
        if any(tool.dedupe == "key" for tool in plan.tools.values()):
            found.append(("keyed", True))
    return found


def _self_check(
    config: CampaignConfig,
    rows: list[SelfCheckRow],
    completed: list[TrialResult],
    passing: list[TrialResult],
) -> None:
    """Run each broken runtime until the invariant it breaks catches it, then the mutations.

    A mistake that needs a fault beyond SIGKILL must first escape every trial without
    that fault (on a smaller campaign), then be caught once that fault is added. Each
    mutation damages a copy of one of the campaign's ``passing`` trials.
    """
    finishes = _golden_finishes(config)
    for name, runtime in BROKEN_RUNTIMES.items():
        expected = set(runtime.caught_by)
        # Each scenario's own model: a --model that id identity cannot follow would get
        # every broken runtime caught for a mistake that is not its own.
        broken = replace(config, runtime=name, random_trials=0, model=None)
        if runtime.needs_threads:
            rows.append(_threads_row(broken, name, runtime, completed))
            continue
        if runtime.needs_model is not None:
            rows.append(_model_row(broken, name, runtime, completed))
            continue
        # A mistake of calls at once that also needs a fault (a cancel) is held to that
        # fault: it must escape every trial without it, in scenarios with batches too.
        batch_fault = runtime.needs_batch and runtime.needs_fault != "sigkill"
        fault = BATCH if runtime.needs_batch and not batch_fault else runtime.needs_fault
        batched = tuple(s for s in config.scenarios if runtime.needs_batch and _has_batch(s))
        needs = runtime.needs_step
        if runtime.needs_batch and not batched:
            needs = "a batch step (scenarios/parallel_phone.toml has some)"
        elif needs is not None and runtime.exposed_by(finishes):
            needs = None
        if needs is not None:
            rows.append(
                SelfCheckRow(
                    name,
                    runtime.mistake,
                    fault,
                    tuple(sorted(expected)),
                    0,
                    None,
                    not_applicable=f"it needs {needs}",
                )
            )
            continue

        def caught_as_expected(result: TrialResult, e: set[str] = expected) -> bool:
            return bool(e & set(result.failed_invariants))

        alone: list[TrialResult] = []
        if runtime.needs_batch:
            plain = tuple(s for s in config.scenarios if s not in batched)
            alone = run_with_progress(
                replace(broken, scenarios=plain[:2]),
                f"self-check {name} (without batches)",
                completed=completed,
                stop=caught_as_expected,
            )
            if batch_fault:
                alone += run_with_progress(
                    replace(broken, scenarios=batched),
                    f"self-check {name} (batches, without {fault})",
                    completed=completed,
                    stop=caught_as_expected,
                    select=_without(fault),
                )
            results = run_with_progress(
                replace(broken, scenarios=batched),
                f"self-check {name} (batches" + (f", {fault})" if batch_fault else ")"),
                completed=completed,
                stop=caught_as_expected,
                select=_with(fault) if batch_fault else None,
            )
        else:
            # The scenarios that can expose the mistake (a compaction's, those that compact).
            exposing = tuple(
                s
                for s in config.scenarios
                if runtime.needs_step is None
                or runtime.exposed_by(_golden_finishes(replace(config, scenarios=(s,))))
            )
            if fault != "sigkill":
                # Without the fault, in those scenarios: the fault alone must make the difference.
                alone = run_with_progress(
                    replace(broken, scenarios=exposing[:2]),
                    f"self-check {name} (without {fault})",
                    completed=completed,
                    stop=caught_as_expected,
                    select=_without(fault),
                )
            # Those scenarios first: the verdict is the same, it only comes sooner.
            rest = tuple(s for s in config.scenarios if s not in exposing)
            results = run_with_progress(
                replace(broken, scenarios=exposing + rest),
                f"self-check {name}" + ("" if fault == "sigkill" else f" ({fault})"),
                completed=completed,
                stop=caught_as_expected,
                select=None if fault == "sigkill" else _with(fault),
            )
        rows.append(_ran_row(name, runtime, fault, results, alone, caught_as_expected))
    rows += _mutation_rows(config, passing)


def _ran_row(
    name: str,
    runtime: type[BrokenRuntime],
    fault: str,
    results: list[TrialResult],
    alone: list[TrialResult],
    caught: Callable[[TrialResult], bool],
) -> SelfCheckRow:
    """The self-check's row of a broken runtime that ran: the trials that were to catch it
    and the first that did, the trials it was to escape and the first that caught it."""
    return SelfCheckRow(
        name,
        runtime.mistake,
        fault,
        tuple(sorted(runtime.caught_by)),
        len(results),
        next((r for r in results if caught(r)), None),
        len(alone),
        next((r for r in alone if caught(r)), None),
    )


def _threads_row(
    broken: CampaignConfig, name: str, runtime: type[BrokenRuntime], completed: list[TrialResult]
) -> SelfCheckRow:
    """A mistake only a batch on threads can expose (``needs_threads``): it must escape
    every trial of the scenarios without (every fault) and, when it also needs a fault,
    the threaded scenarios' trials without that fault; then be caught in theirs with it."""
    expected = set(runtime.caught_by)
    fault = runtime.needs_fault
    label = THREADS if fault == "sigkill" else f"{THREADS}+{fault}"
    threaded = tuple(s for s in broken.scenarios if _has_threads(s, runtime.needs_duplicates))
    if not threaded:
        what = "with duplicate delivery " if runtime.needs_duplicates else ""
        needs = f"a batch on threads {what}(scenarios/threaded_service.toml has one)"
        expected_by = tuple(sorted(expected))
        return SelfCheckRow(
            name, runtime.mistake, label, expected_by, 0, None, not_applicable=f"it needs {needs}"
        )

    def caught_as_expected(result: TrialResult) -> bool:
        return bool(expected & set(result.failed_invariants))

    plain = tuple(s for s in broken.scenarios if s not in threaded)
    alone = run_with_progress(
        replace(broken, scenarios=plain[:2]),
        f"self-check {name} (without threads)",
        completed=completed,
        stop=caught_as_expected,
    )
    if fault != "sigkill":
        alone += run_with_progress(
            replace(broken, scenarios=threaded),
            f"self-check {name} (threads without {fault})",
            completed=completed,
            stop=caught_as_expected,
            select=_without(fault),
        )
    results = run_with_progress(
        replace(broken, scenarios=threaded),
        f"self-check {name} ({label})",
        completed=completed,
        stop=caught_as_expected,
        select=None if fault == "sigkill" else _with(fault),
    )
    return _ran_row(name, runtime, label, results, alone, caught_as_expected)


def _model_row(
    broken: CampaignConfig, name: str, runtime: type[BrokenRuntime], completed: list[TrialResult]
) -> SelfCheckRow:
    """A mistake only one scripted model can expose (``needs_model``): it must escape every
    trial of the scenarios that know calls by content under another model (every fault),
    then be caught in a scenario of that model."""
    expected = set(runtime.caught_by)
    model = str(runtime.needs_model)
    label = f"{MODEL}:{model}"
    found = {s: load_scenario(s) for s in broken.scenarios}
    modelled = tuple(s for s, scenario in found.items() if scenario.model == model)
    if not modelled:
        needs = f"a scenario of the {model} model (scenarios/replan_calls.toml is one)"
        expected_by = tuple(sorted(expected))
        return SelfCheckRow(
            name, runtime.mistake, label, expected_by, 0, None, not_applicable=f"it needs {needs}"
        )

    def caught_as_expected(result: TrialResult) -> bool:
        return bool(expected & set(result.failed_invariants))

    others = tuple(
        s
        for s, scenario in found.items()
        if scenario.identity == "content" and scenario.model != model
    )
    alone = run_with_progress(
        replace(broken, scenarios=others),
        f"self-check {name} (without {model})",
        completed=completed,
        stop=caught_as_expected,
    )
    results = run_with_progress(
        replace(broken, scenarios=modelled),
        f"self-check {name} ({model})",
        completed=completed,
        stop=caught_as_expected,
    )
    return _ran_row(name, runtime, label, results, alone, caught_as_expected)


def _has_threads(scenario: str, duplicates: bool) -> bool:
    """Whether a scenario runs batches on threads (and delivers its writes twice, when
    ``duplicates``)."""
    found = load_scenario(scenario)
    on_threads = found.batch_driver == "threads" and any(
        isinstance(step, BatchStep) for step in found.steps
    )
    return on_threads and (found.duplicate_delivery or not duplicates)


def _has_batch(scenario: str) -> bool:
    """Whether a scenario of the campaign has a step of calls issued together, run on the
    event loop (the batches on threads are ``_has_threads``'s: a forgotten await is no
    mistake there)."""
    found = load_scenario(scenario)
    return found.batch_driver == "async" and any(isinstance(s, BatchStep) for s in found.steps)


def _with(fault: str) -> Callable[[TrialSpec], bool]:
    """Keep the trials whose schedule has ``fault`` (one of them, for ``a or b``)."""
    kinds = _kinds(fault)
    return lambda spec: bool(kinds & spec.schedule.fault_kinds)


def _without(fault: str) -> Callable[[TrialSpec], bool]:
    """Keep the trials whose schedule has no ``fault`` (none of them, for ``a or b``)."""
    kinds = _kinds(fault)
    return lambda spec: not kinds & spec.schedule.fault_kinds


def _kinds(fault: str) -> frozenset[str]:
    """The faults a broken runtime's ``needs_fault`` names: one, or ``lost-reply or
    lost-request`` when either exposes its mistake."""
    return frozenset(fault.split(" or "))


RERUNS = 40
"""How many passing trials whose folder went (``--keep sample``) a mutation may run again
to find one it fits, when no kept folder does."""


def _run_again_to_fit(
    config: CampaignConfig, passing: list[TrialResult], mutation: Mutation
) -> TrialResult | None:
    """A passing exhaustive trial that ``mutation`` fits, run again in the self-check folder
    (its own folder went with the sample); those killed inside a call first."""
    gone = [r for r in passing if not r.kept and r.spec.kind == "exhaustive"]
    inside = ("op.after_intent", "op.mid_effect", "op.reply", "op.after_effect")
    gone.sort(key=lambda r: not any(where.startswith(inside) for where in r.reached))
    supervisor = Supervisor(
        restart_budget=config.restart_budget, timeout_s=config.timeout_s, launch="exec"
    )
    for result in gone[:RERUNS]:
        scenario = result.spec.scenario
        golden = golden_dir(config.run_dir, scenario, result.spec.seed)
        folder = config.run_dir / "self-check" / "again" / result.spec.trial_id
        # The tables its campaign handed it: the scenario's own, when it has one.
        tables = scenario_tables(config.run_dir / "tables", scenario)
        again = run_trial(result.spec, folder, golden, supervisor, tables=tables)
        if again.status == "pass" and mutation.fits(again):
            return again
        shutil.rmtree(folder)
    return None


def _mutation_rows(config: CampaignConfig, passing: list[TrialResult]) -> list[SelfCheckRow]:
    """Damage a copy of a passing trial per mutation; its invariant must fail on the copy."""
    rows = []
    for mutation in MUTATIONS:
        fit = next((r for r in passing if r.kept and mutation.fits(r)), None)
        if fit is None:
            fit = _run_again_to_fit(config, passing, mutation)
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
