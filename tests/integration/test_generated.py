"""The generated scenario: a task drawn from each seed, the same in every process, shrunk
when it fails, and counted by the campaign.

``scenarios/generated.toml`` has a ``[generate]`` table: its task is drawn from the
trial's seed (``harness.chaos.generated``). A failing draw is shrunk by Hypothesis
(``harness.strategies.shrink_generated``) to a smaller task written as a scenario
file, whose replay command fails alike in a fresh process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.agent.plan import plan_to_json
from harness.chaos.campaign import CampaignConfig, generated_scenarios, random_picks, run_trials
from harness.chaos.scenario import compile_plan, load_scenario, parse_scenario
from harness.chaos.schedule import CrashSchedule
from harness.chaos.shapes import plan_shapes
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import TrialResult, TrialSpec, golden_dir, prepare_golden, run_trial
from harness.runtime.classes import ToolTable
from harness.strategies import describe_failure, shrink_generated

ROOT = Path(__file__).parent.parent.parent
GENERATED = str(ROOT / "scenarios" / "generated.toml")
TABLE = ToolTable.load(ROOT / "scenarios" / "generated" / "tools.toml")
SUPERVISOR = Supervisor(restart_budget=8, timeout_s=60)
SEEDS = range(120)


def plan_json(seed: int) -> str:
    return plan_to_json(compile_plan(load_scenario(GENERATED), seed=seed, source=GENERATED))


def calls_of(path: Path) -> list[tuple[str, str]]:
    """A scenario file's calls as (tool, arguments as JSON)."""
    scenario = load_scenario(path)
    return [(c.spec.tool, json.dumps(c.spec.args, sort_keys=True)) for c in scenario.calls]


class TestDraw:
    def test_the_same_seed_draws_the_same_task_in_another_process(self) -> None:
        """A task drawn in this process is the one a fresh interpreter draws from its seed."""
        code = (
            "import sys; from harness.chaos.scenario import compile_plan, load_scenario; "
            "from harness.agent.plan import plan_to_json; "
            f"print(plan_to_json(compile_plan(load_scenario({GENERATED!r}), seed=int(sys.argv[1]), "
            f"source={GENERATED!r})))"
        )
        for seed in (3, 7, 1092612473):
            fresh = subprocess.run(
                [sys.executable, "-c", code, str(seed)],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            )
            assert fresh.stdout.rstrip("\n") == plan_json(seed)

    def test_every_seed_draws_a_valid_task_of_its_size(self) -> None:
        """Each seed draws a task of 5 to 12 calls that compiles, and seeds differ."""
        plans = {seed: plan_json(seed) for seed in SEEDS}
        sizes = {len(json.loads(p)["steps"]) for p in plans.values()}
        assert min(sizes) >= 5 and max(sizes) <= 12
        assert len(set(plans.values())) == len(plans)

    def test_the_shapes_of_real_runs_are_favoured(self) -> None:
        """Equal keyed calls, a write repeated after another, and equal calls in a compacted
        journal under identity by content come up among the draws, and batches too."""
        scenario = load_scenario(GENERATED)
        shapes: Counter[str] = Counter()
        batches = 0
        for seed in SEEDS:
            plan = compile_plan(scenario, seed=seed, source=GENERATED)
            shapes.update(plan_shapes(plan, TABLE))
            batches += any(step.batch is not None for step in plan.steps)
        assert shapes["keyed-twice"] >= len(SEEDS) // 5, shapes
        assert shapes["compacts-repeats"] >= len(SEEDS) // 10, shapes
        assert shapes["content-write-repeated"] >= 3, shapes
        assert batches >= len(SEEDS) // 4

    def test_a_file_with_min_calls_past_max_calls_is_refused(self) -> None:
        """``[generate]`` with min_calls above max_calls is refused, naming the field."""
        text = (ROOT / "scenarios" / "generated.toml").read_text("utf-8")
        text = text.replace("min_calls = 5", "min_calls = 13")
        with pytest.raises(Exception, match="min_calls"):
            parse_scenario(text, source=GENERATED)


class TestCampaign:
    def test_random_trials_draw_tasks_of_their_own_and_are_counted(self, tmp_path: Path) -> None:
        """A campaign with the generated scenario runs its random trials each on a task drawn
        from its own seed, marks them generated, and the real runtime holds on them."""
        phone = str(ROOT / "tests" / "data" / "scenarios" / "mini.toml")
        config = CampaignConfig(tmp_path, (GENERATED, phone), seed=48, random_trials=12, workers=2)
        assert generated_scenarios(config.scenarios) == {GENERATED}
        picks = random_picks(config, frozenset({GENERATED}))
        assert sum(s == GENERATED for s, _, _ in picks) > sum(s == phone for s, _, _ in picks)
        results: list[TrialResult] = []
        run_trials(config, results.append)
        drawn = [r for r in results if r.spec.generated]
        assert {r.spec.scenario for r in drawn} == {GENERATED}
        assert not any(r.spec.generated for r in results if r.spec.scenario == phone)
        seeds = {r.spec.seed for r in drawn if r.spec.kind == "random"}
        assert len(seeds) >= 2
        assert [r.spec.trial_id for r in results if r.status != "pass"] == []


@pytest.mark.long
class TestShrink:
    def test_a_failing_task_shrinks_and_its_replay_fails_alike(self, tmp_path: Path) -> None:
        """key-from-args fails a drawn task with two equal charges; the failure shrinks to a
        smaller task of equal charges, and both replay commands fail in a fresh process."""
        scenario = load_scenario(GENERATED)
        seed = next(
            n
            for n in SEEDS
            if "keyed-twice"
            in plan_shapes(plan := compile_plan(scenario, seed=n, source=GENERATED), TABLE)
            and len(plan.steps) >= 8
        )
        schedule = CrashSchedule.from_json('[{"failpoints":"op.before_intent@1=kill"}]')
        spec = TrialSpec(GENERATED, seed, schedule, "key-from-args", "drawn", "random", None, True)
        golden = prepare_golden(GENERATED, seed, golden_dir(tmp_path, GENERATED, seed), SUPERVISOR)
        failed = run_trial(spec, tmp_path / "trial", golden.directory, SUPERVISOR)
        assert "I8" in failed.failed_invariants, describe_failure(failed)

        shrunk = shrink_generated(
            spec, failed.failed_invariants, root=tmp_path / "shrunk", supervisor=SUPERVISOR
        )
        assert shrunk.calls < shrunk.drawn
        calls = calls_of(shrunk.scenario)
        assert len(calls) == shrunk.calls
        assert Counter(calls).most_common(1)[0][0][0] == "charge"  # two equal charges at least
        assert set(shrunk.result.failed_invariants) & set(failed.failed_invariants)

        for command in (spec.replay_command(), shrunk.replay_command()):
            again = subprocess.run(
                command, shell=True, capture_output=True, text=True, cwd=ROOT, timeout=120
            )
            assert again.returncode != 0, command
            assert "I8" in again.stdout and "FAIL" in again.stdout, again.stdout[-2000:]
