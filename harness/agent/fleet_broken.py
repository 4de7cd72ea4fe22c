"""Broken PostgreSQL journals: each breaks one promise a fleet relies on.

Each class is the real ``PostgresJournal`` with one mistake that fleets' stores
make. None touches the file journal, the runtime or the recovery matrix, so each
escapes every trial of the file journal and every trial that only kills workers;
``make chaos-fleet``'s self-check requires that the fleet's fault it names
(``needs_fault``) gets it caught by the invariant it names (``caught_by``,
``harness.check.fleet``).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, ClassVar

from harness.runtime.errors import JournalLockedError, JournalWriteError
from harness.runtime.journal import JournalScan
from harness.runtime.postgres import _SCHEMA, _SCHEMA_LOCK, PostgresJournal

if TYPE_CHECKING:
    import psycopg

__all__ = ["FLEET_BROKEN", "BrokenJournal"]


class BrokenJournal(PostgresJournal):
    mistake: ClassVar[str] = ""
    needs_fault: ClassVar[str] = ""
    """The fleet's fault that exposes the mistake (``harness.chaos.fleet.FLEET_FAULTS``)."""
    caught_by: ClassVar[str] = ""
    """The fleet's invariant expected to catch it (``harness.check.fleet.FLEET_INVARIANTS``)."""


class NoFenceCheck(BrokenJournal):
    mistake = "writes and renews without checking its fencing token (a zombie's writes land)"
    needs_fault = "lease-pause"
    caught_by = "no-fenced-write"

    def _fence(self, conn: psycopg.Connection[Any], count: int) -> int:
        started = time.monotonic()
        row = conn.execute(
            "UPDATE harness_journals SET lease_until = now() + %s::interval, "
            "next_seq = next_seq + %s WHERE name = %s RETURNING next_seq - %s",
            (f"{self.lease} seconds", count, self.options.journal, count),
        ).fetchone()
        assert row is not None
        self._held_until = started + self.lease
        return int(row[0])


class LeaseNotRenewed(BrokenJournal):
    mistake = "renews its lease only at its writes, never while a long call runs"
    needs_fault = "redelivery:long-call"
    caught_by = "one-runner"

    def _renew_loop(self) -> None:
        return  # no renewal between writes: a call longer than the lease loses it


class CommitTakenAsFailed(BrokenJournal):
    mistake = (
        "takes a COMMIT whose connection dropped for a failure: the call is told it did "
        "not run, while its intent committed"
    )
    needs_fault = "cut:after:intent"
    caught_by = "fail-no-effect"

    def _committed(self, write_id: str | None, pid: int) -> bool | None:
        raise JournalWriteError(
            f"{self.name}: the connection broke at a commit; taken as failed: nothing of "
            "the write committed"
        )


class ClaimWithoutCas(BrokenJournal):
    mistake = (
        "claims by reading the lease, then writing its own claim without compare and swap "
        "(two claims at once both win)"
    )
    needs_fault = "redelivery:claim"
    caught_by = "one-runner"

    def _claim(self) -> tuple[int, str, JournalScan]:
        assert self._conn is not None
        conn = self._conn
        journal = self.options.journal
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            conn.execute(_SCHEMA)
        with conn.transaction():
            row = conn.execute(  # no FOR UPDATE: another claim may read the same row
                "SELECT token, holder, lease_until > now(), journal_id "
                "FROM harness_journals WHERE name = %s",
                (journal,),
            ).fetchone()
            lease = f"{self.lease} seconds"
            if row is not None and row[2]:
                raise JournalLockedError(f"{self.name}: journal held by {row[1]}")
            token = 1 if row is None else int(row[0]) + 1
            journal_id = os.urandom(16).hex() if row is None else str(row[3])
            claimed = conn.execute(  # no compare of the token read: the last writer wins
                "INSERT INTO harness_journals (name, journal_id, token, holder, lease_until) "
                "VALUES (%s, %s, %s, %s, now() + %s::interval) ON CONFLICT (name) DO UPDATE "
                "SET token = excluded.token, holder = excluded.holder, "
                "lease_until = excluded.lease_until RETURNING journal_id",
                (journal, journal_id, token, self.holder, lease),
            ).fetchone()
            assert claimed is not None
            journal_id = str(claimed[0])
            scan = self._decode(self._rows(conn), journal_id=journal_id)
        self._held_until = time.monotonic() + self.lease
        return token, journal_id, scan


FLEET_BROKEN: dict[str, type[BrokenJournal]] = {
    "no-fence-check": NoFenceCheck,
    "lease-not-renewed": LeaseNotRenewed,
    "commit-taken-as-failed": CommitTakenAsFailed,
    "claim-without-cas": ClaimWithoutCas,
}
"""The broken journals, by the name ``--runtime`` takes, in the self-check's order."""
