"""The command line: ``python -m harness chaos | trial | replay | compare | audit | merge``.

- ``chaos``: the default campaign against the real runtime (every failpoint
  at every hit of every scenario, plus random-time kills), then the self-check
  (every broken runtime must be caught by the invariant it breaks). Exit 0
  only if every trial passes and every broken runtime is caught as expected.
- ``trial``: one trial, given scenario, seed, runtime and schedule (the line a
  failure prints), against a fresh golden run.
- ``replay``: run again the trial recorded in a trial folder.
- ``audit``: a campaign for a time budget, then Hypothesis (``harness.audit``).
- ``merge``: one report from the run folders of shards (``harness.report.merge``).

Exit status (``harness.exits``): 0 all held, 1 an invariant failed or the
self-check missed, 2 bad input (nothing was run), 3 could not judge (some
verdict unknown, none failed), 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from harness.chaos.campaign import CampaignConfig, Shard
from harness.chaos.schedule import CrashSchedule
from harness.exits import EXIT_BAD_INPUT, exit_status
from harness.runtime.errors import HarnessError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    chaos = sub.add_parser("chaos", help="run the default campaign and the self-check")
    chaos.add_argument("--scenarios", default="scenarios", help="folder of scenario files")
    chaos.add_argument("--seed", type=int, default=None, help="campaign seed (default: random)")
    chaos.add_argument(
        "--random", type=int, default=200, dest="random_trials", help="number of random-time trials"
    )
    chaos.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    chaos.add_argument("--runtime", default="real", help="runtime under test")
    chaos.add_argument("--reports", default="reports", help="where run folders go")
    chaos.add_argument("--no-self-check", action="store_true")
    chaos.add_argument(
        "--launch",
        choices=("fork", "exec"),
        default="fork",
        help="start incarnations by forking a warm worker, or by exec",
    )
    chaos.add_argument(
        "--only", action="append", default=[], help="limit to scenarios with this name (repeatable)"
    )
    _add_shard_option(chaos)

    trial = sub.add_parser("trial", help="run one trial")
    trial.add_argument("scenario")
    trial.add_argument("--seed", type=int, required=True)
    trial.add_argument("--runtime", default="real")
    trial.add_argument("--schedule", default="[]", help="crash schedule as JSON")
    trial.add_argument("--reports", default="reports")
    trial.add_argument("--launch", choices=("fork", "exec"), default="fork")

    compare = sub.add_parser("compare", help="the same campaign against several runtimes")
    compare.add_argument(
        "--runtime",
        action="append",
        dest="runtimes",
        default=[],
        help="a runtime to compare (repeatable; default: real and dbos)",
    )
    compare.add_argument("--scenarios", default="scenarios")
    compare.add_argument("--only", action="append", default=[])
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
    compare.add_argument("--seed", type=int, default=None)
    compare.add_argument("--random", type=int, default=0, dest="random_trials")
    compare.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    compare.add_argument("--reports", default="reports")
    compare.add_argument("--launch", choices=("fork", "exec"), default="fork")

    replay = sub.add_parser("replay", help="run again the trial of a trial folder")
    replay.add_argument("trial_dir")
    replay.add_argument("--reports", default="reports")
    _add_audit_and_merge(sub)
    return parser


def _add_shard_option(chaos: argparse.ArgumentParser) -> None:
    chaos.add_argument(
        "--shard",
        default=None,
        help="run shard K of N of the campaign (K/N; needs --seed; no self-check)",
    )


def _add_audit_and_merge(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from harness.audit import add_audit_parser
    from harness.report.merge import add_merge_parser

    add_audit_parser(sub)
    add_merge_parser(sub)


def _shard(args: argparse.Namespace) -> Shard | None:
    """``--shard K/N`` of ``chaos``; a shard's self-check is left to an unsharded run."""
    if getattr(args, "shard", None) is None:
        return None
    try:
        shard = Shard.parse(args.shard)
    except ValueError as exc:
        raise HarnessError(f"--shard: {exc}") from None
    if args.seed is None:
        raise HarnessError("--shard needs --seed: every shard must list the same campaign")
    return shard


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Explicitly, since a shell without job control starts background jobs with
    # SIGINT ignored, and an ignored SIGINT would leave agents running.
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    from harness.chaos.supervisor import kill_all, sweep_agents

    try:
        if hasattr(args, "handler"):  # audit, merge: their modules own their options
            return int(args.handler(args))
        if args.command == "chaos":
            from harness.report.console import run_chaos

            config = _chaos_config(args)
            try:
                return run_chaos(config, self_check=not args.no_self_check and config.shard is None)
            finally:
                sweep_agents(config.run_dir)
        if args.command == "compare":
            from harness.report.compare import run_compare

            runtimes = args.runtimes or ["real", "dbos"]
            for name in runtimes:
                _check_runtime(name)
            for name in args.expect_fail:
                if name not in runtimes:
                    raise HarnessError(
                        f"--expect-fail {name}: not a compared runtime "
                        f"(compared: {', '.join(runtimes)})"
                    )
            args.runtime = runtimes[0]
            config = _chaos_config(args)
            try:
                return run_compare(
                    config, runtimes, tuple(args.failpoints), tuple(args.expect_fail)
                )
            finally:
                sweep_agents(config.run_dir)
        if args.command == "trial":
            return _trial(
                args.scenario, args.seed, args.runtime, args.schedule, args.reports, args.launch
            )
        return _replay(Path(args.trial_dir), args.reports)
    except HarnessError as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130
    finally:
        kill_all()


def _run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"


def _check_runtime(name: str) -> None:
    from harness.adapters import UnknownAdapterError, get_adapter

    try:
        get_adapter(name)
    except UnknownAdapterError as exc:
        raise HarnessError(f"--runtime: {exc}") from None


def _chaos_config(args: argparse.Namespace) -> CampaignConfig:
    from harness.chaos.scenario import load_scenarios

    _check_runtime(args.runtime)
    shard = _shard(args)
    scenarios = load_scenarios(Path(args.scenarios))  # refuses a bad one before anything runs
    paths = tuple(s.source for s in scenarios if not args.only or s.name in args.only)
    if not paths:
        raise HarnessError(f"{args.scenarios}: no scenario matches {args.only or 'anything'}")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big") >> 1
    run_dir = Path(args.reports).resolve() / _run_id()
    run_dir.mkdir(parents=True)
    return CampaignConfig(
        run_dir,
        paths,
        seed,
        args.random_trials,
        max(1, args.workers),
        args.runtime,
        launch=args.launch,
        shard=shard,
    )


def _trial(
    scenario: str,
    seed: int,
    runtime: str,
    schedule_json: str,
    reports: str,
    launch: str = "fork",
) -> int:
    from harness.chaos.scenario import load_scenario
    from harness.chaos.supervisor import Supervisor
    from harness.chaos.tables import write_table_variants
    from harness.chaos.trial import TrialSpec, prepare_golden, run_trial
    from harness.report.console import print_trial

    _check_runtime(runtime)
    load_scenario(scenario)
    try:
        schedule = CrashSchedule.from_json(schedule_json)
    except ValueError as exc:
        raise HarnessError(f"--schedule: {exc}") from None
    run_dir = Path(reports) / f"{_run_id()}-trial"
    supervisor = Supervisor(launch=launch)
    spec = TrialSpec(scenario, seed, schedule, runtime, "replay", "custom")
    golden = prepare_golden(scenario, seed, run_dir / "golden", supervisor)
    result = run_trial(
        spec,
        run_dir / "trial",
        golden.directory,
        supervisor,
        tables=write_table_variants(run_dir / "tables"),
    )
    print_trial(result)
    return exit_status([result.status])


def _replay(trial_dir: Path, reports: str) -> int:
    try:
        spec = json.loads((trial_dir / "trial.json").read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{trial_dir}/trial.json: cannot read the trial: {exc}") from None
    return _trial(
        spec["scenario"], spec["seed"], spec["runtime"], json.dumps(spec["schedule"]), reports
    )
