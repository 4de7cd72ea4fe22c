"""DBOS Transact as the runtime under test: what a kill inside a step does to it.

DBOS checkpoints a step's output after the step returns and re-runs a step
that was in flight at the crash, whatever the tool; our runtime verifies an
unsafe op instead. The same trials, side by side, in real processes.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from harness.chaos.trial import TrialSpec
from harness.check.invariants import Verdict
from harness.world.store import read_ledger
from tests.integration.conftest import TrialRunner

ROOT = Path(__file__).parent.parent.parent
TAP_AFTER_EFFECT = '[{"failpoints":"op.after_effect@3=kill"}]'  # s003: ui_tap with a form
TAP_AFTER_INTENT = '[{"failpoints":"op.after_intent@3=kill"}]'


def _failed(verdicts: tuple[Verdict, ...]) -> set[str]:
    return {v.invariant for v in verdicts if v.status == "fail"}


class TestDbosAdapter:
    def test_a_kill_after_the_effect_replays_a_tap_under_dbos(self, run_mini: TrialRunner) -> None:
        """Killed after a tap's effect, DBOS taps again: the form is submitted twice."""
        result = run_mini(TAP_AFTER_EFFECT, runtime="dbos")
        taps = [e for e in read_ledger(result.directory / "world.db") if e.op_id == "s003"]
        assert len(taps) == 2
        assert _failed(result.verdicts) == {"I2", "I8"}
        i2 = next(v for v in result.verdicts if v.invariant == "I2")
        assert any("s003 (ui_tap, non_idempotent) ran 2 times" in line for line in i2.evidence)

    def test_our_runtime_verifies_the_same_tap(self, run_mini: TrialRunner) -> None:
        """The same kill under our runtime: the tap is checked, found, and not replayed."""
        result = run_mini(TAP_AFTER_EFFECT, runtime="real")
        taps = [e for e in read_ledger(result.directory / "world.db") if e.op_id == "s003"]
        assert len(taps) == 1 and result.status == "pass"

    def test_a_kill_before_the_effect_costs_dbos_nothing(self, run_mini: TrialRunner) -> None:
        """Killed before the tool ran, DBOS runs the step once, and the world is the golden one."""
        result = run_mini(TAP_AFTER_INTENT, runtime="dbos")
        assert _failed(result.verdicts) == set()
        judged = {v.invariant for v in result.verdicts if v.status == "pass"}
        assert {"I1", "I2", "I7", "I8"} <= judged

    def test_the_finding_replays_with_its_command(
        self, run_mini: TrialRunner, tmp_path: Path
    ) -> None:
        """The replay line printed for the DBOS finding reproduces the same verdicts."""
        result = run_mini(TAP_AFTER_EFFECT, runtime="dbos")
        command = shlex.split(result.spec.replay_command())
        command[0] = sys.executable
        replay = subprocess.run(
            [*command, "--reports", str(tmp_path / "r")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert replay.returncode == 1, replay.stderr
        verdicts = json.loads(next((tmp_path / "r").glob("*/trial/verdicts.json")).read_text())
        assert {v["invariant"] for v in verdicts if v["status"] == "fail"} == {"I2", "I8"}


class TestDbosCampaign:
    def test_a_small_campaign_side_by_side(self, tmp_path: Path) -> None:
        """The same exhaustive trials: DBOS replays unsafe ops somewhere, our runtime nowhere."""
        from harness.chaos.campaign import CampaignConfig, run_trials
        from tests.integration.conftest import MINI

        def after_effect(spec: TrialSpec) -> bool:
            return spec.label.startswith("op.after_effect@") and "+" not in spec.label

        outcomes = {}
        for runtime in ("real", "dbos"):
            config = CampaignConfig(
                tmp_path / runtime, (MINI,), seed=4, random_trials=0, workers=2, runtime=runtime
            )
            results = run_trials(config, lambda r: None, select=after_effect)
            outcomes[runtime] = {r.spec.label: r.failed_invariants for r in results}
        assert outcomes["real"].keys() == outcomes["dbos"].keys() and len(outcomes["real"]) >= 5
        assert all(failed == () for failed in outcomes["real"].values())
        assert any("I2" in failed for failed in outcomes["dbos"].values())
