"""A Strands Agents agent (strands-agents 1.62.0): an OpenAI-compatible model, tools from MCP.

The model is ``strands.models.openai.OpenAIModel`` on ``OPENAI_BASE_URL``; the tools
come from ``strands.tools.mcp.MCPClient`` on ``HARNESS_MCP_URL`` (streamable HTTP).
State: a ``FileSessionManager`` with a fixed session id, stored in ``sessions/`` in the
working folder. Strands writes each message to it as it is added to the conversation
(the model's tool calls before they run, their results after the whole batch ran).

A restart builds the same agent with the same session manager, which restores the
conversation, and asks it to carry on (Strands' docs on sessions). A conversation that
ends in tool calls with no results gets, from Strands itself, a "Tool was interrupted."
error result for each before the new prompt is added.

Telemetry: Strands exports traces only when told to (``StrandsTelemetry`` with an
exporter); OpenTelemetry's SDK is also switched off by its own variable.
"""

from __future__ import annotations

import os

os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from strands import Agent
from strands.models.openai import OpenAIModel
from strands.session.file_session_manager import FileSessionManager
from strands.tools.mcp import MCPClient

SESSION_ID = "phone-task"
TASK = "Carry out the task step by step with the tools you have, then say you are done."
CARRY_ON = "Carry on with the task from where you left off, then say you are done."


def main() -> int:
    model = OpenAIModel(
        client_args={
            "base_url": os.environ["OPENAI_BASE_URL"],
            "api_key": os.environ.get("OPENAI_API_KEY", "unused"),
        },
        model_id="harness-scripted",
    )
    sessions = FileSessionManager(session_id=SESSION_ID, storage_dir="sessions")
    mcp = MCPClient(url=os.environ["HARNESS_MCP_URL"])
    with mcp:
        agent = Agent(
            model=model,
            tools=mcp.list_tools_sync(),
            session_manager=sessions,
            callback_handler=None,
        )
        # A new session starts the task; a restored one (a restart) is asked to carry on.
        result = agent(CARRY_ON if agent.messages else TASK)
    print(str(result).strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
