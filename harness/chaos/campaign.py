"""A campaign: many trials, run in parallel, all derived from one seed.

Phase 1 runs the golden (crash-free) run of every (scenario, seed) the
campaign needs. Phase 2 runs the trials: for each scenario, every failpoint at
every hit its golden run made (the exhaustive enumeration, with kills during
recovery and a tool-table change), plus ``random_trials`` random-time trials,
each with its own scenario, seed and one to three kills.

With ``crash_states`` above 1, a trial whose power cuts drop what was not synced is
followed, in the same worker, by a sub-trial for each other crash state its cut has
(``crash_state_specs``), up to ``crash_states`` in all: how many a cut has is known only
once it ran.

A ``Shard`` (``harness.chaos.shard``) keeps a deterministic share of the
trials (``--shard K/N``): the shards of one campaign are disjoint and together
are the whole campaign.

Every random choice flows from the campaign seed, so the same seed lists the
same trials; the kill moments of random trials are drawn as fractions of the
golden run's working time and stored in each trial's schedule, whose replay
command runs it again.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import itertools
import random
import shutil
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from harness.adapters import Adapter, get_adapter
from harness.agent.plan import Plan, load_plan
from harness.chaos.keep import keeps_folder
from harness.chaos.pool import WorkerPool
from harness.chaos.scenario import load_scenario
from harness.chaos.schedule import (
    PAUSE_HOLD_MS,
    CrashSchedule,
    answer_hits,
    appends_in_batches,
    black_box_schedules,
    exhaustive_schedules,
    not_applicable,
    random_schedule,
    unobserved,
    unobserved_services,
)
from harness.chaos.services import ServiceSpec
from harness.chaos.shard import Shard
from harness.chaos.supervisor import Supervisor, sweep_agents
from harness.chaos.tables import scenario_tables
from harness.chaos.trial import (
    Golden,
    TrialResult,
    TrialSpec,
    golden_dir,
    power_cuts,
    prepare_golden,
    reached_points,
    run_trial,
)
from harness.chaos.workdir import scratch_folder
from harness.failpoints import parse_failpoints
from harness.runtime.classes import ToolClass, ToolTable
from harness.world.store import fold_wal

__all__ = [
    "GENERATED_WEIGHT",
    "Batch",
    "CampaignConfig",
    "Unreached",
    "applicable",
    "crash_state_specs",
    "crash_states_to_judge",
    "exhaustive_specs",
    "generated_scenarios",
    "listed_schedules",
    "not_applicable",
    "random_specs",
    "reach_limited",
    "run_batches",
    "run_trials",
    "sampled",
    "scenario_seed",
    "unreached_points",
]


@dataclass(frozen=True, slots=True)
class CampaignConfig:
    run_dir: Path
    scenarios: tuple[str, ...]
    seed: int
    random_trials: int = 200
    workers: int = 2
    runtime: str = "real"
    restart_budget: int = 8
    timeout_s: float = 60.0
    launch: str = "fork"
    """How incarnations start: forked from a warm worker, or exec'd (``harness.chaos.launch``)."""
    shard: Shard | None = None
    """Run only this shard's trials (the golden runs are all made: specs need them)."""
    workdir: Path | None = None
    """Where trials run before they move to the run folder (``harness.chaos.workdir``):
    a scratch folder is made under it. None: in the run folder itself."""
    keep: str = "all"
    """Which trial folders stay (``harness.chaos.keep``): ``all``, or ``sample`` (those
    that did not pass and a sample of the others; the rest go once checked)."""
    model: str | None = None
    """The scripted model of every trial (``--model``); None: each scenario's own."""
    whole: bool = False
    """Every exhaustive trial of a scenario that caps them (its ``sample``), not a sample."""
    crash_states: int = 1
    """Each trial whose power cuts drop what was not synced is judged over this many crash
    states of its cuts: itself, then up to ``crash_states - 1`` sub-trials
    (``crash_state_specs``)."""
    fs_model: str = "ordered"
    """The file-system model those crash states follow (``harness.chaos.crashstates``)."""
    pause_ms: int = PAUSE_HOLD_MS
    """How long each pause holds a life stopped (``--pause-ms``): past the timeout of the
    engine under test, whose take-over is what a pause is for."""


T = TypeVar("T")


def scenario_seed(campaign_seed: int, scenario: str) -> int:
    """The random seed of a scenario's exhaustive trials: fixed by the campaign's and its name."""
    return random.Random(f"{campaign_seed}:{Path(scenario).stem}").randrange(2**31)


def exhaustive_specs(
    scenario: str,
    seed: int,
    golden: Golden,
    runtime: str = "real",
    model: str | None = None,
    sample: int | None = None,
    reached: Mapping[str, int] | None = None,
    left_out: list[TrialSpec] | None = None,
    listed: Sequence[tuple[str, CrashSchedule]] | None = None,
    pause_ms: int = PAUSE_HOLD_MS,
) -> list[TrialSpec]:
    """Every exhaustive trial the runtime can host: its failpoints, journal faults only for
    a runtime that keeps the journal, power loss for one that keeps files and whose
    programs and the scenario's services the observer can load into (the others are
    not applicable); ``sample`` of them, drawn from ``seed``, when given.

    ``reached``: how many times the runtime's own crash-free run reached each failpoint
    (``reach_limited``); a trial that arms a point past that is left out (it would
    never fire), into ``left_out`` when given. ``listed``: the golden run's
    ``listed_schedules``, when already listed (they do not depend on the runtime);
    ``pause_ms``: how long their pauses hold, when not listed yet."""
    adapter = get_adapter(runtime)
    if listed is None:
        listed = listed_schedules(golden, black_box=adapter.black_box, pause_ms=pause_ms)
    services = load_scenario(scenario).services
    specs = [
        TrialSpec(scenario, seed, schedule, runtime, label, "exhaustive", model)
        for label, schedule in listed
        if applicable(schedule, adapter, services)
    ]
    if adapter.black_box:
        return specs
    if reached is not None:
        if left_out is not None:
            left_out += [spec for spec in specs if unreached_points(spec.schedule, reached)]
        specs = [spec for spec in specs if not unreached_points(spec.schedule, reached)]
    return sampled(specs, sample, seed)


def listed_schedules(
    golden: Golden, *, black_box: bool, pause_ms: int = PAUSE_HOLD_MS
) -> list[tuple[str, CrashSchedule]]:
    """Every exhaustive schedule of a golden run, labelled, before any runtime's
    ``applicable`` keeps its own: a black box's (``black_box_schedules``) or the others';
    their pauses held ``pause_ms``.

    Listed once a process for each golden run (its folder): the campaign, the self-check's
    plan and its stages all list them, and a long run's are tens of thousands."""
    key = (golden.directory.resolve(), black_box, pause_ms)
    listed = _listed.get(key)
    if listed is None:
        listed = _listed[key] = _list_schedules(golden, black_box=black_box, pause_ms=pause_ms)
        while len(_listed) > _LISTED_KEPT:
            del _listed[next(iter(_listed))]
    return list(listed)


_listed: dict[tuple[Path, bool, int], list[tuple[str, CrashSchedule]]] = {}
_LISTED_KEPT = 64


def _list_schedules(
    golden: Golden, *, black_box: bool, pause_ms: int
) -> list[tuple[str, CrashSchedule]]:
    if black_box:
        return list(black_box_schedules(golden.hits, golden.op_at, pause_ms))
    plan = load_plan(golden.directory / "plan.json")
    threads = plan.batch_driver == "threads"
    in_flight_at = _in_flight(golden)
    return list(
        exhaustive_schedules(
            golden.hits,
            _in_flight_safe(golden, in_flight_at),
            None if threads else _batch_call(golden),
            threads=threads,
            disk_full=_appends_in_batches(golden, plan) if threads else (),
            group_writes=_group_writes(golden, plan, threads=threads),
            unsafe_call=_unsafe_call(golden),
            compacts=plan.compact_at is not None,
            reconciled=_reconciled(golden, in_flight_at),
            reconciled_in_life=_reconciled_in_life(golden),
            reusable=_reusable(golden, plan),
            pause_ms=pause_ms,
        )
    )


def _reusable(golden: Golden, plan: Plan) -> Callable[[int], bool]:
    """Whether the call issued at a hit of ``model.issue`` has an earlier plan step of
    another tool or other arguments, whose id the ``reused-id`` fault gives it."""
    steps = list(plan.steps)
    index = {step.op_id: n for n, step in enumerate(steps)}

    def reusable(hit: int) -> bool:
        n = index.get(golden.op_at("model.issue", hit) or "")
        if n is None:  # an id of the model's own making: listed, F says if it acted
            return True
        return any((e.tool, e.args) != (steps[n].tool, steps[n].args) for e in steps[:n])

    return reusable


def reach_limited(runtime: str) -> bool:
    """Whether a runtime's exhaustive trials are limited to the points its own crash-free
    run reached: a user's agent program (``module:``), whose golden run is this
    project's runtime's. A black box's (``cmd:``) golden run is its own already."""
    return runtime.startswith("module:")


def unreached_points(schedule: CrashSchedule, reached: Mapping[str, int]) -> frozenset[str]:
    """The failpoint hits (``name@N``) ``schedule`` arms past what ``reached`` counts."""
    return frozenset(
        f"{spec.name}@{spec.hit}"
        for life in schedule.lives
        if life.failpoints
        for spec in parse_failpoints(life.failpoints)
        if spec.hit is not None and spec.hit > reached.get(spec.name, 0)
    )


@dataclass(frozen=True, slots=True)
class Unreached:
    """What a reach-limited campaign left out: its exhaustive trials that armed a point
    the runtime's crash-free run never reached, and those points (``name@N``)."""

    runtime: str
    trials: int
    points: frozenset[str]


def sampled(specs: list[T], sample: int | None, seed: int) -> list[T]:
    """``sample`` of ``specs`` drawn from ``seed``, in their order (all when None or fewer)."""
    if sample is None or len(specs) <= sample:
        return specs
    kept = sorted(random.Random(f"{seed}:sample").sample(range(len(specs)), sample))
    return [specs[n] for n in kept]


def applicable(
    schedule: CrashSchedule, adapter: Adapter, services: Sequence[ServiceSpec] = ()
) -> bool:
    """Whether every fault of ``schedule`` has something to act on in ``adapter``'s runtime
    (and, for a power loss, whether the file-system observer it is rebuilt from is here
    and can load into the agent and its scenario's ``services``)."""
    if any(not_applicable(kind, adapter, services) is not None for kind in schedule.fault_kinds):
        return False
    if schedule.needs_journal and not adapter.journal:
        return False
    return schedule.failpoint_names <= adapter.failpoints


def _appends_in_batches(
    golden: Golden, plan: Plan, point: str = "journal.append"
) -> tuple[int, ...]:
    """The golden run's hits of ``point`` (appends) made while one of its batches was under
    way."""
    batch_of = {step.op_id: step.batch for step in plan.steps if step.batch is not None}
    spans: dict[int, tuple[float, float]] = {}
    for call in golden.calls:
        batch = batch_of.get(call.op)
        if batch is not None:
            first, last = spans.get(batch, (call.start_ms, call.end_ms))
            spans[batch] = (min(first, call.start_ms), max(last, call.end_ms))
    return appends_in_batches(golden.moments.get(point, ()), tuple(spans.values()))


def _group_writes(golden: Golden, plan: Plan, *, threads: bool) -> tuple[tuple[str, int], ...]:
    """Where a batch's calls write together in the golden run: threads share an fsync
    (``journal.before_fsync``), tasks on an event loop a write (``journal.append``)."""
    point = "journal.before_fsync" if threads else "journal.append"
    return tuple((point, hit) for hit in _appends_in_batches(golden, plan, point))


def _in_flight(golden: Golden) -> Callable[[str, int], tuple[str, ...]]:
    """``golden.in_flight_at``, the same answers from an index of the calls' spans: a long
    plan is asked it for every hit of every point, and a scan of every call each time
    made listing its trials quadratic."""
    order = sorted(range(len(golden.calls)), key=lambda n: golden.calls[n].start_ms)
    starts = [golden.calls[n].start_ms for n in order]
    reach = list(itertools.accumulate((golden.calls[n].end_ms for n in order), max))

    @functools.cache
    def in_flight(failpoint: str, hit: int) -> tuple[str, ...]:
        op = golden.op_at(failpoint, hit)
        if op is None:
            return ()
        moments = golden.moments.get(failpoint, ())
        if not 0 < hit <= len(moments):
            return (op,)
        moment = moments[hit - 1]
        found = []
        at = bisect.bisect_right(starts, moment) - 1
        while at >= 0 and reach[at] >= moment:  # no call before ``at`` lasts to the moment
            call = golden.calls[order[at]]
            if call.op != op and call.end_ms >= moment:
                found.append(order[at])
            at -= 1
        return (op, *(golden.calls[n].op for n in sorted(found)))

    return in_flight


def _in_flight_safe(
    golden: Golden, in_flight_at: Callable[[str, int], tuple[str, ...]] | None = None
) -> Callable[[str, int], bool | None]:
    """Whether the ops in flight at a golden run's hit are retry-safe, by the table it ran
    with: True or False when all of them are (one op, or a batch of one kind), None for
    a batch of both kinds or an op of no plan step."""
    table = ToolTable.shipped() if golden.table is None else ToolTable.load(golden.table)
    plan = load_plan(golden.directory / "plan.json")
    tools = {step.op_id: step.tool for step in plan.steps}
    in_flight_at = in_flight_at or _in_flight(golden)

    def safe(failpoint: str, hit: int) -> bool | None:
        in_flight = in_flight_at(failpoint, hit)
        kinds = {
            _retried(table.classify(tools[op]), plan.clock_step) if op in tools else None
            for op in in_flight
        }
        return kinds.pop() if len(kinds) == 1 else None

    return safe


def _retried(tool_class: ToolClass, clock_step: float | None = None) -> bool:
    """Whether the next life retries an op of this class left running: a keyed tool's key
    is then ``clock_step`` seconds old (the trial's clock moves that much per restart,
    none without one), retried while that is inside its window."""
    window = tool_class.key_window
    return tool_class.retry_safe or (window is not None and (clock_step or 0.0) < window)


def _reconciled(
    golden: Golden, in_flight_at: Callable[[str, int], tuple[str, ...]] | None = None
) -> Callable[[str, int], bool]:
    """Whether every op in flight at a golden run's hit is, left unknown, put to a reconciler
    at the next start: decided VERIFY there (not retried), and its tool's effect can be
    looked up by key (the agent gives such a tool a reconciler)."""
    in_flight_at = in_flight_at or _in_flight(golden)
    safe = _in_flight_safe(golden, in_flight_at)
    plan = load_plan(golden.directory / "plan.json")
    tools = {step.op_id: step.tool for step in plan.steps}

    def reconciled(failpoint: str, hit: int) -> bool:
        in_flight = in_flight_at(failpoint, hit)
        asked = [op in tools and _by_key(plan, tools[op]) for op in in_flight]
        return bool(asked) and all(asked) and safe(failpoint, hit) is False

    return reconciled


def _reconciled_in_life(golden: Golden) -> Callable[[str, int], bool]:
    """Whether the plan call a golden run's hit served, its reply lost, is put to a
    reconciler in the same life: an unsafe call of a tool whose effect can be looked up by
    key, and not keyed (a keyed call is retried with its key instead)."""
    table = ToolTable.shipped() if golden.table is None else ToolTable.load(golden.table)
    plan = load_plan(golden.directory / "plan.json")
    tools = {step.op_id: step.tool for step in plan.steps}

    def asked(failpoint: str, hit: int) -> bool:
        op = golden.op_at(failpoint, hit)
        if op not in tools or not _by_key(plan, tools[op]):
            return False
        snapshot = table.classify(tools[op])
        return not snapshot.retry_safe and not snapshot.keyed

    return asked


def _by_key(plan: Plan, tool: str) -> bool:
    declared = plan.tools.get(tool)
    return declared is not None and declared.by_key


def _unsafe_call(golden: Golden) -> Callable[[str, int], bool]:
    """Whether the plan call a golden run's hit served must not run twice, by the table it
    ran with (a hit of no plan call: False)."""
    table = ToolTable.shipped() if golden.table is None else ToolTable.load(golden.table)
    tools = {step.op_id: step.tool for step in load_plan(golden.directory / "plan.json").steps}

    def unsafe(failpoint: str, hit: int) -> bool:
        op = golden.op_at(failpoint, hit)
        return op in tools and not table.classify(tools[op]).retry_safe

    return unsafe


def _batch_call(golden: Golden) -> Callable[[str, int], str | None]:
    """The batch call a golden run's hit served (its op id), None for any other hit."""
    batched = {
        step.op_id
        for step in load_plan(golden.directory / "plan.json").steps
        if step.batch is not None
    }

    def call(failpoint: str, hit: int) -> str | None:
        op = golden.op_at(failpoint, hit)
        return op if op in batched else None

    return call


GENERATED_WEIGHT = 3
"""How many times as often a random trial picks a scenario whose task is drawn from its
seed (``[generate]``) as one whose task is fixed: each of its picks is a task of its own."""


def generated_scenarios(scenarios: Iterable[str]) -> frozenset[str]:
    """The scenarios whose task is drawn from each trial's seed (``[generate]``)."""
    return frozenset(s for s in scenarios if load_scenario(s).generate is not None)


def random_picks(
    config: CampaignConfig, drawn: frozenset[str] = frozenset()
) -> list[tuple[str, int, random.Random]]:
    """(scenario, seed, its own rng) for each random trial; a scenario of ``drawn`` (whose
    task is generated) is picked ``GENERATED_WEIGHT`` times as often as another.

    Each trial's task is drawn from a seed of its own, but for a scenario that runs a
    sample of its exhaustive trials (``sample``: a run too long to try at every point):
    its random trials keep its exhaustive trials' seed and so their golden run, which a
    fresh seed would make again, with the run proving its checks (seconds each for
    ``long_lived``). Their schedules are still their own."""
    rng = random.Random(config.seed)
    long_runs = {s for s in config.scenarios if load_scenario(s).sample is not None}
    weights = [GENERATED_WEIGHT if s in drawn else 1 for s in config.scenarios]
    picks = []
    for _ in range(config.random_trials):
        if drawn:
            scenario = rng.choices(config.scenarios, weights)[0]
        else:  # the picks campaigns made before any scenario was generated
            scenario = rng.choice(config.scenarios)
        trial_seed = rng.randrange(2**31)
        seed = scenario_seed(config.seed, scenario) if scenario in long_runs else trial_seed
        picks.append((scenario, seed, random.Random(trial_seed)))
    return picks


def random_specs(
    picks: Iterable[tuple[str, int, random.Random]],
    goldens: dict[tuple[str, int], Golden],
    runtime: str = "real",
    model: str | None = None,
    pause_ms: int = PAUSE_HOLD_MS,
) -> list[TrialSpec]:
    specs = []
    adapter = get_adapter(runtime)
    journal = adapter.journal
    # Kills followed by a power cut for any runtime that keeps files, drawn the same on
    # every machine: where the observer cannot be had, F says so (it did not land). A
    # program the observer can never load into (the agent's, a service's) is the system's
    # own, not the machine's: no cut is drawn for it.
    keeps_files = adapter.keeps_files and unobserved(adapter) is None
    seen: dict[str, bool] = {}
    for n, (scenario, seed, rng) in enumerate(picks, 1):
        if scenario not in seen:
            services = load_scenario(scenario).services
            seen[scenario] = keeps_files and unobserved_services(services) is None
        power_loss = seen[scenario]
        golden = goldens[scenario, seed]
        schedule = random_schedule(
            rng,
            golden.working_ms,
            journal=journal,
            hits=golden.hits,
            calls=golden.calls,
            power_loss=power_loss,
            answers=answer_hits(golden.hits, golden.op_at) if adapter.black_box else (),
            pause_ms=pause_ms,
        )
        label = f"random{n:04d}"
        specs.append(TrialSpec(scenario, seed, schedule, runtime, label, "random", model))
    return specs


# -- running in a pool --------------------------------------------------------------------

_worker_supervisor: Supervisor | None = None


def _init_worker(restart_budget: int, timeout_s: float, launch: str) -> None:
    global _worker_supervisor
    _worker_supervisor = Supervisor(
        restart_budget=restart_budget, timeout_s=timeout_s, launch=launch
    )


def _golden_task(args: tuple[str, int, Path, dict[str, Path], str]) -> tuple[str, int, Golden]:
    scenario, seed, directory, tables, runtime = args
    assert _worker_supervisor is not None
    golden = prepare_golden(
        scenario, seed, directory, _worker_supervisor, tables=tables, runtime=runtime
    )
    return scenario, seed, golden


def _reach_task(
    args: tuple[str, int, Path, dict[str, Path], str],
) -> tuple[str, int, dict[str, int]]:
    scenario, seed, directory, tables, runtime = args
    assert _worker_supervisor is not None
    reached = reached_points(
        scenario, seed, directory, _worker_supervisor, tables=tables, runtime=runtime
    )
    return scenario, seed, reached


def reach_dir(run_dir: Path, runtime: str, scenario: str, seed: int) -> Path:
    """Where a run folder keeps a runtime's own crash-free run of ``scenario``."""
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in runtime)
    return run_dir / "reached" / name / f"{Path(scenario).stem}-{seed}"


@dataclass(frozen=True, slots=True)
class _TrialTask:
    spec: TrialSpec
    directory: Path
    """Where its folder is kept, in the run folder."""
    golden: Path
    tables: dict[str, Path]
    scratch: Path | None
    keep: str
    golden_alone: bool
    """Whether no other trial uses its golden run (which then goes with its folder)."""
    crash_states: int = 1
    """How many crash states its cuts are judged over (``crash_state_specs``)."""
    fs_model: str = "ordered"


def _trial_task(task: _TrialTask) -> TrialResult:
    (result,) = _trial_states_task(replace(task, crash_states=1))
    return result


def _trial_states_task(task: _TrialTask) -> list[TrialResult]:
    """The trial, then the sub-trials of its other crash states (as many as its cuts have,
    up to ``task.crash_states`` in all), each kept or dropped as any trial is."""
    first, cuts = _run_kept(task.spec, task.directory, task)
    results = [first]
    count = crash_states_to_judge(task.spec, cuts, task.crash_states, task.fs_model)
    for sub in crash_state_specs(task.spec, count, task.fs_model)[1:]:
        results.append(_run_kept(sub, task.directory.parent / sub.trial_id, task)[0])
    if task.golden_alone and not any(r.kept for r in results):
        shutil.rmtree(task.golden, ignore_errors=True)
    return results


def _run_kept(
    spec: TrialSpec, directory: Path, task: _TrialTask
) -> tuple[TrialResult, list[dict[str, Any]]]:
    """Run one trial, its folder kept in ``directory`` (moved there from the scratch
    folder) or dropped (``harness.chaos.keep``); with it, its power cuts' events, read
    before its folder may go."""
    assert _worker_supervisor is not None
    ran_in = directory if task.scratch is None else task.scratch / spec.trial_id
    ran = run_trial(spec, ran_in, task.golden, _worker_supervisor, tables=task.tables)
    cuts = power_cuts(ran.directory) if spec.schedule.cuts_drop else []
    if not keeps_folder(ran, task.keep):
        shutil.rmtree(ran.directory)
        return replace(ran, directory=directory, kept=False), cuts
    if task.keep != "all":
        _fold_world(ran.directory)  # checked: nobody writes it again
    if task.scratch is None:
        return ran, cuts
    if directory.exists():
        shutil.rmtree(directory)
    shutil.move(ran.directory, directory)
    return replace(ran, directory=directory), cuts


def crash_states_to_judge(
    spec: TrialSpec, cuts: Sequence[Mapping[str, Any]], wanted: int, model: str = "ordered"
) -> int:
    """How many crash states a trial that ran is judged over, itself included: 1 unless its
    cuts drop (``CrashSchedule.cuts_drop``: a cut that tears is a state of its own) and
    keep something unsynced to choose from. One cut: as many states as it has, up to
    ``wanted``. Several: ``wanted``, since sub-trial ``k`` takes state ``k`` of each and a
    later cut's states depend on what an earlier one kept."""
    if wanted <= 1 or not spec.schedule.cuts_drop:
        return 1
    counts = [int(c.get("crash_states", {}).get(model, 1)) for c in cuts if c.get("landed")]
    if not counts or all(n == 1 for n in counts):
        return 1
    return min(wanted, counts[0]) if len(counts) == 1 else wanted


def crash_state_specs(spec: TrialSpec, count: int, model: str = "ordered") -> list[TrialSpec]:
    """The trial and its sub-trials: crash states 1 to ``count - 1`` of its cuts
    (``power-loss:state:<k>``, in ``model``), each labelled ``+state-<k>``, whose replay
    command runs that state alone."""
    return [spec] + [
        replace(
            spec,
            schedule=spec.schedule.at_crash_state(number, model),
            label=f"{spec.label}+state-{number}",
        )
        for number in range(1, count)
    ]


def run_trials(
    config: CampaignConfig,
    on_result: Callable[[TrialResult], None],
    *,
    on_plan: Callable[[int], None] | None = None,
    stop: Callable[[TrialResult], bool] | None = None,
    select: Callable[[TrialSpec], bool] | None = None,
    on_unreached: Callable[[Unreached], None] | None = None,
) -> list[TrialResult]:
    """Run the whole campaign; ``select`` keeps some trials, ``stop`` may end it early.

    ``on_plan`` is told how many trials were listed; ``on_result`` is told each trial
    and, after it, each sub-trial of its other crash states (``config.crash_states``):
    those are not listed ahead, since how many a cut has is known once it ran.

    For a ``reach_limited`` runtime ``on_unreached`` is told what was left out
    (before ``select`` and the shard), once the trials are listed.

    On any exception (an interrupt included) every worker and every agent is
    stopped before it propagates; results already handed to ``on_result`` stay.
    """
    with contextlib.ExitStack() as stack:
        scratch = None
        if config.workdir is not None:
            scratch = stack.enter_context(scratch_folder(config.workdir))
            # Before the folder goes: an agent whose worker died is found by its folder,
            # and the golden runs, made there too, move to the run folder.
            stack.callback(_move_goldens, scratch, config.run_dir)
            stack.callback(sweep_agents, scratch)  # runs first: callbacks run last in, first out
        return _run_trials(config, on_result, on_plan, stop, select, scratch, on_unreached)


@dataclass(frozen=True, slots=True)
class Batch:
    """Trials run as ``run_trials`` runs them, beside other batches on one pool: the
    exhaustive trials of ``config`` (its runtime, scenarios and seed) that ``select``
    keeps, in order; ``stop`` ends the batch as it ends a campaign."""

    config: CampaignConfig
    select: Callable[[TrialSpec], bool] | None = None
    stop: Callable[[TrialResult], bool] | None = None


def run_batches(
    config: CampaignConfig,
    batches: Sequence[Batch],
    on_result: Callable[[int, TrialResult], None],
    *,
    on_done: Callable[[int, list[TrialResult]], None] | None = None,
) -> list[list[TrialResult]]:
    """Run every batch on one pool of ``config``'s workers; each batch's results, in order.

    Each batch keeps at most the pool's window of its trials in flight and hands
    them over in order, as ``run_trials`` does: a ``stop`` ends it after the very
    trials it ends a campaign after (those in flight finish and count). The pool
    takes later batches' trials meanwhile, so it never waits at a batch's end, and
    a batch lists its scenarios' trials only as far as it runs them.

    ``on_result(batch, result)`` is told each result in its batch's order, ``on_done``
    each batch and its results once it has ended. The batches' golden runs are this project's
    runtime's, made (or reused) once for all of them.
    """
    for batch in batches:
        made = batch.config
        if made.random_trials or made.shard is not None or reach_limited(made.runtime):
            raise ValueError("a batch runs a whole exhaustive campaign of a runtime of ours")
        if get_adapter(made.runtime).black_box:
            raise ValueError("a batch runs a runtime of ours, not a black box")
    with contextlib.ExitStack() as stack:
        scratch = None
        if config.workdir is not None:
            scratch = stack.enter_context(scratch_folder(config.workdir))
            stack.callback(_move_goldens, scratch, config.run_dir)
            stack.callback(sweep_agents, scratch)
        pool = WorkerPool(
            config.workers, _init_worker, (config.restart_budget, config.timeout_s, config.launch)
        )
        try:
            results = _BatchRunner(config, batches, pool, scratch).run(on_result, on_done)
            pool.close()
            return results
        except BaseException:
            pool.abort()
            raise


class _BatchRunner:
    """The batches' trials, listed as they are needed and handed to one pool."""

    def __init__(
        self,
        config: CampaignConfig,
        batches: Sequence[Batch],
        pool: WorkerPool,
        scratch: Path | None,
    ) -> None:
        self.batches = batches
        self.pool = pool
        self.scratch = scratch
        scenarios = sorted({s for batch in batches for s in batch.config.scenarios})
        self.drawn = generated_scenarios(scenarios)
        self.tables = {s: scenario_tables(config.run_dir / "tables", s) for s in scenarios}
        seeds = sorted(
            {(s, scenario_seed(b.config.seed, s)) for b in batches for s in b.config.scenarios}
        )
        tasks = [
            (s, seed, _golden_home(config.run_dir, scratch, s, seed), self.tables[s], "real")
            for s, seed in seeds
        ]
        self.goldens = {(s, seed): g for s, seed, g in pool.map(_golden_task, tasks)}
        self._listed: dict[tuple[str, int], list[tuple[str, CrashSchedule]]] = {}
        self._samples: dict[str, int | None] = {}

    def tasks(self, batch: Batch) -> Iterator[_TrialTask]:
        """The batch's trials, as ``_run_trials`` lists them, a scenario at a time."""
        made = batch.config
        for s in made.scenarios:
            seed = scenario_seed(made.seed, s)
            golden = self.goldens[s, seed]
            if (s, seed) not in self._listed:  # the same for every runtime: listed once
                self._listed[s, seed] = listed_schedules(
                    golden, black_box=False, pause_ms=made.pause_ms
                )
            if s not in self._samples:
                self._samples[s] = load_scenario(s).sample
            sample = None if made.whole else self._samples[s]
            specs = exhaustive_specs(
                s, seed, golden, made.runtime, made.model, sample, listed=self._listed[s, seed]
            )
            for spec in specs:
                spec = replace(spec, generated=s in self.drawn)
                if batch.select is None or batch.select(spec):
                    folder = made.run_dir / "trials" / spec.trial_id
                    yield _TrialTask(
                        spec,
                        folder,
                        golden.directory,
                        self.tables[s],
                        self.scratch,
                        made.keep,
                        False,
                    )

    def run(
        self,
        on_result: Callable[[int, TrialResult], None],
        on_done: Callable[[int, list[TrialResult]], None] | None,
    ) -> list[list[TrialResult]]:
        window = self.pool.window
        streams = [_Stream(self.tasks(batch)) for batch in self.batches]
        owner: dict[int, tuple[int, int]] = {}  # the pool's task number -> (batch, position)
        in_flight = 0
        ended = [False] * len(streams)
        while True:
            for n, stream in enumerate(streams):  # the earliest batches first
                while in_flight < window and stream.can_submit(window):
                    task = stream.take()
                    if task is None:
                        break
                    owner[self.pool.submit(_trial_task, task)] = (n, stream.submitted - 1)
                    in_flight += 1
            for n, stream in enumerate(streams):
                if not ended[n] and stream.finished:
                    ended[n] = True
                    if on_done is not None:
                        on_done(n, stream.results)
            if in_flight == 0:
                return [stream.results for stream in streams]
            index, result = self.pool.next_result()
            in_flight -= 1
            n, position = owner.pop(index)
            stream = streams[n]
            stream.done[position] = result
            stop = self.batches[n].stop
            while len(stream.results) in stream.done:
                at = len(stream.results)
                ready = stream.done.pop(at)
                stream.results.append(ready)
                on_result(n, ready)
                if stream.limit is None and stop is not None and stop(ready):
                    # What run_trials has in flight when it stops: it runs no further.
                    stream.limit = at + window


class _Stream:
    """One batch's progress: its trials submitted, its results in order, where it stops."""

    def __init__(self, tasks: Iterator[_TrialTask]) -> None:
        self._tasks = tasks
        self._listed_all = False
        self.submitted = 0
        self.results: list[TrialResult] = []
        self.done: dict[int, TrialResult] = {}
        self.limit: int | None = None

    def can_submit(self, window: int) -> bool:
        if self._listed_all or self.submitted - len(self.results) >= window:
            return False
        return self.limit is None or self.submitted < self.limit

    def take(self) -> _TrialTask | None:
        task = next(self._tasks, None)
        if task is None:
            self._listed_all = True
            return None
        self.submitted += 1
        return task

    @property
    def finished(self) -> bool:
        """Every trial it is to run came back."""
        stopped = self._listed_all or (self.limit is not None and self.submitted >= self.limit)
        return stopped and len(self.results) == self.submitted


def _fold_world(folder: Path) -> None:
    """A kept folder's world in one file (``fold_wal``): the same rows, a third the size."""
    db = folder / "world.db"
    if db.exists():
        # Only space is at stake: a world the trial left unreadable (its verdicts say
        # so) stays as it is.
        with contextlib.suppress(sqlite3.Error, OSError):
            fold_wal(db)


def _golden_home(run_dir: Path, scratch: Path | None, scenario: str, seed: int) -> Path:
    """Where a golden run is made: in the scratch folder, unless the run folder already
    has it (an earlier campaign of this run made it: it is reused, not made again)."""
    kept = golden_dir(run_dir, scenario, seed)
    if scratch is None or (kept / "golden.json").exists():
        return kept
    return golden_dir(scratch, scenario, seed)


def _move_goldens(scratch: Path, run_dir: Path) -> None:
    """The golden runs made in ``scratch``, moved to where ``golden_dir`` finds them."""
    for made in sorted((scratch / "golden").glob("*")):
        target = run_dir / "golden" / made.name
        if target.exists():  # an unfinished one an interrupt left
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.move(made, target)
        except OSError:  # cut short by an interrupt: an unfinished one the report drops
            shutil.rmtree(target, ignore_errors=True)


def _reached(
    pool: WorkerPool, config: CampaignConfig, tables: dict[str, dict[str, Path]]
) -> dict[str, dict[str, int]]:
    """Scenario -> how many times the runtime's own crash-free run reached each point, for
    a ``reach_limited`` runtime (none for the others)."""
    if not reach_limited(config.runtime):
        return {}
    tasks = []
    for s in config.scenarios:
        seed = scenario_seed(config.seed, s)
        tasks.append((s, seed, reach_dir(config.run_dir, config.runtime, s, seed), tables[s]))
    return {
        s: hits
        for s, _, hits in pool.map(
            _reach_task, [(s, seed, d, t, config.runtime) for s, seed, d, t in tasks]
        )
    }


def _run_trials(
    config: CampaignConfig,
    on_result: Callable[[TrialResult], None],
    on_plan: Callable[[int], None] | None,
    stop: Callable[[TrialResult], bool] | None,
    select: Callable[[TrialSpec], bool] | None,
    scratch: Path | None,
    on_unreached: Callable[[Unreached], None] | None = None,
) -> list[TrialResult]:
    pool = WorkerPool(
        config.workers, _init_worker, (config.restart_budget, config.timeout_s, config.launch)
    )
    try:
        drawn = generated_scenarios(config.scenarios)
        picks = random_picks(config, drawn)
        tables = {s: scenario_tables(config.run_dir / "tables", s) for s in config.scenarios}
        wanted = [(s, scenario_seed(config.seed, s)) for s in config.scenarios]
        wanted += [(s, seed) for s, seed, _ in picks]
        homes = {(s, seed): _golden_home(config.run_dir, scratch, s, seed) for s, seed in wanted}
        # A golden run made now that only one random trial uses goes with its folder.
        made_now = {key for key, home in homes.items() if not (home / "golden.json").exists()}
        golden_tasks = [
            (s, seed, homes[s, seed], tables[s], config.runtime) for s, seed in sorted(homes)
        ]
        goldens = {(s, seed): g for s, seed, g in pool.map(_golden_task, golden_tasks)}
        reached = _reached(pool, config, tables)
        specs: list[TrialSpec] = []
        left_out: list[TrialSpec] = []
        for s in config.scenarios:
            seed = scenario_seed(config.seed, s)
            sample = None if config.whole else load_scenario(s).sample
            golden = goldens[s, seed]
            specs += exhaustive_specs(
                s,
                seed,
                golden,
                config.runtime,
                config.model,
                sample,
                reached.get(s),
                left_out,
                pause_ms=config.pause_ms,
            )
        if on_unreached is not None and reach_limited(config.runtime):
            points = frozenset().union(
                *(unreached_points(spec.schedule, reached[spec.scenario]) for spec in left_out)
            )
            on_unreached(Unreached(config.runtime, len(left_out), points))
        specs += random_specs(picks, goldens, config.runtime, config.model, config.pause_ms)
        specs = [replace(spec, generated=spec.scenario in drawn) for spec in specs]
        if config.shard is not None:
            specs = [spec for spec in specs if config.shard.keeps(spec)]
        if select is not None:
            specs = [spec for spec in specs if select(spec)]
        if on_plan is not None:
            on_plan(len(specs))
        uses = Counter((spec.scenario, spec.seed) for spec in specs)
        tasks = [
            _TrialTask(
                spec,
                config.run_dir / "trials" / spec.trial_id,
                goldens[spec.scenario, spec.seed].directory,
                tables[spec.scenario],
                scratch,
                config.keep,
                spec.kind == "random"
                and uses[spec.scenario, spec.seed] == 1
                and (spec.scenario, spec.seed) in made_now,
                config.crash_states,
                config.fs_model,
            )
            for spec in specs
        ]

        def stops(ran: list[TrialResult]) -> bool:
            # Told every result, a trial's crash states included: a stop may count them.
            assert stop is not None
            return any([stop(result) for result in ran])

        results = []
        for ran in pool.map(_trial_states_task, tasks, stop=None if stop is None else stops):
            for result in ran:
                results.append(result)
                on_result(result)
        pool.close()
        if config.keep != "all":
            for golden in goldens.values():  # no trial reads them any more
                _fold_world(golden.directory)
        return results
    except BaseException:
        pool.abort()
        raise
