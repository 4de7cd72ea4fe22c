"""Launchers: a forked incarnation is as real as an exec'd one, and carries nothing over."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import Golden, TrialSpec, run_trial
from harness.failpoints import arm, disarm, parse_failpoints
from harness.runtime.journal import scan_journal
from harness.runtime.records import IntentRecord
from tests.integration.conftest import MINI, MINI_SEED


def _trial(launch: str, golden: Golden, root: Path, schedule: CrashSchedule) -> dict[str, str]:
    spec = TrialSpec(MINI, MINI_SEED, schedule, "real", f"launch-{launch}")
    result = run_trial(spec, root / launch, golden.directory, Supervisor(launch=launch))
    assert result.kills == schedule.kills
    return {v.invariant: v.status for v in result.verdicts}


class TestLaunchers:
    def test_fork_and_exec_reach_the_same_verdicts(
        self, mini_golden: Golden, tmp_path: Path
    ) -> None:
        """The same trial through both launchers: a real kill each, every invariant holding."""
        schedule = CrashSchedule((Life("op.after_intent@3=kill"), Life("op.after_effect@1=kill")))
        forked = _trial("fork", mini_golden, tmp_path, schedule)
        execed = _trial("exec", mini_golden, tmp_path, schedule)
        assert forked == execed
        assert set(forked.values()) == {"pass"}

    def test_failpoints_armed_in_the_parent_do_not_reach_a_forked_agent(
        self, mini_golden: Golden, tmp_path: Path
    ) -> None:
        """A parent with armed failpoints forks agents that arm only what their life says."""
        try:
            arm(parse_failpoints("op.after_intent=raise"))
            verdicts = _trial("fork", mini_golden, tmp_path, CrashSchedule())
        finally:
            disarm()
        assert set(verdicts.values()) == {"pass"}

    def test_hit_counts_start_afresh_in_every_incarnation(
        self, mini_golden: Golden, tmp_path: Path
    ) -> None:
        """Failpoint hit counts (agent memory) do not carry over from a killed incarnation."""
        trial = tmp_path / "trial"
        trial.mkdir()
        shutil.copyfile(mini_golden.directory / "plan.json", trial / "plan.json")
        counts = tmp_path / "counts.json"
        lives = Supervisor(launch="fork").run(
            trial,
            CrashSchedule(
                (
                    Life("op.before_intent=count,op.after_effect@3=kill"),
                    Life("op.before_intent=count"),
                )
            ),
            counts_file=counts,
        )
        assert [life.killed for life in lives] == ["failpoint", None]
        last = max(
            s.record.incarnation
            for s in scan_journal(trial / "journal").records
            if isinstance(s.record, IntentRecord)
        )
        intents_of_last = sum(
            1
            for s in scan_journal(trial / "journal").records
            if isinstance(s.record, IntentRecord) and s.record.incarnation == last
        )
        assert json.loads(counts.read_text())["op.before_intent"] == intents_of_last

    def test_unknown_launcher_is_refused(self) -> None:
        """A launcher name the supervisor does not know is refused before anything starts."""
        with pytest.raises(ValueError, match="unknown launcher"):
            Supervisor(launch="teleport")
