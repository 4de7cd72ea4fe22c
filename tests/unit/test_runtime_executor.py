"""The executor's write-ahead protocol, in-process retries, and Runtime.call's no-repeat rule."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.runtime import (
    CallContext,
    FailpointTriggered,
    JournalWriteError,
    OpState,
    ToolClass,
    ToolError,
    TransientToolError,
)
from harness.runtime.executor import Executor
from harness.runtime.journal import JournalWriter, scan_journal
from harness.runtime.records import FinishRecord, IntentRecord, Record, digest
from harness.runtime.recovery import fold
from tests.conftest import IW, NI, RO, UNK, FakeTool, journal_records, open_runtime

ARGS = {"path": "/notes.txt", "content": "hello"}

RETRY_SAFE = [ToolClass(RO), ToolClass(IW), ToolClass(NI, True), ToolClass(UNK, True)]
NOT_RETRY_SAFE = [ToolClass(NI), ToolClass(UNK)]


def _name(c: ToolClass) -> str:
    return c.idempotency.value + ("+ask_user" if c.ask_user else "")


@pytest.fixture
def writer(journal_path: Path) -> Iterator[JournalWriter]:
    with JournalWriter(journal_path) as w:
        yield w


def _executor(writer: JournalWriter, *, max_attempts: int = 3) -> Executor:
    return Executor(writer, 1, on_record=lambda record: None, max_attempts=max_attempts)


def _intents(path: Path) -> list[IntentRecord]:
    return [r for r in journal_records(path) if isinstance(r, IntentRecord)]


def _finishes(path: Path) -> list[FinishRecord]:
    return [r for r in journal_records(path) if isinstance(r, FinishRecord)]


def _state(path: Path, op_id: str) -> OpState:
    ops = fold(journal_records(path))
    return ops[op_id].state if op_id in ops else OpState.NOT_STARTED


class TestWriteAhead:
    def test_intent_is_durable_before_the_tool_runs(
        self, writer: JournalWriter, journal_path: Path
    ) -> None:
        """Inside the tool, the journal already holds the op's intent with its snapshot, fsynced."""
        seen: list[list[Record]] = []

        def look(ctx: CallContext) -> None:
            scan = scan_journal(journal_path)
            seen.append([s.record for s in scan.records])
            assert writer.synced_size == scan.valid_end == journal_path.stat().st_size

        snapshot = ToolClass(IW)
        _executor(writer).run("op-1", "write_file", ARGS, snapshot, FakeTool(on_call=look))
        assert seen == [
            [IntentRecord("op-1", "write_file", snapshot, ARGS, digest(ARGS), 1, 1, None)]
        ]

    def test_finish_is_written_after_the_tool(
        self, writer: JournalWriter, journal_path: Path
    ) -> None:
        """After the tool returns, a SUCCEEDED finish with its result follows the intent."""
        finish = _executor(writer).run("op-1", "write_file", ARGS, ToolClass(IW), FakeTool())
        records = journal_records(journal_path)
        assert [type(r) for r in records] == [IntentRecord, FinishRecord]
        assert records[1] == finish
        assert finish.succeeded
        assert finish.result == {"op_id": "op-1", "attempt": 1}
        assert finish.result_digest == digest(finish.result)

    def test_on_record_sees_every_record_in_order(self, writer: JournalWriter) -> None:
        """The executor reports each record it journals, in journal order."""
        noted: list[Record] = []
        executor = Executor(writer, 1, on_record=noted.append)
        executor.run("op-1", "write_file", ARGS, ToolClass(IW), FakeTool())
        assert noted == [s.record for s in scan_journal(writer.path).records]

    @pytest.mark.parametrize(
        ("point", "state", "tool_ran"),
        [
            ("op.before_intent", OpState.NOT_STARTED, False),
            ("op.after_intent", OpState.RUNNING, False),
            ("op.mid_effect", OpState.RUNNING, True),
            ("op.after_effect", OpState.RUNNING, True),
            ("op.after_finish", OpState.SUCCEEDED, True),
        ],
    )
    def test_failpoints_fire_in_protocol_order(
        self,
        writer: JournalWriter,
        journal_path: Path,
        armed: Callable[[str], None],
        point: str,
        state: OpState,
        tool_ran: bool,
    ) -> None:
        """A crash at each protocol point leaves exactly what the protocol has written by then."""
        tool = FakeTool(on_call=lambda ctx: ctx.mid_effect())
        armed(f"{point}=raise")
        with pytest.raises(FailpointTriggered, match=point):
            _executor(writer).run("op-1", "write_file", ARGS, ToolClass(IW), tool)
        assert _state(journal_path, "op-1") is state
        assert tool.count("op-1") == (1 if tool_ran else 0)
        assert (
            len(journal_records(journal_path))
            == {
                OpState.NOT_STARTED: 0,
                OpState.RUNNING: 1,
                OpState.SUCCEEDED: 2,
            }[state]
        )

    def test_enospc_on_intent_runs_nothing(
        self, journal_path: Path, armed: Callable[[str], None]
    ) -> None:
        """When the intent cannot be journaled (disk full), the tool does not run."""
        tool = FakeTool()
        with open_runtime(journal_path) as rt:
            armed("journal.append=enospc")
            with pytest.raises(JournalWriteError):
                rt.call("op-1", "write_file", ARGS, tool)
        assert tool.count("op-1") == 0
        assert _intents(journal_path) == []


class TestInProcessRetry:
    @pytest.mark.parametrize("snapshot", RETRY_SAFE, ids=_name)
    @pytest.mark.parametrize("max_attempts", [1, 2, 3, 5])
    def test_transient_retried_for_retry_safe_up_to_max_attempts(
        self,
        writer: JournalWriter,
        journal_path: Path,
        snapshot: ToolClass,
        max_attempts: int,
    ) -> None:
        """A retry-safe op failing transiently runs max_attempts times, each attempt journaled."""
        attempts_seen_in_journal: list[list[int]] = []
        tool = FakeTool(
            {"op-1": [TransientToolError("busy")] * 10},
            on_call=lambda ctx: attempts_seen_in_journal.append(
                [i.attempt for i in _intents(journal_path)]
            ),
        )
        finish = _executor(writer, max_attempts=max_attempts).run(
            "op-1", "read_file", ARGS, snapshot, tool
        )
        expected = list(range(1, max_attempts + 1))
        assert tool.attempts("op-1") == expected
        assert [i.attempt for i in _intents(journal_path)] == expected
        assert [expected[: n + 1] for n in range(max_attempts)] == attempts_seen_in_journal
        finishes = _finishes(journal_path)
        assert [f.attempt for f in finishes] == expected
        assert all(not f.succeeded and f.transient for f in finishes)
        assert finish == finishes[-1]
        assert _state(journal_path, "op-1") is OpState.FAILED

    @pytest.mark.parametrize("snapshot", NOT_RETRY_SAFE, ids=_name)
    def test_transient_not_retried_for_non_retry_safe(
        self, writer: JournalWriter, journal_path: Path, snapshot: ToolClass
    ) -> None:
        """A non-idempotent or unknown op failing transiently is not retried, run once, and its
        outcome is unknown, not FAILED: the timeout may have come after its effect."""
        tool = FakeTool({"op-1": [TransientToolError("busy"), None]})
        finish = _executor(writer, max_attempts=5).run("op-1", "ui_tap", ARGS, snapshot, tool)
        assert tool.count("op-1") == 1
        assert not finish.succeeded and finish.unknown and finish.transient
        assert finish.error == "TransientToolError: busy"
        assert [i.attempt for i in _intents(journal_path)] == [1]
        assert _state(journal_path, "op-1") is OpState.RUNNING

    @pytest.mark.parametrize("snapshot", RETRY_SAFE, ids=_name)
    def test_transient_then_success(
        self, writer: JournalWriter, journal_path: Path, snapshot: ToolClass
    ) -> None:
        """A transient failure followed by a success ends SUCCEEDED on the second attempt."""
        tool = FakeTool({"op-1": [TransientToolError("busy"), None]})
        finish = _executor(writer).run("op-1", "read_file", ARGS, snapshot, tool)
        assert tool.attempts("op-1") == [1, 2]
        assert finish.succeeded and finish.attempt == 2
        assert [(f.attempt, f.succeeded) for f in _finishes(journal_path)] == [
            (1, False),
            (2, True),
        ]
        assert all(i.snapshot == snapshot for i in _intents(journal_path))
        assert _state(journal_path, "op-1") is OpState.SUCCEEDED

    @pytest.mark.parametrize("snapshot", RETRY_SAFE, ids=_name)
    def test_permanent_error_not_retried(
        self, writer: JournalWriter, journal_path: Path, snapshot: ToolClass
    ) -> None:
        """A non-transient ToolError is not retried, even for a retry-safe class."""
        tool = FakeTool({"op-1": [ToolError("no such file"), None]})
        finish = _executor(writer).run("op-1", "read_file", ARGS, snapshot, tool)
        assert tool.count("op-1") == 1
        assert not finish.succeeded and not finish.transient
        assert finish.error == "ToolError: no such file"

    def test_max_attempts_must_be_positive(self, writer: JournalWriter) -> None:
        """An executor with max_attempts below 1 is refused."""
        with pytest.raises(ValueError, match="max_attempts"):
            _executor(writer, max_attempts=0)


class TestToolFailures:
    def test_tool_error_is_failed(self, writer: JournalWriter, journal_path: Path) -> None:
        """A ToolError becomes a durable FAILED finish carrying the error."""
        tool = FakeTool({"op-1": [ToolError("denied")]})
        finish = _executor(writer).run("op-1", "ui_tap", ARGS, ToolClass(NI), tool)
        assert _finishes(journal_path) == [finish]
        assert (finish.succeeded, finish.error, finish.result) == (False, "ToolError: denied", None)
        assert _state(journal_path, "op-1") is OpState.FAILED

    @pytest.mark.parametrize("snapshot", [ToolClass(RO), ToolClass(NI)], ids=_name)
    def test_unexpected_exception_leaves_op_running(
        self, writer: JournalWriter, journal_path: Path, snapshot: ToolClass
    ) -> None:
        """An exception that is not a ToolError escapes, journaled as an unknown outcome:
        the op stays RUNNING (recovery decides it), never silently."""
        tool = FakeTool({"op-1": [RuntimeError("bug in tool"), None]})
        with pytest.raises(RuntimeError, match="bug in tool"):
            _executor(writer).run("op-1", "read_file", ARGS, snapshot, tool)
        assert tool.count("op-1") == 1
        [finish] = _finishes(journal_path)
        assert (finish.unknown, finish.succeeded, finish.error) == (
            True,
            False,
            "RuntimeError: bug in tool",
        )
        assert _state(journal_path, "op-1") is OpState.RUNNING

    def test_call_outcomes(self, journal_path: Path) -> None:
        """Runtime.call reports ok with the result, fail with the error, and executed=True."""
        tool = FakeTool({"op-2": [ToolError("denied")]})
        with open_runtime(journal_path) as rt:
            ok = rt.call("op-1", "read_file", ARGS, tool)
            fail = rt.call("op-2", "ui_tap", ARGS, tool)
        assert (ok.status, ok.result, ok.executed, ok.ok) == (
            "ok",
            {"op_id": "op-1", "attempt": 1},
            True,
            True,
        )
        assert (fail.status, fail.error, fail.executed, fail.ok) == (
            "fail",
            "ToolError: denied",
            True,
            False,
        )

    def test_call_snapshots_the_tables_class(self, journal_path: Path) -> None:
        """Runtime.call journals the class the table gives the tool at call time."""
        with open_runtime(journal_path) as rt:
            for tool in ("read_file", "alarm", "ask_user_choice", "no_such_tool"):
                rt.call(f"op-{tool}", tool, {}, FakeTool())
        assert {i.tool: i.snapshot for i in _intents(journal_path)} == {
            "read_file": ToolClass(RO),
            "alarm": ToolClass(NI),
            "ask_user_choice": ToolClass(RO, ask_user=True),
            "no_such_tool": ToolClass(UNK),
        }


class TestCallNeverRepeats:
    @pytest.mark.parametrize("tool_name", ["read_file", "write_file", "ui_tap", "shell_execute"])
    def test_settled_ops_are_not_rerun_after_reopen(
        self, journal_path: Path, tool_name: str
    ) -> None:
        """After a restart, call answers a settled op from the journal, never rerunning it."""
        tool = FakeTool({"fail": [ToolError("denied")]})
        with open_runtime(journal_path) as rt:
            rt.call("ok", tool_name, ARGS, tool)
            rt.call("fail", tool_name, ARGS, tool)
        for _ in range(2):  # two restarts, with and without recovery in between
            with open_runtime(journal_path) as rt:
                rt.recover(tool)
                ok = rt.call("ok", tool_name, ARGS, tool)
                fail = rt.call("fail", tool_name, ARGS, tool)
                assert (ok.status, ok.result, ok.executed) == (
                    "ok",
                    {"op_id": "ok", "attempt": 1},
                    False,
                )
                assert (fail.status, fail.error, fail.executed) == (
                    "fail",
                    "ToolError: denied",
                    False,
                )
            with open_runtime(journal_path) as rt:
                assert rt.call("ok", tool_name, ARGS, tool).status == "ok"
        assert tool.counts() == {"ok": 1, "fail": 1}

    def test_settled_ops_are_not_rerun_in_the_same_life(self, journal_path: Path) -> None:
        """Calling an op id again in the same process returns the first outcome without running."""
        tool = FakeTool()
        with open_runtime(journal_path) as rt:
            first = rt.call("op-1", "alarm", ARGS, tool)
            again = rt.call("op-1", "alarm", ARGS, tool)
        assert tool.count("op-1") == 1
        assert (again.status, again.result, again.executed) == ("ok", first.result, False)

    def test_an_unsafe_op_left_running_is_not_run_by_call(self, journal_path: Path) -> None:
        """An unsafe op whose tool raised is not run again by call: 'info' with its hint."""
        tool = FakeTool({"op-1": [RuntimeError("crash")]})
        with open_runtime(journal_path) as rt:
            with pytest.raises(RuntimeError):
                rt.call("op-1", "alarm", ARGS, tool)
            again = rt.call("op-1", "alarm", ARGS, tool)
            assert again.status == "info" and again.hint is not None
        with open_runtime(journal_path) as rt:
            rt.recover(tool)
            outcome = rt.call("op-1", "alarm", ARGS, tool)
        assert (outcome.status, outcome.executed) == ("info", False)
        assert outcome.hint is not None
        assert tool.count("op-1") == 1

    def test_a_retry_safe_op_left_running_runs_again_at_its_next_call(
        self, journal_path: Path
    ) -> None:
        """A retry-safe op whose tool raised runs again at its next call, under its id."""
        tool = FakeTool({"op-1": [RuntimeError("crash")]})
        with open_runtime(journal_path) as rt:
            with pytest.raises(RuntimeError):
                rt.call("op-1", "write_file", ARGS, tool)
            again = rt.call("op-1", "write_file", ARGS, tool)
        assert (again.status, again.executed) == ("ok", True)
        assert tool.count("op-1") == 2

    def test_new_op_after_reopen_runs(self, journal_path: Path) -> None:
        """An op id the journal does not know runs normally after a restart."""
        tool = FakeTool()
        with open_runtime(journal_path) as rt:
            rt.call("op-1", "alarm", ARGS, tool)
        with open_runtime(journal_path) as rt:
            outcome = rt.call("op-2", "alarm", ARGS, tool)
        assert outcome.executed and outcome.ok
        assert tool.counts() == {"op-1": 1, "op-2": 1}
