"""The pydantic-ai adapter's scripted model, fed messages in-process (no DBOS, no process).

``PlanModel`` is a ``FunctionModel`` function: each turn a function of the messages
alone, so that a life DBOS replays asks the same. What it emits, and what it tells
the supervisor it read.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic_ai import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.messages import ModelMessage, UserPromptPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import ToolDefinition

import harness.adapters.pydantic_ai_agent as adapter
from harness.adapters.pydantic_ai_agent import PlanModel
from harness.agent.plan import Plan, PlanStep, Verification
from harness.integrations.guard import VERIFY_TOOL, hint_message
from harness.runtime import VerifyHint

TAP = PlanStep(
    1,
    "s001",
    "ui_tap",
    {"element": "pay"},
    Verification("ui_dump", {}, "submissions", contains="pay"),
)
READ_A = PlanStep(2, "s002a", "ui_dump", {}, batch=2)
WRITE_B = PlanStep(2, "s002b", "shell_execute", {"command": "sync"}, batch=2)
PLAN = Plan("test", 1, "test.toml", (TAP, READ_A, WRITE_B))


def info(*tools: str) -> AgentInfo:
    return AgentInfo(
        function_tools=[ToolDefinition(name=t) for t in tools],
        allow_text_output=True,
        output_tools=[],
        model_settings=None,
        model_request_parameters=ModelRequestParameters(),
        instructions=None,
    )


GUARDED = info("ui_tap", "ui_dump", "shell_execute", VERIFY_TOOL)
BARE = info("ui_tap", "ui_dump", "shell_execute")


def calls(response: ModelResponse) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (p.tool_call_id, p.tool_name, p.args_as_dict())
        for p in response.parts
        if isinstance(p, ToolCallPart)
    ]


def answered(
    messages: list[ModelMessage], response: ModelResponse, *contents: str
) -> list[ModelMessage]:
    """The history after ``response``'s calls came back with ``contents``, in order."""
    parts = [
        ToolReturnPart(p.tool_name, content, tool_call_id=p.tool_call_id)
        for p, content in zip(
            [p for p in response.parts if isinstance(p, ToolCallPart)], contents, strict=True
        )
    ]
    return [*messages, response, ModelRequest(parts=parts)]


@pytest.fixture
def told(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    lines: list[str] = []
    monkeypatch.setattr(adapter, "_tell", lambda what, op="": lines.append(f"{what} {op}"))
    return lines


START: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("go")])]
HINT = hint_message(VerifyHint("s001", "ui_tap", {"element": "pay"}, "Operation s001 ..."))


class TestPlanModel:
    def test_the_plan_turn_by_turn_a_batch_in_one_response(self, told: list[str]) -> None:
        """One call per turn under the plan's id, a batch's calls together, then done."""
        model = PlanModel(PLAN)
        first = model(START, GUARDED)
        assert calls(first) == [("s001", "ui_tap", {"element": "pay"})]
        second = model(answered(START, first, '{"ok": 1}'), GUARDED)
        assert [c[0] for c in calls(second)] == ["s002a", "s002b"]
        history = answered(answered(START, first, '{"ok": 1}'), second, "{}", "{}")
        last = model(history, GUARDED)
        assert last.parts == [TextPart("done")]
        assert told == [
            "invoke s001",
            "ack s001",
            "invoke s002a",
            "invoke s002b",
            "ack s002a",
            "ack s002b",
        ]

    @pytest.mark.parametrize(
        ("screen", "found", "outcome"), [(["pay"], "present", "ack"), ([], "absent", "ack")]
    )
    def test_a_hint_is_checked_then_reported(
        self, told: list[str], screen: list[str], found: str, outcome: str
    ) -> None:
        """A hint in a return: the step's read-only check as s001.check, then the report
        of what it found; the step's outcome once the report is answered."""
        model = PlanModel(PLAN)
        first = model(START, GUARDED)
        history = answered(START, first, HINT)
        check = model(history, GUARDED)
        assert calls(check) == [("s001.check", "ui_dump", {})]
        history = answered(history, check, json.dumps({"submissions": screen}))
        report = model(history, GUARDED)
        assert calls(report) == [("s001.report", VERIFY_TOOL, {"op_id": "s001", "found": found})]
        answer = "recorded: s001 is present; it is not run again"
        nxt = model(answered(history, report, answer if found == "present" else "{}"), GUARDED)
        assert [c[0] for c in calls(nxt)] == ["s002a", "s002b"]
        # The hint is told at each turn the model acts on it (reading it, reading its check).
        assert told[:4] == ["invoke s001", "info s001", "hint s001", "hint s001"]
        assert told[4:] == [f"{outcome} s001", "invoke s002a", "invoke s002b"]

    def test_a_step_no_tool_can_check_is_reported_unknown(self, told: list[str]) -> None:
        """No verification: the report says unknown at once, and the step ends as info."""
        model = PlanModel(PLAN)
        history = answered(START, model(START, GUARDED), '{"ok": 1}')
        batch = model(history, GUARDED)
        hint = hint_message(VerifyHint("s002b", "shell_execute", {}, "Operation s002b ..."))
        history = answered(history, batch, "{}", hint)
        report = model(history, GUARDED)
        assert calls(report) == [
            ("s002b.report", VERIFY_TOOL, {"op_id": "s002b", "found": "unknown"})
        ]
        model(answered(history, report, "recorded: s002b is unknown; it is not run again"), GUARDED)
        assert told[-1] == "info s002b"

    def test_without_report_verification_it_carries_on(self, told: list[str]) -> None:
        """The bare agent offers no report tool: the model goes on with the plan."""
        model = PlanModel(PLAN)
        history = answered(START, model(START, BARE), HINT)
        assert [c[0] for c in calls(model(history, BARE))] == ["s002a", "s002b"]
