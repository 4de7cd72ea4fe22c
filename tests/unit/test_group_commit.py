"""Group commit for threads: appends made together share one fsync, each caller still
waits for its own records to be durable before its tool runs, and the journal's listener
is told outside the journal's locks.

Nothing here measures a time: fsyncs are counted from the listener's ``Synced`` events,
and a slow fsync (a stand-in that sleeps) makes threads' appends overlap for certain.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.runtime import CallContext, JournalWriteError, Runtime, ToolTable
from harness.runtime import journal as journal_module
from harness.runtime.hooks import set_crash_hook
from harness.runtime.journal import Appended, JournalEvent, JournalWriter, Synced, scan_journal
from harness.runtime.records import IncarnationRecord, IntentRecord

TABLE = ToolTable.shipped()
THREADS = 8


@pytest.fixture
def slow_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each fsync takes 20 ms, so that threads started together write while one runs."""
    real = journal_module._fsync

    def slow(fd: int) -> None:
        time.sleep(0.02)
        real(fd)

    monkeypatch.setattr(journal_module, "_fsync", slow)


def _call_together(runtime: Runtime, tool: Any, prefix: str = "t") -> list[str]:
    """Each of THREADS threads makes one call at once; the statuses, in thread order."""
    start = threading.Barrier(THREADS)
    statuses = [""] * THREADS

    def one(n: int) -> None:
        start.wait()
        outcome = runtime.call(f"{prefix}{n}", "write_file", {"path": f"/{n}"}, tool)
        statuses[n] = outcome.status

    threads = [threading.Thread(target=one, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return statuses


def _quiet(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
    return {"ok": True}


class TestSharedFsyncs:
    def test_threads_appends_share_fsyncs(self, tmp_path: Path, slow_fsync: None) -> None:
        """Calls made at once by threads take fewer fsyncs than they make durable writes."""
        events: list[JournalEvent] = []
        with Runtime.open(tmp_path / "journal", table=TABLE, listener=events.append) as runtime:
            runtime.recover(_quiet)
            events.clear()
            assert _call_together(runtime, _quiet) == ["ok"] * THREADS
        durable = [e for e in events if isinstance(e, Appended) and e.synced]
        syncs = [e for e in events if isinstance(e, Synced)]
        assert len(durable) == 2 * THREADS  # an intent and a finish per call
        assert len(syncs) < len(durable)
        # Every durable write is reached by an fsync told after it.
        for write in durable:
            after = events[events.index(write) :]
            assert any(isinstance(e, Synced) and e.end >= write.end for e in after)

    def test_the_point_before_an_fsync_is_hit_once_per_durable_write(
        self, tmp_path: Path, slow_fsync: None
    ) -> None:
        """``journal.before_fsync`` is reached by every durable write's own thread, leader
        of an fsync or not: its count (which a crash schedule aims at) is the same however
        the threads group, while the fsyncs are fewer."""
        hits: list[str] = []
        events: list[JournalEvent] = []
        with Runtime.open(tmp_path / "journal", table=TABLE, listener=events.append) as runtime:
            runtime.recover(_quiet)
            events.clear()
            set_crash_hook(lambda name, detail: hits.append(name))
            try:
                assert _call_together(runtime, _quiet) == ["ok"] * THREADS
            finally:
                set_crash_hook(None)
        durable = [e for e in events if isinstance(e, Appended) and e.synced]
        syncs = [e for e in events if isinstance(e, Synced)]
        assert hits.count("journal.before_fsync") == len(durable) == 2 * THREADS
        assert len(syncs) < len(durable)

    def test_each_tool_runs_after_its_own_intent_is_durable(
        self, tmp_path: Path, slow_fsync: None
    ) -> None:
        """However the fsyncs are shared, a tool runs only once its op's intent is on disk."""
        path = tmp_path / "journal"
        late: list[str] = []

        with Runtime.open(path, table=TABLE) as runtime:

            def check(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
                intent = next(
                    s
                    for s in scan_journal(path).records
                    if isinstance(s.record, IntentRecord) and s.record.op_id == ctx.op_id
                )
                if intent.end > runtime.journal.synced_size:
                    late.append(ctx.op_id)
                return {"ok": True}

            runtime.recover(_quiet)
            assert _call_together(runtime, check) == ["ok"] * THREADS
        assert late == []

    def test_a_failed_fsync_fails_every_caller_it_did_not_cover(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An fsync that fails poisons the writer: no caller waiting for it runs its tool."""
        ran: list[str] = []

        def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            ran.append(ctx.op_id)
            return {"ok": True}

        with Runtime.open(tmp_path / "journal", table=TABLE) as runtime:
            runtime.recover(_quiet)

            def failing(fd: int) -> None:
                time.sleep(0.02)
                raise OSError(5, "Input/output error")

            monkeypatch.setattr(journal_module, "_fsync", failing)
            start = threading.Barrier(THREADS)
            errors: list[BaseException] = []

            def one(n: int) -> None:
                start.wait()
                try:
                    runtime.call(f"f{n}", "write_file", {"path": f"/{n}"}, tool)
                except JournalWriteError as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=one, args=(n,)) for n in range(THREADS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            assert runtime.journal.poisoned
        assert ran == []
        assert len(errors) == THREADS


class TestListenerOutsideTheLock:
    def test_a_blocked_listener_does_not_stop_other_threads(self, tmp_path: Path) -> None:
        """While the listener is held up telling one thread's write, another thread's call
        writes, fsyncs and returns."""
        holding = threading.Event()
        release = threading.Event()

        def listener(event: JournalEvent) -> None:
            if threading.current_thread().name == "first" and isinstance(event, Appended):
                holding.set()
                release.wait(30)

        with Runtime.open(tmp_path / "journal", table=TABLE, listener=listener) as runtime:
            runtime.recover(_quiet)
            first = threading.Thread(
                target=runtime.call, args=("a", "write_file", {"path": "/a"}, _quiet), name="first"
            )
            first.start()
            assert holding.wait(30)
            second: list[str] = []
            other = threading.Thread(
                target=lambda: second.append(
                    runtime.call("b", "write_file", {"path": "/b"}, _quiet).status
                )
            )
            other.start()
            other.join(10)
            done_while_held = second == ["ok"] and not release.is_set()
            release.set()
            first.join(30)
        assert done_while_held


class TestAnFsyncWaitsForItsGroup:
    def test_the_groups_last_write_wakes_the_fsync(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An fsync waiting for a group of two writes (its bound made an hour) goes ahead
        once the second is in, woken by that write, not by its bound."""
        monkeypatch.setattr(JournalWriter, "GATHER_MAX", 3600.0)
        with JournalWriter(tmp_path / "journal") as writer:
            writer._shared, writer._last_batch, writer._last_fsync = True, 2, 3600.0
            gathering = threading.Thread(target=writer._gather)
            gathering.start()
            while writer._gathering is None and gathering.is_alive():
                time.sleep(0.001)
            records = [IncarnationRecord(n, 1) for n in (1, 2)]
            writer.write(records[:1])
            assert gathering.is_alive()  # one write of two
            writer.write(records[1:])
            gathering.join(timeout=60)  # a guard against a hang, not a measure
            assert not gathering.is_alive()

    def test_a_group_that_never_forms_waits_only_its_bound(self, tmp_path: Path) -> None:
        """With nothing more written, the wait ends at its bound and leaves no gate behind."""
        with JournalWriter(tmp_path / "journal") as writer:
            writer._shared, writer._last_batch, writer._last_fsync = True, 16, 0.001
            writer._gather()
            assert writer._gathering is None

    def test_the_group_grows_at_once_and_shrinks_one_write_an_fsync(self, tmp_path: Path) -> None:
        """The group an fsync waits for follows the callers: as large as the last fsync's
        writes at once, one fewer an fsync when fewer come."""
        with JournalWriter(tmp_path / "journal") as writer:
            for n in range(5):
                writer.write([IncarnationRecord(n + 1, 1)])
            writer.sync()
            assert writer._last_batch == 5
            writer.write([IncarnationRecord(9, 1)])
            writer.sync()
            assert writer._last_batch == 4
