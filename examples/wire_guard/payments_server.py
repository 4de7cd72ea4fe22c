"""A payments MCP server (stdio), standard library and the MCP SDK only: the real server a
guard is put in front of in docs/guides/wire-guard.md and its test.

``pay`` records a payment in the SQLite file ``PAYMENTS_DB`` (its own ledger: one row per
payment made, with the request id it carried) and answers with its row; ``list_payments``
reads them. ``pay`` declares in its ``_meta`` what makes two payments the same one (payee,
amount, invoice) and that its ``request_id`` may differ between a call and its re-issue.

``PAYMENTS_PAUSE_FILE``: after a payment is committed, create that file and wait for the
end of the session before answering: a kill can then land between the effect and its reply.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)

DB = Path(os.environ.get("PAYMENTS_DB", "payments.db"))

TOOLS = [
    Tool(
        name="pay",
        description="Pay an invoice. request_id: a fresh id of this request.",
        input_schema={
            "type": "object",
            "properties": {
                "to": {"type": "string"},
                "amount": {"type": "integer"},
                "invoice": {"type": "string"},
                "request_id": {"type": "string"},
            },
            "required": ["to", "amount", "invoice", "request_id"],
        },
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True),
        _meta={
            "agent-crash-harness/identity": {
                "identity": ["to", "amount", "invoice"],
                "volatile": ["request_id"],
            }
        },
    ),
    Tool(
        name="list_payments",
        description="List the payments made.",
        input_schema={"type": "object", "properties": {}},
        annotations=ToolAnnotations(read_only_hint=True),
    ),
]


def connect() -> sqlite3.Connection:
    db = sqlite3.connect(DB, isolation_level=None)
    db.execute(
        "CREATE TABLE IF NOT EXISTS payments (id INTEGER PRIMARY KEY, pay_to TEXT, "
        "amount INTEGER, invoice TEXT, request_id TEXT, pid INTEGER)"
    )
    return db


def answer(value: Any) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=json.dumps(value))], structured_content=value)


async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
    return ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
    args = params.arguments or {}
    with connect() as db:
        if params.name == "list_payments":
            rows = db.execute("SELECT pay_to, amount, invoice FROM payments ORDER BY id").fetchall()
            payments = [{"to": t, "amount": a, "invoice": i} for t, a, i in rows]
            return answer({"payments": payments, "count": len(payments)})
        if params.name != "pay":
            return CallToolResult(content=[TextContent(text="no such tool")], is_error=True)
        cursor = db.execute(
            "INSERT INTO payments (pay_to, amount, invoice, request_id, pid) "
            "VALUES (?, ?, ?, ?, ?)",
            (args["to"], args["amount"], args["invoice"], args["request_id"], os.getpid()),
        )
        paid = {"payment": cursor.lastrowid, "invoice": args["invoice"], "status": "paid"}
    pause = os.environ.get("PAYMENTS_PAUSE_FILE")
    if pause:
        Path(pause).write_text(str(os.getpid()), "utf-8")
        await anyio.sleep_forever()  # cancelled when the session ends
    return answer(paid)


async def main() -> None:
    server: Server[Any] = Server("payments", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
