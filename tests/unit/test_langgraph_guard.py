"""The LangGraph guard: a user's tools in a real graph (``ToolNode``), in this process.

Each "life" is a new guard on the same journal and a new graph whose model issues
the same tool calls again, as a graph resumed from its checkpoint does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import ToolCall
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from harness.integrations.guard import VERIFY_TOOL, VERIFY_TOOL_DOC, hint_message
from harness.integrations.langgraph import LangGraphGuard, current_call
from harness.runtime import CallContext, ToolTable
from harness.runtime.journal import JournalWriter
from harness.runtime.records import (
    FinishRecord,
    IncarnationRecord,
    IntentRecord,
    RecoveredRecord,
    ResolvedRecord,
    digest,
)
from tests.conftest import journal_records

TABLE = ToolTable.shipped()
PAY = {"element": "pay", "form": "bill-1"}


class Screen:
    """Two user tools acting on a list that stands for a phone; each run is recorded with
    the call the guard said it serves (``current_call``)."""

    def __init__(self, fail: bool = False) -> None:
        self.taps: list[str] = []
        self.runs: list[CallContext] = []
        self.fail = fail

    def tools(self) -> list[BaseTool]:
        async def ui_tap(element: str, form: str) -> str:
            ctx = current_call()
            assert ctx is not None
            self.runs.append(ctx)
            if self.fail:
                raise ToolException(f"no button {element!r}")
            self.taps.append(element)
            return f"tapped {element} on {form}"

        async def ui_dump() -> dict[str, Any]:
            ctx = current_call()
            assert ctx is not None
            self.runs.append(ctx)
            return {"taps": list(self.taps)}

        return [
            StructuredTool.from_function(coroutine=ui_tap, description="Tap a button."),
            StructuredTool.from_function(coroutine=ui_dump, description="Read the screen."),
        ]

    def ran(self, op_id: str) -> int:
        return sum(1 for ctx in self.runs if ctx.op_id == op_id)


def _call(call_id: str, name: str, args: dict[str, Any]) -> ToolCall:
    return ToolCall(name=name, args=args, id=call_id, type="tool_call")


def _turn(*calls: ToolCall) -> AIMessage:
    return AIMessage(content="", tool_calls=list(calls))


async def _run_graph(tools: Sequence[BaseTool], turns: Sequence[AIMessage]) -> list[AnyMessage]:
    """A user's graph: a model node and ToolNode in a loop; the model says ``turns``."""
    model = GenericFakeChatModel(messages=iter([*turns, AIMessage(content="done")]))

    async def call_model(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode(list(tools)))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    start = MessagesState(messages=[HumanMessage("pay the bill")])
    result = await builder.compile().ainvoke(start)
    return list(result["messages"])


def _life(journal: Path, screen: Screen, *turns: AIMessage) -> tuple[list[ToolMessage], Any]:
    """One life: a guard on ``journal``, a graph whose model says ``turns``; the tool
    messages it made and the hints of the guard's recovery."""

    async def life() -> tuple[list[ToolMessage], Any]:
        async with await LangGraphGuard.open(journal, screen.tools(), table=TABLE) as guard:
            messages = await _run_graph(guard.tools, turns)
            return [m for m in messages if isinstance(m, ToolMessage)], guard.guard.recovered

    return asyncio.run(life())


def _left_running(journal: Path) -> None:
    """A journal whose last life died with ``s003`` (a ui_tap) in flight."""
    intent = IntentRecord("s003", "ui_tap", TABLE.classify("ui_tap"), PAY, digest(PAY), 1, 1)
    with JournalWriter(journal) as writer:
        writer.append_many([IncarnationRecord(1, 1), RecoveredRecord(1, 0), intent])


class TestWrappedTools:
    def test_same_names_descriptions_and_schemas(self, journal_path: Path) -> None:
        """Same names, descriptions and schemas as the user's tools; report_verification last."""
        tools = Screen().tools()

        async def wrap() -> list[BaseTool]:
            async with await LangGraphGuard.open(journal_path, tools) as guard:
                return guard.tools

        wrapped = asyncio.run(wrap())
        assert [t.name for t in wrapped] == ["ui_tap", "ui_dump", VERIFY_TOOL]
        for mine, theirs in zip(wrapped, tools, strict=False):
            assert (mine.description, mine.args) == (theirs.description, theirs.args)
        assert wrapped[-1].description == VERIFY_TOOL_DOC
        assert set(wrapped[-1].args) == {"op_id", "found"}

    def test_a_name_clash_is_refused(self, journal_path: Path) -> None:
        """Two tools of one name, or one named like the guard's report, are a ValueError."""
        tools = Screen().tools()
        clash = StructuredTool.from_function(
            func=lambda op_id: op_id, name=VERIFY_TOOL, description="mine"
        )

        async def wrap(these: list[BaseTool]) -> None:
            async with await LangGraphGuard.open(journal_path, these):
                pass

        for these in ([*tools, tools[0]], [*tools, clash]):
            with pytest.raises(ValueError, match="must be unique and not 'report_verification'"):
                asyncio.run(wrap(these))

    def test_a_guarded_tool_runs_tool_calls_only(self, journal_path: Path) -> None:
        """Without a call id there is nothing to journal it under: ValueError; sync: refused."""
        screen = Screen()

        async def misuse() -> None:
            async with await LangGraphGuard.open(journal_path, screen.tools()) as guard:
                with pytest.raises(ValueError, match="run it as a tool call"):
                    await guard.tools[0].ainvoke(PAY)
                with pytest.raises(NotImplementedError, match="the guard is async"):
                    guard.tools[0].invoke(_call("c1", "ui_tap", PAY))

        asyncio.run(misuse())
        assert screen.runs == []


class TestGuardedGraph:
    def test_a_success_is_answered_from_the_journal_in_a_later_life(
        self, journal_path: Path
    ) -> None:
        """The same tool-call id in a later life reads the same content; the tap ran once."""
        screen = Screen()
        turn = _turn(_call("call-7", "ui_tap", PAY))
        first, _ = _life(journal_path, screen, turn)
        again, _ = _life(journal_path, screen, turn)
        assert screen.taps == ["pay"] and screen.ran("call-7") == 1
        for message in (first[0], again[0]):
            assert message.content == "tapped pay on bill-1" and message.status == "success"
            assert message.tool_call_id == "call-7"
            assert message.artifact == {"status": "ok", "op_id": "call-7", "hint": None}

    def test_a_batch_runs_each_call_under_its_own_id(self, journal_path: Path) -> None:
        """Two calls in one message: each journaled and run once, under its own id, in order."""
        screen = Screen()
        turn = _turn(_call("t1-a", "ui_tap", PAY), _call("t1-b", "ui_dump", {}))
        replies, _ = _life(journal_path, screen, turn)
        assert [ctx.op_id for ctx in screen.runs] == ["t1-a", "t1-b"]
        assert [m.tool_call_id for m in replies] == ["t1-a", "t1-b"]
        assert replies[1].content == '{"taps": ["pay"]}'
        intents = [r.op_id for r in journal_records(journal_path) if isinstance(r, IntentRecord)]
        assert intents == ["t1-a", "t1-b"]

    def test_a_failure_is_an_error_message_and_is_not_run_again(self, journal_path: Path) -> None:
        """A ToolException is FAILED in the journal and an error the model reads; later, the
        same call is answered with it and not run."""
        screen = Screen(fail=True)
        turn = _turn(_call("call-7", "ui_tap", PAY))
        first, _ = _life(journal_path, screen, turn)
        again, _ = _life(journal_path, screen, turn)
        assert screen.ran("call-7") == 1
        for message in (first[0], again[0]):
            assert message.status == "error"
            assert message.content == "error: ToolError: no button 'pay'"
        finishes = [r for r in journal_records(journal_path) if isinstance(r, FinishRecord)]
        assert [(f.op_id, f.succeeded) for f in finishes] == [("call-7", False)]


class TestUnknownOutcomes:
    def test_a_tap_in_flight_at_the_crash_answers_with_the_hint(self, journal_path: Path) -> None:
        """Run again by the graph, the tap is not run: its message is the VERIFY hint."""
        _left_running(journal_path)
        screen = Screen()
        replies, recovered = _life(journal_path, screen, _turn(_call("s003", "ui_tap", PAY)))
        assert screen.runs == []
        assert [h.op_id for h in recovered] == ["s003"]
        assert replies[0].content == hint_message(recovered[0])
        assert replies[0].status == "success"
        assert replies[0].artifact == {"status": "info", "op_id": "s003", "hint": "s003"}

    @pytest.mark.parametrize(("found", "taps"), [("absent", ["pay"]), ("present", [])])
    def test_the_report_redoes_it_once_or_closes_it(
        self, journal_path: Path, found: str, taps: list[str]
    ) -> None:
        """absent: redone once as s003.redo, with the key of s003; present: not run. A later
        life that runs the report again is answered from the journal, and runs nothing."""
        _left_running(journal_path)
        screen = Screen()
        tap = _turn(_call("s003", "ui_tap", PAY))
        report = _turn(_call("s003.report", VERIFY_TOOL, {"op_id": "s003", "found": found}))
        replies, _ = _life(journal_path, screen, tap, report)
        assert screen.taps == taps
        if found == "absent":
            (redo,) = screen.runs
            assert redo.op_id == "s003.redo"
            with JournalWriter(journal_path) as writer:
                journal_id = writer.journal_id
            first = CallContext("s003", "ui_tap", 1, 1, journal_id=journal_id)
            assert redo.idempotency_key == first.idempotency_key
            assert replies[1].content == "tapped pay on bill-1"
        else:
            assert replies[1].content == "recorded: s003 is present; it is not run again"
        assert replies[1].artifact["status"] == "ok"
        acts = (IntentRecord, FinishRecord, ResolvedRecord)
        before = [r for r in journal_records(journal_path) if isinstance(r, acts)]
        again, recovered = _life(journal_path, screen, report)
        assert recovered == () and screen.taps == taps
        assert again[0].content == replies[1].content
        after = [r for r in journal_records(journal_path) if isinstance(r, acts)]
        assert after == before  # nothing run, resolved or journaled again by the report
        assert sum(isinstance(r, ResolvedRecord) for r in after) == 1

    def test_a_report_about_nothing_is_an_error_the_model_reads(self, journal_path: Path) -> None:
        """An op the journal does not know, or a finding outside the three: an error message."""
        screen = Screen()
        bad = _turn(
            _call("r1", VERIFY_TOOL, {"op_id": "nope", "found": "present"}),
            _call("r2", VERIFY_TOOL, {"op_id": "nope", "found": "maybe"}),
        )
        replies, _ = _life(journal_path, screen, bad)
        assert [m.status for m in replies] == ["error", "error"]
        assert "no operation 'nope' is known" in str(replies[0].content)
        assert "found must be one of present, absent, unknown" in str(replies[1].content)
