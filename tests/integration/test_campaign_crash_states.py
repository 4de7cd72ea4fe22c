"""A campaign's power cuts judged over several crash states, and the weak file-system model.

Each trial whose cut drops what was not synced is followed by a sub-trial per other crash
state its cut has (``--crash-states N``), labelled ``+state-<k>``, with a replay command
that runs that state alone; the weak model (``--fs-model weak``) adds sector tears.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from harness.chaos import observer
from harness.chaos.campaign import CampaignConfig, run_trials
from harness.chaos.trial import TrialResult, TrialSpec
from harness.exits import EXIT_BAD_INPUT
from tests.conftest import run_harness
from tests.integration.test_cli import MINI

pytestmark = pytest.mark.skipif(
    observer.unavailable() is not None or not sys.platform.startswith("linux"),
    reason=f"no observer: {observer.unavailable()}",
)


def _before_fsync_cuts(spec: TrialSpec) -> bool:
    """The exhaustive trials killed between an append and its fsync, then cut by a drop."""
    return spec.label.startswith("journal.before_fsync@") and spec.label.endswith("+drop")


class TestCampaignCrashStates:
    def test_each_dropping_cut_is_followed_by_its_other_crash_states(self, tmp_path: Path) -> None:
        """A runtime that never fsyncs its appends: the drop loses them (the trial fails),
        a later crash state keeps them; each state is a sub-trial right after its trial,
        and its replay command, run alone, reaches the same verdict."""
        config = CampaignConfig(
            tmp_path, (MINI,), seed=3, random_trials=0, runtime="pwritev-no-fsync",
            crash_states=3,
        )  # fmt: skip
        results: list[TrialResult] = []
        run_trials(config, results.append, select=_before_fsync_cuts)
        parents = [r for r in results if r.spec.crash_state is None]
        states = [r for r in results if r.spec.crash_state is not None]
        assert parents and states, [r.spec.trial_id for r in results]
        for result in states:
            parent = results[results.index(result) - result.spec.crash_state]  # type: ignore[operator]
            assert parent.spec.crash_state is None
            assert result.spec.label == f"{parent.spec.label}+state-{result.spec.crash_state}"
            assert f"power-loss:state:{result.spec.crash_state}" in result.spec.replay_command()
        assert all(r.spec.crash_state in (1, 2) for r in states)
        assert {r.status for r in parents} == {"fail"}
        held = [r for r in states if r.status == "pass"]
        assert held, "no crash state kept the unsynced appends"
        replay = shlex.split(held[0].spec.replay_command())
        alone = run_harness(*replay[replay.index("trial") :], "--reports", str(tmp_path / "r"))
        assert alone.returncode == 0 and alone.stdout.rstrip().endswith("PASS"), alone.stdout

    def test_one_state_asked_for_is_the_cut_alone(self, tmp_path: Path) -> None:
        """--crash-states 1: the campaign of before, no sub-trial."""
        config = CampaignConfig(tmp_path, (MINI,), seed=3, random_trials=0, crash_states=1)
        results: list[TrialResult] = []
        run_trials(config, results.append, select=_before_fsync_cuts)
        assert results and all(r.spec.crash_state is None for r in results)

    def test_the_headline_counts_trials_and_crash_states_apart(self, tmp_path: Path) -> None:
        """The real runtime on the mini scenario: its trials, and apart the crash states
        its cuts had, all holding."""
        done = run_harness(
            "chaos", "--scenario", MINI, "--random", "0", "--seed", "3", "--no-self-check",
            "--crash-states", "2", "--reports", str(tmp_path),
        )  # fmt: skip
        headline = done.stdout.rstrip().splitlines()[-1]
        assert done.returncode == 0, done.stdout[-3000:]
        assert "more crash state" in headline and "0 failed" in headline, headline
        (run,) = tmp_path.iterdir()
        lines = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]
        states = [t for t in lines if "_state-" in t["trial"]]
        assert states and all("power-loss:state:1" in t["spec"]["replay"] for t in states)

    def test_crash_states_below_one_is_refused(self, tmp_path: Path) -> None:
        done = run_harness(
            "chaos", "--scenario", MINI, "--crash-states", "0", "--reports", str(tmp_path)
        )
        assert done.returncode == EXIT_BAD_INPUT and "--crash-states" in done.stderr
        assert not any(tmp_path.iterdir())


UNSYNCED = '[{"failpoints":"op.before_intent@3=kill","after_death":"power-loss:drop"}]'


class TestWeakModel:
    def test_the_weak_model_tears_sectors_of_unsynced_writes(self, tmp_path: Path) -> None:
        """pwritev-no-fsync cut with two calls' records unsynced: in the weak model some
        states keep the appends with sectors of them lost, each printed and replayable."""
        done = run_harness(
            "trial", MINI, "--seed", "1", "--runtime", "pwritev-no-fsync", "--schedule",
            UNSYNCED, "--crash-states", "12", "--fs-model", "weak", "--reports", str(tmp_path),
        )  # fmt: skip
        assert "changed sectors lost" in done.stdout, done.stdout
        replays = [line for line in done.stdout.splitlines() if line.startswith("  replay:")]
        assert replays and all("power-loss:state:" in r and ":weak" in r for r in replays)

    def test_the_model_without_crash_states_is_refused(self, tmp_path: Path) -> None:
        done = run_harness(
            "trial", MINI, "--seed", "1", "--schedule", UNSYNCED, "--fs-model", "weak",
            "--reports", str(tmp_path),
        )  # fmt: skip
        assert done.returncode == EXIT_BAD_INPUT and "--fs-model" in done.stderr
