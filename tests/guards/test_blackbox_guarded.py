"""A real agent as a black box, bare and guarded, on the same kill trials.

The OpenAI Agents SDK example agent (``examples/agents/openai_agents``) saves a turn's
calls to its session only once the turn's tools have run: killed after an unsafe call's
effect, it asks its model again and runs the call a second time, which I2 catches from
the world's ledger alone. The same agent with this project's guard in front of its tools
(``guarded.py``) is answered from its journal (a VERIFY hint, a check, a report) and
holds every judged invariant on the same trials. The agent runs under this environment's
Python (.venv-guards has the SDK at the example's pins).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENT = "examples/agents/openai_agents"
SCHEDULES = [
    '[{"failpoints":"op.reply@3=kill"}]',  # s003's tap committed, its reply never sent
    '[{"failpoints":"tool.before_reply@5=kill"}]',  # s005 done, the agent never told
]


def trial(tmp_path: Path, script: str, schedule: str) -> tuple[int, dict[str, dict[str, Any]]]:
    """One trial of the example agent: its exit status and its verdicts by invariant."""
    reports = tmp_path / script
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "trial",
            "scenarios/phone_task.toml",
            "--seed",
            "7",
            "--runtime",
            f"cmd:{sys.executable} {AGENT}/{script}",
            "--schedule",
            schedule,
            "--reports",
            str(reports),
        ],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
    )
    (folder,) = reports.glob("*-trial/trial")
    verdicts = json.loads((folder / "verdicts.json").read_text())
    return ran.returncode, {v["invariant"]: v for v in verdicts}


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_the_bare_agent_runs_an_unsafe_call_twice_the_guarded_one_does_not(
    tmp_path: Path, schedule: str
) -> None:
    code, bare = trial(tmp_path, "agent.py", schedule)
    assert code == 1
    assert bare["I2"]["status"] == "fail"
    assert any("ran 2 times in 2 lives" in line for line in bare["I2"]["evidence"])
    code, guarded = trial(tmp_path, "guarded.py", schedule)
    failed = {k: v["evidence"] for k, v in guarded.items() if v["status"] in ("fail", "unknown")}
    assert code == 0 and not failed, failed
    assert guarded["I2"]["applied"]  # it judged an unsafe call left unknown, and held
