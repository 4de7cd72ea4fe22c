"""The world store: the simulated world and its effect ledger, in one SQLite file.

The world is the ground truth outside the agent. Simulated tools change it only
through ``WorldStore.execution`` and ``WorldStore.transaction``; each is one
``BEGIN IMMEDIATE ... COMMIT`` over a WAL database, so a SIGKILL lands either
before or after a whole step, never inside one. It stands for systems outside the
agent's machine, which no power cut touches: its commits are not fsynced
(``synchronous=NORMAL``).

Contract:

A provider that deduplicates by key keeps each key's first call in
``idempotency_keys``; a repeat it drops leaves no ledger row, only a
``key_replays`` row. Neither table is world state.

The full note: docs/reference/modules.md (``harness/world/store.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the readers (the checkers') load no runtime
    from harness.runtime.executor import CallContext

__all__ = [
    "EFFECT_TABLES",
    "SEED_OP",
    "EffectRow",
    "EffectTable",
    "LedgerEntry",
    "WorldStore",
    "effect_rows",
    "fold_wal",
    "key_seen",
    "life_clock",
    "read_key_replays",
    "read_ledger",
    "result_digest",
    "step_of",
    "trial_clock",
    "world_digest",
]

SCHEMA_VERSION = 5

TRIAL_CLOCK_ENV = "HARNESS_TRIAL_CLOCK"
"""The seconds the trial's clock reads in this life (set by the supervisor; 0 if unset):
what a provider's idempotency window is measured on, the same in every replay."""


def trial_clock() -> float:
    """The trial's clock for this life (``TRIAL_CLOCK_ENV``), constant within the life."""
    return float(os.environ.get(TRIAL_CLOCK_ENV) or 0.0)


def life_clock(trial_dir: Path, life: int) -> str:
    """What ``TRIAL_CLOCK_ENV`` reads in life ``life`` (from 1) of a trial: ``life`` times
    its plan's ``clock_step`` (a key then ages a step at each restart), "0" without one."""
    try:
        step = json.loads((trial_dir / "plan.json").read_text("utf-8")).get("clock_step")
    except FileNotFoundError:
        step = None
    return "0" if step is None else repr(life * float(step))


@dataclass(frozen=True, slots=True)
class EffectTable:
    """One table of world state.

    ``content`` are the columns that say what the state is; ids and the
    writing ``op_id`` are left out of it, so that two worlds can be compared
    as multisets whichever ops wrote them.
    """

    name: str
    columns: str
    content: tuple[str, ...]
    constraints: str = ""
    key: tuple[str, ...] | None = None
    """For a table whose rows are written in place (a later write replaces a row rather
    than adding one): the content columns that name a row, () for a table of one row.
    None: every write adds a row."""

    @property
    def key_positions(self) -> tuple[int, ...] | None:
        """Where ``key``'s columns lie in ``content`` (None: rows are never replaced)."""
        return None if self.key is None else tuple(self.content.index(c) for c in self.key)

    @property
    def ddl(self) -> str:
        extra = f", {self.constraints}" if self.constraints else ""
        return (
            f"CREATE TABLE IF NOT EXISTS {self.name} ({self.columns}, op_id TEXT NOT NULL{extra})"
        )


_ID = "id INTEGER PRIMARY KEY"

# Idempotent tools must leave the same state when retried after a crash between
# their steps, or a correct runtime could never match its golden run: hence a
# download is one row per package and a blob one row per content hash.
EFFECT_TABLES: tuple[EffectTable, ...] = (
    EffectTable(
        "files", "path TEXT PRIMARY KEY, content TEXT NOT NULL", ("path", "content"), key=("path",)
    ),
    EffectTable("directories", "path TEXT PRIMARY KEY", ("path",)),
    EffectTable("downloads", "package TEXT PRIMARY KEY", ("package",)),
    EffectTable("installed_apps", "package TEXT PRIMARY KEY", ("package",)),
    EffectTable("log", f"{_ID}, tag TEXT NOT NULL, line TEXT NOT NULL", ("tag", "line")),
    EffectTable(
        "ui_fields", "field TEXT PRIMARY KEY, text TEXT NOT NULL", ("field", "text"), key=("field",)
    ),
    EffectTable("ui_taps", f"{_ID}, element TEXT NOT NULL", ("element",)),
    EffectTable(
        "submissions",
        f"{_ID}, channel TEXT NOT NULL CHECK (channel IN ('ui', 'browser')), form TEXT NOT NULL",
        ("channel", "form"),
    ),
    EffectTable(
        "browser", "id INTEGER PRIMARY KEY CHECK (id = 1), url TEXT NOT NULL", ("url",), key=()
    ),
    EffectTable("browser_history", f"{_ID}, url TEXT NOT NULL", ("url",)),
    EffectTable("browser_clicks", f"{_ID}, selector TEXT NOT NULL", ("selector",)),
    EffectTable("terminal_input", f"{_ID}, text TEXT NOT NULL", ("text",)),
    EffectTable("alarms", f"{_ID}, time TEXT NOT NULL, label TEXT NOT NULL", ("time", "label")),
    EffectTable(
        "repo_blobs",
        "repo TEXT NOT NULL, sha TEXT NOT NULL, content TEXT NOT NULL",
        ("repo", "sha", "content"),
        "PRIMARY KEY (repo, sha)",
    ),
    EffectTable(
        "repo_files",
        "repo TEXT NOT NULL, path TEXT NOT NULL, content TEXT NOT NULL",
        ("repo", "path", "content"),
        "PRIMARY KEY (repo, path)",
        key=("repo", "path"),
    ),
    EffectTable(
        "calls",
        f"{_ID}, kind TEXT NOT NULL CHECK (kind IN "
        "('shell', 'http', 'mcp', 'terminal_exec', 'code')), payload TEXT NOT NULL",
        ("kind", "payload"),
    ),
    # Asking a person again under the same op id changes nothing in the world
    # (recovery retries the ask-user family), so a question is recorded once per op.
    EffectTable(
        "questions",
        f"{_ID}, tool TEXT NOT NULL, question TEXT NOT NULL",
        ("tool", "question"),
        "UNIQUE (op_id)",
    ),
    # The generic tables of declared tools (``harness.world.declared``): values are
    # canonical JSON, so equal values are equal text.
    EffectTable(
        "records",
        "collection TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL",
        ("collection", "key", "value"),
        "PRIMARY KEY (collection, key)",
        key=("collection", "key"),
    ),
    EffectTable(
        "outbox", f"{_ID}, channel TEXT NOT NULL, message TEXT NOT NULL", ("channel", "message")
    ),
    EffectTable(
        "opaque_calls", f"{_ID}, tool TEXT NOT NULL, payload TEXT NOT NULL", ("tool", "payload")
    ),
    EffectTable(
        "prepared",
        "tool TEXT NOT NULL, call TEXT NOT NULL",
        ("tool", "call"),
        "PRIMARY KEY (tool, call)",
    ),
)
"""Every table of world state, in a fixed order (the order of ``effect_rows``)."""

SEED_OP = "seed"
"""The op id of the records a world holds before the first life: no step's."""

_KEYS_DDL = (
    "CREATE TABLE IF NOT EXISTS idempotency_keys (tool TEXT NOT NULL, key TEXT NOT NULL, "
    "call TEXT NOT NULL, result TEXT NOT NULL, at REAL NOT NULL, op_id TEXT NOT NULL, "
    "PRIMARY KEY (tool, key))",
    "CREATE TABLE IF NOT EXISTS key_replays (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    "tool TEXT NOT NULL, key TEXT NOT NULL, op_id TEXT NOT NULL, attempt INT NOT NULL, "
    "pid INT NOT NULL, first_op TEXT NOT NULL)",
)
"""A deduplicating provider's memory (not world state): each key's first call, and each
repeat it dropped."""

_LEDGER_DDL = (
    "CREATE TABLE IF NOT EXISTS ledger ("
    "seq INTEGER PRIMARY KEY AUTOINCREMENT, op_id TEXT NOT NULL, tool TEXT NOT NULL, "
    "attempt INT NOT NULL, incarnation INT NOT NULL, pid INT NOT NULL, time_ns INT NOT NULL, "
    "journal_pos INT, step TEXT NOT NULL, outcome TEXT, result TEXT, called INT)"
)

OK, ERROR = "ok", "error"
"""The outcomes a ledger row records: the tool returned a result, or refused the call."""


def result_digest(result: object) -> str:
    """The digest of a tool's result: sha256 of its canonical JSON.

    One definition for both ends: the world records it for each execution, and
    the scripted model reports it for the result it was handed (``ack``).
    """
    text = json.dumps(
        result, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )
    return hashlib.sha256(text.encode()).hexdigest()


def step_of(op_id: str) -> str:
    """The scenario step an op belongs to: ``s003.redo`` -> ``s003``, and a call a model
    re-issued under a new id (``harness.agent.plan.reissued_id``: ``s003~2``,
    ``s003~2.redo``) -> ``s003``."""
    return op_id.split(".", 1)[0].split("~", 1)[0]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One real execution of a tool, as the world recorded it."""

    seq: int
    op_id: str
    tool: str
    attempt: int
    incarnation: int
    pid: int
    time_ns: int
    journal_pos: int | None
    step: str
    outcome: str | None = None
    """``ok`` or ``error`` once the execution returned; None when it was cut short."""
    result: str | None = None
    """The ``result_digest`` of what it returned (of its error, for an ``error``)."""
    called: bool | None = None
    """Whether the agent process had told the supervisor it invoked the op's step (under
    any id) before it ran: False for a run the runtime made alone, such as a recovery's
    retry; None where the process that ran it calls nothing itself (a tool server)."""


@dataclass(frozen=True, slots=True)
class EffectRow:
    """One row of world state: its table, the op that wrote it, its content."""

    table: str
    op_id: str
    values: tuple[str, ...]


class WorldStore:
    """The writer's handle on a world database; one per agent process."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        path: Path,
        journal_path: Path | None,
        ledger_pid: int | None = None,
        invoked: Callable[[], Collection[str]] | None = None,
    ) -> None:
        self._db = connection
        self.path = path
        self.journal_path = journal_path
        self.ledger_pid = ledger_pid
        """The agent process a tool server runs calls for (None: this process is the agent)."""
        self.invoked = invoked
        """The op ids the agent process has invoked so far (``LedgerEntry.called``); None
        where the process that runs the tools does not know them."""
        self.clock = trial_clock
        """What a deduplicating provider's window is measured on (the trial's clock)."""

    @classmethod
    def open(
        cls,
        db_path: Path,
        *,
        journal_path: Path | None = None,
        ledger_pid: int | None = None,
        invoked: Callable[[], Collection[str]] | None = None,
    ) -> WorldStore:
        """Open or create the world at ``db_path``; creating the schema is idempotent.

        ``ledger_pid`` is the pid ledgered for each execution when it is not this
        process's: the agent's, for a tool server that runs the agent's calls.
        ``invoked``: the op ids the agent has invoked so far, for ``LedgerEntry.called``.
        """
        # Not bound to this thread: an agent that runs a batch on threads calls its tools
        # from its workers, one at a time (harness.agent.threads holds a lock around them).
        db = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
        try:
            # Small pages: a world holds a few rows per table, and a campaign keeps
            # thousands of worlds (ignored once the file exists).
            db.execute("PRAGMA page_size=1024")
            db.execute("PRAGMA journal_mode=WAL")
            # NORMAL: a commit is in the kernel's hands when it returns (whole, or not at
            # all, after a SIGKILL), not fsynced. The world stands for systems outside the
            # agent's machine: no power cut of a trial touches it, so an fsync a commit
            # would only make every trial wait (about 13 a trial of phone_task).
            db.execute("PRAGMA synchronous=NORMAL")
            store = cls(db, Path(db_path), journal_path, ledger_pid, invoked)
            # A world already at this version needs no write: the agent opens
            # it at every restart, and a committed write costs an fsync.
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                with store.transaction() as tx:
                    tx.execute(_LEDGER_DDL)
                    for ddl in _KEYS_DDL:
                        tx.execute(ddl)
                    for table in EFFECT_TABLES:
                        tx.execute(table.ddl)
                    tx.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            db.close()
            raise
        return store

    def seed(self, records: Iterable[tuple[str, str, str]]) -> None:
        """Put ``(collection, key, value JSON)`` records into a world no tool has run in yet.

        The harness calls it before the first life, so the world begins as the
        scenario says (a customer, a message in the inbox). Not ledgered: no
        tool made them; their op id is ``SEED_OP``.
        """
        with self.transaction() as tx:
            if tx.execute("SELECT 1 FROM ledger LIMIT 1").fetchone() is not None:
                raise ValueError(f"{self.path}: a tool already ran in this world; seed it first")
            tx.executemany(
                "INSERT INTO records (collection, key, value, op_id) VALUES (?, ?, ?, ?)",
                [(c, k, v, SEED_OP) for c, k, v in records],
            )

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> WorldStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic step: committed when the block ends, rolled back if it raises."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    @contextmanager
    def execution(self, ctx: CallContext) -> Iterator[sqlite3.Connection]:
        """The first (or only) step of a tool's execution, ledgered in the same transaction."""
        with self.transaction() as tx:
            tx.execute(
                "INSERT INTO ledger (op_id, tool, attempt, incarnation, pid, time_ns, "
                "journal_pos, step, called) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    ctx.op_id,
                    ctx.tool,
                    ctx.attempt,
                    ctx.incarnation,
                    self._pid(),
                    time.time_ns(),
                    self._journal_pos(),
                    step_of(ctx.op_id),
                    self._called(step_of(ctx.op_id)),
                ),
            )
            yield tx

    def answer(
        self, db: sqlite3.Connection, ctx: CallContext, result: dict[str, Any]
    ) -> dict[str, Any]:
        """Record, inside the transaction of the execution's last step, that it returned
        ``result``; returns it."""
        self._outcome(db, ctx, OK, result_digest(result))
        return result

    def refuse(self, db: sqlite3.Connection, ctx: CallContext, error: str) -> str:
        """Record, inside the execution's transaction, that it failed with ``error`` (a
        failure that depends on the world: no effect); returns the error."""
        self._outcome(db, ctx, ERROR, result_digest(error))
        return error

    def _outcome(self, db: sqlite3.Connection, ctx: CallContext, outcome: str, digest: str) -> None:
        # The execution's row: the last one of this op and attempt by this process.
        db.execute(
            "UPDATE ledger SET outcome = ?, result = ? WHERE seq = (SELECT max(seq) FROM "
            "ledger WHERE op_id = ? AND attempt = ? AND pid = ?)",
            (outcome, digest, ctx.op_id, ctx.attempt, self._pid()),
        )

    def _called(self, step: str) -> bool | None:
        if self.invoked is None:
            return None
        return any(step_of(op_id) == step for op_id in self.invoked())

    def _pid(self) -> int:
        return os.getpid() if self.ledger_pid is None else self.ledger_pid

    def _journal_pos(self) -> int | None:
        # Taken while holding the write lock, after the runtime's intent append
        # returned: the intent is inside this prefix or it was never written.
        if self.journal_path is None:
            return None
        try:
            return os.stat(self.journal_path).st_size
        except FileNotFoundError:
            return None


@contextmanager
def _read_only(db_path: Path) -> Iterator[sqlite3.Connection]:
    path = Path(db_path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no world database")
    db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None)
    try:
        # One read transaction: every table is seen at the same commit.
        db.execute("BEGIN")
        yield db
        db.execute("COMMIT")
    finally:
        db.close()


def key_seen(db_path: Path, tool: str, key: str, *, lag_ns: int = 0) -> bool:
    """Whether the provider of ``tool`` (deduplicating, or recording keys) holds a call
    under ``key``: the look-up by key a reconciler makes (read-only). ``lag_ns``: a lookup
    that lags the provider's writes, missing a call whose execution began less than that
    long ago (an eventually consistent read)."""
    with _read_only(db_path) as db:
        if lag_ns <= 0:
            row = db.execute(
                "SELECT 1 FROM idempotency_keys WHERE tool = ? AND key = ?", (tool, key)
            ).fetchone()
        else:
            row = db.execute(
                "SELECT 1 FROM idempotency_keys k JOIN ledger l ON l.op_id = k.op_id "
                "WHERE k.tool = ? AND k.key = ? AND l.time_ns <= ?",
                (tool, key, time.time_ns() - lag_ns),
            ).fetchone()
    return row is not None


def read_key_replays(db_path: Path) -> list[tuple[str, str, str, int]]:
    """Every repeat a deduplicating provider dropped: ``(tool, op id, first op, attempt)``."""
    with _read_only(db_path) as db:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'key_replays'").fetchone():
            return []  # a world from before keys
        rows = db.execute(
            "SELECT tool, op_id, first_op, attempt FROM key_replays ORDER BY seq"
        ).fetchall()
    return [(str(t), str(o), str(f), int(a)) for t, o, f, a in rows]


def fold_wal(db_path: Path) -> None:
    """Fold a finished world's write-ahead log into its file, and leave it one file.

    The same rows, ledger and digest, in a third of the space: a kept trial folder
    (and a golden run) is read, never written, once its trial is checked. Call it
    only when no process has the world open."""
    with contextlib.closing(sqlite3.connect(db_path, isolation_level=None)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("PRAGMA journal_mode=DELETE")


def read_ledger(db_path: Path) -> list[LedgerEntry]:
    """Every ledgered execution, in the order they committed."""
    with _read_only(db_path) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(ledger)")}
        called = "called" if "called" in columns else "NULL"  # a world from before it
        rows = db.execute(
            "SELECT seq, op_id, tool, attempt, incarnation, pid, time_ns, journal_pos, step, "
            f"outcome, result, {called} FROM ledger ORDER BY seq"
        ).fetchall()
    return [_ledger_entry(row) for row in rows]


def _ledger_entry(row: tuple[Any, ...]) -> LedgerEntry:
    seq, op_id, tool, attempt, incarnation, pid, time_ns, journal_pos, step, *rest = row
    outcome, result, called = rest
    return LedgerEntry(
        seq,
        op_id,
        tool,
        attempt,
        incarnation,
        pid,
        time_ns,
        journal_pos,
        step,
        outcome,
        result,
        None if called is None else bool(called),
    )


def effect_rows(db_path: Path) -> list[EffectRow]:
    """Every row of world state, ordered by table (``EFFECT_TABLES``), content, then op id."""
    rows: list[EffectRow] = []
    with _read_only(db_path) as db:
        for table in EFFECT_TABLES:
            found = [
                EffectRow(table.name, op_id, tuple(values))
                for op_id, *values in db.execute(
                    f"SELECT op_id, {', '.join(table.content)} FROM {table.name}"
                )
            ]
            rows.extend(sorted(found, key=lambda row: (row.values, row.op_id)))
    return rows


def world_digest(db_path: Path, exclude_steps: Collection[str] = frozenset()) -> str:
    """A digest of the multiset of state rows, leaving out rows written by ``exclude_steps``.

    Which op wrote a row does not count: two worlds built by the same calls
    under different op ids have the same digest.
    """
    kept = sorted(
        (row.table, row.values)
        for row in effect_rows(db_path)
        if step_of(row.op_id) not in exclude_steps
    )
    canonical = json.dumps(kept, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
