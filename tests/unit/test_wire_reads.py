"""The wire guard's reads look at the world now, whatever another life read.

Identity by content matches a call of a new life to the op of the same content at the same
place among its calls: right for an action re-issued after a restart (it must not run
twice), wrong for a read, whose answer from another life is what the world held then. A
model that checked its work with a read before a kill, and checks again after the restart
has redone the work, was handed the first check's answer and did the work once more (the
scoreboard's Temporal and Restate rows, proxy-guarded). The MCP session is a stand-in
that answers from a dict: what is tested is the guard's choice, not the transport.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations

from harness.integrations.wire import WireGuard, guard_table

READ = Tool(
    name="ui_dump",
    input_schema={"type": "object"},
    annotations=ToolAnnotations(read_only_hint=True),
)
TYPE = Tool(
    name="input_text",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=False),
)


class Screen:
    """The real server as the guard reaches it: a field that ``input_text`` fills."""

    def __init__(self) -> None:
        self.field = ""
        self.calls: list[str] = []

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], meta: Any = None
    ) -> CallToolResult:
        self.calls.append(name)
        if name == "input_text":
            self.field += str(arguments["text"])
        return CallToolResult(content=[TextContent(text=self.field or "(empty)")])


def _text(result: CallToolResult) -> str:
    (content,) = result.content
    assert isinstance(content, TextContent)
    return content.text


async def _lives(journal: Path) -> tuple[str, str, Screen]:
    screen = Screen()
    tools = [READ, TYPE]
    guard = WireGuard(screen, tools, guard_table(tools, "test"), journal)  # type: ignore[arg-type]
    await guard.begin_life()
    before = _text(await guard.call("ui_dump", {}))
    await guard.begin_life()  # the agent restarted: a new MCP session
    screen.field = "typed by the last life"  # what happened since that read
    after = _text(await guard.call("ui_dump", {}))
    await guard.aclose()
    return before, after, screen


def test_a_read_in_a_new_life_is_run_again_not_answered_from_the_last(tmp_path: Path) -> None:
    before, after, screen = asyncio.run(_lives(tmp_path / "guard.journal"))
    assert before == "(empty)"
    assert after == "typed by the last life"
    assert screen.calls == ["ui_dump", "ui_dump"]


async def _typed_twice(journal: Path) -> Screen:
    screen = Screen()
    tools = [READ, TYPE]
    guard = WireGuard(screen, tools, guard_table(tools, "test"), journal)  # type: ignore[arg-type]
    await guard.begin_life()
    await guard.call("input_text", {"text": "title"})
    await guard.begin_life()
    await guard.call("input_text", {"text": "title"})  # re-issued after the restart
    await guard.aclose()
    return screen


def test_an_action_re_issued_in_a_new_life_is_still_answered_from_the_journal(
    tmp_path: Path,
) -> None:
    screen = asyncio.run(_typed_twice(tmp_path / "guard.journal"))
    assert screen.field == "title"
    assert screen.calls == ["input_text"]
