"""An Agno agent (agno 3.1.10): an OpenAI-compatible model, tools from MCP, a SQLite session.

The model is ``agno.models.openai.OpenAIChat`` on ``OPENAI_BASE_URL``; the tools come
from ``agno.tools.mcp.MCPTools`` on ``HARNESS_MCP_URL`` (streamable HTTP).
State: ``agno.db.sqlite.SqliteDb``, the file ``agno.db`` in the working folder, one
session with a fixed id, its history added to the context. ``checkpoint="tool-batch"``
writes the run to it after each tool batch (status RUNNING), not only when it ends.

A restart builds the same agent and, as Agno's crash-recovery example does, continues
the session's last run in place (``acontinue_run(run_id=...)``) when it was cut off
(RUNNING or ERROR): it goes on from the last tool batch written. Otherwise (no run
written yet, or one that finished) it runs the task again in the same session.

Telemetry: off (``telemetry=False``, and ``AGNO_TELEMETRY=false``).
"""

from __future__ import annotations

import asyncio
import os

os.environ.setdefault("AGNO_TELEMETRY", "false")

from agno.agent import Agent
from agno.db.sqlite import SqliteDb
from agno.models.openai import OpenAIChat
from agno.run.base import RunStatus
from agno.tools.mcp import MCPTools

SESSION_ID = "phone-task"
TASK = "Carry out the task step by step with the tools you have, then say you are done."


async def main() -> int:
    model = OpenAIChat(
        id="harness-scripted",
        base_url=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ.get("OPENAI_API_KEY", "unused"),
    )
    async with MCPTools(url=os.environ["HARNESS_MCP_URL"], transport="streamable-http") as mcp:
        agent = Agent(
            name="phone-agent",  # its id comes from its name: the same in every life
            model=model,
            tools=[mcp],
            db=SqliteDb(db_file="agno.db"),
            session_id=SESSION_ID,
            add_history_to_context=True,
            checkpoint="tool-batch",
            telemetry=False,
        )
        last = await agent.aget_last_run_output(session_id=SESSION_ID)
        if last is not None and last.status in (RunStatus.running, RunStatus.error):
            result = await agent.acontinue_run(run_id=last.run_id, session_id=SESSION_ID)
        else:
            result = await agent.arun(TASK, session_id=SESSION_ID)
    print((result.content or "").strip())
    return 0 if result.status == RunStatus.completed else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
