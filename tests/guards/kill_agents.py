"""``python kill_agents.py openai|adk DIR WHERE``: one life of a guarded agent that pays once.

The tool ``pay`` appends its invoice to ``DIR/ledger`` (the effect, outside the journal);
in the life where ``DIR/die`` is absent it creates it and SIGKILLs its own process,
``WHERE`` "before" or "after" the effect. The model calls ``pay`` as ``call-1``; when
the answer is the guard's VERIFY hint, it reads the ledger (``ledger``, as
``call-1.check``) and reports what it found; then it says "done".
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from harness.integrations.guard import VERIFY_TOOL

HINT = re.compile(rf'call {VERIFY_TOOL} with op_id "([^"]+)"')
FOLDER = Path(sys.argv[2]) if len(sys.argv) > 2 else Path.cwd()
WHERE = sys.argv[3] if len(sys.argv) > 3 else "after"


def pay(invoice: str) -> str:
    """Pay an invoice (not idempotent)."""
    die = not (FOLDER / "die").exists()
    if die:
        (FOLDER / "die").touch()
    if die and WHERE == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    with (FOLDER / "ledger").open("a") as ledger:
        ledger.write(invoice + "\n")
        ledger.flush()
        os.fsync(ledger.fileno())
    if die:
        os.kill(os.getpid(), signal.SIGKILL)
    return "paid"


def ledger(invoice: str) -> str:
    """Whether the ledger holds a payment of the invoice: "yes" or "no"."""
    path = FOLDER / "ledger"
    return "yes" if path.exists() and invoice in path.read_text().split() else "no"


def next_call(outputs: dict[str, str]) -> tuple[str, str, dict[str, Any]] | None:
    """The model's next call (id, tool, arguments), from the outputs it has read; None: done."""
    if "call-1" not in outputs:
        return "call-1", "pay", {"invoice": "A-17"}
    hinted = HINT.search(outputs["call-1"])
    if hinted is None:
        return None
    if "call-1.check" not in outputs:
        return "call-1.check", "ledger", {"invoice": "A-17"}
    if "call-1.report" not in outputs:
        found = "present" if outputs["call-1.check"] == "yes" else "absent"
        return "call-1.report", VERIFY_TOOL, {"op_id": hinted.group(1), "found": found}
    return None


async def openai_agents() -> None:
    from agents import Agent, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
    from agents.models.interface import Model
    from agents.testing import assistant_message, function_call

    from harness.integrations.openai_agents import OpenAIAgentsGuard

    class Scripted(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            items = args[1] if len(args) > 1 else kwargs["input"]
            outputs = {
                str(item["call_id"]): str(item["output"])
                for item in items
                if isinstance(item, dict) and item.get("type") == "function_call_output"
            }
            call = next_call(outputs)
            if call is None:
                output = [assistant_message("done")]
            else:
                output = [function_call(call[1], call[2], call_id=call[0])]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    set_tracing_disabled(True)
    tools = [function_tool(pay), function_tool(ledger)]
    async with await OpenAIAgentsGuard.open(FOLDER / "agent.journal", tools) as guard:
        for hint in guard.guard.recovered:
            print("recovered", hint.op_id)
        agent = Agent(name="payer", model=Scripted(), tools=guard.tools)
        result = await Runner.run(agent, "Pay A-17")
        for item in result.new_items:
            output = getattr(item, "output", None)
            if output is not None:
                print("output", json.dumps(output))
        print(result.final_output)


async def adk() -> None:
    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from harness.integrations.adk import AdkGuard

    class Scripted(BaseLlm):
        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            outputs = {
                str(part.function_response.id): str(
                    (part.function_response.response or {}).get("result")
                )
                for content in llm_request.contents
                for part in content.parts or []
                if part.function_response is not None
            }
            call = next_call(outputs)
            if call is None:
                part = types.Part(text="done")
            else:
                part = types.Part(
                    function_call=types.FunctionCall(id=call[0], name=call[1], args=call[2])
                )
            yield LlmResponse(content=types.Content(role="model", parts=[part]))

    async with await AdkGuard.open(FOLDER / "agent.journal", [pay, ledger]) as guard:
        for hint in guard.guard.recovered:
            print("recovered", hint.op_id)
        agent = LlmAgent(
            name="payer",
            model=Scripted(model="scripted"),
            tools=guard.tools,
            before_tool_callback=guard.before_tool_callback,
        )
        runner = InMemoryRunner(agent)
        session = await runner.session_service.create_session(
            app_name=runner.app_name, user_id="me"
        )
        message = types.Content(role="user", parts=[types.Part(text="Pay A-17")])
        async for event in runner.run_async(
            user_id="me", session_id=session.id, new_message=message
        ):
            for part in event.content.parts or [] if event.content else []:
                if part.function_response is not None:
                    response = part.function_response.response or {}
                    print("output", json.dumps(response.get("result", response)))
                elif part.text:
                    print(part.text)


if __name__ == "__main__":
    asyncio.run(openai_agents() if sys.argv[1] == "openai" else adk())
