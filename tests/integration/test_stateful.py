"""A stateful test: tool calls, kills, power losses and restarts of a real agent, in any order.

One trial folder per run of the machine. ``call_a_tool`` appends a drawn step
to ``plan.json`` (the agent reads it at each start; op ids ``s001``,
``s002``... never move); ``kill`` starts one agent life on the plan so far
with a failpoint kill armed; ``power_loss`` does the same and then cuts the
journal back to what was fsynced (dropped or torn); ``restart`` runs one clean
life, which must finish the plan. Every life is a real process started,
SIGKILLed and reaped by the ``Supervisor``.

After every step the invariants that need no golden run hold (I1-I6, I9);
after a life that finished the plan, I7 too, and I8 against a crash-free run
of the same plan in a folder of its own.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from harness.agent.plan import Plan
from harness.chaos.scenario import Scenario, ScenarioStep, compile_plan, write_plan
from harness.chaos.schedule import OP_FAILPOINTS, RECOVERY_FAILPOINTS, CrashSchedule, Life
from harness.chaos.supervisor import LifeResult, Supervisor
from harness.check.invariants import check_trial
from harness.strategies import KILL_POINTS, process_settings, tool_calls

ONE_LIFE = Supervisor(restart_budget=1, timeout_s=60)
"""Runs exactly one life per call: the machine decides what comes next."""

ALWAYS = ("I1", "I2", "I3", "I4", "I5", "I6", "I9")
WHEN_FINISHED = ("I7", "I8")
NO_BUDGET = 1_000_000  # lives accumulate by design; I7's budget is not what is tested here

kill_points = st.sampled_from((*OP_FAILPOINTS, *RECOVERY_FAILPOINTS))
power_cut_points = st.sampled_from(KILL_POINTS)
hits = st.integers(1, 2)  # a life runs only the steps not yet done: kills land early
power_losses = st.one_of(
    st.just("power-loss:drop"),
    st.builds("power-loss:tear:{:.3f}:{}".format, st.floats(0, 1), st.integers(0, 15)),
)


def _renumber(path: Path, start: int, life: int) -> None:
    """Give the lines a one-life supervisor run appended from byte ``start`` their life number."""
    if not path.exists():
        return
    with path.open("r+b") as file:
        file.seek(start)
        lines = [json.loads(line) for line in file.read().splitlines() if line]
        file.seek(start)
        file.truncate()
        for item in lines:
            if "life" in item:
                item["life"] = life
            file.write((json.dumps(item) + "\n").encode())


class AgentLifecycle(RuleBasedStateMachine):
    """One trial folder, a plan that grows, one agent process per life."""

    runtime = "real"
    kept_failure: ClassVar[Path | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="stateful-"))
        self.trial = self.root / "trial"
        self.trial.mkdir()
        self.steps: list[ScenarioStep] = []
        self.lives: list[LifeResult] = []
        self.finished = False  # the last life ran the whole current plan and exited 0
        self.goldens: dict[int, Path] = {}
        self.failed = False

    # -- rules ----------------------------------------------------------------------------

    @rule(data=st.data())
    def call_a_tool(self, data: st.DataObject) -> None:
        # Numbered steps: no step's check can be satisfied by another step's effect.
        # No transient failures: see TestFindings in test_shrinking.py.
        step = data.draw(tool_calls(step=len(self.steps) + 1))
        self.steps.append(step)
        plan = self._plan()
        write_plan(plan, self.trial / "plan.json")
        self.finished = False

    @precondition(lambda self: bool(self.steps) and not self.finished)
    @rule(point=kill_points, hit=hits)
    def kill(self, point: str, hit: int) -> None:
        self._live(Life(f"{point}@{hit}=kill"))

    @precondition(lambda self: bool(self.steps) and not self.finished)
    @rule(point=power_cut_points, hit=hits, fault=power_losses)
    def power_loss(self, point: str, hit: int, fault: str) -> None:
        self._live(Life(f"{point}@{hit}=kill", after_death=fault))

    @precondition(lambda self: bool(self.steps))
    @rule()
    def restart(self) -> None:
        life = self._live(Life())
        self.failed = not life.done
        assert life.done, f"a clean life did not finish: exit {life.returncode} {life.stderr}"

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def invariants_hold(self) -> None:
        if not self.lives:
            return
        golden = self._golden() if self.finished else None
        wanted = ALWAYS + (WHEN_FINISHED if self.finished else ())
        verdicts = check_trial(self.trial, golden, restart_budget=NO_BUDGET)
        # Lives killed before the agent opened its world leave no world.db: no tool
        # ran, and the checkers that read the ledger can only say "unknown".
        fine = {"pass"} if (self.trial / "world.db").exists() else {"pass", "unknown"}
        bad = [v for v in verdicts if v.invariant in wanted and v.status not in fine]
        self.failed = bool(bad)
        assert not bad, "\n".join(
            [f"trial folder {self.trial}, lives: {[lv.reached or 'done' for lv in self.lives]}"]
            + [f"{v.invariant} {v.status}: {'; '.join(v.evidence)}" for v in bad]
        )

    def teardown(self) -> None:
        # Only the latest failing run's folder stays: Hypothesis reports that one last.
        kept = AgentLifecycle.kept_failure
        if self.failed and kept is not None:
            shutil.rmtree(kept, ignore_errors=True)
        if self.failed:
            AgentLifecycle.kept_failure = self.root
        else:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- helpers --------------------------------------------------------------------------

    def _plan(self) -> Plan:
        scenario = Scenario.model_validate(
            {"name": "stateful", "description": "grown one call at a time", "steps": self.steps}
        )
        return compile_plan(scenario, seed=0, source="<stateful>")

    def _live(self, life: Life) -> LifeResult:
        """One life of the agent on the plan so far, numbered after the lives before it."""
        number = len(self.lives) + 1
        logs = [self.trial / "events.jsonl", self.trial / "history.jsonl"]
        starts = [log.stat().st_size if log.exists() else 0 for log in logs]
        [result] = ONE_LIFE.run(self.trial, CrashSchedule((life,)), runtime=self.runtime)
        for log, start in zip(logs, starts, strict=True):
            _renumber(log, start, number)
        result = replace(result, life=number)
        self.lives.append(result)
        lives = json.dumps([asdict(lv) for lv in self.lives], indent=1)
        (self.trial / "lives.json").write_text(lives, "utf-8")
        self.finished = result.done
        return result

    def _golden(self) -> Path:
        """A crash-free run of the current plan, in a folder of its own."""
        count = len(self.steps)
        if count not in self.goldens:
            golden = self.root / f"golden-{count}"
            golden.mkdir()
            shutil.copyfile(self.trial / "plan.json", golden / "plan.json")
            [result] = ONE_LIFE.run(golden, CrashSchedule())
            assert result.done, f"the crash-free run did not finish: {result.stderr}"
            self.goldens[count] = golden
        return self.goldens[count]


class BrokenAgentLifecycle(AgentLifecycle):
    """The same machine over a runtime that runs durable successes again at each start."""

    runtime = "replay-success"

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)  # failing is what this one is for


class TestAgentLifecycle:
    def test_invariants_hold_after_every_call_kill_power_loss_and_restart(self) -> None:
        """Calls, kills, power losses and restarts in any order keep every invariant."""
        run_state_machine_as_test(AgentLifecycle, settings=process_settings(10, steps=8))

    def test_a_broken_runtime_is_caught_between_steps(self) -> None:
        """The same machine over a runtime that replays successes fails I1 between steps."""
        found = settings(
            max_examples=60,
            stateful_step_count=8,
            derandomize=True,
            database=None,
            deadline=None,
            phases=(Phase.generate,),  # found is enough here; shrinking is test_shrinking's
            suppress_health_check=(HealthCheck.too_slow,),
        )
        with pytest.raises(AssertionError, match="I1 fail"):
            run_state_machine_as_test(BrokenAgentLifecycle, settings=found)
