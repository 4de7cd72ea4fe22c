"""A small customer-support and billing MCP server, over stdio, on an SQLite world.

    python examples/mcp_server.py --db world.db       (or MCP_WORLD_DB=world.db)
    python -m harness table --from-mcp -- python examples/mcp_server.py --db world.db

Built with the ``mcp`` SDK's high-level server (``MCPServer``: what mcp 1.x
called ``FastMCP``; ``pip install 'agent-crash-harness[mcp]'``). Its tools act
on one SQLite database and on nothing else: each call is one transaction on it
(``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back if the tool fails). Sending an
email or charging a card writes a row to the ``outbox`` or ``charges`` table;
nothing leaves the machine. A database that does not exist yet is created with
its tables and two demo customers (``c1``, ``c2``).

Each tool says what running it twice does through its MCP annotations, which
``harness table --from-mcp`` turns into a tool table:

| tool              | annotations                                   | class            |
|-------------------|-----------------------------------------------|------------------|
| `lookup_customer` | readOnlyHint                                  | read_only        |
| `update_crm`      | idempotentHint (sets a field to a value)      | idempotent_write |
| `create_ticket`   | readOnlyHint false, idempotentHint false      | non_idempotent   |
| `charge_card`     | destructiveHint false, openWorldHint          | non_idempotent   |
| `send_email`      | openWorldHint only                            | non_idempotent   |
| `run_report`      | none at all (it also records itself)          | unknown          |
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

DB_ENV = "MCP_WORLD_DB"
"""The environment variable naming the database when ``--db`` is not given."""

CRM_FIELDS = ("name", "email", "plan", "notes")
"""The customer fields ``update_crm`` may set (column names are never taken from a caller)."""

SCHEMA = """
CREATE TABLE customers (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL,
    plan TEXT NOT NULL DEFAULT 'free', notes TEXT NOT NULL DEFAULT ''
);
CREATE TABLE tickets (
    id INTEGER PRIMARY KEY AUTOINCREMENT, customer_id TEXT NOT NULL REFERENCES customers(id),
    subject TEXT NOT NULL, body TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'open'
);
CREATE TABLE charges (
    id INTEGER PRIMARY KEY AUTOINCREMENT, customer_id TEXT NOT NULL REFERENCES customers(id),
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0), description TEXT NOT NULL
);
CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT, recipient TEXT NOT NULL,
    subject TEXT NOT NULL, body TEXT NOT NULL
);
CREATE TABLE reports (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL);
INSERT INTO customers (id, name, email, plan) VALUES
    ('c1', 'Ada Lovelace', 'ada@example.org', 'pro'),
    ('c2', 'Alan Turing', 'alan@example.org', 'free');
"""


class World:
    """The server's SQLite database: one connection and one transaction per tool call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with self.transaction() as db:
            exists = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'customers'"
            ).fetchone()
            if exists is None:
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A connection inside ``BEGIN IMMEDIATE``: committed on return, rolled back on error."""
        db = sqlite3.connect(self.path, isolation_level=None, timeout=10)
        try:
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()


def _customer(db: sqlite3.Connection, customer_id: str) -> dict[str, Any]:
    row = db.execute("SELECT * FROM customers WHERE id = ?", (customer_id,)).fetchone()
    if row is None:
        raise ToolError(f"no customer {customer_id!r}")
    return dict(row)


def build_server(world: World) -> MCPServer:
    """The MCP server and its six tools, acting on ``world`` only."""
    server = MCPServer("support-billing", version="1.0")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def lookup_customer(customer_id: str) -> dict[str, Any]:
        """A customer's record, with their open tickets."""
        with world.transaction() as db:
            customer = _customer(db, customer_id)
            tickets = db.execute(
                "SELECT id, subject FROM tickets WHERE customer_id = ? AND status = 'open'",
                (customer_id,),
            ).fetchall()
        customer["open_tickets"] = [dict(t) for t in tickets]
        return customer

    @server.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, idempotent_hint=True, destructive_hint=True, open_world_hint=False
        )
    )
    def update_crm(customer_id: str, field: str, value: str) -> dict[str, Any]:
        """Set one field of a customer's record (name, email, plan or notes) to a value."""
        if field not in CRM_FIELDS:
            raise ToolError(f"field must be one of {', '.join(CRM_FIELDS)}, not {field!r}")
        with world.transaction() as db:
            _customer(db, customer_id)
            db.execute(f"UPDATE customers SET {field} = ? WHERE id = ?", (value, customer_id))
            return _customer(db, customer_id)

    @server.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, idempotent_hint=False, destructive_hint=False
        )
    )
    def create_ticket(customer_id: str, subject: str, body: str) -> dict[str, Any]:
        """Open a new support ticket for a customer (a second call opens a second ticket)."""
        with world.transaction() as db:
            _customer(db, customer_id)
            cursor = db.execute(
                "INSERT INTO tickets (customer_id, subject, body) VALUES (?, ?, ?)",
                (customer_id, subject, body),
            )
            return {"ticket_id": cursor.lastrowid, "customer_id": customer_id}

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=True))
    def charge_card(customer_id: str, amount_cents: int, description: str) -> dict[str, Any]:
        """Charge the customer's card on file (a second call charges again)."""
        if amount_cents <= 0:
            raise ToolError(f"amount_cents must be positive, got {amount_cents}")
        with world.transaction() as db:
            _customer(db, customer_id)
            cursor = db.execute(
                "INSERT INTO charges (customer_id, amount_cents, description) VALUES (?, ?, ?)",
                (customer_id, amount_cents, description),
            )
            return {"charge_id": cursor.lastrowid, "amount_cents": amount_cents}

    @server.tool(annotations=ToolAnnotations(open_world_hint=True))
    def send_email(to: str, subject: str, body: str) -> dict[str, Any]:
        """Send an email (here: queue it in the outbox table; a second call sends it again)."""
        with world.transaction() as db:
            cursor = db.execute(
                "INSERT INTO outbox (recipient, subject, body) VALUES (?, ?, ?)",
                (to, subject, body),
            )
            return {"message_id": cursor.lastrowid}

    @server.tool()
    def run_report(kind: str) -> dict[str, Any]:
        """Billing figures (kind: 'revenue' or 'tickets'); every run is recorded in the reports
        table. Its annotations are missing on purpose: a client cannot tell what it does."""
        queries = {
            "revenue": "SELECT COUNT(*), COALESCE(SUM(amount_cents), 0) FROM charges",
            "tickets": "SELECT COUNT(*), SUM(status = 'open') FROM tickets",
        }
        if kind not in queries:
            raise ToolError(f"kind must be one of {', '.join(queries)}, not {kind!r}")
        with world.transaction() as db:
            count, total = db.execute(queries[kind]).fetchone()
            db.execute("INSERT INTO reports (kind) VALUES (?)", (kind,))
        return {"kind": kind, "count": count, "total": total or 0}

    return server


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default=os.environ.get(DB_ENV), help=f"the database (or ${DB_ENV})")
    args = parser.parse_args(argv)
    if not args.db:
        print(f"mcp_server.py: give the database with --db PATH or ${DB_ENV}", file=sys.stderr)
        return 2
    build_server(World(Path(args.db))).run("stdio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
