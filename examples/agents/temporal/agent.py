"""An OpenAI Agents SDK agent run as a Temporal workflow (temporalio 1.35.0, its OpenAI Agents
integration ``temporalio-openai-agents`` 1.1.0 through ``temporalio.contrib.openai_agents``).

The workflow ``PhoneTask`` runs the SDK's ``Runner`` on an ``Agent`` whose tools are the MCP
server registered on the worker as ``harness`` (``temporal_mcp_server``): each model request
and each tool call is a Temporal activity, its result kept in the workflow's history on the
server. The worker reaches the model at ``OPENAI_BASE_URL`` (the Responses API, through the
plugin's default model provider) and the tools at ``HARNESS_MCP_URL`` (streamable HTTP).

State: the Temporal server's, never this process's. The server is the dev server
(``temporal server start-dev``) at ``127.0.0.1:$TEMPORAL_PORT``, its SQLite file kept by
whoever runs it. This process is one worker and the client that starts the workflow: it
starts ``phone-task`` or, when that id is already taken (running or closed), attaches to it,
and waits for its result with its own worker polling the task queue. A restarted process
does the same: the server hands the workflow's pending tasks to the new worker, which
replays the history and runs again what had not completed (an activity in flight at a kill
is retried once its start-to-close timeout has passed).

Settings (environment, for the trials of the findings page): ``TEMPORAL_ACTIVITY_TIMEOUT``
(seconds, default 10) is the start-to-close timeout of every activity;
``TEMPORAL_MAX_ATTEMPTS`` (default 0: Temporal's default, no limit) bounds a tool
activity's attempts; ``TEMPORAL_HEARTBEAT`` (seconds, default none) sets a tool activity's
heartbeat timeout. The final answer is printed, exit 0.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from datetime import timedelta

from agents import Agent, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from temporalio import workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RetryPolicy, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.contrib.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
from temporalio.contrib.openai_agents.workflow import temporal_mcp_server
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.worker import Worker
from temporalio.workflow import ActivityConfig

WORKFLOW_ID = "phone-task"
TASK_QUEUE = "phone-agent"
TASK = "Carry out the task step by step with the tools you have, then say you are done."
MAX_TURNS = 100  # the SDK's default (10) is fewer model turns than a long task takes


def _seconds(name: str) -> float | None:
    value = os.environ.get(name, "")
    return float(value) if value else None


@dataclass(frozen=True)
class ToolSettings:
    """How each tool call runs as an activity: the workflow's input, so a restarted worker
    replays it with the settings it was started with."""

    timeout_s: float
    max_attempts: int = 0
    heartbeat_s: float | None = None

    @classmethod
    def from_env(cls) -> ToolSettings:
        return cls(
            _seconds("TEMPORAL_ACTIVITY_TIMEOUT") or 10,
            int(os.environ.get("TEMPORAL_MAX_ATTEMPTS") or 0),
            _seconds("TEMPORAL_HEARTBEAT"),
        )

    def activity_config(self) -> ActivityConfig:
        config = ActivityConfig(start_to_close_timeout=timedelta(seconds=self.timeout_s))
        if self.max_attempts:
            config["retry_policy"] = RetryPolicy(maximum_attempts=self.max_attempts)
        if self.heartbeat_s:
            config["heartbeat_timeout"] = timedelta(seconds=self.heartbeat_s)
        return config


@workflow.defn
class PhoneTask:
    """The agent's run: the SDK's Runner, each model request and tool call an activity."""

    @workflow.run
    async def run(self, settings: ToolSettings) -> str:
        agent = Agent(
            name="phone agent",
            instructions="You operate a phone through your tools. Do the user's task.",
            mcp_servers=[
                temporal_mcp_server("harness", activity_config=settings.activity_config())
            ],
        )
        result = await Runner.run(agent, TASK, max_turns=MAX_TURNS)
        return str(result.final_output)


def plugin() -> OpenAIAgentsPlugin:
    """The integration: the model's activity (its timeouts as the tools') and the MCP server
    each tool activity calls, made afresh in each worker from its environment."""
    heartbeat = _seconds("TEMPORAL_HEARTBEAT")
    return OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(
            start_to_close_timeout=timedelta(seconds=_seconds("TEMPORAL_ACTIVITY_TIMEOUT") or 10),
            heartbeat_timeout=timedelta(seconds=heartbeat) if heartbeat else None,
        ),
        mcp_servers={
            "harness": lambda: MCPServerStreamableHttp(
                {"url": os.environ["HARNESS_MCP_URL"]}, name="harness"
            )
        },
    )


async def start_or_attach(client: Client) -> WorkflowHandle[PhoneTask, str]:
    """The workflow ``phone-task``: started when its id is new, else the one the server has
    (running, or closed: an id is never run twice)."""
    try:
        return await client.start_workflow(
            PhoneTask.run,
            ToolSettings.from_env(),
            id=WORKFLOW_ID,
            task_queue=TASK_QUEUE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        return client.get_workflow_handle(WORKFLOW_ID, result_type=str)


async def connect() -> Client:
    """The client of the server at ``TEMPORAL_PORT``, tried for up to a minute (the server
    may be starting still, as a worker deployed beside it finds it)."""
    address = f"127.0.0.1:{os.environ['TEMPORAL_PORT']}"
    for _ in range(60):
        try:
            return await Client.connect(address, plugins=[plugin()])
        except RuntimeError:
            await asyncio.sleep(1)
    return await Client.connect(address, plugins=[plugin()])


async def main() -> None:
    set_tracing_disabled(True)  # the SDK would otherwise export traces to OpenAI
    client = await connect()
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[PhoneTask]):
        handle = await start_or_attach(client)
        print(await handle.result())


if __name__ == "__main__":
    asyncio.run(main())
