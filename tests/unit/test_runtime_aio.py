"""The async runtime: the same contract as the sync one, calls at once, one writer thread."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.failpoints import arm, hit_ops, parse_failpoints
from harness.runtime import (
    CallContext,
    CallOutcome,
    JournalWriteError,
    Runtime,
    ToolClass,
    ToolError,
    ToolTable,
    TransientToolError,
)
from harness.runtime.aio import AsyncRuntime
from harness.runtime.journal import JournalWriter
from harness.runtime.records import (
    FinishRecord,
    IncarnationRecord,
    IntentRecord,
    Record,
    RecoveredRecord,
    digest,
)
from tests.conftest import IW, NI, RO, UNK, FakeTool, journal_records, open_runtime

TABLE = ToolTable(
    {
        "read": ToolClass(RO),
        "put": ToolClass(IW),
        "tap": ToolClass(NI),
        "opaque": ToolClass(UNK),
        "ask": ToolClass(UNK, True),
    }
)
MIXED = ("read", "put", "tap", "opaque", "ask")


def _open(path: Path) -> Runtime:
    return open_runtime(path, table=TABLE)


def _batch(
    path: Path, calls: list[tuple[str, str]], execute: Any, *, recover: bool = True
) -> tuple[list[CallOutcome], int]:
    """Run ``calls`` (op id, tool) at once on a fresh life; their outcomes and the writes."""

    async def main() -> tuple[list[CallOutcome], int]:
        async with AsyncRuntime(_open(path), owned=True) as runtime:
            if recover:
                await runtime.recover(execute)
            outcomes = await asyncio.gather(
                *(runtime.call(op, tool, {"n": op}, execute) for op, tool in calls)
            )
            return list(outcomes), runtime.journal_writes

    return asyncio.run(main())


class TestCallsAtOnce:
    def test_each_intent_is_durable_before_its_own_tool_runs(self, journal_path: Path) -> None:
        """Inside every tool of a batch, the journal on disk already holds that call's intent."""
        seen: list[str] = []

        def look(ctx: CallContext) -> None:
            intents = {
                r.op_id for r in journal_records(journal_path) if isinstance(r, IntentRecord)
            }
            assert ctx.op_id in intents
            seen.append(ctx.op_id)

        outcomes, _ = _batch(
            journal_path, [(f"s{i}", "put") for i in range(5)], FakeTool(on_call=look)
        )
        assert [o.status for o in outcomes] == ["ok"] * 5
        assert sorted(seen) == [f"s{i}" for i in range(5)]

    def test_calls_issued_together_share_writes(self, journal_path: Path) -> None:
        """Six calls at once take one write for their intents and one for their finishes."""
        outcomes, writes = _batch(journal_path, [(f"s{i}", "put") for i in range(6)], FakeTool())
        assert all(o.ok for o in outcomes)
        assert writes == 1 + 2  # recovery's, then the intents', then the finishes'
        kinds = [r.kind for r in journal_records(journal_path)]
        assert kinds == ["incarnation", "recovered", *["intent"] * 6, *["finish"] * 6]

    def test_a_batch_mixes_outcomes(self, journal_path: Path) -> None:
        """A failure, a retried read and a lost reply of an unsafe call, each its own."""
        tool = FakeTool(
            {
                "a": [ToolError("no such element")],
                "b": [TransientToolError("busy")],
                "c": [TransientToolError("timed out")],
            }
        )
        outcomes, _ = _batch(journal_path, [("a", "tap"), ("b", "read"), ("c", "tap")], tool)
        assert [o.status for o in outcomes] == ["fail", "ok", "info"]
        assert tool.attempts("b") == [1, 2]  # retry-safe: retried in-process
        assert tool.count("c") == 1 and outcomes[2].hint is not None  # unsafe: VERIFY now

    def test_coroutine_tools_are_awaited(self, journal_path: Path) -> None:
        """A coroutine function as ``execute``: awaited, its replies back in any order."""
        order: list[str] = []

        async def execute(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            for _ in range(3 - int(ctx.op_id[1])):
                await asyncio.sleep(0)  # the first call answers last
            order.append(ctx.op_id)
            return {"tool": tool}

        outcomes, _ = _batch(journal_path, [("s0", "read"), ("s1", "put"), ("s2", "tap")], execute)
        assert all(o.ok for o in outcomes) and order == ["s2", "s1", "s0"]
        finishes = [r.op_id for r in journal_records(journal_path) if isinstance(r, FinishRecord)]
        assert finishes == ["s2", "s1", "s0"]

    def test_two_calls_of_one_op_run_it_once(self, journal_path: Path) -> None:
        """The same op id twice at once: the second waits for the first and is answered from
        the journal; the tool runs once."""
        tool = FakeTool()
        first, second = _batch(journal_path, [("s1", "put"), ("s1", "put")], tool)[0]
        assert tool.count("s1") == 1
        assert (first.status, first.executed) == ("ok", True)
        assert (second.status, second.executed, second.result) == ("ok", False, first.result)

    def test_a_failed_write_fails_every_call_it_carried(self, journal_path: Path) -> None:
        """The intents' write meets a full disk: every call raises, no tool ran, none journaled."""
        arm(parse_failpoints("journal.append@2=enospc"))
        tool = FakeTool()
        with pytest.raises(JournalWriteError):
            _batch(journal_path, [(f"s{i}", "put") for i in range(3)], tool)
        assert tool.invocations == []
        assert not any(isinstance(r, IntentRecord) for r in journal_records(journal_path))

    def test_a_known_op_is_answered_from_the_journal(self, journal_path: Path) -> None:
        """Run twice at once in two lives: the second life runs no tool."""
        calls = [(f"s{i}", tool) for i, tool in enumerate(MIXED)]
        _batch(journal_path, calls, FakeTool())
        again = FakeTool()
        outcomes, _ = _batch(journal_path, calls, again)
        assert again.invocations == [] and all(o.ok and not o.executed for o in outcomes)

    def test_the_same_failpoints_in_the_same_order_every_run(self, tmp_path: Path) -> None:
        """A batch hits its calls' points in one order, run after run (kills can aim at hits)."""
        points = ("op.before_intent", "op.after_intent", "op.after_effect", "op.after_finish")
        orders = []
        for run in range(3):
            arm(tuple(spec for p in points for spec in parse_failpoints(f"{p}=count")))
            tool = FakeTool({"s1": [TransientToolError("busy")]})
            _batch(tmp_path / f"run{run}.journal", [(f"s{i}", "read") for i in range(4)], tool)
            orders.append(hit_ops())
        assert orders[0] == orders[1] == orders[2]
        assert orders[0]["op.after_intent"] == ["s0", "s1", "s2", "s3", "s1"]  # s1 retried

    def test_a_borrowed_runtime_stays_open(self, journal_path: Path) -> None:
        """Closing an AsyncRuntime around a borrowed runtime leaves it usable."""
        runtime = _open(journal_path)

        async def main() -> None:
            async with AsyncRuntime(runtime) as batch:
                await batch.call("s1", "put", {}, FakeTool())

        asyncio.run(main())
        assert runtime.call("s2", "put", {}, FakeTool()).ok
        runtime.close()


def _crashed_journal(path: Path, ops: list[tuple[str, str]]) -> None:
    """A journal left by a life killed with ``ops`` (tool, how far) in every state."""
    records: list[Record] = [IncarnationRecord(1, 1), RecoveredRecord(1, 0)]
    for n, (tool, state) in enumerate(ops):
        op = f"s{n:02d}"
        intent = IntentRecord(op, tool, TABLE.classify(tool), {"n": n}, digest({"n": n}), 1, 1)
        records.append(intent)
        if state in ("succeeded", "failed", "retrying"):
            ok = state == "succeeded"
            records.append(
                FinishRecord(
                    op,
                    ok,
                    {"n": n} if ok else None,
                    digest({"n": n} if ok else None),
                    1,
                    1,
                    error=None if ok else "ToolError: no",
                    retrying=state == "retrying",
                )
            )
    with JournalWriter(path) as writer:
        writer.append_many(records)


def _comparable(records: list[Record]) -> list[Record]:
    return [r for r in records if not isinstance(r, IncarnationRecord)]  # pids differ


class TestSameDecisions:
    @settings(max_examples=40, deadline=None)
    @given(
        ops=st.lists(
            st.tuples(
                st.sampled_from(MIXED),
                st.sampled_from(("succeeded", "failed", "running", "retrying")),
            ),
            min_size=1,
            max_size=8,
        )
    )
    def test_sync_and_async_recover_alike(
        self, tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, str]]
    ) -> None:
        """On copies of one crashed journal, both APIs decide, retry, hint and journal the same."""
        folder = tmp_path_factory.mktemp("same")
        _crashed_journal(folder / "sync.journal", ops)
        shutil.copy(folder / "sync.journal", folder / "async.journal")
        sync_tool, async_tool = FakeTool(), FakeTool()
        with _open(folder / "sync.journal") as runtime:
            by_sync = runtime.recover(sync_tool)

        async def main() -> Any:
            async with AsyncRuntime(_open(folder / "async.journal"), owned=True) as runtime:
                return await runtime.recover(async_tool)

        by_async = asyncio.run(main())
        assert by_async.decisions == by_sync.decisions
        assert by_async.hints == by_sync.hints
        assert by_async.retried == by_sync.retried
        assert async_tool.invocations == sync_tool.invocations
        assert _comparable(journal_records(folder / "async.journal")) == _comparable(
            journal_records(folder / "sync.journal")
        )
        decided = {d.op_id: d.decision.value for d in by_sync.decisions}
        for n, (tool, state) in enumerate(ops):
            unsafe = not TABLE.classify(tool).retry_safe
            expected = (
                "skip" if state in ("succeeded", "failed") else "verify" if unsafe else "retry"
            )
            assert decided[f"s{n:02d}"] == expected
