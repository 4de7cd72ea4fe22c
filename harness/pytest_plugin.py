"""The pytest plugin ``agent_chaos``: crash trials and campaigns from your own test suite.

Registered by entry point (``pytest11``), so installing the package is enough::

    def test_my_runtime_survives_crashes(chaos):
        chaos.assert_survives(chaos.run_campaign())

Options (all optional):

- ``--chaos-runtime NAME``: the runtime under test, any name
  ``harness.adapters.get_adapter`` knows (``real``, a broken runtime, ``dbos``,
  ``module:<your.agent>``); default ``real``.
- ``--chaos-trials N``: the size of ``run_campaign()``; default 20.
- ``--chaos-scenario PATH``: the scenario file; default the one shipped in the
  package (``harness/scenarios/every_class.toml``: one tool of every class, a
  step that fails, a step no read-only tool can check).
- ``--chaos-seed N``: the random seed of ``run_trial`` (its Faker arguments) and of
  ``run_campaign`` (as ``python -m harness chaos --seed``); default 1, so that a
  suite runs the same trials on every machine (change it to explore).
- ``--chaos-workers N`` and ``--chaos-launch fork|exec``: as for ``python -m harness chaos``.

The full note: docs/reference/modules.md (``harness/pytest_plugin.py``).
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the plugin loads in every pytest run of the venv: import the harness lazily
    from harness.chaos.schedule import CrashSchedule
    from harness.chaos.supervisor import Supervisor
    from harness.chaos.trial import TrialResult, TrialSpec

__all__ = [
    "DEFAULT_SCENARIO",
    "DEFAULT_SCHEDULE",
    "Chaos",
    "ChaosOptions",
    "assert_survives",
    "sample_trials",
]

DEFAULT_SCENARIO = Path(__file__).parent / "scenarios" / "every_class.toml"
DEFAULT_SCHEDULE = '[{"failpoints":"op.after_intent@1=kill"}]'
"""``run_trial``'s schedule when none is given: a kill right after the first call's intent."""
DEFAULT_TRIALS = 20
DEFAULT_SEED = 1
RANDOM_SHARE = 5
"""One trial in this many of a campaign is a random-time kill; the rest are failpoint kills."""
MAX_FAILURES_SHOWN = 10


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agent_chaos", "crash trials of an agent runtime (agent-crash-harness)")
    group.addoption(
        "--chaos-runtime",
        default="real",
        help="runtime under test: real, a broken runtime, dbos, module:<pkg.agent> (default real)",
    )
    group.addoption(
        "--chaos-trials",
        type=int,
        default=DEFAULT_TRIALS,
        help=f"trials in chaos.run_campaign() (default {DEFAULT_TRIALS})",
    )
    group.addoption(
        "--chaos-scenario",
        default=None,
        help="scenario file (default: the package's every_class.toml)",
    )
    group.addoption(
        "--chaos-seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"seed of run_trial and run_campaign (default {DEFAULT_SEED})",
    )
    group.addoption(
        "--chaos-workers",
        type=int,
        default=min(4, os.cpu_count() or 2),
        help="worker processes of a campaign",
    )
    group.addoption("--chaos-launch", choices=("fork", "exec"), default="fork")


@dataclass(frozen=True, slots=True)
class ChaosOptions:
    """The plugin's options, validated."""

    runtime: str = "real"
    trials: int = DEFAULT_TRIALS
    scenario: str = str(DEFAULT_SCENARIO)
    seed: int = DEFAULT_SEED
    workers: int = 2
    launch: str = "fork"

    @classmethod
    def from_config(cls, config: pytest.Config) -> ChaosOptions:
        scenario = config.getoption("--chaos-scenario")
        return cls(
            config.getoption("--chaos-runtime"),
            config.getoption("--chaos-trials"),
            str(Path(scenario).resolve()) if scenario else str(DEFAULT_SCENARIO),
            config.getoption("--chaos-seed"),
            config.getoption("--chaos-workers"),
            config.getoption("--chaos-launch"),
        )


def pytest_configure(config: pytest.Config) -> None:
    """Refuse bad options before any test runs (only options given: the plugin loads everywhere)."""
    options = ChaosOptions.from_config(config)
    if options.trials < 1 or options.workers < 1:
        raise pytest.UsageError("--chaos-trials and --chaos-workers must be at least 1")
    if options.runtime != "real":
        from harness.adapters import UnknownAdapterError, get_adapter

        try:
            get_adapter(options.runtime)
        except UnknownAdapterError as exc:
            raise pytest.UsageError(f"--chaos-runtime: {exc}") from None
    if config.getoption("--chaos-scenario"):
        from harness.chaos.scenario import load_scenario
        from harness.runtime.errors import HarnessError

        try:
            load_scenario(options.scenario)
        except HarnessError as exc:
            raise pytest.UsageError(f"--chaos-scenario: {exc}") from None


@pytest.fixture
def chaos(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Chaos]:
    """Crash trials of the runtime under test, in this test's ``tmp_path``."""
    runner = Chaos(ChaosOptions.from_config(request.config), tmp_path / "chaos")
    try:
        yield runner
    finally:
        runner.close()


class Chaos:
    """What the ``chaos`` fixture gives a test: single trials, campaigns, and the verdict check.

    Every run folder lies under ``root``; ``close`` kills and reaps any agent
    process still alive (the supervisor already reaps each one it starts).
    """

    def __init__(self, options: ChaosOptions, root: Path) -> None:
        self.options = options
        self.root = root
        self._counter = itertools.count(1)
        self._supervisor: Supervisor | None = None

    def run_trial(
        self,
        scenario: str | Path | None = None,
        schedule: CrashSchedule | str | None = None,
    ) -> TrialResult:
        """One trial of ``scenario`` under ``schedule`` (a ``CrashSchedule`` or its JSON).

        Defaults: the option's scenario and ``DEFAULT_SCHEDULE``. The result
        holds the verdicts (``result.verdicts``, ``result.status``).
        """
        from harness.chaos.scenario import load_scenario
        from harness.chaos.schedule import CrashSchedule
        from harness.chaos.supervisor import Supervisor
        from harness.chaos.tables import scenario_tables
        from harness.chaos.trial import TrialSpec, prepare_golden, run_trial

        path = str(Path(scenario).resolve()) if scenario is not None else self.options.scenario
        load_scenario(path)  # a bad file raises ScenarioError before any process starts
        if not isinstance(schedule, CrashSchedule):
            schedule = CrashSchedule.from_json(schedule or DEFAULT_SCHEDULE)
        if self._supervisor is None:
            self._supervisor = Supervisor(launch=self.options.launch)
        seed = self.options.seed
        tables = scenario_tables(self.root / "tables", path)
        golden = prepare_golden(
            path,
            seed,
            self.root / "golden" / f"{Path(path).stem}-{seed}",
            self._supervisor,
            tables=tables,
        )
        spec = TrialSpec(
            path, seed, schedule, self.options.runtime, f"fixture{next(self._counter)}", "custom"
        )
        return run_trial(
            spec,
            self.root / "trials" / spec.trial_id,
            golden.directory,
            self._supervisor,
            tables=tables,
        )

    def run_campaign(self, n: int | None = None) -> list[TrialResult]:
        """``n`` trials (default ``--chaos-trials``) of the scenario's campaign, in a pool."""
        from harness.chaos.campaign import CampaignConfig, run_trials

        size = self.options.trials if n is None else n
        if size < 1:
            raise ValueError(f"run_campaign: n must be at least 1, not {size}")
        config = CampaignConfig(
            self.root / f"campaign{next(self._counter)}",
            (self.options.scenario,),
            self.options.seed,
            random_trials=size // RANDOM_SHARE,
            workers=self.options.workers,
            runtime=self.options.runtime,
            launch=self.options.launch,
        )
        config.run_dir.mkdir(parents=True)
        listed: list[TrialSpec] = []

        def list_only(spec: TrialSpec) -> bool:
            listed.append(spec)
            return False

        # The first pass only lists the campaign (and leaves its golden runs for the second).
        run_trials(config, _ignore, select=list_only)
        chosen = {spec.trial_id for spec in sample_trials(listed, size, self.options.seed)}
        return run_trials(config, _ignore, select=lambda spec: spec.trial_id in chosen)

    @staticmethod
    def assert_survives(results: Iterable[TrialResult]) -> None:
        """``assert_survives(results)``, reachable from the fixture."""
        __tracebackhide__ = True  # pytest shows the user's test, not this frame
        assert_survives(results)

    def close(self) -> None:
        """Kill and reap every agent process this fixture's trials may have left."""
        from harness.chaos.supervisor import kill_all, sweep_agents

        kill_all()
        sweep_agents(self.root)


def _ignore(result: TrialResult) -> None:
    return None


def sample_trials(specs: Sequence[TrialSpec], n: int, seed: int) -> list[TrialSpec]:
    """``n`` of ``specs``, in their order: every random trial, then failpoint families in turn.

    Exhaustive trials are grouped by failpoint (``op.after_intent@3+table`` is
    of ``op.after_intent``), each group shuffled by ``seed``, and the groups
    taken round-robin, so a small sample still kills at every kind of point.
    A pure function of its arguments.
    """
    if len(specs) <= n:
        return list(specs)
    chosen = [spec for spec in specs if spec.kind != "exhaustive"][:n]
    families: dict[str, list[TrialSpec]] = {}
    for spec in specs:
        if spec.kind == "exhaustive":
            families.setdefault(spec.label.split("@", 1)[0], []).append(spec)
    queues = []
    for family, members in sorted(families.items()):
        random.Random(f"{seed}:{family}").shuffle(members)
        queues.append(iter(members))
    for spec in _round_robin(queues):
        if len(chosen) >= n:
            break
        chosen.append(spec)
    keep = {id(spec) for spec in chosen}
    return [spec for spec in specs if id(spec) in keep]


def _round_robin(queues: list[Iterator[TrialSpec]]) -> Iterator[TrialSpec]:
    while queues:
        for queue in list(queues):
            spec = next(queue, None)
            if spec is None:
                queues.remove(queue)
            else:
                yield spec


def assert_survives(results: Iterable[TrialResult]) -> None:
    """Raise AssertionError unless every trial passed (every verdict pass or not-judged).

    A trial that could not be judged (some verdict ``unknown``, none failed)
    fails too: it proves nothing. The message lists, for each trial that did
    not pass, each invariant that failed or could not be judged with its first
    evidence line, its folder and the one command that replays it. An empty
    list fails too: no trial proves nothing.
    """
    __tracebackhide__ = True  # pytest shows the user's test, not this frame
    ran = list(results)
    if not ran:
        raise AssertionError("no trial ran: an empty campaign proves nothing")
    bad = [r for r in ran if r.status != "pass"]
    if not bad:
        return
    failed = sum(r.status == "fail" for r in bad)
    lines = [
        f"{len(bad)} of {len(ran)} trials did not hold: {failed} broke an invariant, "
        f"{len(bad) - failed} could not be judged:"
    ]
    for result in bad[:MAX_FAILURES_SHOWN]:
        lines.append(f"- {result.spec.trial_id} ({result.spec.schedule.describe()})")
        for verdict in result.verdicts:
            if verdict.status in _NOT_HELD:
                first = verdict.evidence[0] if verdict.evidence else "(no evidence)"
                lines.append(
                    f"    {verdict.invariant} {verdict.title} {_NOT_HELD[verdict.status]}: {first}"
                )
        lines.append(f"    folder: {result.directory}")
        lines.append(f"    replay: {result.spec.replay_command()}")
    if len(bad) > MAX_FAILURES_SHOWN:
        lines.append(f"... and {len(bad) - MAX_FAILURES_SHOWN} more")
    raise AssertionError("\n".join(lines))


_NOT_HELD = {"fail": "FAILED", "unknown": "COULD NOT BE JUDGED"}
"""The verdicts ``assert_survives`` lists, and how it names them."""
