"""Batches in real processes: a SIGKILL with several calls of a batch in flight.

The shipped ``parallel_phone`` scenario opens with a batch of four calls of three
classes (two idempotent installs, a read-only log read, a non-idempotent typed
text). Killed at the third call's ``op.after_intent``, the first life leaves all
four intents durable, the first two effects done without their finishes, and
the last two tools not yet run. The next life decides each op from its own
snapshot, the model verifies the typed text, and the world ends as in the
crash-free run.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from harness.chaos.schedule import CrashSchedule
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import Golden, TrialSpec, prepare_golden, run_trial
from harness.report.timeline import read_timeline, render_timeline
from harness.runtime import RecoveryReport, Runtime, ToolTable
from harness.runtime.aio import AsyncRuntime
from harness.runtime.journal import scan_journal
from harness.runtime.records import DecisionRecord, IncarnationRecord, IntentRecord, Record
from tests.conftest import FakeTool

ROOT = Path(__file__).resolve().parents[2]
PHONE = str(ROOT / "scenarios" / "parallel_phone.toml")
SEED = 11
BATCH = ("s001a", "s001b", "s001c", "s001d")


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory, supervisor: Supervisor) -> Golden:
    return prepare_golden(PHONE, SEED, tmp_path_factory.mktemp("golden"), supervisor)


def _life_records(journal: Path, life: int) -> list[Record]:
    """The records the journal holds of one life (from its incarnation record on)."""
    records: list[Record] = []
    current = 0
    for scanned in scan_journal(journal).records:
        if isinstance(scanned.record, IncarnationRecord):
            current = scanned.record.incarnation
        if current == life:
            records.append(scanned.record)
    return records


def test_the_golden_run_hits_a_batch_call_by_call(golden: Golden) -> None:
    """The crash-free run's hits of a point walk through the batch's calls in their order."""
    assert [golden.op_at("op.after_intent", hit) for hit in range(1, 5)] == list(BATCH)
    assert [golden.op_at("op.after_finish", hit) for hit in range(1, 5)] == list(BATCH)


def test_a_kill_with_the_batch_in_flight(
    tmp_path: Path, golden: Golden, supervisor: Supervisor, tables: dict[str, Path]
) -> None:
    """All four intents durable, two effects done: RETRY three, VERIFY the text, redo it."""
    assert golden.op_at("op.after_intent", 3) == "s001c"
    schedule = CrashSchedule.from_json('[{"failpoints": "op.after_intent@3=kill"}]')
    spec = TrialSpec(PHONE, SEED, schedule, "real", "batch-in-flight", "exhaustive")
    result = run_trial(spec, tmp_path / "trial", golden.directory, supervisor, tables=tables)
    assert result.status == "pass", result.verdicts
    assert result.reached == ("op.after_intent 3 s001c",)
    journal = result.directory / "journal"

    first = _life_records(journal, 1)
    intents = [r.op_id for r in first if isinstance(r, IntentRecord)]
    assert intents == list(BATCH)  # one write of four intents, before any tool
    assert not [r for r in first if r.kind == "finish"]  # the life died before any finish
    first_pid = next(r.pid for r in first if isinstance(r, IncarnationRecord))
    with closing(sqlite3.connect(result.directory / "world.db")) as world:
        ledger = world.execute("SELECT op_id FROM ledger WHERE pid = ?", (first_pid,))
        ran_first = {op_id for (op_id,) in ledger}
    assert ran_first == {"s001a", "s001b"}  # the third was killed before its tool

    decided = {
        r.op_id: r.decision.value
        for r in _life_records(journal, 2)
        if isinstance(r, DecisionRecord) and r.op_id in BATCH
    }
    assert decided == {"s001a": "retry", "s001b": "retry", "s001c": "retry", "s001d": "verify"}
    history = [
        json.loads(line) for line in (result.directory / "history.jsonl").read_text().splitlines()
    ]
    first_life = [(h["type"], h["op"]) for h in history if h["life"] == 1]
    assert first_life == [*(("invoke", op) for op in BATCH), *(("info", op) for op in BATCH)]
    ops = {r.op_id for r in _life_records(journal, 2) if isinstance(r, IntentRecord)}
    assert {"s001d.check", "s001d.redo"} <= ops  # verified absent, then redone

    # The journal as the kill left it: the sync and async APIs decide the same on it.
    cut = next(
        s.offset
        for s in scan_journal(journal).records
        if isinstance(s.record, IncarnationRecord) and s.record.incarnation == 2
    )
    for name in ("sync", "async"):
        (tmp_path / name).write_bytes(journal.read_bytes()[:cut])
    table = ToolTable.shipped()
    with Runtime.open(tmp_path / "sync", table=table) as runtime:
        by_sync = runtime.recover(FakeTool())

    async def by_async_runtime() -> RecoveryReport:
        async with await AsyncRuntime.open(tmp_path / "async", table=table) as runtime:
            return await runtime.recover(FakeTool())

    by_async = asyncio.run(by_async_runtime())
    assert by_async.decisions == by_sync.decisions
    assert [d.op_id for d in by_sync.decisions if d.decision.value == "verify"] == ["s001d"]

    # The timeline shows each batch's calls side by side, a column per op: the first
    # batch in the first life, the last one in the second (the first was recovered).
    page = render_timeline(read_timeline(result.directory))
    for batch in (BATCH, ("s003a", "s003b", "s003c")):
        header = "<tr><th>calls at once</th>" + "".join(f"<th>{op}</th>" for op in batch)
        assert page.count(header + "</tr>") == 1, batch
    shutil.rmtree(tmp_path / "trial")
