"""The runtime on a PostgreSQL journal keeps every promise of the file journal, and claims.

Each test gets a database of its own on the session's server. The ground truth of
what ran is the fake tool's own list of invocations (``tests.conftest.FakeTool``),
never the journal; what the journal holds is read back over a connection of the
test's own.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from harness.runtime import (
    AsyncRuntime,
    CallContext,
    Compaction,
    Decision,
    JournalFencedError,
    JournalLockedError,
    JournalRetiredError,
    Reconciled,
    Resolution,
    Retention,
    Runtime,
    ToolTable,
    TransientToolError,
)
from harness.runtime.errors import FailpointTriggered
from harness.runtime.hooks import set_crash_hook
from harness.runtime.postgres import PostgresJournal, PostgresOptions
from tests.conftest import IW, NI, RO, UNK, FakeTool

TABLE = ToolTable(
    {"read": RO, "put": IW, "pay": NI, "shell": UNK},
    source="<test>",
)


def _url(database: str, journal: str = "task-1", **options: Any) -> str:
    extra = "".join(f"&{k}={v}" for k, v in options.items())
    return f"{database}&journal={journal}{extra}"


def _rows(database: str, journal: str = "task-1") -> list[str]:
    """The kinds of the journal's records, in order, read over a connection of the test's."""
    with psycopg.connect(database) as conn:
        rows = conn.execute(
            "SELECT record::json->>'kind' FROM harness_journal_records WHERE name = %s "
            "ORDER BY seq",
            (journal,),
        ).fetchall()
    return [str(kind) for (kind,) in rows]


def _end_lease(database: str, journal: str = "task-1") -> None:
    """The holder's lease ends now, as if it had gone silent past it."""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(
            "UPDATE harness_journals SET lease_until = now() - interval '1 second' WHERE name = %s",
            (journal,),
        )


def _crash_at(point: str, op_id: str) -> Callable[[], None]:
    """A hook that stops the protocol at ``point`` for ``op_id``, as a kill there would;
    returns what removes it."""

    def hook(name: str, at: str) -> None:
        if name == point and at == op_id:
            raise FailpointTriggered(f"{name} {at}")

    set_crash_hook(hook)
    return lambda: set_crash_hook(None)


class TestWriteAhead:
    def test_intent_is_committed_before_the_tool_runs(self, database: str) -> None:
        """Inside the tool, another connection already sees the op's intent, and no finish."""
        seen: list[list[str]] = []
        tool = FakeTool(on_call=lambda ctx: seen.append(_rows(database)))
        with Runtime.open(_url(database), table=TABLE) as runtime:
            runtime.recover(tool)
            runtime.call("s1", "pay", {"amount": 5}, tool)
            assert seen == [["incarnation", "recovered", "intent"]]
            assert _rows(database)[-2:] == ["intent", "finish"]

    def test_a_durable_success_is_answered_never_run_again(self, database: str) -> None:
        """After a restart the op is answered from the journal with its result."""
        tool = FakeTool()
        with Runtime.open(_url(database), table=TABLE) as runtime:
            runtime.recover(tool)
            first = runtime.call("s1", "pay", {"amount": 5}, tool)
        with Runtime.open(_url(database), table=TABLE) as runtime:
            report = runtime.recover(tool)
            again = runtime.call("s1", "pay", {"amount": 5}, tool)
        assert tool.count("s1") == 1
        assert again.result == first.result and not again.executed
        assert report.incarnation == 2

    def test_a_bad_url_is_one_clear_line(self) -> None:
        """A URL without a journal, or a lease that is no number, is refused naming it."""
        with pytest.raises(ValueError, match=r"no journal named: add \?journal="):
            Runtime.open("postgresql://u:secret@127.0.0.1:1/db")
        with pytest.raises(ValueError, match="lease='soon' must be a positive number") as bad:
            PostgresOptions.from_url("postgresql://u:secret@h/db?journal=t&lease=soon")
        assert "secret" not in str(bad.value) and "\n" not in str(bad.value)
        with pytest.raises(ValueError, match="renew=5 must be shorter than lease=2"):
            PostgresOptions.from_url("postgresql://h/db?journal=t&lease=2&renew=5")


class TestSameDecisions:
    """A history left by a crash is decided the same on the file journal and on PostgreSQL."""

    def _history(self, source: str | Path) -> tuple[list[tuple[str, Decision]], list[str]]:
        tool = FakeTool(script={"s2": [RuntimeError("reply lost")]})
        with Runtime.open(source, table=TABLE, compaction=Compaction.never()) as runtime:
            runtime.recover(tool)
            runtime.call("s1", "put", {"k": 1}, tool)
            with pytest.raises(RuntimeError):
                runtime.call("s2", "pay", {"amount": 1}, tool)
            for op_id, tool_name in (("s3", "read"), ("s4", "pay"), ("s5", "shell")):
                remove = _crash_at("op.after_intent", op_id)
                try:
                    with pytest.raises(FailpointTriggered):
                        runtime.call(op_id, tool_name, {"n": op_id}, tool)
                finally:
                    remove()
        with Runtime.open(source, table=TABLE) as runtime:
            report = runtime.recover(tool)
            decisions = [(d.op_id, d.decision) for d in report.decisions]
            hints = [h.op_id for h in report.hints]
        return decisions, hints

    def test_the_matrix_decides_alike(self, database: str, tmp_path: Path) -> None:
        """SKIP, RETRY and VERIFY per op, and the hints, are the file journal's."""
        on_file = self._history(tmp_path / "agent.journal")
        on_postgres = self._history(_url(database))
        assert on_postgres == on_file
        assert dict(on_postgres[0])["s3"] is Decision.RETRY
        assert dict(on_postgres[0])["s4"] is Decision.VERIFY
        assert on_postgres[1] == ["s2", "s4", "s5"]


class TestKeys:
    def test_keys_are_unique_per_journal_and_stable_per_op(self, database: str) -> None:
        """Two journals hand out different keys for one op id; a restart hands the same."""
        keys: list[tuple[str, str]] = []
        tool = FakeTool(on_call=lambda ctx: keys.append((ctx.op_id, ctx.idempotency_key)))
        for journal in ("task-a", "task-b"):
            with Runtime.open(_url(database, journal), table=TABLE) as runtime:
                runtime.recover(tool)
                remove = _crash_at("op.after_effect", "s1")
                try:
                    with pytest.raises(FailpointTriggered):
                        runtime.call("s1", "put", {"k": 1}, tool)
                finally:
                    remove()
            with Runtime.open(_url(database, journal), table=TABLE) as runtime:
                runtime.recover(tool)  # RETRY: the same op, the same key
        assert len(keys) == 4
        assert keys[0] == keys[1] and keys[2] == keys[3] and keys[0] != keys[2]


class TestCompaction:
    def test_answers_stay_and_retention_lets_go(self, database: str) -> None:
        """Compaction keeps every answer; an op past retention then runs as new."""
        tool = FakeTool()
        url = _url(database)
        with Runtime.open(url, table=TABLE, compaction=Compaction.never()) as runtime:
            runtime.recover(tool)
            for n in range(4):
                runtime.call(f"s{n}", "put", {"n": n}, tool)
            before = [runtime.outcome_of(f"s{n}") for n in range(4)]
            runtime.compact()
            assert [runtime.outcome_of(f"s{n}") for n in range(4)] == before
        assert _rows(database)[0] == "checkpoint"
        keep_two = Compaction.never(Retention(ops=2))
        with Runtime.open(url, table=TABLE, compaction=keep_two) as runtime:
            runtime.recover(tool)
            runtime.compact()
            runtime.call("s3", "put", {"n": 3}, tool)
            runtime.call("s0", "put", {"n": 0}, tool)
        assert tool.count("s3") == 1 and tool.count("s0") == 2

    def test_retire_refuses_the_task_after(self, database: str) -> None:
        """A retired journal is refused at the next claim; deleted, its name starts anew."""
        tool = FakeTool()
        with Runtime.open(_url(database), table=TABLE) as runtime:
            runtime.recover(tool)
            runtime.call("s1", "put", {"k": 1}, tool)
            runtime.retire()
        with pytest.raises(JournalRetiredError, match="retired task"):
            Runtime.open(_url(database), table=TABLE)
        with Runtime.open(_url(database, "task-2"), table=TABLE) as runtime:
            runtime.recover(tool)
            runtime.retire(delete=True)
        with Runtime.open(_url(database, "task-2"), table=TABLE) as runtime:
            assert len(runtime.ops) == 0


class TestReconcilers:
    def test_a_reconciler_closes_an_unknown_op(self, database: str) -> None:
        """An op of unknown outcome whose provider says its effect is there is ok, not run."""
        tool = FakeTool()

        def reconciler(args: Mapping[str, Any], ctx: CallContext) -> Any:
            return Reconciled.PRESENT

        with Runtime.open(_url(database), table=TABLE) as runtime:
            runtime.recover(tool)
            remove = _crash_at("op.after_effect", "s1")
            try:
                with pytest.raises(FailpointTriggered):
                    runtime.call("s1", "pay", {"amount": 3}, tool)
            finally:
                remove()
        reconcilers = {"pay": reconciler}
        with Runtime.open(_url(database), table=TABLE, reconcilers=reconcilers) as runtime:
            report = runtime.recover(tool)
            assert report.hints == ()
            outcome = runtime.call("s1", "pay", {"amount": 3}, tool)
        assert outcome.ok and outcome.resolution is Resolution.EFFECT_PRESENT
        assert tool.count("s1") == 1


class TestAsync:
    def test_calls_together_each_journaled(self, database: str) -> None:
        """``AsyncRuntime`` on PostgreSQL: calls gathered, each run once, each answered."""
        tool = FakeTool()

        async def main() -> list[str]:
            async with await AsyncRuntime.open(_url(database), table=TABLE) as runtime:
                await runtime.recover(tool)
                outcomes = await asyncio.gather(
                    *(runtime.call(f"s{n}", "put", {"n": n}, tool) for n in range(8))
                )
                return [o.status for o in outcomes]

        assert asyncio.run(main()) == ["ok"] * 8
        assert sorted(tool.counts().values()) == [1] * 8
        assert _rows(database).count("finish") == 8


class TestClaims:
    def test_a_live_lease_refuses_a_second_worker(self, database: str) -> None:
        """A second claim while the lease holds names the holder and its token."""
        with Runtime.open(_url(database, holder="worker-a"), table=TABLE) as runtime:
            runtime.recover(FakeTool())
            with pytest.raises(JournalLockedError, match=r"held by worker-a \(token 1\)"):
                Runtime.open(_url(database, holder="worker-b"), table=TABLE)

    def test_a_takeover_fences_the_old_holder(self, database: str) -> None:
        """Once another worker claimed the task, the old one's next call raises
        ``JournalFencedError`` naming both tokens, and its tool never runs."""
        old_tool, new_tool = FakeTool(), FakeTool()
        old = Runtime.open(_url(database, holder="worker-a"), table=TABLE)
        old.recover(old_tool)
        old.call("s1", "put", {"k": 1}, old_tool)
        _end_lease(database)
        with Runtime.open(_url(database, holder="worker-b"), table=TABLE) as new:
            new.recover(new_tool)
            with pytest.raises(JournalFencedError) as fenced:
                old.call("s2", "pay", {"amount": 1}, old_tool)
            message = str(fenced.value)
            assert "token 1" in message and "worker-b (token 2)" in message
            assert "task-1" in message and "\n" not in message
            with pytest.raises(JournalFencedError):
                old.call("s3", "read", {}, old_tool)
            new.call("s2", "pay", {"amount": 1}, new_tool)
        old.close()
        assert old_tool.count("s2") == 0 and old_tool.count("s3") == 0
        assert new_tool.count("s2") == 1

    def test_the_lease_is_renewed_while_a_long_call_runs(self, database: str) -> None:
        """A call longer than the lease keeps it: no second worker may claim meanwhile."""
        refused: list[str] = []

        def slow(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            for _ in range(3):
                time.sleep(0.9)  # past the lease of 2 s in all, renewed every 0.3 s
                try:
                    Runtime.open(_url(database, holder="worker-b"), table=TABLE).close()
                except JournalLockedError as exc:
                    refused.append(str(exc))
            return "done"

        with Runtime.open(_url(database, holder="worker-a", lease=2, renew=0.3)) as runtime:
            runtime.recover(slow)
            assert runtime.call("s1", "put", {}, slow).ok
        assert len(refused) == 3 and all("worker-a" in r for r in refused)

    def test_a_lapsed_lease_is_renewed_before_a_tool_runs(self, database: str) -> None:
        """A worker whose lease lapsed with nobody else claiming renews it and goes on."""
        tool = FakeTool()
        journal = PostgresJournal.open(_url(database), lease=30, renew=20)
        with Runtime.open(journal, table=TABLE) as runtime:
            runtime.recover(tool)
            journal._held_until = 0.0  # as if paused past the lease
            _end_lease(database)
            assert not journal.proven
            assert runtime.call("s1", "put", {"k": 1}, tool).ok
            assert journal.proven
        assert tool.count("s1") == 1

    def test_claims_race_one_winner(self, database: str) -> None:
        """Workers claiming an ended lease at once: exactly one wins (compare and swap)."""
        with Runtime.open(_url(database), table=TABLE) as runtime:
            runtime.recover(FakeTool())
        _end_lease(database)
        # close() let the lease go already; take it again and end it, then race.
        first = PostgresJournal.open(_url(database))
        first._stop.set()
        _end_lease(database)
        won: list[PostgresJournal] = []
        lost: list[str] = []
        start = threading.Barrier(4)

        def claim(n: int) -> None:
            start.wait()
            try:
                journal = PostgresJournal.open(_url(database, holder=f"w{n}"))
            except JournalLockedError as exc:
                lost.append(str(exc))
                return
            won.append(journal)  # held until every claim was made

        threads = [threading.Thread(target=claim, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        first.close()
        for journal in won:
            journal.close()
        assert len(won) == 1 and len(lost) == 3 and won[0].token == 3


class TestTransient:
    def test_in_process_retry_of_a_safe_call(self, database: str) -> None:
        """A transient failure of a retry-safe call is retried in-process, journaled."""
        tool = FakeTool(script={"s1": [TransientToolError("busy"), None]})
        with Runtime.open(_url(database), table=TABLE) as runtime:
            runtime.recover(tool)
            assert runtime.call("s1", "read", {}, tool).ok
        assert tool.attempts("s1") == [1, 2]
        kinds: Sequence[str] = _rows(database)
        assert kinds.count("intent") == 2 and kinds.count("finish") == 2
