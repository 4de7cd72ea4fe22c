"""The journal in PostgreSQL: one task's records shared by a fleet, a claim that fences zombies.

    runtime = Runtime.open("postgresql://app@db/agents?journal=task-42&lease=30")

A worker claims a journal (a task) at open: it gets a lease and a fencing token
that grows with every claim. Every write checks the token and renews the lease in
its own transaction, so a worker whose lease was taken over is refused at its next
write (``JournalFencedError``) and runs no tool after that. A background thread
renews the lease every ``renew`` seconds while the journal is open, and no tool
starts unless at least half the lease is left as this worker's monotonic clock
measures it (else the lease is renewed first, the token checked).

A commit whose outcome the driver cannot know (the connection dropped) is never
taken as failed or as done: the journal connects again, waits out the old
transaction on the task's row lock, and reads back whether the write is there. If
it is, the records are durable; if not, the write is made again. If the database
cannot be asked, the journal takes no more writes and the failure says the write
may be durable (``JournalWriteError.maybe_durable``): its ops are handed on by
class. This module needs the ``postgres`` extra (psycopg 3), imported here only.
"""

from __future__ import annotations

import _thread
import contextlib
import json
import os
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from harness.runtime import log
from harness.runtime.errors import (
    JournalCorruptError,
    JournalError,
    JournalFencedError,
    JournalLockedError,
    JournalRetiredError,
    JournalVersionError,
    JournalWriteError,
)
from harness.runtime.journal import (
    Appended,
    CompactionBuild,
    IndexBuild,
    JournalListener,
    JournalScan,
    ScannedRecord,
    Written,
)
from harness.runtime.records import (
    IntentRecord,
    Record,
    RetiredRecord,
    UnknownRecordKind,
    record_from_json,
    record_to_json,
)

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "LEASE_SECONDS",
    "RECONNECT_SECONDS",
    "PostgresJournal",
    "PostgresOptions",
    "without_password",
]

T = TypeVar("T")

LEASE_SECONDS = 30.0
"""How long a claim holds without renewal (``?lease=``); a worker silent that long may be
taken over."""
RECONNECT_SECONDS = 10.0
"""How long a journal whose connection broke tries to connect again and ask whether its
last write committed, before it gives the write up as of unknown outcome."""
TOOL_MARGIN = 0.5
"""A tool starts only with at least this share of the lease left, else the lease is
renewed (the token checked) first."""
_OPTIONS = ("journal", "lease", "renew", "holder")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS harness_journals (
    name text PRIMARY KEY,
    journal_id text NOT NULL,
    token bigint NOT NULL,
    holder text NOT NULL,
    lease_until timestamptz NOT NULL,
    next_seq bigint NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS harness_journal_records (
    name text NOT NULL REFERENCES harness_journals (name) ON DELETE CASCADE,
    seq bigint NOT NULL,
    write_id text NOT NULL,
    token bigint NOT NULL,
    record text NOT NULL,
    PRIMARY KEY (name, seq)
);
CREATE INDEX IF NOT EXISTS harness_journal_records_write
    ON harness_journal_records (name, write_id);
"""
_SCHEMA_LOCK = 0x4A4F55524E414C  # an advisory lock: two first workers never race the DDL


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    """Where a journal lives and how it is claimed (read from the URL's query)."""

    conninfo: str
    """The URL without this module's options: what psycopg connects with."""
    journal: str
    """The journal's name in the database: one per task."""
    lease: float = LEASE_SECONDS
    renew: float | None = None
    """Seconds between renewals (None: a third of the lease)."""
    holder: str = ""
    """Who claims, as refusals name it (default ``host:pid``)."""

    @classmethod
    def from_url(cls, url: str) -> PostgresOptions:
        """Split ``url`` into psycopg's conninfo and this module's options; ``ValueError``
        naming the URL (without its password) and the problem."""
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        ours = {k: v for k, v in query if k in _OPTIONS}
        rest = [(k, v) for k, v in query if k not in _OPTIONS]
        conninfo = urlunsplit(parts._replace(query=urlencode(rest)))
        shown = without_password(url)
        if not ours.get("journal"):
            raise ValueError(f"{shown}: no journal named: add ?journal=<task> to the URL")
        lease = _seconds(shown, "lease", ours.get("lease"), LEASE_SECONDS)
        renew = _seconds(shown, "renew", ours.get("renew"), None)
        assert lease is not None
        if renew is not None and renew >= lease:
            raise ValueError(f"{shown}: renew={renew:g} must be shorter than lease={lease:g}")
        return cls(conninfo, ours["journal"], lease, renew, ours.get("holder", ""))


def _seconds(shown: str, name: str, value: str | None, default: float | None) -> float | None:
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 86400 * 365:
        raise ValueError(f"{shown}: {name}={value!r} must be a positive number of seconds")
    return seconds


def without_password(url: str) -> str:
    """The URL as messages and logs name it: its password, if any, as ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise JournalError(
            "a PostgreSQL journal needs psycopg 3: pip install 'agent-crash-harness[postgres]'"
        ) from None
    return psycopg


class _Unknown(Exception):
    """A write whose commit the driver could not confirm."""


class PostgresJournal:
    """One task's journal in PostgreSQL, claimed by this worker (``harness.runtime.store``).

    ``token`` is this worker's fencing token; ``lease`` and ``renew`` the claim's
    settings in seconds. Open with ``PostgresJournal.open(url)``.
    """

    def __init__(self, options: PostgresOptions, *, listener: JournalListener | None = None):
        self._psycopg = _driver()
        self.options = options
        self.lease = options.lease
        self.renew = options.renew if options.renew is not None else options.lease / 3
        self.holder = options.holder or f"{socket.gethostname()}:{os.getpid()}"
        self._listener = listener
        self._lock = _thread.allocate_lock()
        self._deferred: list[Record] = []
        self._events: list[Appended] = []
        self._fenced: JournalFencedError | None = None
        self._poisoned: str | None = None
        self._closed = False
        self._held_until = 0.0
        where = urlsplit(options.conninfo)
        host = (where.hostname or "") + (f":{where.port}" if where.port else "")
        self._name = urlunsplit(where._replace(netloc=host, query=f"journal={options.journal}"))
        self._conn: psycopg.Connection[Any] | None = self._connect()
        try:
            self.token, self.journal_id, self.scan = self._claim()
        except self._psycopg.Error as exc:
            self._drop_connection()
            raise JournalError(
                f"{self.name}: claim failed ({_first_line(exc)}); nothing ran. If the "
                "connection broke at its commit, the claim may hold the journal until its "
                "lease ends"
            ) from exc
        except BaseException:
            self._drop_connection()
            raise
        self.size = sum(len(json.dumps(record_to_json(s.record))) for s in self.scan.records)
        self._next = self.scan.valid_end
        self._stop = threading.Event()
        self._renewer = threading.Thread(
            target=self._renew_loop, name=f"lease {options.journal}", daemon=True
        )
        self._renewer.start()

    @classmethod
    def open(
        cls, url: str, *, listener: JournalListener | None = None, **settings: Any
    ) -> PostgresJournal:
        """Claim the journal ``url`` names (``?journal=`` required; ``lease``, ``renew``
        and ``holder`` optional, or given here as keywords)."""
        options = PostgresOptions.from_url(url)
        if settings:
            unknown = set(settings) - set(_OPTIONS)
            if unknown:
                raise TypeError(f"PostgresJournal.open: unknown settings {sorted(unknown)}")
            merged = {**_as_query(options), **{k: str(v) for k, v in settings.items()}}
            options = PostgresOptions.from_url(_with_query(options.conninfo, merged))
        return cls(options, listener=listener)

    # -- the store's face (harness.runtime.store.Journal) ---------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def proven(self) -> bool:
        """Whether this worker's lease has at least half its length left (by its clock)."""
        return (
            self._fenced is None and time.monotonic() < self._held_until - self.lease * TOOL_MARGIN
        )

    def prove(self) -> None:
        """Renew the lease now, checking the token: a fenced worker raises here, its
        tool never run."""
        with self._lock:
            self._require_open()
            self._transaction(lambda conn: self._fence(conn, 0), retry=True)

    def check_writable(self) -> None:
        with self._lock:
            self._require_open()

    def defer(self, records: Iterable[Record]) -> None:
        with self._lock:
            self._deferred.extend(records)

    @property
    def poisoned(self) -> bool:
        """Whether a write's outcome could not be learnt, so that this writer takes no more
        (a fenced one is refused by ``JournalFencedError`` instead)."""
        return self._poisoned is not None

    @property
    def synced_size(self) -> int:
        """Where the committed records end (the next sequence number): every write is
        committed when it returns."""
        return self._next

    def append(self, record: Record, *, sync: bool = True) -> int:
        return self.append_many((record,), sync=sync)

    def append_many(self, records: Iterable[Record], *, sync: bool = True) -> int:
        written = self.write(records, sync=sync)
        self.settle(written)
        return written.offset

    def write(self, records: Iterable[Record], *, sync: bool = True) -> Written:
        """Commit ``records`` (after any deferred ones) in one transaction that checks this
        worker's token and renews its lease: durable when this returns. ``sync=False``
        commits without waiting for the server's WAL flush."""
        with self._lock:
            self._require_open()
            deferred = len(self._deferred)
            batch = (*self._deferred, *records)
            payloads = [json.dumps(record_to_json(r), separators=(",", ":")) for r in batch]
            write_id = uuid.uuid4().hex
            try:
                first = self._transaction(
                    lambda conn: self._insert(conn, payloads, write_id, sync),
                    retry=True,
                    write_id=write_id,
                    read_back=lambda conn: self._first_of(conn, write_id),
                )
            except _Unknown as unknown:
                intents = frozenset(r.op_id for r in batch if isinstance(r, IntentRecord))
                message = self._poison(str(unknown))
                raise JournalWriteError(message, maybe_durable=intents) from unknown.__cause__
            self._deferred.clear()
            self.size += sum(len(p) for p in payloads)
            end = first + len(batch)
            self._next = max(self._next, end)
            if self._listener is not None:
                self._events.append(Appended(batch, first, end, True))
            return Written(first + deferred, end, False, 0)

    def settle(self, written: Written) -> None:
        """Nothing to wait for (``write`` committed); the listener is told here, outside
        the journal's lock."""
        if self._listener is None:
            return
        with self._lock:
            events, self._events = self._events, []
        for event in events:
            try:
                self._listener(event)
            except Exception as exc:  # a metrics hook must never fail the journal
                log.warning("%s: journal listener raised %r", self.name, exc)

    def compact(self, build: CompactionBuild) -> int:
        """Replace the journal's records by ``build``'s in one transaction (the token
        checked): every record or none. Returns the new size in bytes."""
        with self._lock:
            self._require_open()
            write_id = uuid.uuid4().hex

            def work(conn: psycopg.Connection[Any]) -> tuple[int, JournalScan]:
                self._fence(conn, 0)
                rows = self._rows(conn)
                scanned = self._decode(rows).records
                joined = "".join(str(row[1]) for row in rows).encode()
                new = build([s.record for s in scanned], len(joined), zlib.crc32(joined))
                payloads = [json.dumps(record_to_json(r), separators=(",", ":")) for r in new]
                conn.execute(
                    "DELETE FROM harness_journal_records WHERE name = %s",
                    (self.options.journal,),
                )
                first = self._insert(conn, payloads, write_id, True, fence=False)
                placed = tuple(
                    ScannedRecord(first + i, first + i + 1, r) for i, r in enumerate(new)
                )
                size = sum(len(p) for p in payloads)
                return size, JournalScan(placed, first + len(new), None, self.journal_id)

            def read_back(conn: psycopg.Connection[Any]) -> tuple[int, JournalScan]:
                rows = self._rows(conn)
                return sum(len(str(row[1])) for row in rows), self._decode(rows)

            try:
                self.size, self.scan = self._transaction(
                    work, retry=False, write_id=write_id, read_back=read_back
                )
                self._next = self.scan.valid_end
            except _Unknown as unknown:
                raise JournalWriteError(self._poison(str(unknown))) from unknown.__cause__
            return self.size

    def append_index(self, build: IndexBuild) -> bool:
        """No index: a start reads the journal's rows in one query."""
        return False

    def remove(self) -> None:
        """Delete the journal's rows (the runtime calls it once closed, after ``retire``)."""
        conn = self._connect()
        try:
            with conn.transaction():
                conn.execute(
                    "DELETE FROM harness_journals WHERE name = %s AND token = %s",
                    (self.options.journal, self.token),
                )
        finally:
            conn.close()

    def close(self) -> None:
        """Stop renewing and let go of the claim (its lease ends now), so a successor
        need not wait out the lease."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        if self._renewer is not threading.current_thread():
            self._renewer.join()
        with self._lock:
            conn = self._conn
            if conn is not None and self._fenced is None and self._poisoned is None:
                try:
                    with conn.transaction():
                        conn.execute(
                            "UPDATE harness_journals SET lease_until = now() "
                            "WHERE name = %s AND token = %s",
                            (self.options.journal, self.token),
                        )
                except self._psycopg.Error:
                    log.info("%s: lease not let go; it ends by itself", self.name)
            self._drop_connection()

    def __enter__(self) -> PostgresJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the claim -------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn: psycopg.Connection[Any] = self._psycopg.connect(
                self.options.conninfo,
                autocommit=False,
                connect_timeout=max(1, int(RECONNECT_SECONDS)),
                application_name="harness-journal",
            )
        except self._psycopg.Error as exc:
            raise JournalError(f"{self.name}: cannot connect: {_first_line(exc)}") from exc
        return conn

    def _claim(self) -> tuple[int, str, JournalScan]:
        """Claim the journal in one transaction: create it, or take it over when its lease
        has ended (compare and swap on its row), with a token one higher; read it."""
        assert self._conn is not None
        conn = self._conn
        journal = self.options.journal
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            conn.execute(_SCHEMA)
        with conn.transaction():
            row = conn.execute(
                "SELECT token, holder, lease_until > now(), "
                "extract(epoch FROM lease_until - now()), journal_id "
                "FROM harness_journals WHERE name = %s FOR UPDATE",
                (journal,),
            ).fetchone()
            lease = f"{self.lease} seconds"
            if row is None:
                journal_id = os.urandom(16).hex()
                created = conn.execute(
                    "INSERT INTO harness_journals (name, journal_id, token, holder, lease_until) "
                    "VALUES (%s, %s, 1, %s, now() + %s::interval) "
                    "ON CONFLICT (name) DO NOTHING RETURNING token",
                    (journal, journal_id, self.holder, lease),
                ).fetchone()
                if created is None:  # another worker created it in the same instant
                    raise JournalLockedError(
                        f"{self.name}: journal claimed by another worker as it was created; "
                        "run one worker per task"
                    )
                self._held_until = time.monotonic() + self.lease
                return 1, journal_id, JournalScan((), 1, None, journal_id)
            token, holder, live, left, journal_id = row
            if live:
                raise JournalLockedError(
                    f"{self.name}: journal held by {holder} (token {token}), its lease "
                    f"ends in {float(left):.1f} s; run one worker per task, or claim it "
                    "after the lease ends"
                )
            started = time.monotonic()
            scan = self._decode(self._rows(conn), journal_id=journal_id)
            last = scan.records[-1].record if scan.records else None
            if isinstance(last, RetiredRecord):
                raise JournalRetiredError(
                    f"{self.name}: journal of a retired task (retired by life "
                    f"{last.incarnation} at {time.ctime(last.retired_at)}); nothing runs "
                    "on it: give a new task a journal of its own"
                )
            claimed = conn.execute(
                "UPDATE harness_journals SET token = token + 1, holder = %s, "
                "lease_until = now() + %s::interval WHERE name = %s AND token = %s "
                "RETURNING token",
                (self.holder, lease, journal, token),
            ).fetchone()
            assert claimed is not None  # the row is locked: nobody moved the token
            self._held_until = started + self.lease
            log.info("%s: claimed with token %d after %s", self.name, claimed[0], holder)
            return int(claimed[0]), str(journal_id), scan

    def _decode(
        self, rows: Sequence[tuple[Any, ...]], journal_id: str | None = None
    ) -> JournalScan:
        records = []
        for number, (seq, payload) in enumerate(rows, start=1):
            try:
                record = record_from_json(json.loads(payload))
            except UnknownRecordKind as exc:
                raise JournalVersionError(self.name, int(seq), f"a {exc}") from None
            except (ValueError, RecursionError) as exc:
                raise JournalCorruptError(
                    self.name, int(seq), number, f"row is not a record: {exc}"
                ) from None
            records.append(ScannedRecord(int(seq), int(seq) + 1, record))
        end = records[-1].end if records else 1
        return JournalScan(tuple(records), end, None, journal_id or self.journal_id)

    def _fence(self, conn: psycopg.Connection[Any], count: int) -> int:
        """Check this worker's token and renew its lease, taking ``count`` sequence numbers;
        the first of them. ``JournalFencedError`` when a newer claim took the journal."""
        started = time.monotonic()
        row = conn.execute(
            "UPDATE harness_journals SET lease_until = now() + %s::interval, "
            "next_seq = next_seq + %s WHERE name = %s AND token = %s "
            "RETURNING next_seq - %s",
            (f"{self.lease} seconds", count, self.options.journal, self.token, count),
        ).fetchone()
        if row is None:
            now = conn.execute(
                "SELECT token, holder FROM harness_journals WHERE name = %s",
                (self.options.journal,),
            ).fetchone()
            newer, holder = (None, "nobody: the journal was removed") if now is None else now
            self._fenced = JournalFencedError(self.name, self.token, newer, str(holder))
            log.error("%s", self._fenced)
            raise self._fenced
        self._held_until = started + self.lease
        return int(row[0])

    def _insert(
        self,
        conn: psycopg.Connection[Any],
        payloads: Sequence[str],
        write_id: str,
        sync: bool,
        *,
        fence: bool = True,
    ) -> int:
        if not sync:
            conn.execute("SET LOCAL synchronous_commit TO off")
        first = self._fence(conn, len(payloads)) if fence else self._take(conn, len(payloads))
        if payloads:
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO harness_journal_records (name, seq, write_id, token, record) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    [
                        (self.options.journal, first + i, write_id, self.token, payload)
                        for i, payload in enumerate(payloads)
                    ],
                )
        return first

    def _take(self, conn: psycopg.Connection[Any], count: int) -> int:
        row = conn.execute(
            "UPDATE harness_journals SET next_seq = next_seq + %s WHERE name = %s "
            "RETURNING next_seq - %s",
            (count, self.options.journal, count),
        ).fetchone()
        assert row is not None
        return int(row[0])

    # -- transactions and the unknown commit --------------------------------------------

    def _transaction(
        self,
        work: Callable[[psycopg.Connection[Any]], T],
        *,
        retry: bool,
        write_id: str | None = None,
        read_back: Callable[[psycopg.Connection[Any]], T] | None = None,
    ) -> T:
        """Run ``work`` in one transaction. An error on a live connection rolled it back:
        ``JournalWriteError``, nothing changed. When the connection breaks, the outcome
        is asked of the database on a new one (``_committed``): committed (``read_back``
        says what it came to), not (run again when ``retry``, at most twice), or nobody
        can tell (``_Unknown``)."""
        for _ in range(3):
            conn = self._conn or self._reconnect()
            pid = conn.info.backend_pid  # the backend to wait out if the connection breaks
            try:
                with conn.transaction():
                    return work(conn)
            except JournalError:
                raise
            except self._psycopg.Error as exc:
                if not conn.broken and not conn.closed:
                    raise JournalWriteError(
                        f"{self.name}: the database refused the write ({_first_line(exc)}); "
                        "nothing of it committed"
                    ) from exc
                self._drop_connection()
                committed = self._committed(write_id, pid)
                if committed is None:
                    raise _Unknown(
                        f"the connection broke ({_first_line(exc)}) and the database could "
                        f"not be asked within {RECONNECT_SECONDS:g} s whether the write "
                        "committed"
                    ) from exc
                if committed and read_back is not None:
                    log.warning(
                        "%s: the connection broke at a commit; read back: it committed",
                        self.name,
                    )
                    conn = self._conn or self._reconnect()
                    with conn.transaction():
                        return read_back(conn)
                if not retry:
                    raise JournalWriteError(
                        f"{self.name}: the connection broke ({_first_line(exc)}); the "
                        "write did not commit and nothing changed"
                    ) from exc
                log.warning(
                    "%s: the connection broke; read back: the write did not commit, so "
                    "it is made again",
                    self.name,
                )
        raise _Unknown("the connection broke three times in a row")

    def _first_of(self, conn: psycopg.Connection[Any], write_id: str) -> int:
        row = conn.execute(
            "SELECT min(seq) FROM harness_journal_records WHERE name = %s AND write_id = %s",
            (self.options.journal, write_id),
        ).fetchone()
        assert row is not None and row[0] is not None  # it committed
        return int(row[0])

    def _rows(self, conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
        return conn.execute(
            "SELECT seq, record FROM harness_journal_records WHERE name = %s ORDER BY seq",
            (self.options.journal,),
        ).fetchall()

    def _committed(self, write_id: str | None, pid: int) -> bool | None:
        """Whether the write ``write_id`` committed, asked on a new connection once the old
        backend is gone (ended for good, its row lock let go); None if nobody could tell
        within ``RECONNECT_SECONDS``."""
        deadline = time.monotonic() + RECONNECT_SECONDS
        while time.monotonic() < deadline:
            try:
                conn = self._reconnect()
                with conn.transaction():
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE pid = %s AND application_name = 'harness-journal'",
                        (pid,),
                    )
                with conn.transaction():
                    conn.execute("SET LOCAL lock_timeout TO '5s'")
                    conn.execute(  # waits for the old transaction to end, either way
                        "SELECT 1 FROM harness_journals WHERE name = %s FOR UPDATE",
                        (self.options.journal,),
                    )
                    if write_id is None:
                        return False
                    row = conn.execute(
                        "SELECT count(*) FROM harness_journal_records "
                        "WHERE name = %s AND write_id = %s",
                        (self.options.journal, write_id),
                    ).fetchone()
                return bool(row and row[0])
            except (JournalError, self._psycopg.Error):
                self._drop_connection()
                time.sleep(0.2)
        return None

    def _reconnect(self) -> psycopg.Connection[Any]:
        self._conn = self._connect()
        return self._conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # a broken connection: nothing to let go
                conn.close()

    def _poison(self, why: str) -> str:
        self._poisoned = (
            f"{self.name}: {why}; the journal takes no more writes in this process: its "
            "last write may be durable, so its ops are handed on by their class at the "
            "next start. Open the journal again to go on"
        )
        log.error("%s", self._poisoned)
        return self._poisoned

    def _require_open(self) -> None:
        if self._fenced is not None:
            raise self._fenced
        if self._poisoned is not None:
            raise JournalWriteError(self._poisoned)
        if self._closed:
            raise JournalError(f"{self.name}: journal is closed")

    # -- the lease -------------------------------------------------------------------------

    def _renew_loop(self) -> None:
        """Renew the lease every ``renew`` seconds until closed or fenced; a failure to
        reach the database is logged and tried again (the lease may then end)."""
        while not self._stop.wait(self.renew):
            with self._lock:
                if self._closed or self._fenced is not None or self._poisoned is not None:
                    return
                try:
                    conn = self._conn or self._reconnect()
                    with conn.transaction():
                        self._fence(conn, 0)
                except JournalFencedError:
                    return
                except (JournalError, self._psycopg.Error) as exc:
                    log.warning("%s: lease not renewed: %s", self.name, _first_line(exc))
                    self._drop_connection()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _as_query(options: PostgresOptions) -> dict[str, str]:
    query = {"journal": options.journal, "lease": str(options.lease)}
    if options.renew is not None:
        query["renew"] = str(options.renew)
    if options.holder:
        query["holder"] = options.holder
    return query


def _with_query(conninfo: str, extra: dict[str, str]) -> str:
    parts = urlsplit(conninfo)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(extra.items())
    return urlunsplit(parts._replace(query=urlencode(query)))
