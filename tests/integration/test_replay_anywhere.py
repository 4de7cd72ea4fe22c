"""CI-safe artifacts: folder names an artifact upload keeps, replays that work from anywhere."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from harness.chaos.schedule import CrashSchedule
from harness.chaos.trial import TrialSpec

ROOT = Path(__file__).resolve().parents[2]
MINI = "tests/data/scenarios/mini.toml"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    return {**env, **extra}


class TestFolderNames:
    def test_trial_ids_use_only_safe_characters(self) -> None:
        """A module: runtime and a failpoint label make a name of [A-Za-z0-9._-] only."""
        schedule = CrashSchedule.from_json('[{"failpoints":"op.after_intent@3=kill"}]')
        spec = TrialSpec(MINI, 7, schedule, "module:my.agent", "op.after_intent@3+table")
        assert re.fullmatch(r"[A-Za-z0-9._-]+", spec.trial_id), spec.trial_id
        assert spec.trial_id.startswith("module_my.agent--mini-7-")

    def test_a_black_box_is_named_by_its_program_not_its_command(self) -> None:
        """A cmd: runtime's trial id starts with its program's name (its folder's, for an
        agent.py) and a short digest: no path of its command; two commands of one name
        differ."""
        schedule = CrashSchedule.from_json('[{"failpoints":"tool.before_reply@3=kill"}]')
        command = "cmd:/tmp/x/.venv/bin/python /home/me/agents/plain_python/agent.py"
        spec = TrialSpec(MINI, 7, schedule, command, "tool.before_reply@3")
        assert re.fullmatch(
            r"cmd_plain_python-[0-9a-f]{6}--mini-7-tool\.before_reply_3", spec.trial_id
        )
        other = TrialSpec(
            MINI, 7, schedule, command.replace("/tmp/x", "/tmp/y"), "tool.before_reply@3"
        )
        assert other.trial_id != spec.trial_id
        assert other.trial_id.startswith("cmd_plain_python-")

    def test_a_module_replay_line_carries_its_import_path(self, tmp_path: Path) -> None:
        """The replay line of a module: runtime starts with the PYTHONPATH that finds it."""
        schedule = CrashSchedule.from_json("[]")
        spec = TrialSpec(MINI, 7, schedule, "module:tests.integration.unreadable_world_agent")
        assert spec.replay_command().startswith(f"PYTHONPATH={ROOT} "), spec.replay_command()


class TestReplayFromAnywhere:
    def test_replay_from_another_folder_reaches_the_same_verdicts(self, tmp_path: Path) -> None:
        """A trial recorded from the project replays from an unrelated folder, same verdicts;
        given no --reports, its run folder goes beside the trial's own run, none in the
        folder it ran from."""
        schedule = '[{"failpoints":"op.after_intent@3=kill"}]'
        first = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness",
                "trial",
                MINI,
                "--seed",
                "3",
                "--schedule",
                schedule,
                "--reports",
                str(tmp_path / "first"),
            ],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert first.returncode == 0, first.stdout + first.stderr
        [trial] = (tmp_path / "first").glob("*/trial")
        assert re.fullmatch(r"[A-Za-z0-9._-]+", trial.parent.name)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        again = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness",
                "replay",
                str(trial),
                "--project",
                str(ROOT),
            ],
            cwd=elsewhere,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert again.returncode == 0, again.stdout + again.stderr
        assert list(elsewhere.iterdir()) == [], "the replay wrote in the folder it ran from"
        assert f"run folder goes in {tmp_path / 'first'} " in again.stderr

        def statuses(run: Path) -> dict[str, str]:
            data = json.loads((run / "trial" / "verdicts.json").read_text())
            return {v["invariant"]: v["status"] for v in data}

        runs = {p.parent for p in (tmp_path / "first").glob("*/trial")}
        (replayed,) = runs - {trial.parent}
        assert statuses(replayed) == statuses(trial.parent)
