"""The guard's core: the runtime between a framework and its tools, and the model's report."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import httpx
import httpx2
import pytest

from harness.integrations.guard import (
    VERIFY_TOOL,
    GuardReply,
    ToolGuard,
    hint_message,
    reply_lost,
    tool_failure,
)
from harness.runtime import (
    CallContext,
    ToolClass,
    ToolError,
    ToolTable,
    TransientToolError,
    VerifyHint,
)
from harness.runtime.journal import JournalWriter
from harness.runtime.records import (
    FinishRecord,
    IncarnationRecord,
    IntentRecord,
    RecoveredRecord,
    ResolvedRecord,
    digest,
)
from tests.conftest import IW, NI, RO, FakeTool, journal_records

T = TypeVar("T")
TABLE = ToolTable({"tap": ToolClass(NI), "put": ToolClass(IW), "read": ToolClass(RO)})
ARGS = {"element": "pay"}


def _run(body: Callable[[ToolGuard], Awaitable[T]], journal: Path, tool: FakeTool) -> T:
    """Open a guard on ``journal`` (a new life), run ``body`` with it, close it."""

    async def life() -> T:
        async with await ToolGuard.open(journal, tool, table=TABLE) as guard:
            return await body(guard)

    return asyncio.run(life())


def _left_running(journal: Path, tool: str) -> None:
    """A journal whose last life died with ``s003`` (``tool``) in flight."""
    intent = IntentRecord("s003", tool, TABLE.classify(tool), ARGS, digest(ARGS), 1, 1)
    with JournalWriter(journal) as writer:
        writer.append_many([IncarnationRecord(1, 1), RecoveredRecord(1, 0), intent])


class TestGuardedCalls:
    def test_a_success_is_never_run_again(self, journal_path: Path) -> None:
        """The same tool-call id in a later life answers from the journal, runs nothing."""
        tool = FakeTool()
        first = _run(lambda g: g.call("call-1", "tap", ARGS), journal_path, tool)
        again = _run(lambda g: g.call("call-1", "tap", ARGS), journal_path, tool)
        assert (first.status, again.status) == ("ok", "ok") and tool.count("call-1") == 1
        assert again.text == first.text == '{"op_id": "call-1", "attempt": 1}'

    def test_a_tool_error_is_a_reply(self, journal_path: Path) -> None:
        """A ToolError fails the call, in words the model reads; nothing is raised."""
        tool = FakeTool({"call-1": [ToolError("no such button")]})
        reply = _run(lambda g: g.call("call-1", "tap", ARGS), journal_path, tool)
        assert reply.status == "fail" and reply.text == "error: ToolError: no such button"

    def test_a_safe_call_in_flight_is_retried_at_open(self, journal_path: Path) -> None:
        """A read left running is retried before the framework resumes, then answered."""
        _left_running(journal_path, "read")
        tool = FakeTool()
        reply = _run(lambda g: g.call("s003", "read", ARGS), journal_path, tool)
        assert reply.status == "ok" and tool.count("s003") == 1


class TestUnknownOutcomes:
    def test_an_unsafe_call_in_flight_answers_with_its_hint(self, journal_path: Path) -> None:
        """Run again by the framework, a tap left running is not run: the model gets the hint."""
        _left_running(journal_path, "tap")
        tool = FakeTool()

        async def resume(guard: ToolGuard) -> tuple[tuple[VerifyHint, ...], str]:
            return guard.recovered, (await guard.call("s003", "tap", ARGS)).text

        recovered, text = _run(resume, journal_path, tool)
        assert [h.op_id for h in recovered] == ["s003"]
        assert tool.invocations == []
        assert text == hint_message(recovered[0])
        assert "may already have run" in text and VERIFY_TOOL in text and '"s003"' in text

    @pytest.mark.parametrize(
        ("found", "runs", "status"),
        [("present", 0, "ok"), ("absent", 1, "ok"), ("unknown", 0, "info")],
    )
    def test_the_report_resolves_it_for_good(
        self, journal_path: Path, found: str, runs: int, status: str
    ) -> None:
        """present: done; absent: redone once as s003.redo; unknown: left undone. Either way
        a later life runs nothing and asks nothing more."""
        _left_running(journal_path, "tap")
        tool = FakeTool()

        async def report(guard: ToolGuard) -> str:
            await guard.call("s003", "tap", ARGS)
            return (await guard.verified("s003", found)).status  # type: ignore[arg-type]

        assert _run(report, journal_path, tool) == status
        assert tool.count("s003.redo") == runs and tool.count("s003") == 0
        later = FakeTool()

        async def resume(guard: ToolGuard) -> str:
            assert guard.recovered == ()
            return (await guard.call("s003", "tap", ARGS)).status

        assert _run(resume, journal_path, later) == status
        assert later.invocations == []

    @pytest.mark.parametrize("found", ["present", "absent", "unknown"])
    def test_a_report_made_again_is_answered_from_the_journal(
        self, journal_path: Path, found: str
    ) -> None:
        """A framework that runs the report again in a later life (its checkpoint came before
        the reply) gets the first report's answer; nothing is run or journaled again."""
        _left_running(journal_path, "tap")
        tool = FakeTool()

        async def report(guard: ToolGuard) -> str:
            await guard.call("s003", "tap", ARGS)
            return (await guard.verified("s003", found)).text  # type: ignore[arg-type]

        first = _run(report, journal_path, tool)
        acts = (IntentRecord, FinishRecord, ResolvedRecord)
        before = [r for r in journal_records(journal_path) if isinstance(r, acts)]

        async def again(guard: ToolGuard) -> str:
            return (await guard.verified("s003", "absent")).text

        assert _run(again, journal_path, tool) == first
        assert [r for r in journal_records(journal_path) if isinstance(r, acts)] == before
        assert tool.count("s003.redo") == (1 if found == "absent" else 0)

    def test_a_redo_in_flight_is_hinted_when_the_report_is_made_again(
        self, journal_path: Path
    ) -> None:
        """Killed inside the redo after the report was journaled: the repeated report answers
        with the redo's own hint, for the model to verify the redo."""
        _left_running(journal_path, "tap")
        lost = FakeTool({"s003.redo": [TransientToolError("timed out")]})

        async def report(guard: ToolGuard) -> str:
            await guard.call("s003", "tap", ARGS)
            return (await guard.verified("s003", "absent")).status

        assert _run(report, journal_path, lost) == "info"  # the redo's reply was lost

        async def again(guard: ToolGuard) -> tuple[list[str], str | None]:
            reply = await guard.verified("s003", "absent")
            return [
                h.op_id for h in guard.recovered
            ], None if reply.hint is None else reply.hint.op_id

        assert _run(again, journal_path, FakeTool()) == (["s003.redo"], "s003.redo")
        resolved = [r for r in journal_records(journal_path) if isinstance(r, ResolvedRecord)]
        assert [r.op_id for r in resolved] == ["s003"]  # resolved once

    def test_a_report_on_nothing_is_refused(self, journal_path: Path) -> None:
        """An op the journal does not hold, or a finding outside the three, is a ValueError."""
        with pytest.raises(ValueError, match="no operation 'nope'"):
            _run(lambda g: g.verified("nope", "present"), journal_path, FakeTool())
        _left_running(journal_path, "tap")
        with pytest.raises(ValueError, match="found must be one of present, absent, unknown"):
            _run(lambda g: g.verified("s003", "maybe"), journal_path, FakeTool())  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        ("found", "status", "text"),
        [
            ("present", "ok", "recorded: s003 is present; it is not run again"),
            ("absent", "ok", '{"op_id": "s003.redo", "attempt": 1}'),
            ("unknown", "info", "recorded: s003 is unknown; it is not run again"),
        ],
    )
    def test_a_replayed_report_is_answered_as_the_first(
        self, journal_path: Path, found: str, status: str, text: str
    ) -> None:
        """A framework that replays the report after a restart gets the first report's
        answer from the journal, whatever it says this time; nothing is redone again."""
        _left_running(journal_path, "tap")
        tool = FakeTool()

        async def report(guard: ToolGuard, said: str) -> tuple[str, str]:
            await guard.call("s003", "tap", ARGS)
            reply = await guard.verified("s003", said)  # type: ignore[arg-type]
            return reply.status, reply.text

        assert _run(lambda g: report(g, found), journal_path, tool) == (status, text)
        other = "absent" if found != "absent" else "present"
        assert _run(lambda g: report(g, other), journal_path, tool) == (status, text)
        assert tool.count("s003.redo") == (found == "absent") and tool.count("s003") == 0

    def test_a_report_replayed_before_its_redo_finished_meets_the_redo_s_hint(
        self, journal_path: Path
    ) -> None:
        """Killed inside the redo, a replayed report gets the redo's VERIFY hint, runs
        nothing, and the op is resolved as redone."""
        _left_running(journal_path, "tap")
        redo = IntentRecord(
            "s003.redo", "tap", TABLE.classify("tap"), ARGS, digest(ARGS), 1, 2, redo_of="s003"
        )
        with JournalWriter(journal_path) as writer:
            writer.append_many([IncarnationRecord(2, 1), RecoveredRecord(2, 0), redo])
        tool = FakeTool()

        async def replayed(guard: ToolGuard) -> tuple[str, str | None]:
            reply = await guard.verified("s003", "absent")
            hint = None if reply.hint is None else reply.hint.op_id
            return reply.status, hint

        assert _run(replayed, journal_path, tool) == ("info", "s003.redo")
        assert tool.invocations == []


def _raised_from(outer: Exception, cause: BaseException) -> Exception:
    """``outer`` as a framework raises it around ``cause`` (``raise outer from cause``)."""
    try:
        raise outer from cause
    except Exception as exc:
        return exc


def _mcp_error(code: int, message: str) -> Exception:
    from mcp.shared.exceptions import MCPError

    return MCPError(code=code, message=message)


class TestLostReplies:
    """A framework's exception for a call whose reply never came is an unknown outcome."""

    @pytest.mark.parametrize(
        "exc",
        [
            pytest.param(ConnectionResetError("reset by peer"), id="connection reset"),
            pytest.param(TimeoutError(), id="timeout"),
            pytest.param(
                _raised_from(RuntimeError("Error invoking MCP tool"), httpx.ReadError("eof")),
                id="httpx error under a wrapper",
            ),
            pytest.param(
                ExceptionGroup("task group", [anyio.ClosedResourceError()]), id="anyio in a group"
            ),
            pytest.param(
                httpx2.RemoteProtocolError("Server disconnected without sending a response."),
                id="httpx2, MCP 2.x's client",
            ),
            pytest.param(_mcp_error(-32000, "Connection closed"), id="MCP connection closed"),
            pytest.param(_mcp_error(-32001, "Request 'tools/call' timed out"), id="MCP timeout"),
        ],
    )
    def test_is_transient(self, exc: Exception) -> None:
        assert reply_lost(exc)
        failure = tool_failure("tap", exc)
        assert isinstance(failure, TransientToolError) and "reply was lost" in str(failure)

    @pytest.mark.parametrize(
        "exc",
        [
            pytest.param(ValueError("no such button"), id="the tool's own error"),
            pytest.param(_mcp_error(-32602, "Invalid params"), id="the server refused it"),
            pytest.param(
                _raised_from(RuntimeError("wrapped"), KeyError("x")), id="a bug under a wrapper"
            ),
        ],
    )
    def test_anything_else_is_a_failure(self, exc: Exception) -> None:
        assert not reply_lost(exc)
        failure = tool_failure("tap", exc)
        assert type(failure) is ToolError and str(failure) == f"tap: {exc}"

    def test_a_tool_error_is_kept(self) -> None:
        error = TransientToolError("busy")
        assert tool_failure("tap", error) is error

    def test_an_unsafe_call_whose_reply_was_lost_answers_with_its_hint(
        self, journal_path: Path
    ) -> None:
        """Through the guard: not journaled as failed, nor retried: the model must verify,
        and a later life runs nothing."""
        calls: list[str] = []

        async def execute(tool: str, args: object, ctx: CallContext) -> object:
            calls.append(ctx.op_id)
            try:
                raise httpx.RemoteProtocolError("peer closed connection")
            except httpx.HTTPError as exc:
                raise tool_failure(tool, exc) from exc

        async def life(guard: ToolGuard) -> GuardReply:
            return await guard.call("call-1", "tap", ARGS)

        async def run() -> tuple[GuardReply, GuardReply]:
            async with await ToolGuard.open(journal_path, execute, table=TABLE) as guard:
                first = await life(guard)
            async with await ToolGuard.open(journal_path, execute, table=TABLE) as guard:
                return first, await life(guard)

        first, again = asyncio.run(run())
        assert first.status == "info" and first.hint is not None and VERIFY_TOOL in first.text
        assert again.status == "info" and calls == ["call-1"]
