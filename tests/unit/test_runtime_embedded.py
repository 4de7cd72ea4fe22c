"""The runtime embedded in a service: threads, cancellation, keys, versions, limits, logs.

Each class holds one promise a service that handles payments would rely on: two
threads never run one op twice and a failed append never loses a durable record;
a cancelled call is an unknown outcome handed on by its class; keys differ across
journals and stay put across attempts, restarts and redoes; a newer format is
refused, never cut; no tool gets a class nobody declared; and what happens can be
seen (standard logging, a listener for metrics).
"""

from __future__ import annotations

import asyncio
import logging
import stat
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.runtime import (
    CallContext,
    Decision,
    IdempotencyClass,
    JournalError,
    JournalVersionError,
    JournalWriteError,
    OpState,
    Resolution,
    Runtime,
    ToolTable,
    TransientToolError,
)
from harness.runtime.aio import WRITER_THREADS, AsyncRuntime
from harness.runtime.executor import JSON_LIMIT, TOO_LARGE
from harness.runtime.journal import (
    FILE_HEADER,
    Appended,
    JournalEvent,
    JournalWriter,
    Synced,
    encode_frame,
)
from harness.runtime.records import FinishRecord, IncarnationRecord, IntentRecord, digest
from tests.conftest import journal_records, open_runtime

PAY = {"amount": 30}


def _finishes(path: Path) -> list[FinishRecord]:
    return [r for r in journal_records(path) if isinstance(r, FinishRecord)]


class CountingTool:
    """A tool that counts its runs per op, thread-safely, and can wait inside its effect."""

    def __init__(self, *, inside: Callable[[CallContext], None] | None = None) -> None:
        self.runs: Counter[str] = Counter()
        self.keys: list[tuple[str, int, str]] = []
        self._lock = threading.Lock()
        self._inside = inside

    def __call__(self, tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        with self._lock:
            self.runs[ctx.op_id] += 1
            self.keys.append((ctx.op_id, ctx.attempt, ctx.idempotency_key))
        if self._inside is not None:
            self._inside(ctx)
        return {"paid": ctx.op_id}


class TestThreads:
    def test_two_threads_calling_one_op_run_it_once(self, journal_path: Path) -> None:
        """The second caller of a non-idempotent op waits for the first, then is answered
        from the journal: the tool runs once."""
        entered = threading.Event()
        release = threading.Event()

        def hold(ctx: CallContext) -> None:
            entered.set()
            assert release.wait(10)

        tool = CountingTool(inside=hold)
        outcomes: list[Any] = []
        with open_runtime(journal_path) as runtime:

            def pay() -> None:
                outcomes.append(runtime.call("op-1", "alarm", PAY, tool))

            first = threading.Thread(target=pay)
            first.start()
            assert entered.wait(10)
            second = threading.Thread(target=pay)
            second.start()
            second.join(0.2)
            assert second.is_alive()  # waiting for the first, not running the tool
            release.set()
            first.join()
            second.join()
        assert tool.runs == {"op-1": 1}
        assert sorted((o.status, o.executed) for o in outcomes) == [("ok", False), ("ok", True)]

    @pytest.mark.parametrize("full_disk_at", [None, 150], ids=["no-fault", "enospc"])
    def test_many_threads_many_ops_lose_nothing_durable(
        self, journal_path: Path, armed: Callable[[str], None], full_disk_at: int | None
    ) -> None:
        """8 threads x 60 calls over 120 ops (each op called by two threads), with and
        without a full disk: every op ran at most once, only after its intent was durable;
        every call answered ok is a durable success after reopening; after the failure
        every append is refused; nothing journaled before the failure is lost."""
        if full_disk_at is not None:
            armed(f"journal.append@{full_disk_at}=enospc")
        tool = CountingTool()
        acknowledged: set[str] = set()
        refused: list[str] = []
        strange: list[Any] = []
        lock = threading.Lock()
        with open_runtime(journal_path) as runtime:

            def work(thread: int) -> None:
                for n in range(60):
                    op = f"op-{(thread // 2) * 30 + n % 30}"  # threads 2k, 2k+1 share ops
                    try:
                        outcome = runtime.call(op, "alarm", {"op": op}, tool)
                    except JournalWriteError as exc:
                        with lock:
                            refused.append(str(exc))
                        continue
                    with lock:
                        if outcome.status == "ok":
                            acknowledged.add(op)
                        else:
                            strange.append(outcome)

            threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            size_before_close = journal_path.stat().st_size
        assert strange == []
        assert max(tool.runs.values()) == 1
        if full_disk_at is None:
            assert refused == [] and len(acknowledged) == 120
        else:
            assert refused and all("takes no more appends" in r for r in refused)
            assert 0 < len(acknowledged) < 120
        assert journal_path.stat().st_size == size_before_close
        with open_runtime(journal_path) as reopened:
            succeeded = {
                op_id for op_id, op in reopened.ops.items() if op.state is OpState.SUCCEEDED
            }
            intents = {
                r.op_id for r in journal_records(journal_path) if isinstance(r, IntentRecord)
            }
            assert acknowledged <= succeeded  # every ok the callers saw is durable
            assert set(tool.runs) <= intents  # no tool ran without its intent
            ran_unsettled = set(tool.runs) - succeeded
            assert all(reopened.ops[op].state is OpState.RUNNING for op in ran_unsettled)

    def test_recovery_refuses_to_start_while_a_call_is_in_flight(self, journal_path: Path) -> None:
        """recover() decides from a journal nobody is writing: a call in flight makes it a
        RuntimeError, and the call is unharmed."""
        entered, release = threading.Event(), threading.Event()

        def hold(ctx: CallContext) -> None:
            entered.set()
            assert release.wait(10)

        tool = CountingTool(inside=hold)
        with open_runtime(journal_path) as runtime:
            caller = threading.Thread(target=runtime.call, args=("op-1", "alarm", PAY, tool))
            caller.start()
            assert entered.wait(10)
            with pytest.raises(RuntimeError, match="in flight"):
                runtime.recover(tool)
            release.set()
            caller.join()
            assert runtime.outcome_of("op-1").status == "ok"


class TestCancellation:
    def test_a_call_cancelled_in_its_tool_is_an_unknown_outcome(self, journal_path: Path) -> None:
        """wait_for cancels an unsafe call inside its tool: an unknown finish is journaled, the
        hint handed over in the same life, CancelledError (TimeoutError) raised on."""
        runs: list[str] = []

        async def slow(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            runs.append(ctx.op_id)
            await asyncio.sleep(30)

        async def main() -> Any:
            async with AsyncRuntime(open_runtime(journal_path), owned=True) as runtime:
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(runtime.call("op-1", "alarm", PAY, slow), 0.05)
                return await runtime.call("op-1", "alarm", PAY, slow)

        again = asyncio.run(main())
        (finish,) = _finishes(journal_path)
        assert finish.unknown and "CancelledError" in (finish.error or "")
        assert again.status == "info" and again.hint is not None
        assert runs == ["op-1"]

    def test_a_retry_safe_call_cancelled_runs_again_at_its_next_call(
        self, journal_path: Path
    ) -> None:
        """A read-only call cancelled inside its tool runs again at its next call (attempt 2)."""
        calls: list[int] = []

        async def read(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            calls.append(ctx.attempt)
            if ctx.attempt == 1:
                await asyncio.sleep(30)
            return {"text": "log"}

        async def main() -> Any:
            async with AsyncRuntime(open_runtime(journal_path), owned=True) as runtime:
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(runtime.call("op-1", "logcat", {}, read), 0.05)
                return await runtime.call("op-1", "logcat", {}, read)

        again = asyncio.run(main())
        assert (again.status, again.executed, again.result) == ("ok", True, {"text": "log"})
        assert calls == [1, 2]

    def test_a_call_cancelled_while_its_intent_is_written_never_runs_its_tool(
        self, journal_path: Path
    ) -> None:
        """Cancelled before its intent's write came back: the tool never runs, and the intent
        that did land is closed as failed (it never ran): no VERIFY, no retry."""
        runs: list[str] = []

        def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            runs.append(ctx.op_id)

        async def main() -> Any:
            async with AsyncRuntime(open_runtime(journal_path), owned=True) as runtime:
                await runtime.recover(tool)
                task = asyncio.create_task(runtime.call("op-1", "alarm", PAY, tool))
                await asyncio.sleep(0)  # the call queued its intent and waits for the write
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                return runtime.outcome_of("op-1")

        outcome = asyncio.run(main())
        assert runs == []
        records = journal_records(journal_path)
        assert [
            type(r).__name__ for r in records if isinstance(r, IntentRecord | FinishRecord)
        ] == [
            "IntentRecord",
            "FinishRecord",
        ]
        assert outcome.status == "fail" and outcome.hint is None
        assert outcome.error is not None and "before the tool ran" in outcome.error

    def test_a_call_cancelled_while_its_finish_is_written_keeps_its_outcome(
        self, journal_path: Path
    ) -> None:
        """Cancelled after its tool returned, while the finish is written: the finish lands,
        the op is a success, no hint is handed over, and the cancellation goes on."""
        task: dict[str, asyncio.Task[Any]] = {}

        def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            asyncio.get_running_loop().call_soon(task["call"].cancel)
            return {"paid": 30}

        async def main() -> Any:
            async with AsyncRuntime(open_runtime(journal_path), owned=True) as runtime:
                task["call"] = asyncio.create_task(runtime.call("op-1", "alarm", PAY, tool))
                with pytest.raises(asyncio.CancelledError):
                    await task["call"]
                return runtime.outcome_of("op-1")

        outcome = asyncio.run(main())
        assert (outcome.status, outcome.result) == ("ok", {"paid": 30})
        kinds = [r.kind for r in journal_records(journal_path)]
        assert kinds[-2:] == ["intent", "finish"] and "hint" not in kinds

    @pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit], ids=lambda e: e.__name__)
    def test_an_interrupt_inside_a_tool_is_journaled_and_raised_on(
        self, journal_path: Path, raised: type[BaseException]
    ) -> None:
        """KeyboardInterrupt or SystemExit inside a sync tool: an unknown finish, the hint, and
        the interrupt goes on to the caller."""

        def interrupted(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            raise raised()

        with open_runtime(journal_path) as runtime:
            with pytest.raises(raised):
                runtime.call("op-1", "ui_tap", PAY, interrupted)
            again = runtime.call("op-1", "ui_tap", PAY, interrupted)
        (finish,) = _finishes(journal_path)
        assert finish.unknown and raised.__name__ in (finish.error or "")
        assert again.status == "info" and again.hint is not None


class TestKeys:
    def test_two_journals_give_one_op_id_different_keys(self, tmp_path: Path) -> None:
        """Two tasks that each have an op ``step-7`` hand an API two different keys."""
        keys = []
        for task in ("a", "b"):
            tool = CountingTool()
            with open_runtime(tmp_path / f"{task}.journal") as runtime:
                runtime.call("step-7", "alarm", PAY, tool)
            keys.append(tool.keys[0][2])
        assert keys[0] != keys[1]

    def test_one_op_keeps_its_key_across_attempts_a_restart_and_a_redo(
        self, journal_path: Path
    ) -> None:
        """Attempts of a retried op, its retry after a restart, and the redo of a verified
        op all carry the key of the op they stand for."""
        tool = CountingTool()
        flaky = {"attempt": 0}

        def write(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            tool(name, args, ctx)
            flaky["attempt"] += 1
            if ctx.op_id == "w" and flaky["attempt"] == 1:
                raise TransientToolError("busy")
            if ctx.op_id == "w" and ctx.incarnation == 1:
                raise RuntimeError("crash after the retry")  # left RUNNING: retried at start
            return {}

        with open_runtime(journal_path) as runtime:
            with pytest.raises(RuntimeError):
                runtime.call("w", "write_file", PAY, write)
            with pytest.raises(RuntimeError):
                runtime.call("t", "ui_tap", PAY, lambda *a: (_ for _ in ()).throw(RuntimeError()))
        with open_runtime(journal_path) as runtime:
            runtime.recover(write)
            runtime.call("t.redo", "ui_tap", PAY, write, redo_of="t")
            runtime.resolve("t", Resolution.REDONE, redo_op="t.redo")
        by_op: dict[str, set[str]] = {}
        for op_id, _, key in tool.keys:
            by_op.setdefault(op_id, set()).add(key)
        assert len(by_op["w"]) == 1 and [a for o, a, _ in tool.keys if o == "w"] == [1, 2, 3]
        with JournalWriter(journal_path) as writer:
            first_tap = CallContext("t", "ui_tap", 1, 1, journal_id=writer.journal_id)
        assert by_op["t.redo"] == {first_tap.idempotency_key}

    def test_a_journal_made_before_identities_gets_one_and_keeps_it(
        self, journal_path: Path
    ) -> None:
        """A format-1 journal without an identity is given one, durably, at its first open;
        the next open finds the same one, so keys never change again."""
        journal_path.write_bytes(FILE_HEADER + encode_frame(IncarnationRecord(1, 7)))
        with JournalWriter(journal_path) as first:
            given = first.journal_id
        with JournalWriter(journal_path) as second:
            assert second.journal_id == given
            assert [type(s.record) for s in second.scan.records] == [IncarnationRecord]


def _frame(payload: bytes, *, version: int) -> bytes:
    import struct
    import zlib

    body = struct.pack(">BI", version, len(payload)) + payload
    return b"HJ" + body[:5] + struct.pack(">I", zlib.crc32(body)) + payload


class TestVersions:
    @pytest.mark.parametrize("version", [2, 255])
    def test_a_frame_of_a_newer_version_is_refused_and_the_file_left_as_it_is(
        self, journal_path: Path, version: int
    ) -> None:
        """A whole frame of an unknown version after older frames is refused, naming the
        file, its offset and its version; it is never cut as a torn tail."""
        with open_runtime(journal_path) as runtime:
            runtime.call("op-1", "alarm", PAY, CountingTool())
        offset = journal_path.stat().st_size
        with journal_path.open("ab") as out:
            out.write(_frame(b'{"kind":"intent","op_id":"op-2"}', version=version))
        before = journal_path.read_bytes()
        with pytest.raises(JournalVersionError) as refused:
            open_runtime(journal_path)
        message = str(refused.value)
        assert str(journal_path) in message and f"byte {offset}" in message
        assert f"format {version}" in message
        assert journal_path.read_bytes() == before

    def test_a_record_kind_this_version_does_not_know_is_refused(self, journal_path: Path) -> None:
        """A checksummed record of a kind this runtime does not know: refused, not corrupt."""
        with open_runtime(journal_path):
            pass
        with journal_path.open("ab") as out:
            out.write(_frame(b'{"kind":"rollup","ops":{}}', version=1))
        before = journal_path.read_bytes()
        with pytest.raises(JournalVersionError, match="record kind 'rollup'"):
            JournalWriter(journal_path)
        assert journal_path.read_bytes() == before

    def test_a_header_of_a_newer_version_is_refused(self, journal_path: Path) -> None:
        journal_path.write_bytes(b"%HJOURNAL 2\n" + b"anything")
        with pytest.raises(JournalVersionError, match="journal header of format 2"):
            JournalWriter(journal_path)
        assert journal_path.read_bytes() == b"%HJOURNAL 2\nanything"

    def test_a_damaged_frame_with_a_strange_version_is_still_a_torn_tail(
        self, journal_path: Path
    ) -> None:
        """A version byte flipped by damage breaks the checksum: a torn tail, cut as before."""
        with open_runtime(journal_path):
            pass
        good = journal_path.read_bytes()
        frame = bytearray(_frame(b'{"kind":"incarnation","incarnation":9,"pid":1}', version=1))
        frame[2] = 7  # the version byte, after the CRC was computed
        journal_path.write_bytes(good + bytes(frame))
        with JournalWriter(journal_path) as writer:
            assert writer.scan.torn is not None and writer.scan.torn.offset == len(good)


class TestNoSilentTable:
    def test_without_a_table_every_tool_is_unknown(self, journal_path: Path) -> None:
        """A service's own tool named like a shipped one gets no class nobody declared: left
        RUNNING by a crash, it is verified, never retried."""

        def crash(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            raise RuntimeError("crash")

        with Runtime.open(journal_path) as runtime:
            assert runtime.table.classify("write_file").idempotency is IdempotencyClass.UNKNOWN
            with pytest.raises(RuntimeError):
                runtime.call("op-1", "write_file", PAY, crash)
        with Runtime.open(journal_path) as runtime:
            (decision,) = runtime.plan()
        assert decision.decision is Decision.VERIFY

    def test_the_shipped_table_is_there_by_name(self) -> None:
        shipped = ToolTable.shipped()
        assert shipped.classify("write_file").idempotency is IdempotencyClass.IDEMPOTENT_WRITE


class TestLimits:
    def test_a_result_too_large_for_a_frame_is_journaled_as_digest_and_size(
        self, journal_path: Path
    ) -> None:
        """The call succeeded: its op is SUCCEEDED, answered with the stand-in ever after."""
        big = "x" * (JSON_LIMIT + 10)

        def huge(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            return big

        with open_runtime(journal_path) as runtime:
            outcome = runtime.call("op-1", "read_file", {"path": "/big"}, huge)
        assert outcome.status == "ok"
        assert outcome.result == {TOO_LARGE: len(big) + 2, "digest": digest(big)}
        with open_runtime(journal_path) as runtime:
            assert runtime.call("op-1", "read_file", {"path": "/big"}, huge) == outcome.__class__(
                "op-1", "ok", result=outcome.result
            )

    def test_arguments_too_large_are_refused_before_anything(self, journal_path: Path) -> None:
        tool = CountingTool()
        with (
            open_runtime(journal_path) as runtime,
            pytest.raises(ValueError, match="exceed the journal's limit"),
        ):
            runtime.call("op-1", "write_file", {"content": "x" * JSON_LIMIT}, tool)
        assert tool.runs == Counter()
        assert not any(isinstance(r, IntentRecord) for r in journal_records(journal_path))

    def test_a_new_journal_is_readable_by_its_owner_only(self, journal_path: Path) -> None:
        with open_runtime(journal_path):
            pass
        assert stat.S_IMODE(journal_path.stat().st_mode) == 0o600

    def test_an_unsupported_platform_is_refused_in_one_line(
        self, journal_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(sys, "platform", "win32")
        with pytest.raises(JournalError, match="Linux and macOS only, not win32") as refused:
            JournalWriter(journal_path)
        assert "\n" not in str(refused.value)
        assert not journal_path.exists()

    def test_three_hundred_async_runtimes_share_a_bounded_pool_of_writers(
        self, tmp_path: Path
    ) -> None:
        """300 open AsyncRuntimes, each having written: at most WRITER_THREADS more threads."""
        before = threading.active_count()

        async def main() -> int:
            runtimes = [
                AsyncRuntime(open_runtime(tmp_path / f"{n}.journal"), owned=True)
                for n in range(300)
            ]
            try:
                await asyncio.gather(
                    *(r.call("op", "logcat", {}, CountingTool()) for r in runtimes)
                )
                return threading.active_count()
            finally:
                for runtime in runtimes:
                    await runtime.aclose()

        during = asyncio.run(main())
        assert during - before <= WRITER_THREADS


class TestObservability:
    def test_the_log_says_what_recovery_did(
        self, journal_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A torn tail cut (warning), each decision and each VERIFY hint handed over (info)."""
        with open_runtime(journal_path) as runtime, pytest.raises(RuntimeError):
            runtime.call("op-1", "ui_tap", PAY, lambda *a: (_ for _ in ()).throw(RuntimeError()))
        with journal_path.open("ab") as out:
            out.write(b"HJ\x01\x00")  # a torn write
        with (
            caplog.at_level(logging.INFO, logger="harness.runtime"),
            open_runtime(journal_path) as runtime,
        ):
            runtime.recover(CountingTool())
        messages = [(r.levelname, r.getMessage()) for r in caplog.records]
        assert any(level == "WARNING" and "torn tail" in m for level, m in messages)
        assert ("INFO", "op-1 (ui_tap) left running: verify") in messages
        assert ("INFO", "op-1 (ui_tap): VERIFY hint handed to the model") in messages

    def test_a_failed_append_is_logged_as_an_error(
        self,
        journal_path: Path,
        armed: Callable[[str], None],
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        with open_runtime(journal_path) as runtime:
            armed("journal.append=enospc")
            with pytest.raises(JournalWriteError):
                runtime.call("op-1", "alarm", PAY, CountingTool())
        (error,) = [r for r in caplog.records if r.levelname == "ERROR"]
        assert "takes no more appends" in error.getMessage()

    def test_a_listener_sees_every_write_and_fsync(self, journal_path: Path) -> None:
        """Each write (its records and span) and each fsync (its duration), in order."""
        events: list[JournalEvent] = []
        with Runtime.open(
            journal_path, table=ToolTable.shipped(), listener=events.append
        ) as runtime:
            runtime.recover(CountingTool())
            runtime.call("op-1", "alarm", PAY, CountingTool())
        writes = [e for e in events if isinstance(e, Appended)]
        syncs = [e for e in events if isinstance(e, Synced)]
        kinds = [r.kind for w in writes for r in w.records]
        assert kinds == ["incarnation", "recovered", "intent", "finish"]
        assert all(w.synced for w in writes) and len(syncs) == len(writes)  # one thread
        assert all(s.seconds >= 0 for s in syncs)
        assert all(any(s.end >= w.end for s in syncs) for w in writes)
        assert syncs[-1].end == journal_path.stat().st_size
        assert [w.offset for w in writes[1:]] == [w.end for w in writes[:-1]]

    def test_a_listener_that_raises_never_fails_the_journal(
        self, journal_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        def broken(event: JournalEvent) -> None:
            raise ValueError("metrics backend down")

        with Runtime.open(journal_path, table=ToolTable.shipped(), listener=broken) as runtime:
            assert runtime.call("op-1", "alarm", PAY, CountingTool()).status == "ok"
        assert any("metrics backend down" in r.getMessage() for r in caplog.records)
