"""The self-check as data, and its runner: every broken runtime must be caught as expected.

``plan_self_check`` turns the two tables, every broken runtime of
``harness.agent.broken`` (each with ``caught_by``, the invariants expected to
catch it, ``needs_fault``, the fault that can expose it, and its ``mistake``)
and every mutation of ``harness.chaos.mutations`` (each with its invariant),
into a list of ``BrokenCheck``: for each broken runtime the stages of trials it
must escape and the stage that must catch it (or why the selected scenarios
cannot expose it). ``run_self_check`` runs them in that order and gives the
rows (``SelfCheckRow``), the mutations' last.

Each broken runtime runs until the invariant it breaks catches it. One that
needs more than SIGKILL (a fault, calls at once, threads, a scripted model)
must first escape every trial without that need, then be caught once it is
met; the docs' self-check page tells each case. Each mutation damages a copy
of one of the campaign's passing trials, and its invariant must fail on it.
"""

from __future__ import annotations

import functools
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from harness.adapters import get_adapter
from harness.agent.broken import BROKEN_RUNTIMES, BrokenRuntime
from harness.agent.plan import load_plan
from harness.chaos.campaign import Batch, CampaignConfig, exhaustive_specs, scenario_seed
from harness.chaos.mutations import MUTATIONS, Mutation
from harness.chaos.scenario import BatchStep, load_scenario
from harness.chaos.shapes import plan_shapes
from harness.chaos.supervisor import Supervisor
from harness.chaos.tables import scenario_tables
from harness.chaos.trial import TrialResult, TrialSpec, golden_dir, load_golden, run_trial
from harness.check.invariants import check_trial
from harness.check.journal import read_journal, settles
from harness.report.model import BATCH, MODEL, MUTATION, THREADS, SelfCheckRow
from harness.runtime.classes import ToolTable

__all__ = [
    "RERUNS",
    "BrokenCheck",
    "Runner",
    "Stage",
    "plan_self_check",
    "run_self_check",
]


class Runner(Protocol):
    """How the self-check's batches are run (the command's progress bar around
    ``run_batches``): results land in ``completed`` as they come, ``on_done`` is told
    each batch that ended and its results; the batches' results, in order."""

    def __call__(
        self,
        config: CampaignConfig,
        title: str,
        batches: Sequence[Batch],
        *,
        completed: list[TrialResult],
        on_done: Callable[[int, list[TrialResult]], None] | None = None,
    ) -> list[list[TrialResult]]: ...


@dataclass(frozen=True, slots=True)
class Stage:
    """One run of a broken runtime's trials: its progress title, its scenarios, and which
    of their trials (``select``; None: all)."""

    title: str
    scenarios: tuple[str, ...]
    select: Callable[[TrialSpec], bool] | None = None


@dataclass(frozen=True, slots=True)
class BrokenCheck:
    """What the self-check runs for one broken runtime, in order: the stages it must
    escape, then the one that must catch it; or why it is not run at all."""

    name: str
    runtime: type[BrokenRuntime]
    fault: str
    """The row's fault column: the fault (or ``batch``, ``threads``, ``model:NAME``) that
    exposes the mistake."""
    escape: tuple[Stage, ...] = ()
    catch: Stage | None = None
    not_applicable: str | None = None
    """Why the selected scenarios cannot expose the mistake (then nothing runs)."""


def plan_self_check(config: CampaignConfig) -> list[BrokenCheck]:
    """Every broken runtime's check, in ``BROKEN_RUNTIMES``'s order; read from the
    scenarios and the campaign's golden runs (which must be made)."""
    finishes = _golden_finishes(config)
    checks = []
    for name, runtime in BROKEN_RUNTIMES.items():
        if runtime.needs_threads:
            checks.append(_threads_check(config, name, runtime))
        elif runtime.needs_model is not None:
            checks.append(_model_check(config, name, runtime))
        else:
            checks.append(_plain_check(config, finishes, name, runtime))
    return checks


def run_self_check(
    config: CampaignConfig,
    rows: list[SelfCheckRow],
    completed: list[TrialResult],
    passing: list[TrialResult],
    run: Runner,
) -> None:
    """Run each broken runtime until the invariant it breaks catches it, then the mutations.

    Every stage of every broken runtime is one batch (``run_batches``), all on one pool:
    each stage runs and stops as it would alone, while the pool takes the next stages'
    trials instead of waiting at each stage's end. Rows land in ``rows``, in the plan's
    order, and trials in ``completed`` as they come (an interrupt keeps them). Each
    mutation damages a copy of one of the campaign's ``passing`` trials.
    """
    checks = plan_self_check(config)
    batches: list[Batch] = []
    owned: list[range] = []  # each check's batches
    for check in checks:
        first = len(batches)
        if check.not_applicable is None and check.catch is not None:
            # Each scenario's own model: a --model that id identity cannot follow would get
            # every broken runtime caught for a mistake that is not its own.
            broken = replace(config, runtime=check.name, random_trials=0, model=None)
            caught = _caught_as_expected(check.runtime)
            for stage in (*check.escape, check.catch):
                batches.append(
                    Batch(replace(broken, scenarios=stage.scenarios), stage.select, caught)
                )
        owned.append(range(first, len(batches)))
    ended: dict[int, list[TrialResult]] = {}

    first_row = len(rows)

    def add_rows() -> None:
        # The rows of the checks whose batches all ended, in order (an interrupt keeps them).
        while (at := len(rows) - first_row) < len(checks) and all(n in ended for n in owned[at]):
            rows.append(_row(checks[at], [ended[n] for n in owned[at]]))

    def on_done(batch: int, results: list[TrialResult]) -> None:
        ended[batch] = results
        add_rows()

    add_rows()
    if batches:
        run(config, "self-check", batches, completed=completed, on_done=on_done)
    rows += _mutation_rows(config, passing)


def _caught_as_expected(runtime: type[BrokenRuntime]) -> Callable[[TrialResult], bool]:
    expected = set(runtime.caught_by)
    return lambda result: bool(expected & set(result.failed_invariants))


def _row(check: BrokenCheck, stages: list[list[TrialResult]]) -> SelfCheckRow:
    """A broken runtime's row, from the results of its stages (the escaping ones, then
    the catching one), or why it did not run."""
    runtime = check.runtime
    if check.not_applicable is not None or check.catch is None:
        return SelfCheckRow(
            check.name,
            runtime.mistake,
            check.fault,
            tuple(sorted(runtime.caught_by)),
            0,
            None,
            not_applicable=check.not_applicable,
        )
    alone = [result for stage in stages[:-1] for result in stage]
    caught = _caught_as_expected(runtime)
    return _ran_row(check.name, runtime, check.fault, stages[-1], alone, caught)


def _golden_finishes(config: CampaignConfig) -> list[tuple[str, bool]]:
    """Every settling finish of the selected scenarios' golden runs, as (kind, succeeded),
    ``("compacts", True)`` for each whose plan compacts the journal (``compact_at``) and
    ``("keyed", True)`` for each with a tool whose provider deduplicates by key and
    ``("reconciled", True)`` for each with a tool whose effect can be looked up by key,
    and ``(shape, True)`` for each shape of equal calls its plan has
    (``harness.chaos.shapes.plan_shapes``)."""
    return [
        found
        for scenario in config.scenarios
        for found in _finishes_of(
            golden_dir(config.run_dir, scenario, scenario_seed(config.seed, scenario)), scenario
        )
    ]


@functools.lru_cache(maxsize=64)
def _finishes_of(golden: Path, scenario: str) -> tuple[tuple[str, bool], ...]:
    """``_golden_finishes`` of one scenario's golden run, read once: every broken runtime
    that needs a step asks it of every scenario."""
    found = []
    for entry in read_journal(golden / "journal").entries:
        if entry.kind == "finish" and settles(entry):
            found.append(("finish", bool(entry.payload["succeeded"])))
    plan = load_plan(golden / "plan.json")
    table_path = load_scenario(scenario).table_path
    table = ToolTable.shipped() if table_path is None else ToolTable.load(table_path)
    found += [(shape, True) for shape in plan_shapes(plan, table)]
    if plan.compact_at is not None:
        found.append(("compacts", True))
    if any(tool.dedupe == "key" for tool in plan.tools.values()):
        found.append(("keyed", True))
    if any(tool.by_key for tool in plan.tools.values()):
        found.append(("reconciled", True))
    return tuple(found)


def _plain_check(
    config: CampaignConfig,
    finishes: list[tuple[str, bool]],
    name: str,
    runtime: type[BrokenRuntime],
) -> BrokenCheck:
    """A mistake SIGKILL or one fault exposes, in any scenario or in those with batches,
    or with what a step of the scenario does (``needs_step``)."""
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
        return BrokenCheck(name, runtime, fault, not_applicable=f"it needs {needs}")
    if runtime.needs_batch:
        plain = tuple(s for s in config.scenarios if s not in batched)
        escape = [Stage(f"self-check {name} (without batches)", _by_cost(config, plain)[:1])]
        if batch_fault:
            batched = _by_cost(config, batched, without=fault)
            escape.append(
                Stage(
                    f"self-check {name} (batches, without {fault})",
                    batched[:1],
                    _without(fault),
                )
            )
        catch = Stage(
            f"self-check {name} (batches" + (f", {fault})" if batch_fault else ")"),
            batched,
            _with(fault) if batch_fault else None,
        )
        return BrokenCheck(name, runtime, fault, tuple(escape), catch)
    # The scenarios that can expose the mistake (a compaction's, those that compact).
    exposing = tuple(
        s
        for s in config.scenarios
        if runtime.needs_step is None
        or runtime.exposed_by(_golden_finishes(replace(config, scenarios=(s,))))
    )
    escape = []
    if fault != "sigkill":
        # Without the fault, in the one of those scenarios with the fewest such trials, then
        # with it, that scenario first: the fault alone must make the difference.
        exposing = _by_cost(config, exposing, without=fault)
        escape.append(Stage(f"self-check {name} (without {fault})", exposing[:1], _without(fault)))
    # Those scenarios first: the verdict is the same, it only comes sooner.
    rest = tuple(s for s in config.scenarios if s not in exposing)
    catch = Stage(
        f"self-check {name}" + ("" if fault == "sigkill" else f" ({fault})"),
        exposing + rest,
        None if fault == "sigkill" else _with(fault),
    )
    return BrokenCheck(name, runtime, fault, tuple(escape), catch)


def _threads_check(config: CampaignConfig, name: str, runtime: type[BrokenRuntime]) -> BrokenCheck:
    """A mistake only a batch on threads can expose (``needs_threads``): it must escape
    every trial of a scenario without (every fault) and, when it also needs a fault,
    a threaded scenario's trials without that fault; then be caught in theirs with it."""
    scenarios = config.scenarios
    fault = runtime.needs_fault
    label = THREADS if fault == "sigkill" else f"{THREADS}+{fault}"
    threaded = tuple(s for s in scenarios if _has_threads(s, runtime.needs_duplicates))
    if not threaded:
        what = "with duplicate delivery " if runtime.needs_duplicates else ""
        needs = f"a batch on threads {what}(scenarios/threaded_service.toml has one)"
        return BrokenCheck(name, runtime, label, not_applicable=f"it needs {needs}")
    plain = tuple(s for s in scenarios if s not in threaded)
    escape = [Stage(f"self-check {name} (without threads)", _by_cost(config, plain)[:1])]
    if fault != "sigkill":
        threaded = _by_cost(config, threaded, without=fault)
        escape.append(
            Stage(f"self-check {name} (threads without {fault})", threaded[:1], _without(fault))
        )
    catch = Stage(
        f"self-check {name} ({label})", threaded, None if fault == "sigkill" else _with(fault)
    )
    return BrokenCheck(name, runtime, label, tuple(escape), catch)


_MODEL_SCENARIOS = {
    "replan": "scenarios/replan_calls.toml",
    "drift": "scenarios/drift_payments.toml",
}
"""A shipped scenario of each model a broken runtime may need, named where none is selected."""


def _model_check(config: CampaignConfig, name: str, runtime: type[BrokenRuntime]) -> BrokenCheck:
    """A mistake only one scripted model can expose (``needs_model``): it must escape every
    trial of a scenario that knows calls by content under another model (every fault),
    then be caught in a scenario of that model."""
    model = str(runtime.needs_model)
    label = f"{MODEL}:{model}"
    found = {s: load_scenario(s) for s in config.scenarios}
    modelled = tuple(s for s, scenario in found.items() if scenario.model == model)
    if not modelled:
        one = _MODEL_SCENARIOS.get(model)
        needs = f"a scenario of the {model} model" + (f" ({one} is one)" if one else "")
        return BrokenCheck(name, runtime, label, not_applicable=f"it needs {needs}")
    others = tuple(
        s
        for s, scenario in found.items()
        if scenario.identity == "content" and scenario.model != model
    )
    escape = (Stage(f"self-check {name} (without {model})", _by_cost(config, others)[:1]),)
    return BrokenCheck(
        name, runtime, label, escape, Stage(f"self-check {name} ({model})", modelled)
    )


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


def _by_cost(
    config: CampaignConfig, scenarios: tuple[str, ...], *, without: str | None = None
) -> tuple[str, ...]:
    """``scenarios`` by how many of their exhaustive trials there are (those ``without``
    the fault, when named), fewest first (ties in their order): a stage a broken runtime
    must escape runs the first alone. The proof is the same in any of them (every trial of
    a scenario that can expose the mistake, without what exposes it), and the escape
    stages are most of the self-check's trials. A scenario that runs a sample of its
    trials (``sample``) comes after those that run every one: a sample is not every trial."""
    left_out = frozenset() if without is None else _kinds(without)

    def cost(scenario: str) -> tuple[bool, int]:
        found = _exhaustive(config.run_dir, scenario, scenario_seed(config.seed, scenario))
        if found is None:  # no golden run (a scenario the campaign left out): last
            return True, sys.maxsize
        capped, _, kinds = found
        return capped and not config.whole, sum(not left_out & k for k in kinds)

    return tuple(sorted(scenarios, key=cost))


@functools.lru_cache(maxsize=64)
def _exhaustive(
    run_dir: Path, scenario: str, seed: int
) -> tuple[bool, tuple[TrialSpec, ...], tuple[frozenset[str], ...]] | None:
    """Whether the scenario caps its exhaustive trials (``sample``), all of them and the
    faults of each; None before its golden run is made. Read once: every check's stages
    ask."""
    golden = load_golden(golden_dir(run_dir, scenario, seed))
    if golden is None:
        return None
    capped = load_scenario(scenario).sample is not None
    specs = tuple(exhaustive_specs(scenario, seed, golden))
    return capped, specs, tuple(spec.schedule.fault_kinds for spec in specs)


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
