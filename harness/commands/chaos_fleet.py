"""``python -m harness chaos-fleet``: the fleet's campaign, then its self-check.

Worker processes pull tasks from a queue and run them through the runtime, on the
file journal and on PostgreSQL (a server of the harness's own,
``harness.chaos.postgres``), under each fault of a fleet
(``harness.chaos.fleet.FLEET_FAULTS``); every trial is judged by the fleet's
invariants (``harness.check.fleet``). Then each broken PostgreSQL journal must
escape the trials without its fault and be caught by its invariant with it
(``harness.chaos.fleet_selfcheck``). PostgreSQL must be installed: where it is not,
the command says so in one line and runs nothing (exit 2). Exit 0 when every trial
of the runtime passed and every broken journal was caught as expected, 1 otherwise.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any

from harness.agent.fleet_broken import FLEET_BROKEN
from harness.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    fleet: argparse.ArgumentParser = sub.add_parser(
        "chaos-fleet",
        help="the fleet's campaign: workers, a queue, PostgreSQL, the faults of a fleet",
        description="Worker processes pull tasks from a queue; each fault of a fleet is "
        "injected on the file journal and on PostgreSQL (installed on the machine: the "
        "harness starts a server of its own), then each broken PostgreSQL journal must be "
        "caught. Exit 0 all held, 1 a failure, 2 bad input or no PostgreSQL.",
    )
    fleet.add_argument("--seed", type=int, default=None, help="campaign seed (default: random)")
    fleet.add_argument(
        "--runtime",
        default="real",
        help=f"real (the default) or a broken journal: {', '.join(FLEET_BROKEN)}",
    )
    fleet.add_argument(
        "--journal",
        choices=("file", "postgres"),
        default=None,
        help="run only the trials of this store (default: both)",
    )
    fleet.add_argument(
        "--fault",
        default=None,
        help="run only the trials of this fault ('plain' for none; default: every one)",
    )
    fleet.add_argument(
        "--no-self-check", action="store_true", help="skip the broken journals' self-check"
    )
    fleet.add_argument("--reports", default="reports", help="where the run folder goes")
    return fleet


def run(args: argparse.Namespace) -> int:
    from harness.chaos.fleet import (
        LEASE,
        TASKS,
        WORKERS,
        FleetSpecError,
        FleetTrialResult,
        FleetTrialSpec,
        campaign_specs,
        run_fleet_trial,
    )
    from harness.chaos.postgres import PostgresServer, PostgresUnavailable, find_binaries

    seed = args.seed if args.seed is not None else random.randrange(2**32)
    fault = None if args.fault == "plain" else args.fault
    specs = [
        s
        for s in campaign_specs(seed, args.runtime)
        if (args.journal is None or s.journal == args.journal)
        and (args.fault is None or s.fault == fault)
    ]
    try:  # a fault the store has not, or an unknown runtime: one line, nothing run
        FleetTrialSpec(args.journal or "postgres", fault, args.runtime).check()
    except FleetSpecError as exc:
        print(f"chaos-fleet: {exc}")
        return EXIT_BAD_INPUT
    self_check = not args.no_self_check and args.runtime == "real"
    needs_postgres = self_check or any(s.journal == "postgres" for s in specs)
    if needs_postgres:
        try:
            find_binaries()
        except PostgresUnavailable as exc:
            print(f"chaos-fleet: {exc}; nothing ran (CI installs it: see .ci/run)")
            return EXIT_BAD_INPUT
    run_dir = Path(args.reports) / f"chaos-fleet-{seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    print(
        f"chaos-fleet: seed {seed}, {WORKERS} workers, {TASKS} tasks of 3 calls each, lease "
        f"{LEASE:g} s; run folder {run_dir}"
    )
    started = time.monotonic()
    server = PostgresServer.start() if needs_postgres else None
    try:

        def trial(spec: FleetTrialSpec) -> FleetTrialResult:
            folder = run_dir / spec.runtime / spec.name.replace("/", "-").replace(":", "-")
            result = run_fleet_trial(spec, folder, server)
            _print_trial(result)
            return result

        results = [trial(s) for s in specs]
        rows = []
        if self_check:
            from harness.chaos.fleet_selfcheck import run_fleet_self_check

            print("self-check: each broken PostgreSQL journal, without its fault, then with it")
            rows = run_fleet_self_check(seed, trial)
            _print_self_check(rows)
    finally:
        if server is not None:
            server.stop()
    failed = [r for r in results if r.status == "fail"]
    unjudged = [r for r in results if r.status == "unknown"]
    missed = [row for row in rows if not row.as_expected]
    print(
        f"chaos-fleet: {len(results)} trial(s) of {args.runtime}: "
        f"{len(results) - len(failed) - len(unjudged)} passed, {len(failed)} failed, "
        f"{len(unjudged)} could not be judged"
        + (f"; self-check {len(rows) - len(missed)}/{len(rows)} as expected" if rows else "")
        + f" ({time.monotonic() - started:.0f} s, seed {seed})"
    )
    for result in [*failed, *unjudged]:
        print(f"  replay: {replay_line(seed, result.spec)}")
    for row in missed:
        print(f"  replay: {replay_line(seed, row.caught.spec)}")
    return EXIT_FAILED if failed or unjudged or missed else EXIT_OK


def replay_line(seed: int, spec: Any) -> str:
    """The command that runs ``spec``'s trial again, alone."""
    return (
        f"python -m harness chaos-fleet --seed {seed} --runtime {spec.runtime} "
        f"--journal {spec.journal} --fault {spec.fault or 'plain'} --no-self-check"
    )


def _print_trial(result: Any) -> None:
    failed = ", ".join(result.failed)
    line = (
        f"  {result.spec.runtime:<23} {result.spec.name:<30} {result.status:<5} "
        f"{result.seconds:4.1f} s  {failed + ': ' if failed else ''}{result.fault_note}"
    )
    print(line.rstrip())


def _print_self_check(rows: list[Any]) -> None:
    print(f"  {'broken journal':<24} {'needs fault':<22} {'escaped':<9} outcome")
    for row in rows:
        escaped = sum(r.status == "pass" for r in row.escaped)
        mark = "ok" if row.as_expected else "UNEXPECTED"
        print(
            f"  {row.name:<24} {row.needs_fault:<22} {escaped}/{len(row.escaped):<7} "
            f"{row.outcome} [{mark}]"
        )
