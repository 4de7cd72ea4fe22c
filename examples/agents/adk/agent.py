"""A Google ADK agent (google-adk 2.13.0): an ``LlmAgent`` in a resumable ``App``.

Its model is the OpenAI-compatible endpoint at ``OPENAI_BASE_URL``, through ADK's
LiteLLM wrapper (``LiteLlm(model="openai/...")``); its tools are an ``McpToolset`` on
the MCP server at ``HARNESS_MCP_URL`` (streamable HTTP), or the one started from
``HARNESS_MCP_COMMAND`` (stdio) when ``AGENT_MCP=stdio``.

State: ADK's ``DatabaseSessionService`` on SQLite, ``sessions.db`` in the working
folder: the session ``task`` holds every event of the run (the model's function
calls with their ids, the tools' responses), each appended as it happens.

Restart: the app is resumable (``ResumabilityConfig(is_resumable=True)``), so the
agent resumes the session's interrupted invocation as ADK's "Resume stopped agents"
says: ``run_async`` with that invocation's id (from the session's event history) and
no new message. ADK then runs again any function call of the model that has no
response in the session, and goes on. Once the invocation ends, it prints the
model's final answer and exits 0.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from typing import Any

# Nothing online: LiteLLM's cost map is its local copy, and ADK's MCP client does not look
# for Google credentials to set up mTLS (google-auth's switch; the probe would ask the
# cloud metadata server).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")

from google.adk.agents import LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService
from google.adk.tools.mcp_tool import (
    McpToolset,
    StdioConnectionParams,
    StreamableHTTPConnectionParams,
)
from google.genai import types
from mcp import StdioServerParameters

APP, USER, SESSION = "phone_agent", "user", "task"
TASK = "Carry out the task step by step with the tools you have, then say you are done."


def mcp_tools() -> McpToolset:
    """The harness's tools, as an ADK toolset."""
    if os.environ.get("AGENT_MCP") == "stdio":
        command, *args = shlex.split(os.environ["HARNESS_MCP_COMMAND"])
        server = StdioServerParameters(command=command, args=args)
        return McpToolset(connection_params=StdioConnectionParams(server_params=server))
    return McpToolset(
        connection_params=StreamableHTTPConnectionParams(url=os.environ["HARNESS_MCP_URL"])
    )


def build_app(tools: list[Any], **agent_options: Any) -> App:
    model = LiteLlm(
        model="openai/harness-scripted",
        api_base=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ.get("OPENAI_API_KEY", "unused"),
    )
    agent = LlmAgent(
        name="phone_agent", model=model, instruction=TASK, tools=tools, **agent_options
    )
    return App(
        name=APP, root_agent=agent, resumability_config=ResumabilityConfig(is_resumable=True)
    )


async def run(app: App) -> int:
    sessions = DatabaseSessionService(db_url="sqlite+aiosqlite:///sessions.db")
    runner = Runner(app=app, session_service=sessions)
    session = await sessions.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    if session is None:
        session = await sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    if session.events:  # a life after a stop: resume its invocation, by its id
        resume = {"invocation_id": session.events[-1].invocation_id}
    else:
        resume = {"new_message": types.Content(role="user", parts=[types.Part(text=TASK)])}
    async for _ in runner.run_async(user_id=USER, session_id=SESSION, **resume):
        pass
    session = await sessions.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert session is not None
    final = [e for e in session.events if e.is_final_response() and e.content]
    answer = "".join(p.text or "" for p in final[-1].content.parts or []) if final else ""
    await runner.close()
    await sessions.close()
    print(answer)
    return 0 if final else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(run(build_app([mcp_tools()]))))
