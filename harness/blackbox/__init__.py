"""Testing an agent program as a black box: the harness serves its model and its tools.

An agent program the harness cannot change (``--runtime cmd:"python my_agent.py"``)
speaks two protocols at its edges: a model API (OpenAI's or Anthropic's) and MCP for its
tools. The harness serves both for each life (``harness.blackbox.host``): a model
scripted from the trial's plan (``harness.blackbox.model``) and the scenario's tools
on the trial's world (``harness.blackbox.tools``), and speaks the supervisor's
channel on the agent's behalf, from what the agent showed its model and what it
asked of its tools. The agent is handed three things in its environment:

- ``OPENAI_BASE_URL`` (and ``OPENAI_API_KEY``): the model, Chat Completions
  (streamed or not) and the Responses API; ``ANTHROPIC_BASE_URL`` (and
  ``ANTHROPIC_API_KEY``): the same model as Anthropic's Messages API;
- ``HARNESS_MCP_URL``: the tools as an MCP server over streamable HTTP;
- ``HARNESS_MCP_COMMAND``: the same tools over stdio, a shell-quoted command the
  agent starts itself (``harness/blackbox/stdio_bridge.py``).

Its failpoints (``BLACKBOX_POINTS``) fire in the harness's servers, never in the
agent: the kill takes the whole process group of the life (the host, the agent
and anything it started).
"""

from __future__ import annotations

import shlex
from pathlib import Path

__all__ = [
    "AGENT_COMMAND_ENV",
    "AGENT_HOME_ENV",
    "BLACKBOX_POINTS",
    "CALL_POINTS",
    "MCP_COMMAND_ENV",
    "MCP_URL_ENV",
    "MODEL_RECORD",
    "TOOL_RECORD",
    "resolve_command",
]

AGENT_HOME_ENV = "HARNESS_AGENT_HOME"
"""The folder the command line was given in: relative paths in it are found from there."""
AGENT_COMMAND_ENV = "HARNESS_AGENT_COMMAND"
"""The agent program's command line (shell-quoted), handed to the host of each life."""
MCP_URL_ENV = "HARNESS_MCP_URL"
MCP_COMMAND_ENV = "HARNESS_MCP_COMMAND"
MODEL_RECORD = "model.jsonl"
"""In the trial folder: every request the model received and what it answered."""
TOOL_RECORD = "tools.jsonl"
"""In the trial folder: every tool call the tool server received and what came of it."""

CALL_POINTS = ("tool.received", "op.request", "op.reply", "tool.before_reply", "model.received")
"""The points of one tool call of a black box, in the order it hits them: the tool server
got it, its request goes to the world (``op.request``), its effect is committed
(``op.reply``), its reply is about to be written, and the model is shown its result
(``model.received`` with the call's op)."""

BLACKBOX_POINTS = frozenset(
    {
        "tool.received",
        "op.request",
        "op.mid_effect",
        "op.reply",
        "tool.before_reply",
        "model.received",
        "model.before_reply",
        "agent.before_exit",
    }
)
"""The failpoints a black box's life hits, all in the harness's servers: a tool call
received, on its way to the world, between the steps of a multi-step tool, its effect
committed, its reply ready; a model request received, its answer ready; and the
agent's exit (after the agent exited 0, before the life ends)."""


def resolve_command(command: str, home: str | None) -> list[str]:
    """The command's words, with each relative path that exists under ``home`` made absolute
    (the agent runs in the trial folder, the command was written where the user stood): the
    program when it names a path (``./agent``, ``bin/agent``; a bare name is looked up on
    ``PATH``), and any later word but an option (``agent.py``, ``conf/my.toml``)."""
    words = shlex.split(command)
    if home is None:
        return words
    out = []
    for at, word in enumerate(words):
        candidate = Path(home) / word
        is_path = (
            not word.startswith("-") and not Path(word).is_absolute() and ("/" in word or at > 0)
        )
        out.append(str(candidate) if is_path and candidate.exists() else word)
    return out
