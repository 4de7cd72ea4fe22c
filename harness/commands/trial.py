"""``python -m harness trial SCENARIO --seed N``: one trial, against a fresh golden run.

Given scenario, seed, runtime, schedule and, when it is not the scenario's,
the model (the line a failing trial prints),
it makes the golden run, runs the trial, prints its verdicts
(``harness.report.console.print_trial``) and exits with its status.

With ``--crash-states N`` a schedule's power losses are each judged over N crash
states of the same cut (``power-loss:state:K``, ``harness.chaos.crashstates``): one
sub-trial per state, run again from its start, each printed with its verdict and the
command that replays it alone.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.adapters import get_adapter
from harness.chaos.crashstates import MODELS
from harness.chaos.schedule import CrashSchedule, unobserved, unobserved_services
from harness.commands.options import (
    RUNTIME_HELP,
    add_fs_model_option,
    add_launch_option,
    add_model_option,
    add_reports_option,
    add_timeout_option,
    check_black_box,
    check_model,
    check_reports,
    check_runtime,
    run_id,
    scenario_runtime,
)
from harness.exits import exit_status
from harness.runtime.errors import HarnessError

if TYPE_CHECKING:
    from harness.chaos.supervisor import Supervisor
    from harness.chaos.trial import TrialSpec

__all__ = ["add_parser", "run", "run_one_trial"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    trial: argparse.ArgumentParser = sub.add_parser(
        "trial",
        help="run one trial",
        description="One trial (scenario, seed, runtime, schedule: the line a failing trial "
        "prints), against a fresh golden run; exit 0 held, 1 failed, 3 could not judge.",
    )
    trial.add_argument(
        "scenario_file",
        nargs="?",
        default=None,
        metavar="SCENARIO",
        help="the scenario file (or give it as --scenario FILE)",
    )
    trial.add_argument(
        "--scenario",
        default=None,
        dest="scenario_option",
        metavar="FILE",
        help="the scenario file, as on the other commands",
    )
    trial.add_argument(
        "--seed", type=int, required=True, help="the trial's seed (the scenario's Faker draws)"
    )
    trial.add_argument("--runtime", default=None, help=RUNTIME_HELP)
    trial.add_argument(
        "--schedule",
        default="[]",
        help="the crash schedule as JSON, one object per life (default: [] for no fault)",
    )
    trial.add_argument(
        "--crash-states",
        type=_positive,
        default=None,
        metavar="N",
        help="judge the schedule's power losses over N crash states of each cut, a "
        "sub-trial each (the first loses every unsynced change)",
    )
    add_fs_model_option(trial, MODELS)
    add_reports_option(trial)
    add_launch_option(trial)
    add_model_option(trial)
    add_timeout_option(trial)
    return trial


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


def run(args: argparse.Namespace) -> int:
    if args.scenario_file is not None and args.scenario_option is not None:
        raise HarnessError("trial: give the scenario once, as SCENARIO or as --scenario FILE")
    scenario = args.scenario_file or args.scenario_option
    if scenario is None:
        raise HarnessError("trial: which scenario? give SCENARIO or --scenario FILE")
    return run_one_trial(
        scenario,
        args.seed,
        args.runtime,
        args.schedule,
        args.reports,
        args.launch,
        model=args.model,
        timeout=args.timeout,
        crash_states=args.crash_states,
        fs_model=args.fs_model,
    )


def run_one_trial(
    scenario: str,
    seed: int,
    runtime: str | None,
    schedule_json: str,
    reports: str,
    launch: str = "fork",
    *,
    model: str | None = None,
    timeout: float | None = None,
    crash_states: int | None = None,
    fs_model: str = "ordered",
) -> int:
    """Run one trial in a new folder under ``reports``, print it; its exit status.

    ``model`` replaces the scenario's scripted model (None: the scenario's own);
    ``crash_states``: that many sub-trials, one per crash state of its power losses, in
    the file-system model ``fs_model``.
    """
    from harness.chaos.scenario import load_scenario
    from harness.chaos.supervisor import Supervisor
    from harness.chaos.tables import scenario_tables
    from harness.chaos.trial import TrialSpec, prepare_golden, run_trial
    from harness.report.console import print_trial

    services = load_scenario(scenario).services
    runtime = scenario_runtime(runtime, [scenario])
    check_runtime(runtime)
    check_model(runtime, model)
    try:
        schedule = CrashSchedule.from_json(schedule_json)
    except ValueError as exc:
        raise HarnessError(f"--schedule: {exc}") from None
    if crash_states is not None and "power-loss" not in schedule.fault_kinds:
        raise HarnessError("--crash-states: the schedule has no power loss to judge over states")
    if fs_model != "ordered" and crash_states is None:
        raise HarnessError("--fs-model: the model of crash states, given with --crash-states")
    if "power-loss" in schedule.fault_kinds:
        why = unobserved(get_adapter(runtime)) or unobserved_services(services)
        if why is not None:
            raise HarnessError(f"--schedule: no power loss for it: {why}")
    check_reports(reports)
    timeout_s = check_black_box(runtime, scenario, launch, timeout)
    run_dir = Path(reports) / f"{run_id()}-trial"
    supervisor = Supervisor(launch=launch, timeout_s=timeout_s)
    # Labelled by its schedule, as a campaign's trial is by its faults.
    label = "-".join(life.describe() for life in schedule.lives) or "no-faults"
    spec = TrialSpec(scenario, seed, schedule, runtime, label, "custom", model)
    tables = scenario_tables(run_dir / "tables", scenario)
    golden = prepare_golden(
        scenario, seed, run_dir / "golden", supervisor, tables=tables, runtime=runtime
    )
    if crash_states is not None:
        return _over_crash_states(
            spec, crash_states, run_dir, golden.directory, supervisor, tables, fs_model
        )
    result = run_trial(spec, run_dir / "trial", golden.directory, supervisor, tables=tables)
    print_trial(result)
    return exit_status([result.status])


def _over_crash_states(
    spec: TrialSpec,
    count: int,
    run_dir: Path,
    golden: Path,
    supervisor: Supervisor,
    tables: dict[str, Path],
    fs_model: str = "ordered",
) -> int:
    """One sub-trial per crash state, each printed with its verdict and replay; stops early
    when its one cut has fewer states than asked (each is then run)."""
    from harness.chaos.trial import power_cuts, run_trial
    from harness.report.console import print_crash_state

    statuses = []
    for number in range(count):
        schedule = spec.schedule.at_crash_state(number, fs_model)
        label = "-".join(life.describe() for life in schedule.lives)
        sub = replace(spec, schedule=schedule, label=label)
        result = run_trial(sub, run_dir / f"state-{number}", golden, supervisor, tables=tables)
        cuts = power_cuts(result.directory)
        print_crash_state(number, count, result, cuts)
        statuses.append(result.status)
        # One cut, its states enumerated: state k is its k-th, so past their number the
        # states come again. With several cuts each takes state k of its own, and a later
        # cut's states depend on what the earlier one kept: every one asked for is run.
        if number == 0 and len(cuts) == 1 and cuts[0].get("enumerated"):
            states = int(cuts[0].get("states", count))
            if states < count:
                print(f"the cut has {states} crash states in all: each is run")
                count = states
        if number + 1 >= count:
            break
    return exit_status(statuses)
