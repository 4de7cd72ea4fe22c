"""``python -m harness audit`` (``make audit``, ``python -m harness.audit``): a nightly audit.

A campaign for a time budget, then Hypothesis.

Within ``--minutes`` (``AUDIT_MINUTES``, default 20), in this order:

1. the exhaustive trials of every scenario (those ``python -m harness chaos
   --whole`` runs with the same seed: all of them, where ``chaos`` runs a sample of a
   scenario that caps them);
2. random-time trials in numbered batches of ``--batch``, batch ``b`` with its
   own seed drawn from the campaign seed, until the campaign's share of the
   budget is spent (or ``--batches`` batches ran). The clock is checked as
   each trial comes back and between batches; the trials that completed are kept;
3. Hypothesis with a large budget: ``HYPOTHESIS_PROFILE=audit pytest`` on those
   of ``HYPOTHESIS_TESTS`` that exist, as a subprocess with ``--junitxml``. It
   gets the rest of the budget (``--hypothesis-share`` of it at least); at the
   end of the budget it is interrupted (SIGINT), and pytest reports what completed
   (one that outlives three SIGINTs, 10 s apart, is killed: a cut, not a failure).

The full note: docs/reference/modules.md (``harness/commands/audit.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import itertools
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from harness.chaos.campaign import CampaignConfig, run_trials
from harness.chaos.shard import Shard
from harness.chaos.trial import TrialResult, TrialSpec
from harness.commands.options import (
    AUDIT_CRASH_STATES,
    RUNTIME_HELP,
    add_crash_states_options,
    add_keep_option,
    add_launch_option,
    add_only_option,
    add_scenario_options,
    add_timeout_option,
    add_workdir_option,
    campaign_scenarios,
    check_black_box,
    check_reports,
    run_info,
    scenario_runtime,
    workdir,
)
from harness.exits import EXIT_FAILED, EXIT_OK, EXIT_UNJUDGED, exit_status
from harness.report.files import discard_incomplete, write_run_reports
from harness.report.merge import HYPOTHESIS_JUNIT, amend_run_report
from harness.runtime.errors import HarnessError

__all__ = [
    "HYPOTHESIS_TESTS",
    "NIGHTLY_SHARDS",
    "NIGHTLY_TRIALS",
    "AuditConfig",
    "HypothesisOutcome",
    "add_parser",
    "batch_seed",
    "budget_line",
    "run",
    "run_audit",
]

HYPOTHESIS_TESTS = (
    "tests/property",
    "tests/integration/test_shrinking.py",
    "tests/integration/test_stateful.py",
)
"""What the Hypothesis part runs, relative to the working directory; missing ones are skipped."""
HYPOTHESIS_PROFILE = "audit"
INTERRUPTS = 3
INTERRUPT_EVERY_S = 10.0
"""At the end of its budget pytest gets a SIGINT, and another every this many seconds while it
runs, up to ``INTERRUPTS``; then it is killed. More than one, because CPython loses a
KeyboardInterrupt raised inside a finaliser (``__del__``, a generator's close), which
Hypothesis's churn of objects makes likely."""
HEADLINES = {EXIT_OK: "PASS", EXIT_FAILED: "FAIL", EXIT_UNJUDGED: "COULD NOT JUDGE"}
MAX_SHOWN = 10


@dataclass(frozen=True, slots=True)
class AuditConfig:
    campaign: CampaignConfig
    """Run folder, scenarios, seed, workers, runtime, launch, shard; ``random_trials`` is
    the size of one random batch."""
    minutes: float
    max_batches: int | None = None
    """Random batches of the whole campaign (a shard runs its own of them); None: until
    the budget is spent."""
    hypothesis_tests: tuple[str, ...] = HYPOTHESIS_TESTS
    hypothesis_share: float = 0.25
    """The share of the budget kept for Hypothesis when it has tests to run."""


@dataclass(frozen=True, slots=True)
class HypothesisOutcome:
    """What the Hypothesis run did: not run (``returncode`` None), passed, failed, or cut."""

    tests: tuple[str, ...]
    returncode: int | None = None
    interrupted: bool = False
    """The budget ran out and pytest was interrupted; it reported what completed."""
    tests_run: int = 0
    failures: int = 0
    """Failures and errors in its JUnit XML."""
    note: str = ""

    @property
    def passed(self) -> bool:
        if self.returncode is None or self.returncode == 5:  # nothing to run: nothing failed
            return True
        if self.interrupted:
            return self.failures == 0
        return self.returncode == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "tests": list(self.tests),
            "returncode": self.returncode,
            "interrupted_at_budget": self.interrupted,
            "tests_run": self.tests_run,
            "failures": self.failures,
            "passed": self.passed,
            "note": self.note,
        }


def batch_seed(seed: int, batch: int) -> int:
    """The campaign seed of random batch ``batch`` (from 0): fixed by the audit's seed."""
    return random.Random(f"{seed}:batch{batch}").randrange(2**31)


@dataclass(slots=True)
class _Progress:
    results: list[TrialResult]
    batches: int = 0
    cut: bool = False
    """The budget ended the campaign before it ran every trial it listed."""


def run_audit(config: AuditConfig) -> int:
    """The campaign for its share of the budget, then Hypothesis; write the reports."""
    campaign = config.campaign
    started = time.monotonic()
    info = run_info(campaign)  # summary.json's start and commit
    budget_s = config.minutes * 60
    tests = tuple(t for t in config.hypothesis_tests if Path(t).exists())
    share = config.hypothesis_share if tests else 0.0
    _say(
        f"audit: seed {campaign.seed}, runtime {campaign.runtime}, "
        f"{len(campaign.scenarios)} scenarios, budget {config.minutes:g} min "
        f"({1 - share:.0%} campaign), shard {campaign.shard or 'all'}; "
        f"run folder {campaign.run_dir}"
    )
    progress = _Progress([])
    try:
        _run_campaign(config, started + budget_s * (1 - share), progress)
        campaign_s = time.monotonic() - started
        write_run_reports(info, progress.results, [])
        failed = [r for r in progress.results if r.status == "fail"]
        unjudged = [r for r in progress.results if r.status == "unknown"]
        states = sum(r.spec.crash_state is not None for r in progress.results)
        _say(
            f"audit: campaign {len(progress.results) - states} trials ({progress.batches} "
            f"random batches) and {states} more crash states of their power cuts, "
            f"{len(failed)} failed, {len(unjudged)} could not be judged, "
            f"{'cut by the budget' if progress.cut else 'complete'} after {campaign_s:.0f} s"
        )
        _say(budget_line(len(progress.results), campaign_s, config.minutes, 1 - share))
        for result in failed[:MAX_SHOWN]:
            _say(
                f"  FAIL {result.spec.trial_id} {' '.join(result.failed_invariants)}; replay: "
                f"{result.spec.replay_command()}"
            )
        for result in unjudged[:MAX_SHOWN]:
            _say(
                f"  COULD NOT JUDGE {result.spec.trial_id} "
                f"{' '.join(result.unknown_invariants)}; replay: {result.spec.replay_command()}"
            )
        hypothesis = _run_hypothesis(config, tests, started + budget_s)
    except BaseException:
        discard_incomplete(campaign.run_dir, progress.results)
        write_run_reports(info, progress.results, [], interrupted=True)
        _say(f"audit: INTERRUPTED; kept {len(progress.results)} completed trials")
        raise
    elapsed = time.monotonic() - started
    junit = campaign.run_dir / HYPOTHESIS_JUNIT
    amend_run_report(
        campaign.run_dir,
        progress.results,
        section={
            "budget_minutes": config.minutes,
            "elapsed_s": round(elapsed, 1),
            "campaign_s": round(campaign_s, 1),
            "trials_per_s": round(len(progress.results) / campaign_s, 2) if campaign_s else None,
            "shard": None if campaign.shard is None else str(campaign.shard),
            "batch": campaign.random_trials,
            "batches": progress.batches,
            "cut_by_budget": progress.cut,
            "hypothesis": hypothesis.to_json(),
        },
        passed=hypothesis.passed,
        junit_suites=[(junit, "hypothesis: ")] if junit.exists() else [],
    )
    status = exit_status(
        [*(r.status for r in progress.results), *([] if hypothesis.passed else ["fail"])]
    )
    _say(
        f"audit: {HEADLINES[status]} in {elapsed:.0f} s of {budget_s:.0f} s; "
        f"hypothesis {_describe(hypothesis)}; JUnit XML {campaign.run_dir / 'junit.xml'}; "
        f"report {campaign.run_dir / 'index.html'}"
    )
    return status


NIGHTLY_TRIALS = 100_000
"""The nightly audit the budget line measures against: so many trials on ``NIGHTLY_SHARDS``."""
NIGHTLY_SHARDS = 4


def budget_line(trials: int, campaign_s: float, minutes: float, campaign_share: float) -> str:
    """The measured pace, how many trials a budget of ``minutes`` holds at it (the campaign
    gets ``campaign_share`` of it), and the budget a shard needs for ``NIGHTLY_TRIALS`` on
    ``NIGHTLY_SHARDS`` at the same pace."""
    if trials == 0 or campaign_s <= 0 or campaign_share <= 0:
        return "audit: pace: no trial completed, so no rate to plan a budget with"
    rate = trials / campaign_s
    holds = rate * minutes * 60 * campaign_share
    needs_min = NIGHTLY_TRIALS / NIGHTLY_SHARDS / rate / 60 / campaign_share
    return (
        f"audit: pace {rate:.1f} trials/s; the campaign's share of this "
        f"{minutes:g}-minute budget holds about {holds:,.0f} trials; "
        f"{NIGHTLY_TRIALS:,} trials on {NIGHTLY_SHARDS} shards need a budget of "
        f"{needs_min:.0f} min a shard at this pace"
    )


def _run_campaign(config: AuditConfig, deadline: float, progress: _Progress) -> None:
    """Exhaustive trials, then random batches, until ``deadline`` (a ``time.monotonic``)."""
    campaign = config.campaign

    def spent(result: TrialResult) -> bool:
        return time.monotonic() >= deadline

    def run(phase: CampaignConfig, select: Callable[[TrialSpec], bool] | None) -> None:
        planned: list[int] = []
        got = run_trials(
            phase, progress.results.append, on_plan=planned.append, stop=spent, select=select
        )
        # The sub-trials of crash states were not listed ahead: trials are counted alone.
        ran = sum(result.spec.crash_state is None for result in got)
        progress.cut = progress.cut or ran < sum(planned)

    run(replace(campaign, random_trials=0), None)
    for batch in _batches(campaign.shard, config.max_batches):
        if time.monotonic() >= deadline:
            progress.cut = True
            return
        # A whole batch belongs to one shard, so a shard makes only its own golden runs.
        phase = replace(campaign, seed=batch_seed(campaign.seed, batch), shard=None)
        run(phase, _random_only)
        progress.batches += 1
        if progress.cut:
            return


def _random_only(spec: TrialSpec) -> bool:
    return spec.kind == "random"


def _batches(shard: Shard | None, limit: int | None) -> Iterator[int]:
    numbers = itertools.count() if limit is None else iter(range(limit))
    return (b for b in numbers if shard is None or shard.owns_batch(b))


def _run_hypothesis(
    config: AuditConfig, tests: tuple[str, ...], deadline: float
) -> HypothesisOutcome:
    """pytest on ``tests`` with the audit profile, interrupted at ``deadline``; always reaped."""
    if not tests:
        note = "disabled"
        if config.hypothesis_tests:
            note = "none of its tests is here: " + ", ".join(config.hypothesis_tests)
        _say(f"audit: hypothesis skipped ({note})")
        return HypothesisOutcome((), note=note)
    campaign = config.campaign
    junit = campaign.run_dir / HYPOTHESIS_JUNIT
    shard = "" if campaign.shard is None else f"-shard{campaign.shard.index}"
    command = [
        sys.executable,
        "-m",
        "pytest",
        *tests,
        "-q",
        "-p",
        "no:cacheprovider",
        f"--junitxml={junit}",
        f"--hypothesis-seed={campaign.seed}{shard}",
    ]
    if importlib.util.find_spec("pytest_timeout") is not None:
        command.append("--timeout=0")  # the audit's budget bounds the run, not a per-test limit
    env = {**os.environ, "HYPOTHESIS_PROFILE": HYPOTHESIS_PROFILE}
    _say(f"audit: hypothesis: HYPOTHESIS_PROFILE={HYPOTHESIS_PROFILE} {' '.join(command[1:])}")
    # The property tests are written against this project's runtime and its broken
    # variants (their assertions name them); --runtime chose the campaign's runtime only.
    _say("audit: hypothesis: tests the real runtime (and its broken variants), whatever --runtime")
    interrupted, note = False, ""
    proc = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        try:
            returncode = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            interrupted = True
            _say("audit: hypothesis: budget spent, interrupting pytest (it reports what completed)")
            stopped = _interrupt(proc)
            if stopped is None:
                note = f"pytest outlived {INTERRUPTS} SIGINTs: killed, its JUnit XML lost"
                _say(f"audit: hypothesis: {note}")
                _reap_tree(proc)
            returncode = proc.wait() if stopped is None else stopped
    finally:
        _reap_tree(proc)
    tests_run, failures = _junit_counts(junit)
    return HypothesisOutcome(tests, returncode, interrupted, tests_run, failures, note)


def _interrupt(proc: subprocess.Popen[bytes]) -> int | None:
    """SIGINT ``proc`` until it exits (its status) or ``INTERRUPTS`` were sent (None)."""
    for _ in range(INTERRUPTS):
        proc.send_signal(signal.SIGINT)
        try:
            return proc.wait(timeout=INTERRUPT_EVERY_S)
        except subprocess.TimeoutExpired:
            continue
    return None


def _reap_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL and reap ``proc`` and everything it started, if it is still running."""
    if proc.poll() is not None:
        return
    import psutil

    try:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.Error:
        family = []
    for member in family:
        with contextlib.suppress(psutil.Error):
            member.kill()
    proc.wait()
    psutil.wait_procs(family[1:], timeout=5)


def _junit_counts(path: Path) -> tuple[int, int]:
    """(tests, failures + errors) of a JUnit XML file; (0, 0) if there is none."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return 0, 0
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests = sum(int(s.get("tests", 0)) for s in suites)
    failures = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    return tests, failures


def _describe(outcome: HypothesisOutcome) -> str:
    if outcome.returncode is None:
        return "not run"
    cut = ", interrupted at the budget" if outcome.interrupted else ""
    return (
        f"{'passed' if outcome.passed else 'FAILED'} ({outcome.tests_run} tests, "
        f"{outcome.failures} failed, exit {outcome.returncode}{cut})"
    )


def _say(line: str) -> None:
    print(line, flush=True)


# -- the command line ---------------------------------------------------------------------


def _default_minutes() -> float:
    try:
        return float(os.environ.get("AUDIT_MINUTES", "20"))
    except ValueError:
        return -1.0  # refused below with the option's name


def add_parser(sub: Any) -> argparse.ArgumentParser:
    audit: argparse.ArgumentParser = sub.add_parser(
        "audit", help="a campaign for a time budget, then Hypothesis"
    )
    audit.add_argument(
        "--minutes",
        type=float,
        default=_default_minutes(),
        help="time budget in minutes (default: $AUDIT_MINUTES, else 20)",
    )
    add_scenario_options(audit)
    add_only_option(audit)
    audit.add_argument("--seed", type=int, default=None, help="campaign seed (default: random)")
    audit.add_argument("--shard", default=None, help="run shard K of N (K/N; needs --seed)")
    audit.add_argument("--runtime", default=None, help=RUNTIME_HELP)
    audit.add_argument("--batch", type=int, default=100, help="random trials per batch")
    audit.add_argument(
        "--batches", type=int, default=None, help="stop after this many random batches"
    )
    audit.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 2,
        help="trials run at once (default: the number of CPUs)",
    )
    add_launch_option(audit)
    add_timeout_option(audit)
    add_workdir_option(audit)
    add_keep_option(audit)
    audit.add_argument("--reports", default="reports", help="where the run folder goes")
    audit.add_argument("--out", default=None, help="the run folder itself (new or empty)")
    audit.add_argument(
        "--hypothesis-tests",
        nargs="*",
        default=list(HYPOTHESIS_TESTS),
        help="pytest paths of the Hypothesis part (none: skip it)",
    )
    audit.add_argument("--no-hypothesis", action="store_true", help="skip the Hypothesis part")
    audit.add_argument(
        "--hypothesis-share",
        type=float,
        default=0.25,
        help="share of the budget kept for Hypothesis (default 0.25)",
    )
    add_crash_states_options(audit, AUDIT_CRASH_STATES)
    return audit


def _config(args: argparse.Namespace) -> AuditConfig:
    """Validate everything before anything runs; HarnessError on bad input."""
    from harness.adapters import UnknownAdapterError, get_adapter

    if not args.minutes > 0:
        raise HarnessError("--minutes (or AUDIT_MINUTES): a positive number of minutes")
    if args.batch < 1 or (args.batches is not None and args.batches < 0) or args.workers < 1:
        raise HarnessError("--batch and --workers must be at least 1, --batches at least 0")
    if not 0 <= args.hypothesis_share < 1:
        raise HarnessError("--hypothesis-share: a fraction from 0 up to (not including) 1")
    paths = campaign_scenarios(args)  # refuses a bad one before anything runs
    args.runtime = scenario_runtime(args.runtime, paths)
    try:
        get_adapter(args.runtime)
        shard = None if args.shard is None else Shard.parse(args.shard)
    except (UnknownAdapterError, ValueError) as exc:
        raise HarnessError(f"--runtime or --shard: {exc}") from None
    if shard is not None and args.seed is None:
        raise HarnessError("--shard needs --seed: every shard must list the same campaign")
    if args.out is None:
        check_reports(args.reports)
    timeout = check_black_box(args.runtime, paths[0], args.launch, args.timeout)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big") >> 1
    if args.out is not None:
        run_dir = Path(args.out).resolve()
        if run_dir.exists() and any(run_dir.iterdir()):
            raise HarnessError(f"--out {args.out}: not empty")
    else:
        suffix = "" if shard is None else f"-shard{shard.index}of{shard.count}"
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run_dir = Path(args.reports).resolve() / f"{stamp}-{os.getpid()}-audit{suffix}"
    run_dir.mkdir(parents=True, exist_ok=True)
    campaign = CampaignConfig(
        run_dir,
        paths,
        seed,
        args.batch,
        args.workers,
        args.runtime,
        launch=args.launch,
        shard=shard,
        workdir=workdir(args),
        keep=args.keep,
        whole=True,  # a scenario's sample caps its exhaustive trials in chaos, not here
        timeout_s=timeout,
        crash_states=args.crash_states,
        fs_model=args.fs_model,
    )
    tests = () if args.no_hypothesis else tuple(args.hypothesis_tests)
    return AuditConfig(campaign, args.minutes, args.batches, tests, args.hypothesis_share)


def run(args: argparse.Namespace) -> int:
    from harness.chaos.supervisor import sweep_agents

    config = _config(args)
    try:
        return run_audit(config)
    finally:
        sweep_agents(config.campaign.run_dir)
