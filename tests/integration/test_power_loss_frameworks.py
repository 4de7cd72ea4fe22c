"""A power cut under the third-party runtimes that keep files in the trial folder.

The cut is rebuilt from what the agent asked the kernel (``harness.chaos.observer``),
here of DBOS's and LangGraph's SQLite databases. One trial per framework, asserting
what it measured: DBOS (SQLite in rollback mode, ``synchronous=FULL``) commits a step's
checkpoint by deleting its rollback journal without fsyncing the folder, so the cut
brings the journal back and the next start rolls the checkpoint back: the step runs
again. LangGraph's checkpointer (WAL, every commit fsynced) keeps what it committed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.chaos import observer
from harness.chaos.trial import TrialResult
from harness.world.store import read_ledger
from tests.integration.conftest import TrialRunner

pytestmark = pytest.mark.skipif(
    observer.unavailable() is not None, reason=f"no observer: {observer.unavailable()}"
)

AFTER_THE_TAP = '[{"failpoints":"op.before_intent@4=kill","after_death":"power-loss:drop"}]'
"""Killed as s004's tool starts: s003 (``ui_tap``, not idempotent) was reported done."""
AT_THE_TAP_S_FINISH = '[{"failpoints":"op.after_finish@3=kill","after_death":"power-loss:drop"}]'
"""Killed once s003's step was checkpointed, before the model was told of it."""


def _statuses(result: TrialResult) -> dict[str, str]:
    return {v.invariant: v.status for v in result.verdicts}


def _cut(result: TrialResult) -> dict[str, Any]:
    events = (result.directory / "events.jsonl").read_text().splitlines()
    return next(e for e in map(json.loads, events) if e["event"] == "fault")


def _taps(directory: Path) -> int:
    return sum(1 for e in read_ledger(directory / "world.db") if e.op_id == "s003")


def test_dbos_loses_a_checkpoint_reported_done(run_mini: TrialRunner) -> None:
    """The cut brings back ``dbos.sqlite-journal`` (its unlink was never made durable): the
    next start rolls s003's checkpoint back and taps again, after the user was told."""
    result = run_mini(AFTER_THE_TAP, runtime="dbos")
    cut = _cut(result)
    assert cut["landed"] and cut["restored"] == ["dbos.sqlite-journal"]
    assert _taps(result.directory) == 2
    statuses = _statuses(result)
    assert {k for k, v in statuses.items() if v == "fail"} == {"I1", "I2", "I8"}
    assert statuses["F"] == "pass"


def test_langgraph_keeps_every_checkpoint_it_committed(run_mini: TrialRunner) -> None:
    """``sync``: the WAL was fsynced at each commit, the cut takes nothing of it (the ``-shm``
    index comes back empty), and no step runs again."""
    result = run_mini(AFTER_THE_TAP, runtime="langgraph")
    cut = _cut(result)
    assert cut["landed"] and cut["mapped"] == ["langgraph.sqlite-shm"]
    assert cut["files"]["langgraph.sqlite-wal"]["lost"] == 0
    assert _taps(result.directory) == 1
    assert result.status == "pass", _statuses(result)


def test_pydantic_ai_on_dbos_runs_a_checkpointed_tap_again(run_mini: TrialRunner) -> None:
    """The same cut in Pydantic AI's DBOS integration, after s003's step was checkpointed:
    its checkpoint is rolled back, the tap runs again (before the user was told: I2)."""
    result = run_mini(AT_THE_TAP_S_FINISH, runtime="pydantic-ai")
    assert _cut(result)["restored"] == ["dbos.sqlite-journal"]
    assert _taps(result.directory) == 2
    statuses = _statuses(result)
    assert {k for k, v in statuses.items() if v == "fail"} == {"I2", "I8"}
    assert statuses["F"] == "pass"
