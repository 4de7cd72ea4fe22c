"""``python -m harness compare``: the same campaign against several runtimes, side by side.

Every runtime meets the same trials (same scenarios, seeds and schedules; the
golden runs are shared); ``--failpoint`` keeps the exhaustive trials of some
failpoints only. The results go to ``harness.report.compare``, which prints
the table and writes ``compare.md`` and ``compare.json`` to the run folder.

Exit status: 0 when every runtime did what was expected of it (each holds,
except those named by ``--expect-fail``, which must fail at least one trial);
1 when one did not; 3 when nothing went against expectation but some runtime
could not be judged; 2 on bad input (nothing runs). See
``harness.report.compare`` for the rules.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from harness.adapters import get_adapter
from harness.chaos.campaign import CampaignConfig, applicable, run_trials
from harness.chaos.supervisor import sweep_agents
from harness.chaos.trial import TrialResult, TrialSpec
from harness.commands.options import (
    AGENT_RUNTIME,
    add_keep_option,
    add_launch_option,
    add_maxfail_options,
    add_model_option,
    add_only_option,
    add_reports_option,
    add_scenario_options,
    add_timeout_option,
    add_workdir_option,
    add_workers_option,
    campaign_config,
    check_model,
    check_runtime,
    count,
    scenario_runtime,
    selected_scenarios,
    stop_after_failures,
)
from harness.report.compare import announce_campaign, report_comparison
from harness.runtime.errors import HarnessError

__all__ = ["add_parser", "run", "run_compare"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    compare: argparse.ArgumentParser = sub.add_parser(
        "compare",
        help="the same campaign against several runtimes",
        description="The same campaign (same scenarios, seeds and schedules) against several "
        "runtimes, side by side; exit 0 when each did what was expected of it.",
    )
    compare.add_argument(
        "--runtime",
        action="append",
        dest="runtimes",
        default=[],
        help="a runtime to compare (repeatable; default: real and dbos); agent is the "
        "scenario's [agent] table",
    )
    add_scenario_options(compare)
    add_only_option(compare)
    compare.add_argument(
        "--failpoint",
        action="append",
        dest="failpoints",
        default=[],
        help="keep exhaustive trials of this failpoint only (repeatable)",
    )
    compare.add_argument(
        "--expect-fail",
        action="append",
        dest="expect_fail",
        default=[],
        metavar="NAME",
        help="a compared runtime that must fail at least one trial (repeatable); "
        "every other must hold",
    )
    compare.add_argument("--seed", type=int, default=None, help="campaign seed (default: random)")
    compare.add_argument(
        "--random",
        type=count,
        default=0,
        dest="random_trials",
        metavar="N",
        help="random-time trials per runtime (default 0: the exhaustive trials only)",
    )
    add_workers_option(compare)
    add_timeout_option(compare)
    add_reports_option(compare)
    add_launch_option(compare, repeatable=True)
    add_maxfail_options(compare)
    add_workdir_option(compare)
    add_keep_option(compare)
    add_model_option(compare)
    return compare


def run(args: argparse.Namespace) -> int:
    runtimes = args.runtimes or ["real", "dbos"]
    if AGENT_RUNTIME in runtimes:  # the scenarios' [agent]
        agent = scenario_runtime(AGENT_RUNTIME, selected_scenarios(args))
        runtimes = [agent if name == AGENT_RUNTIME else name for name in runtimes]
    for name in runtimes:
        check_runtime(name)
        check_model(name, args.model)
    boxes = [name for name in runtimes if name.startswith("cmd:")]
    if boxes and len(boxes) < len(runtimes):
        # A black box is killed at the harness's servers, another runtime inside itself:
        # no trial of one is a trial of the other.
        other = next(name for name in runtimes if not name.startswith("cmd:"))
        raise HarnessError(
            f"--runtime {boxes[0]}: a black box is compared only with black boxes, not with {other}"
        )
    for name in args.expect_fail:
        if name not in runtimes:
            raise HarnessError(
                f"--expect-fail {name}: not a compared runtime (compared: {', '.join(runtimes)})"
            )
    launches: list[str] = list(dict.fromkeys(args.launch)) or ["fork"]
    if len(launches) > 1 and len(runtimes) > 1:
        raise HarnessError(
            f"--launch {' --launch '.join(launches)}: one runtime under several launchers, "
            f"not {len(runtimes)} runtimes"
        )
    args.runtime = runtimes[0]
    # The black box's crash-free run records its imports when a campaign runs warm.
    args.launch = "warm" if "warm" in launches else launches[0]
    config = campaign_config(args)
    try:
        return run_compare(
            config,
            runtimes,
            tuple(args.failpoints),
            tuple(args.expect_fail),
            maxfail=args.maxfail,
            launches=launches,
        )
    finally:
        sweep_agents(config.run_dir)


def _select(failpoints: tuple[str, ...], runtimes: Sequence[str]) -> Callable[[TrialSpec], bool]:
    """The exhaustive trials of ``failpoints`` that every compared runtime can host, so that
    a row of the table compares like with like (a journal fault is not applicable to a
    runtime without our journal, so no runtime meets it). Random trials are each
    runtime's own draws: the same kill moments, journal faults only where applicable."""
    adapters = [get_adapter(runtime) for runtime in runtimes]

    def keep(spec: TrialSpec) -> bool:
        if spec.kind != "exhaustive":
            return True
        if not all(applicable(spec.schedule, adapter) for adapter in adapters):
            return False
        return not failpoints or spec.label.split("@", 1)[0] in failpoints

    return keep


def run_compare(
    config: CampaignConfig,
    runtimes: list[str],
    failpoints: tuple[str, ...],
    expect_fail: Sequence[str] = (),
    *,
    maxfail: int | None = None,
    launches: Sequence[str] = (),
) -> int:
    """Run the campaign once per runtime; print and write the side-by-side table.

    Returns the exit status (``harness.report.compare.compare_status``);
    ``expect_fail`` names the runtimes that must fail at least one trial. ``maxfail``
    stops each runtime's campaign once that many of its trials failed. ``launches``
    (more than one, for one runtime): the campaign once per launcher instead, each a
    column named ``RUNTIME --launch LAUNCHER``, its golden runs and trials in a folder
    of the run folder named by the launcher.
    """
    runs = [(runtime, config.launch, runtime) for runtime in runtimes]
    if len(launches) > 1:
        runs = [(runtimes[0], how, f"{runtimes[0]} --launch {how}") for how in launches]
        expect_fail = [label for rt, _, label in runs if rt in expect_fail]
    by_runtime: dict[str, list[TrialResult]] = {}
    stopped = []
    for runtime, how, label in runs:
        announce_campaign(label)
        # One runtime's trials are named alike under each launcher: each keeps a folder.
        run_dir = config.run_dir / how if len(launches) > 1 else config.run_dir
        run_dir.mkdir(exist_ok=True)
        by_runtime[label] = run_trials(
            replace(config, runtime=runtime, launch=how, run_dir=run_dir),
            lambda r: None,
            select=_select(failpoints, runtimes),
            stop=None if maxfail is None else stop_after_failures(maxfail),
        )
        failed = sum(r.status == "fail" for r in by_runtime[label])
        if maxfail is not None and failed >= maxfail:
            stopped.append(f"{label} after {failed} failed, --maxfail {maxfail}")
    labels = [label for _, _, label in runs]
    return report_comparison(config.run_dir, labels, by_runtime, expect_fail, stopped)
