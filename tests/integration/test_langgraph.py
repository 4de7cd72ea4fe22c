"""LangGraph under the harness, bare and guarded, in real processes killed by real SIGKILLs.

The bare agent (``langgraph``: a StateGraph with ToolNode on SQLite checkpoints,
durability ``sync``) resumes from LangGraph's checkpoint and runs again a tool
call that was in flight; the guarded one (``langgraph-guarded``) is the same agent
with ``harness.integrations.langgraph`` around its tools. The guarded variant is
held to every invariant; the bare one's figures are recorded (printed), not
asserted: they are what LangGraph does, whatever that is.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from harness.chaos.campaign import CampaignConfig, run_trials
from harness.chaos.schedule import CrashSchedule
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import Golden, TrialResult, TrialSpec, run_trial
from harness.check.invariants import Verdict
from harness.exits import AGENT_REFUSED, AGENT_WRITE_FAILED
from harness.world.store import read_ledger
from tests.integration.conftest import MINI, MINI_BATCH, TrialRunner

CONTAINED = "harness.adapters.langgraph_agent: containment"
CAMPAIGN_POINTS = ("op.after_intent", "op.mid_effect", "op.after_effect", "op.reply")


def _failed(verdicts: tuple[Verdict, ...]) -> dict[str, tuple[str, ...]]:
    return {v.invariant: v.evidence for v in verdicts if v.status not in ("pass", "not-judged")}


def _runs(result: TrialResult, op_id: str) -> int:
    return sum(1 for e in read_ledger(result.directory / "world.db") if e.op_id == op_id)


def _events(result: TrialResult, kind: str) -> list[dict[str, object]]:
    lines = (result.directory / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == kind]


def _lives(result: TrialResult) -> list[dict[str, object]]:
    lives: list[dict[str, object]] = json.loads((result.directory / "lives.json").read_text())
    return lives


class TestGuarded:
    def test_a_tap_killed_after_its_effect_is_verified_not_replayed(
        self, run_mini: TrialRunner
    ) -> None:
        """LangGraph runs the tap's call again; the guard answers with the hint, the model
        checks the screen (s003.check), finds the submission and reports it: one tap."""
        result = run_mini('[{"failpoints":"op.after_effect@3=kill"}]', runtime="langgraph-guarded")
        assert _failed(result.verdicts) == {} and result.status == "pass"
        assert _runs(result, "s003") == 1 and _runs(result, "s003.check") == 1
        assert [e["op"] for e in _events(result, "hint")] == ["s003"]

    def test_a_kill_inside_a_batch(self, run_mini_batch: TrialRunner) -> None:
        """Killed after the batch's typed text (s002a): the three calls are run again by
        LangGraph, the guard verifies the text and retries nothing it must not."""
        result = run_mini_batch(
            '[{"failpoints":"op.after_effect@2=kill"}]', runtime="langgraph-guarded"
        )
        assert _failed(result.verdicts) == {} and result.status == "pass"
        assert _runs(result, "s002a") == 1

    @pytest.mark.parametrize(
        ("schedule", "refused"),
        [
            (
                '[{"failpoints":"op.after_finish@2=kill","after_death":"corrupt:0.5"}]',
                AGENT_REFUSED,
            ),
            ('[{"failpoints":"journal.append@3=enospc"}]', AGENT_WRITE_FAILED),
        ],
    )
    def test_journal_faults_stop_it_before_any_tool(
        self, run_mini: TrialRunner, schedule: str, refused: int
    ) -> None:
        """A corrupt journal is refused and a full disk stops the life, as
        our agent does; every invariant holds."""
        result = run_mini(schedule, runtime="langgraph-guarded")
        assert _failed(result.verdicts) == {}
        assert refused in [life["returncode"] for life in _lives(result)]


class TestBare:
    def test_a_restart_resumes_from_the_checkpoint(self, run_mini: TrialRunner) -> None:
        """Killed before the tap (s003) ran, the next life resumes the thread: the two steps
        before it are not run again, the plan ends, the world is the crash-free one."""
        result = run_mini('[{"failpoints":"op.after_intent@3=kill"}]', runtime="langgraph")
        assert [_runs(result, op) for op in ("s001", "s002", "s003")] == [1, 1, 1]
        judged = {v.invariant: v.status for v in result.verdicts}
        assert judged["I7"] == judged["I8"] == "pass"
        assert [life["returncode"] for life in _lives(result)] == [-signal.SIGKILL, 0]


class TestContained:
    @pytest.mark.parametrize("runtime", ["langgraph", "langgraph-guarded"])
    def test_a_trial_under_containment_reaches_nothing_outside(
        self, runtime: str, tmp_path: Path, mini_golden: Golden, tables: dict[str, Path]
    ) -> None:
        """With HARNESS_CONTAINMENT=1 (no socket but Unix ones, no process, no write outside
        the trial), a killed and restarted agent finishes: LangGraph needs no network."""
        supervisor = Supervisor(
            restart_budget=8, timeout_s=60, extra_env={"HARNESS_CONTAINMENT": "1"}
        )
        schedule = '[{"failpoints":"op.after_effect@3=kill"}]'
        spec = TrialSpec(MINI, 3, CrashSchedule.from_json(schedule), runtime, "contained")
        result = run_trial(spec, tmp_path / "t", mini_golden.directory, supervisor, tables=tables)
        lives = _lives(result)
        assert [life["returncode"] for life in lives] == [-signal.SIGKILL, 0]
        assert not any(CONTAINED in str(life["stderr"]) for life in lives)
        judged = {v.invariant: v.status for v in result.verdicts}
        assert judged["I7"] == "pass"
        if runtime == "langgraph-guarded":
            assert result.status == "pass"


class TestCampaign:
    @pytest.mark.long
    def test_side_by_side_the_guarded_agent_holds(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The same exhaustive trials (kills after an intent, inside and after an effect,
        lost replies) of mini and mini_batch: the guarded agent fails none; the bare
        one's figures are printed as they come."""

        def chosen(spec: TrialSpec) -> bool:
            point, _, rest = spec.label.partition("@")
            return point in CAMPAIGN_POINTS and ("+" not in rest or rest.endswith("+lost-reply"))

        outcomes: dict[str, dict[tuple[str, str], tuple[str, ...]]] = {}
        for runtime in ("real", "langgraph", "langgraph-guarded"):
            config = CampaignConfig(
                tmp_path / runtime,
                (MINI, MINI_BATCH),
                seed=4,
                random_trials=0,
                workers=2,
                runtime=runtime,
            )
            results = run_trials(config, lambda r: None, select=chosen)
            outcomes[runtime] = {
                (Path(r.spec.scenario).stem, r.spec.label): r.failed_invariants for r in results
            }
        labels = outcomes["real"].keys()
        assert outcomes["langgraph"].keys() == labels == outcomes["langgraph-guarded"].keys()
        assert len(labels) >= 20
        assert {k: v for k, v in outcomes["real"].items() if v} == {}
        assert {k: v for k, v in outcomes["langgraph-guarded"].items() if v} == {}
        bare = outcomes["langgraph"]
        per_invariant: dict[str, int] = {}
        for failed in bare.values():
            for invariant in failed:
                per_invariant[invariant] = per_invariant.get(invariant, 0) + 1
        with capsys.disabled():
            print(
                f"\nlanggraph (bare, sync) on {len(bare)} trials of mini and mini_batch: "
                f"{sum(1 for f in bare.values() if f)} failed; by invariant {per_invariant}; "
                "langgraph-guarded: 0 failed"
            )
