"""The fleet's world: the queue its workers pull tasks from, and the effects they make.

One SQLite file (WAL, ``synchronous=FULL``) holds what is outside the workers:

- ``queue``: deliveries of tasks. A worker takes the first visible delivery of a
  task not yet done; it stays invisible for ``VISIBILITY`` seconds, as a
  broker's visibility timeout. The supervisor redelivers a task by adding a
  delivery visible at once (a duplicate message, a lapsed timeout).
- ``done``: the tasks a worker acknowledged.
- ``effects`` and ``ledger``: every real run of a tool writes its effect and one
  ledger row (task, step, op id, pid) in the same transaction. The ledger's
  order (``seq``) is the order the runs took effect in.

Contract: the workers change the world only through ``FleetWorld``; the checkers
read it with the module's readers, never through a worker. The queue lives here,
not in PostgreSQL, so that a fleet on the file journal pulls from the same queue,
and so that the supervisor's redeliveries are writes to the harness's own table,
never to the store under test.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = [
    "VISIBILITY",
    "FleetLedgerRow",
    "FleetWorld",
    "Pulled",
    "ledger_mark",
    "read_done",
    "read_fleet_ledger",
]

VISIBILITY = 60.0
"""Seconds a taken delivery stays invisible: longer than any trial, so that only the
supervisor (or the worker that gives it back) makes a task visible again."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS queue (
    delivery INTEGER PRIMARY KEY AUTOINCREMENT,
    task TEXT NOT NULL,
    visible_at REAL NOT NULL,
    taken_by INTEGER
);
CREATE TABLE IF NOT EXISTS done (task TEXT PRIMARY KEY, pid INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS effects (
    task TEXT NOT NULL, step TEXT NOT NULL, op_id TEXT NOT NULL, value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    task TEXT NOT NULL,
    step TEXT NOT NULL,
    op_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    pid INTEGER NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class Pulled:
    """A delivery a worker took: its number and its task."""

    delivery: int
    task: str


@dataclass(frozen=True, slots=True)
class FleetLedgerRow:
    """One real run of a tool, in the order runs took effect."""

    seq: int
    task: str
    step: str
    op_id: str
    tool: str
    pid: int


class FleetWorld:
    """A connection to the fleet's world (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path, timeout=60, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")

    @classmethod
    def create(cls, path: Path, tasks: list[str], *, twice: str | None = None) -> None:
        """A new world whose queue delivers ``tasks`` in order (``twice``: that task's
        delivery is doubled at the head of the queue, a duplicate message)."""
        with cls(path) as world:
            world._db.executescript(_SCHEMA)
            head = [twice, twice] if twice is not None else []
            for task in [*head, *(t for t in tasks if t != twice)]:
                world._db.execute("INSERT INTO queue (task, visible_at) VALUES (?, 0)", (task,))

    def pull(self, pid: int) -> Pulled | bool | None:
        """Take the first visible delivery of an undone task: it, or True when none is
        visible yet but some task is undone, or None when every task is done."""
        with self._write() as db:
            row = db.execute(
                "SELECT delivery, task FROM queue WHERE visible_at <= ? "
                "AND task NOT IN (SELECT task FROM done) ORDER BY delivery LIMIT 1",
                (time.time(),),
            ).fetchone()
            if row is None:
                left = db.execute(
                    "SELECT count(*) FROM (SELECT DISTINCT task FROM queue "
                    "WHERE task NOT IN (SELECT task FROM done))"
                ).fetchone()[0]
                return True if left else None
            db.execute(
                "UPDATE queue SET visible_at = ?, taken_by = ? WHERE delivery = ?",
                (time.time() + VISIBILITY, pid, row[0]),
            )
            return Pulled(int(row[0]), str(row[1]))

    def give_back(self, delivery: int, after: float) -> None:
        """Make a taken delivery visible again ``after`` seconds from now."""
        with self._write() as db:
            db.execute(
                "UPDATE queue SET visible_at = ?, taken_by = NULL WHERE delivery = ?",
                (time.time() + after, delivery),
            )

    def redeliver(self, task: str) -> None:
        """Deliver ``task`` once more, visible at once (the supervisor's fault)."""
        with self._write() as db:
            db.execute("INSERT INTO queue (task, visible_at) VALUES (?, 0)", (task,))

    def ack(self, task: str, pid: int) -> None:
        """The task is done: none of its deliveries is handed out again."""
        with self._write() as db:
            db.execute("INSERT OR IGNORE INTO done (task, pid) VALUES (?, ?)", (task, pid))

    def run_effect(self, task: str, step: str, op_id: str, tool: str, value: int, pid: int) -> None:
        """One real run of a tool: its effect and its ledger row, in one transaction."""
        with self._write() as db:
            db.execute(
                "INSERT INTO effects (task, step, op_id, value) VALUES (?, ?, ?, ?)",
                (task, step, op_id, value),
            )
            db.execute(
                "INSERT INTO ledger (task, step, op_id, tool, pid) VALUES (?, ?, ?, ?, ?)",
                (task, step, op_id, tool, pid),
            )

    def has_effect(self, task: str, step: str) -> bool:
        """Whether the world holds an effect of ``task``'s ``step`` (a read-only check)."""
        row = self._db.execute(
            "SELECT 1 FROM effects WHERE task = ? AND step = ? LIMIT 1", (task, step)
        ).fetchone()
        return row is not None

    def _write(self) -> _Immediate:
        return _Immediate(self._db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> FleetWorld:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Immediate:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an error): one writer at a time."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> sqlite3.Connection:
        self._db.execute("BEGIN IMMEDIATE")
        return self._db

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._db.execute("COMMIT" if kind is None else "ROLLBACK")


def read_fleet_ledger(path: Path) -> list[FleetLedgerRow]:
    """Every real run of a tool, in ``seq`` order."""
    with sqlite3.connect(path, timeout=60) as db:
        rows = db.execute(
            "SELECT seq, task, step, op_id, tool, pid FROM ledger ORDER BY seq"
        ).fetchall()
    return [FleetLedgerRow(int(r[0]), r[1], r[2], r[3], r[4], int(r[5])) for r in rows]


def read_done(path: Path) -> dict[str, int]:
    """The tasks acknowledged done, and by which worker's pid."""
    with sqlite3.connect(path, timeout=60) as db:
        return {str(t): int(p) for t, p in db.execute("SELECT task, pid FROM done")}


def ledger_mark(path: Path) -> int:
    """The ledger's last ``seq`` now (0 when empty): a mark in the order of runs."""
    with sqlite3.connect(path, timeout=60) as db:
        row = db.execute("SELECT coalesce(max(seq), 0) FROM ledger").fetchone()
    return int(row[0])
