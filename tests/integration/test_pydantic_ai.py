"""Pydantic AI on its DBOS integration as the runtime under test, bare and guarded.

Real agent processes (forked from the warm fork server), real SIGKILLs. The
guarded agent (this project's runtime inside the DBOS step of each tool call)
must hold every trial; the bare one's figures are recorded for the findings,
not asserted: nothing here is shaped to make it fail.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.chaos.campaign import CampaignConfig, run_trials
from harness.chaos.schedule import CrashSchedule
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import Golden, TrialResult, TrialSpec, prepare_golden, run_trial
from harness.exits import AGENT_WRITE_FAILED
from harness.world.store import read_ledger
from tests.integration.conftest import MINI, MINI_BATCH, MINI_SEED, TrialRunner

TAP_AFTER_EFFECT = '[{"failpoints":"op.after_effect@3=kill"}]'  # s003: ui_tap with a form
CONTAINED = "harness.agent: containment: "


def _history(result: TrialResult) -> list[tuple[int, str, str]]:
    lines = (result.directory / "history.jsonl").read_text().splitlines()
    return [(int(h["life"]), str(h["type"]), str(h["op"])) for h in map(json.loads, lines)]


def _hints(result: TrialResult) -> list[tuple[int, str]]:
    lines = (result.directory / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    return [(int(e["life"]), str(e["op"])) for e in events if e["event"] == "hint"]


class TestWhatDbosRecords:
    def test_a_model_request_and_each_tool_call_are_steps(self, run_mini: TrialRunner) -> None:
        """A crash-free run leaves in DBOS's database one step per model request and one
        per tool call, in the order of the turns (the module docstring's claim)."""
        result = run_mini("[{}]", runtime="pydantic-ai")
        assert result.status == "pass", result.verdicts
        with sqlite3.connect(result.directory / "dbos.sqlite") as db:
            steps = [
                name
                for (name,) in db.execute(
                    "SELECT function_name FROM operation_outputs WHERE workflow_uuid = 'plan' "
                    "ORDER BY function_id"
                )
            ]
        request, call = "harness_plan__model.request", "harness.pydantic_ai.tool_call"
        assert steps == [request, call] * 6 + [request]  # six one-call turns, then "done"


class TestGuardedAgent:
    def test_a_tap_killed_after_its_effect_is_verified_not_replayed(
        self, run_mini: TrialRunner
    ) -> None:
        """DBOS runs the tap's step again after the restart; the guard inside it answers
        with the VERIFY hint, the model checks, finds the submission, and reports it."""
        result = run_mini(TAP_AFTER_EFFECT, runtime="pydantic-ai-guarded")
        assert result.status == "pass", [v for v in result.verdicts if v.status != "pass"]
        ops = [e.op_id for e in read_ledger(result.directory / "world.db")]
        assert ops.count("s003") == 1 and "s003.check" in ops and "s003.redo" not in ops
        assert (2, "s003") in _hints(result)
        assert (2, "ok", "s003") in _history(result)

    def test_a_full_disk_stops_the_life_and_the_next_one_resumes(
        self, run_mini: TrialRunner
    ) -> None:
        """ENOSPC on an append inside a guarded call ends the process (status 3), so DBOS
        keeps the workflow pending; the next life recovers it and every invariant holds."""
        result = run_mini(
            '[{"failpoints":"journal.append@6=enospc"}]', runtime="pydantic-ai-guarded"
        )
        lives = json.loads((result.directory / "lives.json").read_text())
        assert [life["returncode"] for life in lives][:1] == [AGENT_WRITE_FAILED], lives
        assert result.status == "pass", [v for v in result.verdicts if v.status != "pass"]


@pytest.mark.long
class TestSideBySide:
    @pytest.mark.parametrize("scenario", [MINI, MINI_BATCH], ids=["mini", "mini_batch"])
    def test_a_small_campaign(
        self, scenario: str, tmp_path: Path, record_property: Callable[[str, object], None]
    ) -> None:
        """The same exhaustive trials (a kill after each effect): the guarded agent holds
        every one; the bare agent's failures are recorded, whatever they are."""

        def after_effect(spec: TrialSpec) -> bool:
            return spec.label.startswith("op.after_effect@") and "+" not in spec.label

        outcomes: dict[str, dict[str, tuple[str, ...]]] = {}
        for runtime in ("pydantic-ai", "pydantic-ai-guarded"):
            config = CampaignConfig(
                tmp_path / runtime, (scenario,), seed=4, random_trials=0, workers=2, runtime=runtime
            )
            results = run_trials(config, lambda r: None, select=after_effect)
            outcomes[runtime] = {r.spec.label: r.failed_invariants for r in results}
            unknown = [r.spec.label for r in results if r.status == "unknown"]
            assert not unknown or runtime == "pydantic-ai", unknown
        bare, guarded = outcomes["pydantic-ai"], outcomes["pydantic-ai-guarded"]
        assert bare.keys() == guarded.keys() and len(guarded) >= 4
        assert all(failed == () for failed in guarded.values()), guarded
        figures = Counter(inv for failed in bare.values() for inv in failed)
        recorded = (
            f"{sum(1 for f in bare.values() if f)} of {len(bare)} trials failed; "
            f"by invariant {dict(sorted(figures.items()))}"
        )
        record_property(f"pydantic-ai {Path(scenario).stem}", recorded)  # in the JUnit XML
        print(f"pydantic-ai on {Path(scenario).stem}: {recorded}")  # shown with pytest -rP


@pytest.fixture(scope="module")
def contained() -> Supervisor:
    return Supervisor(restart_budget=8, timeout_s=60, extra_env={"HARNESS_CONTAINMENT": "1"})


@pytest.fixture(scope="module")
def contained_golden(tmp_path_factory: pytest.TempPathFactory, contained: Supervisor) -> Golden:
    return prepare_golden(MINI, MINI_SEED, tmp_path_factory.mktemp("contained-golden"), contained)


class TestContainment:
    @pytest.mark.parametrize("runtime", ["pydantic-ai", "pydantic-ai-guarded"])
    def test_a_contained_trial_reaches_nothing_outside(
        self, runtime: str, tmp_path: Path, contained: Supervisor, contained_golden: Golden
    ) -> None:
        """Under HARNESS_CONTAINMENT=1 (no socket but a Unix one, no process, no write
        outside the trial) a trial killed inside a call and recovered runs to its end:
        Pydantic AI, DBOS and the guard reach no network."""
        schedule = CrashSchedule.from_json('[{"failpoints":"op.after_intent@2=kill"}]')
        spec = TrialSpec(MINI, MINI_SEED, schedule, runtime, "contained")
        result = run_trial(spec, tmp_path / "trial", contained_golden.directory, contained)
        lives = json.loads((result.directory / "lives.json").read_text())
        assert not any(CONTAINED in life["stderr"] for life in lives), lives
        assert [life["returncode"] for life in lives] == [-9, 0], lives
        assert result.status == "pass", [v for v in result.verdicts if v.status != "pass"]


class TestPreload:
    def test_the_fork_server_s_preload_holds_the_framework_and_starts_no_thread(self) -> None:
        """What a fork server preloads for these adapters: pydantic_ai, its DBOS
        integration and what a run imports on its way, with no thread running."""
        probe = (
            "import sys, threading\n"
            "before = set(sys.modules)\n"
            "from harness.chaos.forkserver import preload\n"
            "preload('harness.adapters.pydantic_ai_agent')\n"
            "from harness.adapters.pydantic_ai_agent import RUN_TIME_IMPORTS\n"
            "wanted = {'pydantic_ai', 'pydantic_ai.durable_exec.dbos', 'dbos', *RUN_TIME_IMPORTS}\n"
            "print(sorted(wanted - set(sys.modules)), threading.active_count())\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["[]", "1"]
