"""A LangGraph ReAct agent: ChatOpenAI for the model, its tools from MCP, a SQLite checkpointer.

Framework: LangGraph 1.2.24 (``langgraph.prebuilt.create_react_agent``), langchain-openai
for the model at ``OPENAI_BASE_URL``, langchain-mcp-adapters for the tools of the MCP
server at ``HARNESS_MCP_URL`` (streamable HTTP).

State: LangGraph's ``AsyncSqliteSaver`` in ``checkpoints.db`` in the working folder, one
fixed thread (``THREAD``); the graph checkpoints after each step (the model's answer, the
tool node's results).

A restart: when the thread has a checkpoint, the graph is invoked with ``None`` on the
same thread, as LangGraph's docs say to resume, and goes on from its last checkpoint (a
tool call whose result was not checkpointed is run again); otherwise it starts the task.
It prints the model's final answer and exits 0.
"""

from __future__ import annotations

import asyncio
import os
import sys

from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.prebuilt import create_react_agent

os.environ.setdefault("LANGSMITH_TRACING", "false")  # LangSmith reads it when a run starts

CHECKPOINTS = "checkpoints.db"
THREAD = {"configurable": {"thread_id": "phone-task"}}
TASK = "Carry out the task step by step with the tools you have, then say you are done."


def model() -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini",
        base_url=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ.get("OPENAI_API_KEY", "unused"),
    )


async def mcp_tools() -> list:
    client = MultiServerMCPClient(
        {"harness": {"transport": "streamable_http", "url": os.environ["HARNESS_MCP_URL"]}}
    )
    return await client.get_tools()


async def run(tools: list) -> int:
    """The graph over ``tools`` with its checkpointer: started, or resumed from its thread."""
    async with AsyncSqliteSaver.from_conn_string(CHECKPOINTS) as saver:
        graph = create_react_agent(model(), tools, checkpointer=saver)
        resuming = await saver.aget_tuple(THREAD) is not None
        inputs = None if resuming else {"messages": [("user", TASK)]}
        state = await graph.ainvoke(inputs, THREAD)
    print(state["messages"][-1].content)
    return 0


async def main() -> int:
    return await run(await mcp_tools())


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
