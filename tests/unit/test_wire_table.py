"""The wire guard's table: the server's listing, a table file over it, and key arguments."""

from __future__ import annotations

from typing import Any

from mcp.types import Tool, ToolAnnotations

from harness.integrations.wire import guard_table
from harness.runtime import IdempotencyClass, ToolTable
from harness.runtime.classes import MCP_CONTENT_META
from harness.runtime.identity import ContentRule


def _tool(
    name: str, *args: str, read_only: bool = False, meta: dict[str, Any] | None = None
) -> Tool:
    schema = {"type": "object", "properties": {a: {"type": "string"} for a in args}}
    return Tool(
        name=name,
        input_schema=schema,
        annotations=ToolAnnotations(read_only_hint=read_only),
        _meta=meta,
    )


class TestGuardTable:
    def test_classes_and_rules_come_from_the_listing(self) -> None:
        """Annotations give the classes, ``_meta`` the content rules."""
        meta = {MCP_CONTENT_META: {"identity": ["invoice"]}}
        table = guard_table(
            [_tool("pay", "invoice", "memo", meta=meta), _tool("ls", read_only=True)], "s"
        )
        assert table.classify("pay").idempotency is IdempotencyClass.NON_IDEMPOTENT
        assert table.classify("ls").idempotency is IdempotencyClass.READ_ONLY
        assert table.content_rule("pay") == ContentRule(("invoice",))

    def test_a_table_file_overrides_tool_by_tool(self) -> None:
        """A file's class and rule win over the server's for the tools it names."""
        text = (
            'format = 1\n[classes]\nidempotent_write = ["pay"]\n'
            '[content.pay]\nvolatile = ["memo"]\n'
        )
        file = ToolTable.parse(text, source="tools.toml")
        table = guard_table(
            [_tool("pay", "invoice", "memo"), _tool("ls", read_only=True)], "s", file
        )
        assert table.classify("pay").idempotency is IdempotencyClass.IDEMPOTENT_WRITE
        assert table.classify("ls").idempotency is IdempotencyClass.READ_ONLY
        assert table.content_rule("pay") == ContentRule(None, ("memo",))

    def test_an_idempotency_key_argument_is_volatile(self) -> None:
        """A tool that takes an idempotency key compares all but it (the model may send a
        new one each time); one with a declared identity keeps it."""
        meta = {MCP_CONTENT_META: {"identity": ["invoice"]}}
        tools = [
            _tool("charge", "invoice", "idempotency_key"),
            _tool("pay", "invoice", "idempotencyKey", meta=meta),
        ]
        table = guard_table(tools, "s")
        assert table.content_rule("charge") == ContentRule(None, ("idempotency_key",))
        assert table.content_rule("pay") == ContentRule(("invoice",))
