"""The runtime used as a service would misuse it: no misuse may turn into a wrong decision.

Each class holds one edge of the contract (docs/runtime.md, "Misuse and shutdown"):
recovery while calls run, an async tool on the sync API, a reconciler whose lookup
lags, a failed group write, an op id reused with other content, both APIs at once,
calls before recovery, and closing with calls in flight. The tests catch only the
base classes a caller of an older runtime would have caught, so that each one fails
on a runtime without the mend rather than on a missing name.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.runtime import (
    AsyncRuntime,
    CallContext,
    HarnessError,
    IdempotencyClass,
    JournalError,
    Reconciled,
    Runtime,
    ToolClass,
    ToolTable,
    TransientToolError,
)
from harness.runtime.journal import scan_journal
from harness.runtime.records import HintRecord, IntentRecord
from tests.conftest import FakeTool

TABLE = ToolTable(
    {
        "put": ToolClass(IdempotencyClass.IDEMPOTENT_WRITE),
        "charge": ToolClass(IdempotencyClass.NON_IDEMPOTENT),
        "send": ToolClass(IdempotencyClass.NON_IDEMPOTENT),
    }
)


def _intents(path: Path) -> list[IntentRecord]:
    return [s.record for s in scan_journal(path).records if isinstance(s.record, IntentRecord)]


def _hinted(path: Path) -> set[str]:
    return {s.record.op_id for s in scan_journal(path).records if isinstance(s.record, HintRecord)}


class TestAsyncRecoverWhileCallsRun:
    def test_recover_is_refused_while_calls_are_in_flight(self, tmp_path: Path) -> None:
        """recover() during calls decides nothing: no hint for a charge still running, no
        second run of a put beside itself."""
        path = tmp_path / "journal"
        runs: Counter[str] = Counter()

        async def main() -> list[Any]:
            release = asyncio.Event()

            async def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
                await release.wait()
                runs[ctx.op_id] += 1
                return {"done": ctx.op_id}

            async with AsyncRuntime(Runtime.open(path, table=TABLE), owned=True) as runtime:
                await runtime.recover(tool)
                calls = [
                    asyncio.create_task(runtime.call("c1", "charge", {"cents": 5}, tool)),
                    asyncio.create_task(runtime.call("p1", "put", {"key": "a"}, tool)),
                ]
                await asyncio.sleep(0.05)  # both calls are inside their tools
                with pytest.raises(RuntimeError, match="in flight"):
                    await runtime.recover(tool)
                release.set()
                return [outcome.status for outcome in await asyncio.gather(*calls)]

        assert asyncio.run(main()) == ["ok", "ok"]
        assert runs == {"c1": 1, "p1": 1}
        assert _hinted(path) == set()

    def test_a_call_made_while_recover_runs_waits_for_it(self, tmp_path: Path) -> None:
        """A call issued while recovery retries an op waits, then is answered from the
        journal: the op runs once."""
        path = tmp_path / "journal"
        tool = FakeTool({"p1": [RuntimeError("lost")]})
        with Runtime.open(path, table=TABLE) as rt, pytest.raises(RuntimeError):
            rt.call("p1", "put", {"key": "a"}, tool)  # left open: retried at the next start
        retrying = threading.Event()

        async def slow(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            retrying.set()
            await asyncio.sleep(0.05)
            return tool(name, args, ctx)

        async def main() -> str:
            async with AsyncRuntime(Runtime.open(path, table=TABLE), owned=True) as runtime:
                recovering = asyncio.create_task(runtime.recover(slow))
                while not retrying.is_set():
                    await asyncio.sleep(0)
                outcome = await runtime.call("p1", "put", {"key": "a"}, slow)
                await recovering
                return outcome.status

        assert asyncio.run(main()) == "ok"
        assert tool.count("p1") == 2  # the run that raised, and recovery's retry


class TestAsyncToolOnTheSyncApi:
    def test_an_async_tool_is_refused_before_anything_is_journaled(self, tmp_path: Path) -> None:
        """An ``async def`` tool handed to Runtime.call is refused: never journaled as a
        success whose result is a coroutine, so a restart still runs the op."""
        path = tmp_path / "journal"

        async def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            return {"paid": True}

        with Runtime.open(path, table=TABLE) as rt, pytest.raises(TypeError, match="async"):
            rt.call("s1", "put", {"key": "a"}, tool)
        assert _intents(path) == []
        with Runtime.open(path, table=TABLE) as rt:
            rt.recover(FakeTool())
            assert rt.call("s1", "put", {"key": "a"}, FakeTool()).executed

    def test_a_tool_that_returns_an_awaitable_leaves_the_outcome_unknown(
        self, tmp_path: Path
    ) -> None:
        """A plain function that returns a coroutine is not a success: the call raises, the
        op stays open, and the next start hands it on by its class."""
        path = tmp_path / "journal"

        async def pay() -> dict[str, bool]:
            return {"paid": True}

        def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            return pay()

        with Runtime.open(path, table=TABLE) as rt, pytest.raises(TypeError, match="awaitable"):
            rt.call("c1", "charge", {"cents": 5}, tool)
        with Runtime.open(path, table=TABLE) as rt:
            report = rt.recover(FakeTool())
        assert [(d.op_id, d.decision.value) for d in report.decisions] == [("c1", "verify")]


class TestReconcilerThatLags:
    @staticmethod
    def _lost(runs: list[float]) -> Any:
        def send(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            runs.append(time.monotonic())
            raise TransientToolError("the reply was lost")

        return send

    def test_absent_answers_with_lost_replies_make_a_bounded_chain(self, tmp_path: Path) -> None:
        """A reconciler that keeps answering ABSENT while every reply is lost makes at most
        ``reconcile_redoes`` redoes: one call of an unkeyed unsafe tool, not nine runs."""
        runs: list[float] = []
        reconcilers = {"send": lambda args, ctx: Reconciled.ABSENT}
        with Runtime.open(tmp_path / "journal", table=TABLE, reconcilers=reconcilers) as rt:
            outcome = rt.call("send-1", "send", {"to": "x"}, self._lost(runs))
        assert len(runs) == 3  # the call and its two redoes
        assert outcome.status == "info"

    def test_a_lookup_that_lags_the_effect_is_asked_after_the_backoff(self, tmp_path: Path) -> None:
        """A lookup that sees an effect only 50 ms after it is made is asked after the
        backoff (0.2 s by default): it finds the effect, and the call is not redone."""
        runs: list[float] = []

        def lookup(args: Mapping[str, Any], ctx: CallContext) -> Reconciled:
            seen = runs and time.monotonic() - runs[0] >= 0.05
            return Reconciled.PRESENT if seen else Reconciled.ABSENT

        with Runtime.open(
            tmp_path / "journal",
            table=TABLE,
            reconcilers={"send": lookup},
        ) as rt:
            outcome = rt.call("send-1", "send", {"to": "x"}, self._lost(runs))
        assert len(runs) == 1
        assert outcome.status == "ok"

    def test_a_hanging_reconciler_holds_neither_the_lock_nor_other_threads(
        self, tmp_path: Path
    ) -> None:
        """While a reconciler hangs on a lost reply, another thread's call is answered."""
        asked, hang = threading.Event(), threading.Event()
        done: list[str] = []

        def lookup(args: Mapping[str, Any], ctx: CallContext) -> Reconciled:
            asked.set()
            hang.wait(10)
            return Reconciled.UNKNOWN

        with Runtime.open(
            tmp_path / "journal", table=TABLE, reconcilers={"send": lookup}, reconcile_timeout=20
        ) as rt:
            hanging = threading.Thread(
                target=rt.call, args=("send-1", "send", {"to": "x"}, self._lost([]))
            )
            hanging.start()
            asked.wait(10)
            worker = threading.Thread(
                target=lambda: done.append(rt.call("p1", "put", {"key": "a"}, FakeTool()).status)
            )
            worker.start()
            worker.join(5)
            answered_while_hanging = list(done)
            hang.set()
            hanging.join()
            worker.join()
        assert answered_while_hanging == ["ok"]

    def test_a_start_asks_every_reconciler_at_once(self, tmp_path: Path) -> None:
        """Twenty ops left open: their reconcilers are asked together (each waits for all
        twenty to be asked), not one after another."""
        path = tmp_path / "journal"
        with Runtime.open(path, table=TABLE) as rt:
            for n in range(20):
                with pytest.raises(RuntimeError):
                    rt.call(f"c{n}", "charge", {"n": n}, FakeTool({f"c{n}": [RuntimeError()]}))
        everyone = threading.Barrier(20, timeout=5)

        def together(args: Mapping[str, Any], ctx: CallContext) -> Reconciled:
            everyone.wait()  # breaks (an answer of UNKNOWN) unless all twenty are asked
            return Reconciled.PRESENT

        with Runtime.open(path, table=TABLE, reconcilers={"charge": together}) as rt:
            report = rt.recover(FakeTool())
        assert report.hints == ()
        assert all(rt.outcome_of(f"c{n}").ok for n in range(20))


FULL_DISK_CHILD = textwrap.dedent(
    """
    import asyncio, json, resource, signal, sys
    from harness.runtime import AsyncRuntime, JournalWriteError, Runtime, ToolTable
    from harness.runtime import IdempotencyClass, ToolClass

    table = ToolTable({
        "put": ToolClass(IdempotencyClass.IDEMPOTENT_WRITE),
        "charge": ToolClass(IdempotencyClass.NON_IDEMPOTENT),
    })
    path = sys.argv[1]

    async def tool(name, args, ctx):
        return {"done": ctx.op_id}

    async def main():
        told = {}
        async with AsyncRuntime(Runtime.open(path, table=table), owned=True) as runtime:
            await runtime.recover(tool)
            await runtime.call("warm", "put", {"n": -1}, tool)
            size = runtime.runtime.journal.size
            # The file may grow by about two and a half intents: the group's write is cut.
            intent = len(json.dumps({"n": 10, "pad": "x" * 200})) + 160
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (size + intent * 5 // 2, -1))

            async def one(n):
                tool_name = "put" if n % 2 else "charge"
                try:
                    await runtime.call(f"op{n}", tool_name, {"n": n, "pad": "x" * 200}, tool)
                    told[f"op{n}"] = "ok"
                except JournalWriteError as exc:
                    unknown = getattr(exc, "outcome_unknown", None)
                    told[f"op{n}"] = "unknown" if unknown else "failed"

            await asyncio.gather(*(one(n) for n in range(10)))
        print(json.dumps(told))

    asyncio.run(main())
    """
)


class TestFullDiskInAGroupWrite:
    def test_a_caller_told_failed_never_sees_its_op_run(self, tmp_path: Path) -> None:
        """A group write cut by a full file: each caller is told 'unknown' if its intent may
        be on disk, else 'failed'; no op told 'failed' is ever run by a later start."""
        path = tmp_path / "journal"
        child = subprocess.run(
            [sys.executable, "-c", FULL_DISK_CHILD, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        told: dict[str, str] = json.loads(child.stdout)
        assert set(told.values()) <= {"unknown", "failed"}
        journaled = {i.op_id for i in _intents(path)} - {"warm"}
        assert journaled, "no intent frame was written whole: the cut came too early"
        runs = FakeTool()
        with Runtime.open(path, table=TABLE) as rt:
            report = rt.recover(runs)
            later = {d.op_id for d in report.decisions if d.decision.value != "skip"}
        for op_id in later | set(runs.counts()):
            assert told[op_id] == "unknown", f"{op_id} was told {told[op_id]} and then acted on"
        assert {op for op, said in told.items() if said == "failed"}.isdisjoint(journaled)


class TestOpIdReusedWithOtherContent:
    @pytest.mark.parametrize(
        ("tool", "args"), [("charge", {"x": 999}), ("put", {"x": 2})], ids=["tool", "args"]
    )
    def test_reuse_is_refused_naming_both_digests(
        self, tmp_path: Path, tool: str, args: dict[str, int]
    ) -> None:
        """``a4`` called as put(x=1), then as another call: refused, never answered with
        the put's result, and nothing else runs."""
        runs = FakeTool()
        with Runtime.open(tmp_path / "journal", table=TABLE) as rt:
            first = rt.call("a4", "put", {"x": 1}, runs)
            assert first.ok
            with pytest.raises(HarnessError, match="a4") as refused:
                rt.call("a4", tool, args, runs)
        assert "digest" in str(refused.value)
        assert runs.count("a4") == 1
        assert len(_intents(tmp_path / "journal")) == 1

    def test_reuse_is_refused_after_a_restart_and_a_compaction(self, tmp_path: Path) -> None:
        """The settled op read from a compacted journal is held to its content as well."""
        path = tmp_path / "journal"
        with Runtime.open(path, table=TABLE) as rt:
            rt.call("a4", "put", {"x": 1}, FakeTool())
            rt.compact()
        with Runtime.open(path, table=TABLE) as rt:
            rt.recover(FakeTool())
            assert rt.call("a4", "put", {"x": 1}, FakeTool()).ok  # the same call: answered
            with pytest.raises(HarnessError, match="digest"):
                rt.call("a4", "put", {"x": 3}, FakeTool())


class TestOneApiAtATime:
    def test_the_sync_api_is_refused_while_an_async_runtime_drives(self, tmp_path: Path) -> None:
        """While an AsyncRuntime holds a runtime, a sync call is refused: one put never runs
        twice at once, and an async caller never gets a bare info for a success."""
        runs = FakeTool()

        async def main() -> None:
            runtime = Runtime.open(tmp_path / "journal", table=TABLE)
            async with AsyncRuntime(runtime, owned=True) as aio:
                await aio.recover(runs)
                with pytest.raises(RuntimeError, match="one API"):
                    runtime.call("p1", "put", {"key": "a"}, runs)
                assert (await aio.call("p1", "put", {"key": "a"}, runs)).ok
            assert runs.count("p1") == 1

        asyncio.run(main())

    def test_an_async_runtime_is_refused_over_sync_calls_in_flight(self, tmp_path: Path) -> None:
        """A sync call in another thread still running: no AsyncRuntime may take over."""
        inside, release = threading.Event(), threading.Event()

        def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            inside.set()
            release.wait(5)
            return {}

        with Runtime.open(tmp_path / "journal", table=TABLE) as rt:
            caller = threading.Thread(target=rt.call, args=("p1", "put", {}, tool))
            caller.start()
            inside.wait(5)
            try:
                with pytest.raises(RuntimeError, match="one API"):
                    AsyncRuntime(rt)
            finally:
                release.set()
                caller.join()
            AsyncRuntime(rt)  # once the call is done, it may


class TestBeforeRecover:
    def test_an_op_left_open_is_not_answered_before_recover(self, tmp_path: Path) -> None:
        """Without recover(), a call of an op an earlier life left open is refused (never a
        bare info without a hint), and so is deliver_hints(); after it, the hint comes."""
        path = tmp_path / "journal"
        with Runtime.open(path, table=TABLE) as rt, pytest.raises(RuntimeError):
            rt.call("c1", "charge", {}, FakeTool({"c1": [RuntimeError("crash")]}))
        with Runtime.open(path, table=TABLE) as rt:
            with pytest.raises(RuntimeError, match="recover"):
                rt.call("c1", "charge", {}, FakeTool())
            with pytest.raises(RuntimeError, match="recover"):
                rt.deliver_hints()
            with pytest.raises(ValueError, match="recover"):
                rt.retire()
            assert rt.call("new", "put", {}, FakeTool()).ok  # other ops are not held up
            rt.recover(FakeTool())
            outcome = rt.call("c1", "charge", {}, FakeTool())
        assert outcome.status == "info" and outcome.hint is not None


class TestClose:
    def test_aclose_waits_for_the_calls_in_flight(self, tmp_path: Path) -> None:
        """aclose() with twenty calls in flight drains them: each caller gets its outcome."""

        async def main() -> list[str]:
            async def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
                await asyncio.sleep(0.05)
                return {"n": args["n"]}

            runtime = await AsyncRuntime.open(tmp_path / "journal", table=TABLE)
            await runtime.recover(tool)
            calls = [
                asyncio.create_task(runtime.call(f"p{n}", "put", {"n": n}, tool)) for n in range(20)
            ]
            await asyncio.sleep(0.01)
            await runtime.aclose()
            with pytest.raises(RuntimeError, match="aclose"):
                await runtime.call("late", "put", {"n": -1}, tool)
            return [outcome.status for outcome in await asyncio.gather(*calls)]

        assert asyncio.run(main()) == ["ok"] * 20

    def test_a_call_outliving_the_close_is_told_its_outcome_is_unknown(
        self, tmp_path: Path
    ) -> None:
        """Past the close's timeout a call in flight ends with a journal error that says
        its outcome is unknown, and the next start decides its op by its class."""
        path = tmp_path / "journal"

        async def main() -> BaseException | None:
            release = asyncio.Event()

            async def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
                await release.wait()
                return {}

            runtime = await AsyncRuntime.open(path, table=TABLE)
            await runtime.recover(tool)
            call = asyncio.create_task(runtime.call("c1", "charge", {}, tool))
            await asyncio.sleep(0.01)
            await runtime.aclose(timeout=0.05)
            release.set()
            try:
                await call
            except JournalError as exc:
                return exc
            return None

        error = asyncio.run(main())
        assert isinstance(error, JournalError) and "unknown" in str(error)
        with Runtime.open(path, table=TABLE) as rt:
            report = rt.recover(FakeTool())
        assert [(d.op_id, d.decision.value) for d in report.decisions] == [("c1", "verify")]

    def test_close_waits_for_a_thread_in_its_tool(self, tmp_path: Path) -> None:
        """The sync close() lets a call under way in another thread finish first."""
        inside = threading.Event()
        outcomes: list[str] = []

        def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            inside.set()
            time.sleep(0.05)
            return {}

        rt = Runtime.open(tmp_path / "journal", table=TABLE)
        caller = threading.Thread(
            target=lambda: outcomes.append(rt.call("p1", "put", {}, tool).status)
        )
        caller.start()
        inside.wait(5)
        rt.close()
        caller.join()
        assert outcomes == ["ok"]


class TestSmallerEdges:
    def test_bad_arguments_are_refused_before_anything_runs(self, tmp_path: Path) -> None:
        """A list as arguments, a table of names, a negative timeout, a redo of an unknown
        op: each refused with its reason."""
        with pytest.raises(HarnessError, match="'x'"):
            ToolTable({"x": "read_only"})  # type: ignore[dict-item]
        with pytest.raises(ValueError, match="reconcile_timeout"):
            Runtime.open(tmp_path / "journal", reconcile_timeout=-1)
        with Runtime.open(tmp_path / "journal", table=TABLE) as rt:
            with pytest.raises(TypeError, match="mapping"):
                rt.call("s1", "put", [1, 2], FakeTool())  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="redo_of"):
                rt.call("s2", "put", {}, FakeTool(), redo_of="nowhere")
        assert _intents(tmp_path / "journal") == []

    def test_max_attempts_counts_this_call_not_earlier_lives(self, tmp_path: Path) -> None:
        """A retry-safe op killed twice still gets its in-process retries at the third life."""
        path = tmp_path / "journal"
        with Runtime.open(path, table=TABLE) as rt, pytest.raises(RuntimeError):
            rt.call("p1", "put", {}, FakeTool({"p1": [RuntimeError("kill")]}))
        with Runtime.open(path, table=TABLE) as rt, pytest.raises(RuntimeError):
            rt.recover(FakeTool({"p1": [None, RuntimeError("kill")]}))  # attempt 2 dies too
        flaky = FakeTool({"p1": [None, None, TransientToolError("busy")]})
        with Runtime.open(path, table=TABLE, max_attempts=2) as rt:
            report = rt.recover(flaky)
        assert [o.status for o in report.retried] == ["ok"]

    def test_a_second_open_in_this_process_names_this_process(self, tmp_path: Path) -> None:
        """The lock's refusal says the holder is this very process, not another one."""
        with Runtime.open(tmp_path / "journal"), pytest.raises(JournalError, match="this process"):
            Runtime.open(tmp_path / "journal")


class TestBlockingToolsUnderTheLoop:
    @pytest.mark.parametrize("in_threads", [True, False], ids=["in-threads", "on-the-loop"])
    def test_tools_in_threads_keeps_the_loop_running(
        self, tmp_path: Path, in_threads: bool
    ) -> None:
        """With ``tools_in_threads`` a plain tool that blocks runs in a thread: the loop goes
        on (here it is what releases the tool); without it, the loop waits for the tool."""
        released = threading.Event()

        def blocking(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            return {"released": released.wait(2)}

        async def release_after_three_ticks() -> None:
            for _ in range(3):
                await asyncio.sleep(0.01)
            released.set()

        async def main() -> Any:
            runtime = await AsyncRuntime.open(
                tmp_path / "journal", table=TABLE, tools_in_threads=in_threads
            )
            async with runtime:
                await runtime.recover(blocking)
                ticker = asyncio.create_task(release_after_three_ticks())
                await asyncio.sleep(0)  # the ticker starts before the call blocks
                outcome = await runtime.call("p1", "put", {}, blocking)
                await ticker
                return outcome.result

        assert asyncio.run(main()) == {"released": in_threads}
