"""The public Hypothesis strategies: what they draw is valid, tells steps apart, and shrinks.

Fast: no agent process is started. The one test that runs tools does so
in-process, on a world database in a temporary folder.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import harness.strategies
from harness.agent.plan import load_plan
from harness.chaos.draws import WORLD_PARTS
from harness.chaos.faults import parse_after_death
from harness.chaos.scenario import (
    MAX_BATCH,
    BatchStep,
    Scenario,
    ScenarioStep,
    compile_plan,
    load_scenarios,
    parse_scenario,
    write_plan,
)
from harness.chaos.schedule import RECOVERY_FAILPOINTS, CrashSchedule
from harness.failpoints import parse_failpoints
from harness.runtime.classes import IdempotencyClass, ToolTable
from harness.runtime.errors import ToolError
from harness.runtime.executor import CallContext
from harness.strategies import (
    AUDIT_PROFILE,
    KILL_POINTS,
    crash_schedules,
    process_settings,
    scenario_toml,
    scenarios,
    tool_calls,
)
from harness.world import CATALOG, WorldStore, make_tool_function

ROOT = Path(__file__).parent.parent.parent
TABLE = ToolTable.shipped()
# Pure and fast: a modest number of examples in `make test`, many more in an audit.
EXAMPLES = 2000 if os.environ.get("HYPOTHESIS_PROFILE") == AUDIT_PROFILE else 100
FAST = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SHRINK = settings(database=None, derandomize=True, max_examples=500)
SEARCH = settings(SHRINK, phases=(Phase.generate,))
NO_CHECK = frozenset({IdempotencyClass.READ_ONLY, IdempotencyClass.UNKNOWN})


def _calls(tool: str) -> Callable[[ScenarioStep], bool]:
    return lambda step: step.tool == tool


def _kills(schedule: CrashSchedule) -> list[str]:
    return [life.failpoints for life in schedule.lives if life.failpoints]


class TestPublicApi:
    def test_all_is_sorted_and_exported(self) -> None:
        """``__all__`` is sorted and names exactly what the module defines for users."""
        names = harness.strategies.__all__
        assert list(names) == sorted(names)
        assert all(hasattr(harness.strategies, name) for name in names)

    def test_bad_arguments_are_refused_early(self) -> None:
        """Impossible step or life counts raise InvalidArgument when the strategy is built."""
        with pytest.raises(InvalidArgument):
            scenarios(min_steps=3, max_steps=2)
        with pytest.raises(InvalidArgument):
            scenarios(min_steps=0)
        with pytest.raises(InvalidArgument):
            crash_schedules(max_lives=0)
        with pytest.raises(InvalidArgument):
            tool_calls(step=0)

    def test_process_budget_follows_the_profile(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Process tests run a fixed small sample by default and the audit budget under audit."""
        monkeypatch.delenv("HYPOTHESIS_PROFILE", raising=False)
        small = process_settings(15, steps=6)
        assert (small.max_examples, small.stateful_step_count, small.deadline) == (15, 6, None)
        assert small.derandomize
        monkeypatch.setenv("HYPOTHESIS_PROFILE", AUDIT_PROFILE)
        large = process_settings(15, steps=6)
        assert large.max_examples == settings.get_profile(AUDIT_PROFILE).max_examples >= 500
        assert large.stateful_step_count > 6 and not large.derandomize


class TestToolCalls:
    @FAST
    @given(tool_calls())
    def test_a_call_validates_and_checks_only_what_changes(self, step: ScenarioStep) -> None:
        """A drawn call is a valid step; read-only, ask-user and UNKNOWN tools carry no check."""
        tool_class = TABLE.classify(step.tool)
        if tool_class.ask_user or tool_class.idempotency in NO_CHECK:
            assert step.verify is None
        if tool_class.idempotency is IdempotencyClass.NON_IDEMPOTENT:
            assert step.verify is not None
        Scenario.model_validate({"name": "one", "description": "one step", "steps": [step]})

    def test_every_catalog_tool_is_drawn(self) -> None:
        """Each tool of the catalog, of every class, comes out of ``tool_calls()``."""
        for tool in CATALOG:
            found = find(tool_calls(), _calls(tool), settings=SEARCH)
            assert found.tool == tool

    @FAST
    @given(tool_calls(step=7))
    def test_a_numbered_call_carries_its_number_where_checked(self, step: ScenarioStep) -> None:
        """With ``step=7`` every value a check reads names step 7."""
        if step.verify is not None:
            check = step.verify.compile(step.args)
            rendered = json.dumps([check.args, check.path, check.contains, check.equals])
            assert "-7" in rendered or "#7" in rendered


class TestScenarios:
    @FAST
    @given(scenarios())
    def test_a_scenario_validates_and_compiles(self, scenario: Scenario) -> None:
        """A drawn scenario compiles to a plan of op ids s001... that the agent can read."""
        assert 1 <= len(scenario.steps) <= 8
        plan = compile_plan(scenario, seed=0, source="<drawn>")
        assert [s.op_id for s in plan.steps] == [f"s{i:03d}" for i in range(1, len(plan.steps) + 1)]
        with tempfile.TemporaryDirectory() as folder:
            write_plan(plan, Path(folder) / "plan.json")
            assert load_plan(Path(folder) / "plan.json") == plan

    @FAST
    @given(scenarios())
    def test_a_scenario_round_trips_through_its_file(self, scenario: Scenario) -> None:
        """``scenario_toml`` writes a file that reads back to the same scenario."""
        again = parse_scenario(scenario_toml(scenario), source="<toml>")
        assert again.model_dump() == scenario.model_dump()

    def test_shipped_scenarios_round_trip(self) -> None:
        """Hand-written scenarios, Faker recipes included, survive ``scenario_toml`` too."""
        for scenario in load_scenarios(ROOT / "scenarios"):
            again = parse_scenario(scenario_toml(scenario), source=scenario.source)
            assert again.model_dump() == scenario.model_dump(), scenario.source

    @FAST
    @given(st.one_of(scenarios(min_steps=2), scenarios(min_steps=2, batches=True)))
    def test_each_check_tells_its_step_apart(self, scenario: Scenario) -> None:
        """A VERIFY check fails before its step ran and holds right after it succeeded."""
        plan = compile_plan(scenario, seed=0, source="<drawn>")
        with (
            tempfile.TemporaryDirectory() as folder,
            WorldStore.open(Path(folder) / "world.db") as world,
        ):
            execute = make_tool_function(world)
            for step in plan.steps:
                check = step.verify
                needs_check = check is not None and not TABLE.classify(step.tool).retry_safe
                if needs_check:
                    assert check is not None
                    before = execute(check.tool, check.args, CallContext("c", check.tool, 1, 1))
                    assert not check.holds(before), f"step {step.index} looks done before it ran"
                try:  # a last attempt, past any fail_attempts
                    execute(step.tool, step.args, CallContext(step.op_id, step.tool, 3, 1))
                    succeeded = True
                except ToolError:
                    succeeded = False
                if needs_check:
                    assert check is not None
                    after = execute(check.tool, check.args, CallContext("c", check.tool, 1, 1))
                    assert check.holds(after) is succeeded, f"step {step.index}: {check}"

    @FAST
    @given(scenarios(batches=True))
    def test_drawn_batches_commute_and_round_trip(self, scenario: Scenario) -> None:
        """A drawn batch holds 2 to MAX_BATCH calls, never two writers of one part of the
        world, compiles to ids s004a, s004b, ... and reads back from its file."""
        for step in scenario.steps:
            if isinstance(step, BatchStep):
                assert 2 <= len(step.batch) <= MAX_BATCH
                parts = [WORLD_PARTS[c.tool] for c in step.batch if c.tool in WORLD_PARTS]
                assert len(parts) == len(set(parts)), step
        plan = compile_plan(scenario, seed=0, source="<drawn>")
        assert [s.op_id for s in plan.steps] == [c.op_id for c in scenario.calls]
        assert all((s.batch is None) == s.op_id[-1].isdigit() for s in plan.steps)
        again = parse_scenario(scenario_toml(scenario), source="<toml>")
        assert again.model_dump() == scenario.model_dump()

    def test_batches_are_drawn_and_shrink_to_two_reads(self) -> None:
        """Asked for a batch, the strategy finds one, and it shrinks to two plain reads."""
        found = find(
            scenarios(batches=True),
            lambda s: any(isinstance(step, BatchStep) for step in s.steps),
            settings=SHRINK,
        )
        (batch,) = found.steps
        assert isinstance(batch, BatchStep) and len(batch.batch) == 2
        for call in batch.batch:
            assert TABLE.classify(call.tool).idempotency is IdempotencyClass.READ_ONLY

    def test_shrinks_to_the_fewest_simplest_steps(self) -> None:
        """A scenario asked to have at least three steps shrinks to three plain reads."""
        found = find(scenarios(), lambda s: len(s.steps) >= 3, settings=SHRINK)
        assert len(found.steps) == 3
        for step in (call.spec for call in found.calls):
            assert TABLE.classify(step.tool).idempotency is IdempotencyClass.READ_ONLY
            assert "fail_attempts" not in step.args

    def test_shrinks_to_the_one_step_that_matters(self) -> None:
        """A scenario asked to hold a form tap shrinks to that single tap."""
        found = find(
            scenarios(),
            lambda s: any(c.spec.tool == "ui_tap" and "form" in c.spec.args for c in s.calls),
            settings=SHRINK,
        )
        assert [call.spec.tool for call in found.calls] == ["ui_tap"]


class TestCrashSchedules:
    @FAST
    @given(crash_schedules())
    def test_a_schedule_round_trips_through_json(self, schedule: CrashSchedule) -> None:
        """A drawn schedule, a kill at 0.0 ms included, survives ``to_json``/``from_json``."""
        assert CrashSchedule.from_json(schedule.to_json()) == schedule
        assert 1 <= len(schedule.lives) <= 3
        # Every life meets a fault: a kill, or a power cut after it ran to its end.
        assert all(
            life.failpoints or life.kill_after_ms is not None or life.after_death
            for life in schedule.lives
        )
        assert "recovery." not in schedule.lives[0].failpoints  # nothing to recover yet

    @FAST
    @given(crash_schedules())
    def test_every_fault_spec_parses(self, schedule: CrashSchedule) -> None:
        """Failpoint specs and after-death specs are ones the agent and the supervisor accept."""
        for life in schedule.lives:
            if life.failpoints:
                parse_failpoints(life.failpoints, source="drawn")
            if life.after_death:
                kind, _ = parse_after_death(life.after_death)
                assert kind == "power-loss"

    @FAST
    @given(crash_schedules({"op.after_intent": 2, "op.mid_effect": 0}, random_time=False))
    def test_hits_bound_the_failpoint_kills(self, schedule: CrashSchedule) -> None:
        """With a golden run's counts, kills land only on points it hit, at hits it made."""
        allowed = {"op.after_intent@1=kill", "op.after_intent@2=kill"}
        allowed |= {f"{point}@1=kill" for point in RECOVERY_FAILPOINTS}
        assert set(_kills(schedule)) <= allowed
        assert all(life.kill_after_ms is None for life in schedule.lives)

    @pytest.mark.parametrize(
        ("wanted", "shrunk"),
        [
            # The first life has nothing to recover: a kill in recovery comes second.
            ("kill during recovery", "op.before_intent@1=kill | recovery.after_decision@1=kill"),
            ("random-time kill", "kill@0.000ms"),
            ("power loss", "op.before_intent@1=kill then power-loss:drop"),
            ("torn journal", "op.before_intent@1=kill then power-loss:tear:0.000:0"),
            ("fsync kill", "journal.before_fsync@"),
        ],
    )
    def test_every_fault_kind_is_drawn_and_shrinks_plain(self, wanted: str, shrunk: str) -> None:
        """Each kind of fault is drawn, and shrinks to its plainest form in the fewest lives."""
        conditions = {
            "kill during recovery": lambda s: any("recovery." in k for k in _kills(s)),
            "random-time kill": lambda s: any(x.kill_after_ms is not None for x in s.lives),
            "power loss": lambda s: any(x.after_death for x in s.lives),
            "torn journal": lambda s: any("tear" in (x.after_death or "") for x in s.lives),
            "fsync kill": lambda s: any("journal." in k for k in _kills(s)),
        }
        found = find(crash_schedules(), conditions[wanted], settings=SHRINK)
        assert found.describe().startswith(shrunk)

    def test_shrinks_to_the_fewest_plainest_lives(self) -> None:
        """A schedule asked for two lives shrinks to two kills before the first intent."""
        found = find(crash_schedules(), lambda s: len(s.lives) >= 2, settings=SHRINK)
        assert found.describe() == "op.before_intent@1=kill | op.before_intent@1=kill"
        assert found.kills == 2

    @given(st.data())
    def test_kill_points_are_failpoints(self, data: st.DataObject) -> None:
        """Every point a drawn kill names is a failpoint an agent process hits (``FAILPOINTS``)."""
        point = data.draw(st.sampled_from(KILL_POINTS))
        parse_failpoints(f"{point}@1=kill", source="test")
