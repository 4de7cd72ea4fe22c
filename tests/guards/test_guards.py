"""Both guards in this process: a tool's failure, the call a tool serves, the tool names.

Each run is one "life": a guard on a journal, and an agent whose scripted model makes
one call to ``pay``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents import (
    Agent,
    Runner,
    SQLiteSession,
    ToolOutputText,
    function_tool,
    set_tracing_disabled,
)
from agents.testing import ScriptedModel, assistant_message, function_call
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

from harness.integrations import adk, openai_agents
from harness.integrations.adk import AdkGuard
from harness.integrations.openai_agents import OpenAIAgentsGuard
from harness.runtime import CallContext
from harness.runtime.records import FinishRecord, IntentRecord
from tests.conftest import journal_records

set_tracing_disabled(True)


def _agents_output(journal: Path | None, pay: Any) -> Any:
    """The function-call output the model is sent for ``pay``'s call (no guard: ``None``)."""

    async def life() -> Any:
        model = ScriptedModel(
            [
                [function_call("pay", {"invoice": "A-17"}, call_id="call-1")],
                [assistant_message("done")],
            ]
        )
        if journal is None:
            result = await Runner.run(Agent(name="payer", model=model, tools=[pay]), "Pay")
        else:
            async with await OpenAIAgentsGuard.open(journal, [pay]) as guard:
                agent = Agent(name="payer", model=model, tools=guard.tools)
                result = await Runner.run(agent, "Pay")
        return result.new_items[1].raw_item["output"]

    return asyncio.run(life())


def _agents_run(journal: Path, pay: Any) -> str:
    return str(_agents_output(journal, pay))


class _Llm(BaseLlm):
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = (llm_request.contents[-1].parts or [types.Part()])[0]
        if last.function_response is None:
            call = types.FunctionCall(id="call-1", name="pay", args={"invoice": "A-17"})
            part = types.Part(function_call=call)
        else:
            part = types.Part(text="done")
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def _adk_run(journal: Path, pay: Any) -> dict[str, Any]:
    async def life() -> dict[str, Any]:
        async with await AdkGuard.open(journal, [pay]) as guard:
            agent = LlmAgent(
                name="payer",
                model=_Llm(model="scripted"),
                tools=guard.tools,
                before_tool_callback=guard.before_tool_callback,
            )
            runner = InMemoryRunner(agent)
            session = await runner.session_service.create_session(
                app_name=runner.app_name, user_id="me"
            )
            message = types.Content(role="user", parts=[types.Part(text="Pay")])
            responses = [
                part.function_response.response or {}
                async for event in runner.run_async(
                    user_id="me", session_id=session.id, new_message=message
                )
                for part in (event.content.parts or [] if event.content else [])
                if part.function_response is not None
            ]
        assert len(responses) == 1, responses
        return responses[0]

    return asyncio.run(life())


def _finishes(journal: Path) -> list[tuple[str, bool]]:
    return [(r.op_id, r.succeeded) for r in journal_records(journal) if isinstance(r, FinishRecord)]


class TestOpenAIAgents:
    def test_a_failure_it_lets_out_is_journaled_failed_and_read_as_an_error(
        self, tmp_path: Path
    ) -> None:
        def pay(invoice: str) -> str:
            raise RuntimeError(f"card declined for {invoice}")

        output = _agents_run(tmp_path / "j", function_tool(pay, failure_error_function=None))
        assert output.startswith("error: ") and "card declined for A-17" in output
        assert _finishes(tmp_path / "j") == [("call-1", False)]
        assert _agents_run(tmp_path / "j", function_tool(pay)) == output  # from the journal

    def test_the_tool_reads_the_call_it_serves(self, tmp_path: Path) -> None:
        served: list[CallContext | None] = []

        def pay(invoice: str) -> str:
            served.append(openai_agents.current_call())
            return "paid"

        assert _agents_run(tmp_path / "j", function_tool(pay)) == "paid"
        assert [(c.op_id, c.tool, c.attempt) for c in served if c] == [("call-1", "pay", 1)]
        assert openai_agents.current_call() is None

    def test_a_structured_output_reaches_the_model_as_without_the_guard(
        self, tmp_path: Path
    ) -> None:
        """An MCP tool's output is a ``ToolOutputText`` (a dict once journaled): the model
        is sent its text as a content part, as without the guard, never the JSON of it."""
        ran: list[str] = []

        def pay(invoice: str) -> ToolOutputText:
            ran.append(invoice)
            return ToolOutputText(text=json.dumps({"receipt": f"R-{invoice}"}))

        bare = _agents_output(None, function_tool(pay))
        assert bare == [{"type": "input_text", "text": '{"receipt": "R-A-17"}'}]
        assert _agents_output(tmp_path / "j", function_tool(pay)) == bare
        assert _agents_output(tmp_path / "j", function_tool(pay)) == bare  # from the journal
        assert ran == ["A-17", "A-17"]  # bare, then guarded once

    def test_a_tool_named_as_the_guards_own_is_refused_before_the_journal(
        self, tmp_path: Path
    ) -> None:
        def report_verification(op_id: str) -> str:
            return op_id

        with pytest.raises(ValueError, match="report_verification"):
            _agents_run(tmp_path / "j", function_tool(report_verification))
        assert not (tmp_path / "j").exists()

    def test_a_lost_reply_is_an_unknown_outcome_not_a_failure(self, tmp_path: Path) -> None:
        """A tool whose reply was lost on the way (its connection dropped) may have had
        its effect: the model reads the VERIFY hint, and nothing is journaled failed."""

        def pay(invoice: str) -> str:
            raise httpx.RemoteProtocolError("peer closed connection without a response")

        output = _agents_run(tmp_path / "j", function_tool(pay, failure_error_function=None))
        assert "report_verification" in output and '"call-1"' in output, output
        (finish,) = [r for r in journal_records(tmp_path / "j") if isinstance(r, FinishRecord)]
        assert not finish.succeeded and finish.transient, finish
        assert _agents_run(tmp_path / "j", function_tool(pay)) == output  # still to verify

    @pytest.mark.parametrize("saved", [False, True])
    def test_a_call_the_session_saved_never_answers_a_new_one(
        self, tmp_path: Path, saved: bool
    ) -> None:
        """Identity by content, with the agent's session: a new call of a content whose
        first call the session saved (with its output) is a call of its own and runs;
        without it, it stands for the first, as a re-issued call does."""
        ran: list[str] = []

        def pay(invoice: str) -> str:
            ran.append(invoice)
            return f"paid {invoice}"

        async def life(call_id: str, session: SQLiteSession | None) -> None:
            model = ScriptedModel(
                [
                    [function_call("pay", {"invoice": "A-17"}, call_id=call_id)],
                    [assistant_message("done")],
                ]
            )
            async with await OpenAIAgentsGuard.open(
                tmp_path / "j", [function_tool(pay)], identity="content", session=session
            ) as guard:
                await Runner.run(
                    Agent(name="payer", model=model, tools=guard.tools), "Pay", session=session
                )

        async def two_lives() -> None:
            session = SQLiteSession("task", tmp_path / "session.db")
            await life("call-1", session)
            await life("call-2", session if saved else None)
            session.close()

        asyncio.run(two_lives())
        assert ran == (["A-17", "A-17"] if saved else ["A-17"])


class TestAdk:
    @pytest.mark.parametrize("graceful", [True, False])
    def test_mcp_tools_that_answer_their_own_errors_are_warned_of(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, graceful: bool
    ) -> None:
        """ADK's MCP tools turn a lost connection into an {"error"} result unless told not
        to: the guard would journal it as the call's result, so opening it says so."""
        import warnings

        from google.adk.tools.mcp_tool import McpTool, StreamableHTTPConnectionParams
        from google.adk.tools.mcp_tool.mcp_session_manager import MCPSessionManager
        from mcp_types import Tool

        if not graceful:
            monkeypatch.setenv("ADK_DISABLE_MCP_GRACEFUL_ERROR_HANDLING", "1")
        sessions = MCPSessionManager(StreamableHTTPConnectionParams(url="http://127.0.0.1:9/mcp"))
        tap = McpTool(
            mcp_tool=Tool(name="ui_tap", input_schema={"type": "object"}),
            mcp_session_manager=sessions,
        )

        async def open_and_close() -> None:
            async with await AdkGuard.open(tmp_path / "j", [tap]):
                pass

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            asyncio.run(open_and_close())
        said = [str(w.message) for w in caught if "ADK_DISABLE_MCP" in str(w.message)]
        assert len(said) == (1 if graceful else 0), said

    def test_a_failure_is_journaled_failed_and_read_as_an_error(self, tmp_path: Path) -> None:
        def pay(invoice: str) -> str:
            """Pay an invoice."""
            raise RuntimeError(f"card declined for {invoice}")

        response = _adk_run(tmp_path / "j", pay)
        assert list(response) == ["error"] and "card declined for A-17" in response["error"]
        assert _finishes(tmp_path / "j") == [("call-1", False)]
        assert _adk_run(tmp_path / "j", pay) == response  # from the journal, not run again

    def test_the_tool_reads_the_call_it_serves_and_its_dict_is_the_answer(
        self, tmp_path: Path
    ) -> None:
        served: list[CallContext | None] = []

        def pay(invoice: str) -> dict[str, str]:
            """Pay an invoice."""
            served.append(adk.current_call())
            return {"receipt": f"R-{invoice}"}

        assert _adk_run(tmp_path / "j", pay) == {"receipt": "R-A-17"}
        assert [(c.op_id, c.tool, c.attempt) for c in served if c] == [("call-1", "pay", 1)]
        intents = [r for r in journal_records(tmp_path / "j") if isinstance(r, IntentRecord)]
        assert [(r.op_id, r.tool, json.dumps(r.args)) for r in intents] == [
            ("call-1", "pay", '{"invoice": "A-17"}')
        ]
