"""Faults of the model's answer, through a real black box against the real scripted model.

Each fault (``model.before_reply@N=<action>``) is armed in the harness's model server;
the example agent (``examples/agents/plain_python``, which has no retry of its own) meets
it over HTTP, exits non-zero, is restarted, asks again, and finishes without running any
tool call twice. A hung answer that never ends is ended by the trial's time, with a
verdict and no process left. A broken agent that retries a failed model request by
running the turn's tool calls again holds in a crash-free run and is caught once the
model's answer fails after an unsafe call's result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from harness.chaos.schedule import CrashSchedule
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import Golden, TrialResult, TrialSpec, prepare_golden, run_trial

ROOT = Path(__file__).resolve().parents[2]
PLAIN = f"cmd:python {ROOT / 'examples/agents/plain_python/agent.py'}"
TURN_RETRY = f"cmd:python {Path(__file__).parent / 'turn_retry_agent.py'}"
PHONE = str(ROOT / "scenarios/phone_task.toml")
SEED = 7

SEEN = {
    "rate-limit(200)": ("model-rate-limit", "HTTP Error 429"),
    "server-error": ("model-server-error", "HTTP Error 500"),
    "overloaded": ("model-overloaded", "HTTP Error 503"),
    "stream-cut": ("model-stream-cut", "IncompleteRead"),
    "stream-hang(300)": ("model-stream-hang", "IncompleteRead(0 bytes read"),
    "lost-answer": ("model-lost-answer", "RemoteDisconnected"),
}
"""Each fault: the event the supervisor recorded, and what the agent's first life died of."""


@pytest.fixture(scope="module")
def plain_golden(tmp_path_factory: pytest.TempPathFactory, supervisor: Supervisor) -> Golden:
    """The example agent's own crash-free run of phone_task, shared by the fault trials."""
    return prepare_golden(PHONE, SEED, tmp_path_factory.mktemp("golden"), supervisor, runtime=PLAIN)


def run(
    where: Path, golden: Golden, supervisor: Supervisor, schedule: str, runtime: str = PLAIN
) -> tuple[TrialResult, dict[str, dict[str, object]]]:
    spec = TrialSpec(PHONE, SEED, CrashSchedule.from_json(schedule), runtime, "test")
    result = run_trial(spec, where / spec.trial_id, golden.directory, supervisor)
    return result, {v.invariant: v.to_json() for v in result.verdicts}


def events(folder: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


def events_named(folder: Path, prefix: str) -> list[str]:
    """The names of the trial's events that start with ``prefix``."""
    return [str(e["event"]) for e in events(folder) if str(e["event"]).startswith(prefix)]


@pytest.mark.parametrize("fault", list(SEEN))
def test_a_fault_of_the_model_lands_and_no_call_runs_twice(
    tmp_path: Path, plain_golden: Golden, supervisor: Supervisor, fault: str
) -> None:
    """The answer to the 4th request (s004's, after s003's unsafe tap) fails as ``fault``;
    the agent dies of it, its restart asks again from its file, and every call ran once."""
    schedule = json.dumps([{"failpoints": f"model.before_reply@4={fault}"}])
    result, verdicts = run(tmp_path, plain_golden, supervisor, schedule)
    assert result.status == "pass", verdicts
    folder = result.directory
    kind, died_of = SEEN[fault]
    assert verdicts["F"]["evidence"] == ["1 scheduled fault landed"]
    assert [e["at"] for e in events(folder) if e["event"] == kind] == ["model.before_reply 4 s004"]
    assert died_of in (folder / "agent-1.stderr").read_text()
    assert result.lives == 2
    for key in ("I1", "I2", "I8", "I10", "I11"):
        assert verdicts[key]["status"] == "pass", verdicts[key]
    record = [json.loads(line) for line in (folder / "model.jsonl").read_text().splitlines()]
    assert [line["fault"] for line in record if "fault" in line] == [fault.split("(")[0]]


def test_a_hung_answer_ends_with_the_trial_s_time_not_a_stuck_run(tmp_path: Path) -> None:
    """Headers, then nothing, for ever: the agent waits on its own 120 s timeout, the trial's
    time (5 s) runs out first, the life is killed with its group, and the trial has a
    verdict: I7 names the timeout. Through the command a failing trial prints."""
    schedule = '[{"failpoints": "model.before_reply@3=stream-hang"}]'
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    ran = subprocess.run(
        [
            *(sys.executable, "-m", "harness", "trial", PHONE, "--seed", str(SEED)),
            *("--runtime", PLAIN, "--schedule", schedule, "--timeout", "5"),
            *("--reports", str(tmp_path)),
        ],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 1, ran.stderr
    (folder,) = tmp_path.glob("*-trial/trial")
    verdicts = {v["invariant"]: v for v in json.loads((folder / "verdicts.json").read_text())}
    assert verdicts["I7"]["status"] == "fail"
    assert "life 1 of 1 ended killed (timeout)" in str(verdicts["I7"]["evidence"])
    assert verdicts["F"]["status"] == "pass", verdicts["F"]
    assert events_named(folder, "model-") == ["model-stream-hang"]
    left = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline", "cwd"])
        if str(tmp_path) in " ".join(p.info["cmdline"] or ()) + str(p.info["cwd"] or "")
    ]
    assert left == []


def test_an_agent_that_retries_the_turn_is_caught_by_a_failed_answer_only(
    tmp_path: Path, plain_golden: Golden, supervisor: Supervisor
) -> None:
    """Crash-free it holds; a 500 on the answer after s003's tap makes it tap again, which
    the ledger shows (I1: after its success was reported; I10: within one life)."""
    result, verdicts = run(tmp_path / "clean", plain_golden, supervisor, "[]", TURN_RETRY)
    assert result.status == "pass", verdicts
    failed = '[{"failpoints": "model.before_reply@4=server-error"}]'
    result, verdicts = run(tmp_path / "fault", plain_golden, supervisor, failed, TURN_RETRY)
    assert result.status == "fail"
    assert verdicts["I1"]["status"] == "fail"
    assert "s003 (ui_tap) ran again in life 1" in str(verdicts["I1"]["evidence"])
    assert "s003 (ui_tap, non_idempotent) ran 2 times in life 1" in str(verdicts["I10"]["evidence"])
