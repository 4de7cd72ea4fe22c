"""The self-check's plan: each escape stage runs in the one scenario with the fewest trials it
must escape, and the catching stage tries that scenario first.

The escape stages are most of the self-check's trials; the proof they give (every trial of a
scenario that can expose the mistake, without what exposes it, passes) is the same in any of
those scenarios, so the cheapest carries it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.chaos.campaign import CampaignConfig, exhaustive_specs, run_trials, scenario_seed
from harness.chaos.selfcheck import plan_self_check
from harness.chaos.trial import TrialSpec, golden_dir, load_golden

ROOT = Path(__file__).parent.parent.parent
SCENARIOS = tuple(
    str(ROOT / path)
    for path in (
        "scenarios/phone_task.toml",
        "tests/data/scenarios/mini.toml",
        "scenarios/parallel_phone.toml",
        "tests/data/scenarios/mini_batch.toml",
    )
)


def test_each_escape_stage_is_the_cheapest_scenario_and_the_catch_starts_there(
    tmp_path: Path,
) -> None:
    config = CampaignConfig(tmp_path, SCENARIOS, seed=5, random_trials=0)
    run_trials(config, lambda result: None, select=lambda spec: False)  # the golden runs only
    counted = {}
    for scenario in SCENARIOS:
        seed = scenario_seed(config.seed, scenario)
        golden = load_golden(golden_dir(config.run_dir, scenario, seed))
        assert golden is not None
        counted[scenario] = exhaustive_specs(scenario, seed, golden)

    def cheapest(select: Callable[[TrialSpec], bool] | None) -> str:
        def trials(scenario: str) -> int:
            return sum(1 for spec in counted[scenario] if select is None or select(spec))

        return min(SCENARIOS, key=trials)  # the first of the fewest, in the selection's order

    escaping = 0
    for check in plan_self_check(config):
        for stage in check.escape:
            assert len(stage.scenarios) == 1, (check.name, stage.title)
            escaping += 1
        runtime = check.runtime
        plain = not (runtime.needs_batch or runtime.needs_threads or runtime.needs_model)
        if plain and runtime.needs_step is None and runtime.needs_fault != "sigkill":
            # Escape and catch in the same scenario first: a difference of the fault alone.
            (escape,) = check.escape
            assert check.catch is not None
            assert escape.scenarios == (cheapest(escape.select),), check.name
            assert check.catch.scenarios[0] == escape.scenarios[0], check.name
            assert set(check.catch.scenarios) == set(SCENARIOS), check.name
    assert escaping > 10  # the plan has escape stages: power loss, lost replies, batches
