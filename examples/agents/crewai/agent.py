"""A CrewAI Flow whose step runs an agent with MCP tools (crewai 1.15.30).

The flow's state is kept by ``@persist`` with CrewAI's SQLite persistence,
``SQLiteFlowPersistence(db_path="flow_state.db")`` in the working folder, saved after each
flow method completes. Its one working step has an ``Agent`` (model ``crewai.LLM`` at
``OPENAI_BASE_URL``, tools from the MCP server at ``HARNESS_MCP_URL`` through crewai-tools'
``MCPServerAdapter``: the agent's own ``mcps=`` reports every HTTP tool call as failed in
this version on Python 3.11) carry out the task. Started again, the flow is kicked off
with the same state id, so ``@persist`` loads the last saved state and the flow runs from
its start with it: a step whose result the state holds is skipped, a step that was under
way when the process died runs again from the top. CrewAI's telemetry and tracing are
turned off by their environment variables.
"""

from __future__ import annotations

import os
import sys

os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
os.environ["OTEL_SDK_DISABLED"] = "true"
os.environ["CREWAI_TRACING_ENABLED"] = "false"

from crewai import LLM, Agent
from crewai.flow.flow import Flow, FlowState, listen, start
from crewai.flow.persistence import SQLiteFlowPersistence, persist
from crewai_tools import MCPServerAdapter

STATE_ID = "phone-task"  # one run per working folder: a restart names the same state
TASK = "Carry out the task step by step with the tools you have, then say you are done."


class TaskState(FlowState):
    answer: str = ""


@persist(SQLiteFlowPersistence(db_path="flow_state.db"))
class TaskFlow(Flow[TaskState]):
    @start()
    def carry_out(self) -> None:
        if self.state.answer:  # done before a restart: the saved state holds it
            return
        server = {"url": os.environ["HARNESS_MCP_URL"], "transport": "streamable-http"}
        with MCPServerAdapter(server) as tools:
            agent = Agent(
                role="Phone operator",
                goal="Carry out the user's task on the phone with the tools given.",
                backstory="You operate a phone through its tools, one step at a time.",
                llm=LLM(
                    model="openai/harness-scripted",
                    base_url=os.environ["OPENAI_BASE_URL"],
                    api_key=os.environ.get("OPENAI_API_KEY", "none"),
                ),
                tools=tools,
            )
            self.state.answer = agent.kickoff(TASK).raw

    @listen(carry_out)
    def report(self) -> str:
        return self.state.answer


def main() -> int:
    print(TaskFlow().kickoff(inputs={"id": STATE_ID}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
