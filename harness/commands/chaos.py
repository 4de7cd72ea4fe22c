"""``python -m harness chaos``: the default campaign, then the self-check.

The campaign runs, against the runtime under test, every failpoint at every
hit of every scenario plus random-time kills (``harness.chaos.campaign``).
The self-check (every broken runtime must be caught by the invariant it breaks,
every mutation by its own) is ``harness.chaos.selfcheck``: its plan as data and
its runner; this command runs it after the campaign, with its progress bars.

The results go to the console (``harness.report.console``) and to the run
folder's files (``harness.report.files``). Exit 0 only if every trial passes
and every broken runtime is caught as expected; an interrupt still leaves a
report of what completed.
"""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Callable, Sequence
from typing import Any

from harness.adapters import get_adapter
from harness.chaos.campaign import Batch, CampaignConfig, Unreached, run_batches, run_trials
from harness.chaos.pool import WorkerRefusal
from harness.chaos.selfcheck import run_self_check
from harness.chaos.supervisor import sweep_agents
from harness.chaos.trial import TrialResult, TrialSpec
from harness.commands import interrupts
from harness.commands.options import (
    CHAOS_CRASH_STATES,
    RUNTIME_HELP,
    add_crash_states_options,
    add_keep_option,
    add_launch_option,
    add_maxfail_options,
    add_model_option,
    add_only_option,
    add_pause_option,
    add_reports_option,
    add_scenario_options,
    add_shard_option,
    add_timeout_option,
    add_workdir_option,
    add_workers_option,
    campaign_config,
    count,
    run_info,
    stop_after_failures,
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
    print_self_check_skipped,
    print_start,
    print_took,
    print_unreached,
    progress_bar,
)
from harness.report.files import discard_incomplete, folder_bytes, write_run_reports
from harness.report.model import SelfCheckRow

__all__ = ["add_parser", "run", "run_batches_with_progress", "run_chaos", "run_with_progress"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    chaos: argparse.ArgumentParser = sub.add_parser(
        "chaos",
        help="run the default campaign and the self-check",
        description="The default campaign against a runtime (every failpoint at every hit "
        "of every scenario, plus random-time kills), then the self-check (every broken "
        "runtime caught by the invariant it breaks; not by default for a module: or cmd: "
        "runtime).",
    )
    add_scenario_options(chaos)
    chaos.add_argument("--seed", type=int, default=None, help="campaign seed (default: random)")
    chaos.add_argument(
        "--random",
        type=count,
        default=200,
        dest="random_trials",
        metavar="N",
        help="number of random-time trials (default 200)",
    )
    add_workers_option(chaos)
    add_timeout_option(chaos)
    chaos.add_argument("--runtime", default=None, help=RUNTIME_HELP)
    add_reports_option(chaos)
    chaos.add_argument(
        "--no-self-check",
        action="store_true",
        help="skip the self-check (it tests the harness, not the runtime under test)",
    )
    chaos.add_argument(
        "--whole",
        action="store_true",
        help="every exhaustive trial of a scenario that caps them (its 'sample'), as audit runs",
    )
    chaos.add_argument(
        "--self-check",
        action="store_true",
        help="run the self-check after the campaign of a module: or cmd: runtime too (left "
        "out by default for your own agent: it tests the harness, not the agent)",
    )
    add_launch_option(chaos)
    add_only_option(chaos)
    add_maxfail_options(chaos)
    add_shard_option(chaos)
    add_workdir_option(chaos)
    add_keep_option(chaos)
    add_model_option(chaos)
    add_crash_states_options(chaos, CHAOS_CRASH_STATES)
    add_pause_option(chaos)
    return chaos


def run(args: argparse.Namespace) -> int:
    config = campaign_config(args)
    adapter = get_adapter(config.runtime)
    # Your own agent's campaign tests your agent; the self-check tests the harness.
    own = adapter.black_box or config.runtime.startswith("module:")
    wanted = args.self_check or not own
    try:
        return run_chaos(
            config,
            self_check=wanted and not args.no_self_check and config.shard is None,
            maxfail=args.maxfail,
        )
    finally:
        sweep_agents(config.run_dir)


def run_chaos(config: CampaignConfig, *, self_check: bool, maxfail: int | None = None) -> int:
    """The campaign, then the self-check; an interrupt still leaves a report of what completed.

    ``maxfail``: stop the campaign once that many trials failed (the trials under way
    finish); the self-check is then not run, and the headline says it stopped early."""
    info = run_info(config)
    print_start(info, config.workers)
    results: list[TrialResult] = []
    checks: list[SelfCheckRow] = []
    self_checked: list[TrialResult] = []
    began = time.monotonic()
    self_check_s: float | None = None
    try:
        started = time.monotonic()
        run_with_progress(
            config,
            "campaign",
            results,
            stop=None if maxfail is None else stop_after_failures(maxfail),
            on_unreached=lambda u: print_unreached(u.runtime, u.trials, u.points),
        )
        campaign_s = time.monotonic() - started
        print_pace(len(results), campaign_s, config.workers, config.workdir)
        summary = CampaignSummary(results)
        print_campaign(summary, config.runtime)
        failed = sum(r.status == "fail" for r in results)
        stopped = maxfail is not None and failed >= maxfail
        if self_check and stopped:
            print_self_check_skipped(f"the campaign stopped early (--maxfail {maxfail})")
        elif self_check:
            passing = [r for r in results if r.status == "pass"]
            started = time.monotonic()
            run_self_check(config, checks, self_checked, passing, run_batches_with_progress)
            self_check_s = time.monotonic() - started
            print_self_check(checks)
        # Inside the try: an interrupt while the reports are written, or before the run's
        # last line is printed, still leaves them, marked interrupted (exit 130 and a
        # summary that says it finished would disagree); so does one a library swallowed.
        if interrupts.received:
            raise KeyboardInterrupt
        write_run_reports(info, results, checks)
        status = exit_status(
            [r.status for r in results] + ["fail" for c in checks if not c.as_expected]
        )
        kept = sum(r.kept for r in results)
        print_folder(config.run_dir, folder_bytes(config.run_dir), kept, len(results))
        print_took(time.monotonic() - began, campaign_s, self_check_s)
        print_headline(status, summary, config.run_dir, stopped_after=maxfail if stopped else None)
        interrupts.result_final()
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
    return status


def run_batches_with_progress(
    config: CampaignConfig,
    title: str,
    batches: Sequence[Batch],
    *,
    completed: list[TrialResult],
    on_done: Callable[[int, list[TrialResult]], None] | None = None,
) -> list[list[TrialResult]]:
    """Run the self-check's batches on one pool with one progress bar, whose failures are
    counted as caught; results land in ``completed`` as they come."""
    with progress_bar(title, catching=True) as bar:
        caught = 0

        def on_result(batch: int, result: TrialResult) -> None:
            nonlocal caught
            completed.append(result)
            caught += result.status == "fail"
            bar.advanced(failed=caught)

        return run_batches(config, batches, on_result, on_done=on_done)


def run_with_progress(
    config: CampaignConfig,
    title: str,
    results: list[TrialResult] | None = None,
    *,
    completed: list[TrialResult] | None = None,
    stop: Callable[[TrialResult], bool] | None = None,
    select: Callable[[TrialSpec], bool] | None = None,
    on_unreached: Callable[[Unreached], None] | None = None,
    catching: bool = False,
) -> list[TrialResult]:
    """Run trials with a progress bar; results land in ``results`` (and ``completed``)
    as they come, so that an interrupt keeps every completed one. ``catching``: the
    trials are a broken runtime's, and the bar counts their failures as caught."""
    results = [] if results is None else results
    with progress_bar(title, catching=catching) as bar:
        planned = 0
        failed = sum(r.status == "fail" for r in results)  # counted as they come, not again

        def on_plan(trials: int) -> None:
            nonlocal planned
            planned = trials
            bar.planned(planned)

        def on_result(result: TrialResult) -> None:
            nonlocal planned, failed
            results.append(result)
            failed += result.status == "fail"
            if completed is not None:
                completed.append(result)
            if result.spec.crash_state is not None:  # a sub-trial, listed once its cut ran
                planned += 1
                bar.planned(planned)
            bar.advanced(failed=failed)

        run_trials(
            config,
            on_result,
            on_plan=on_plan,
            stop=stop,
            select=select,
            on_unreached=on_unreached,
        )
    return results
