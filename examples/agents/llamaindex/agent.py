"""A LlamaIndex FunctionAgent (llama-index-core 0.14.25, llama-index-workflows 2.26.1).

The agent's tools are the MCP server's (llama-index-tools-mcp: ``BasicMCPClient`` over
streamable HTTP at ``HARNESS_MCP_URL``, ``McpToolSpec``), its model ``OpenAILike`` at
``OPENAI_BASE_URL``. It is made durable as the "Writing durable workflows" guide of
LlamaIndex Workflows says: the run's ``Context`` is snapshot (``ctx.to_dict()``) to
``checkpoint.json`` in the working folder each time a step finishes (an internal
``StepStateChanged`` event with ``StepState.NOT_RUNNING``), with the ``JsonPickleSerializer``
that the "Maintaining state" guide names for state that is not JSON (the agent's memory,
which the JSON serializer skips). Started again, it rebuilds the
context with ``Context.from_dict`` and calls ``run(ctx=...)``, which continues the run: the
events still pending are dispatched again, and a step that was running when the snapshot
was taken (a tool call, a model call) is rewound and runs again from the top.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.workflow import Context, JsonPickleSerializer
from llama_index.llms.openai_like import OpenAILike
from llama_index.tools.mcp import BasicMCPClient, McpToolSpec
from workflows.events import StepState, StepStateChanged

CHECKPOINT = Path("checkpoint.json")
SERIALIZER = JsonPickleSerializer()  # the agent's memory is not JSON: pickled, as the docs say
TASK = "Carry out the task step by step with the tools you have, then say you are done."


def save(ctx: Context) -> None:
    """Write the snapshot whole, then put it in place (a kill leaves the last one)."""
    partial = CHECKPOINT.with_suffix(".tmp")
    partial.write_text(json.dumps(ctx.to_dict(serializer=SERIALIZER)), encoding="utf-8")
    os.replace(partial, CHECKPOINT)


async def main() -> int:
    client = BasicMCPClient(os.environ["HARNESS_MCP_URL"])
    tools = await McpToolSpec(client=client).to_tool_list_async()
    llm = OpenAILike(
        model="any",
        api_base=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ.get("OPENAI_API_KEY", "none"),
        is_chat_model=True,
        is_function_calling_model=True,
        context_window=128_000,
    )
    agent = FunctionAgent(tools=tools, llm=llm, system_prompt="You are a careful assistant.")
    # Made first: it loads the tokenizer LlamaIndex ships, which unpickling a saved memory
    # needs too (else tiktoken would fetch it from the network).
    memory = ChatMemoryBuffer.from_defaults(llm=llm)
    if CHECKPOINT.exists():
        ctx = Context.from_dict(
            agent, json.loads(CHECKPOINT.read_text("utf-8")), serializer=SERIALIZER
        )
        handler = agent.run(ctx=ctx)
    else:
        handler = agent.run(user_msg=TASK, memory=memory)
    async for event in handler.stream_events(expose_internal=True):
        if isinstance(event, StepStateChanged) and event.step_state == StepState.NOT_RUNNING:
            save(handler.ctx)
    result = await handler
    print(str(result))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
