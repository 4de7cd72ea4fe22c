"""Batches on threads (``harness.agent.threads``) on one shared ``Runtime``, and the two
broken runtimes only threads expose (``no-op-lock``, ``stale-offset-truncate``)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.agent.broken import NoOpLock, StaleOffsetTruncate
from harness.agent.plan import PlanStep
from harness.agent.threads import run_batch_threads
from harness.failpoints import arm, disarm, parse_failpoints
from harness.runtime import CallContext, JournalWriteError, Runtime, ToolTable
from harness.runtime.hooks import set_crash_hook
from harness.runtime.journal import scan_journal
from harness.runtime.records import IntentRecord
from tests.conftest import FakeTool, subprocess_env

TABLE = ToolTable.shipped()
# One batch of three classes: a non-idempotent typed text, an idempotent install, a read.
BATCH = (
    ("b1a", PlanStep(1, "b1a", "input_text", {"field": "f", "text": "t"}, batch=1)),
    ("b1b", PlanStep(1, "b1b", "app_install", {"package": "p"}, batch=1)),
    ("b1c", PlanStep(1, "b1c", "logcat", {"tag": "x"}, batch=1)),
    ("b1d", PlanStep(1, "b1d", "alarm", {"time": "07:00", "label": "l"}, batch=1)),
)


def _twice(calls: tuple[tuple[str, PlanStep], ...]) -> list[tuple[str, PlanStep]]:
    """The calls with every writing one delivered twice (as the compiler marks them)."""
    return [
        (op_id, PlanStep(s.index, s.op_id, s.tool, s.args, s.verify, s.batch, s.tool != "logcat"))
        for op_id, s in calls
    ]


class Told:
    """The model's words to the supervisor, in order, from any thread."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __call__(
        self, what: str, op_id: str, result: object = None, answered_by: str | None = None, /
    ) -> None:
        with self._lock:
            self.lines.append((what, op_id))


class SlowTool(FakeTool):
    """A fake tool that takes a while, so that other threads act while it runs."""

    def __init__(self, seconds: float = 0.02) -> None:
        super().__init__()
        self.seconds = seconds

    def __call__(self, tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        time.sleep(self.seconds)
        return super().__call__(tool, args, ctx)


@pytest.fixture
def hits() -> Iterator[list[tuple[str, str]]]:
    """Every crash point the runtime hits, with its op, in order."""
    seen: list[tuple[str, str]] = []
    set_crash_hook(lambda name, detail: seen.append((name, detail)))
    yield seen
    set_crash_hook(None)


class TestThreadedDriver:
    """Each call of a batch on its own thread, in plan order, on the life's Runtime."""

    def test_each_intent_is_durable_before_its_own_tool_runs(self, tmp_path: Path) -> None:
        """When a call's tool starts, the journal file holds that call's intent."""
        path = tmp_path / "journal"
        seen: dict[str, bool] = {}

        def look(ctx: CallContext) -> None:
            intents = {
                s.record.op_id
                for s in scan_journal(path).records
                if isinstance(s.record, IntentRecord)
            }
            seen[ctx.op_id] = ctx.op_id in intents

        with Runtime.open(path, table=TABLE) as runtime:
            outcomes = run_batch_threads(runtime, BATCH, FakeTool(on_call=look), Told())
        assert seen == {op_id: True for op_id, _ in BATCH}
        assert [o.status for o in outcomes] == ["ok"] * 4

    def test_the_intents_come_in_plan_order_in_every_run(
        self, tmp_path: Path, hits: list[tuple[str, str]]
    ) -> None:
        """Three runs hit ``op.after_intent`` at the same calls in the same order: a kill
        at its N-th hit lands at the same call in a trial as in the crash-free run."""
        orders = []
        for run in range(3):
            hits.clear()
            with Runtime.open(tmp_path / f"journal{run}", table=TABLE) as runtime:
                run_batch_threads(runtime, BATCH, SlowTool(0.005), Told())
            orders.append([op for name, op in hits if name == "op.after_intent"])
        assert orders == [[op_id for op_id, _ in BATCH]] * 3

    def test_every_call_is_told_once_invoke_first(self, tmp_path: Path) -> None:
        """Each op is told ``invoke`` (in plan order) and then its outcome, once."""
        told = Told()
        with Runtime.open(tmp_path / "journal", table=TABLE) as runtime:
            run_batch_threads(runtime, BATCH, SlowTool(), told)
        invokes = [op for what, op in told.lines if what == "invoke"]
        assert invokes == [op_id for op_id, _ in BATCH]
        for op_id, _ in BATCH:
            said = [what for what, op in told.lines if op == op_id]
            assert said == ["invoke", "ack"]

    def test_a_failed_append_is_raised_once_every_call_is_back(self, tmp_path: Path) -> None:
        """A full disk at the third append stops the batch with JournalWriteError; the last
        call, whose intent would be the fourth append at the earliest, never runs."""
        tool = FakeTool()
        with Runtime.open(tmp_path / "journal", table=TABLE) as runtime:
            arm(parse_failpoints("journal.append@3=enospc", source="test"))
            try:
                with pytest.raises(JournalWriteError):
                    run_batch_threads(runtime, BATCH, tool, Told())
            finally:
                disarm()
        assert tool.count("b1d") == 0


class TestDuplicateDelivery:
    """A call delivered twice at once, under one op id, runs its tool once."""

    def test_a_non_idempotent_tool_runs_once(self, tmp_path: Path) -> None:
        """Both deliveries of every writing call come back ok; each tool ran once; each op is
        told once."""
        tool, told = SlowTool(), Told()
        with Runtime.open(tmp_path / "journal", table=TABLE) as runtime:
            outcomes = run_batch_threads(runtime, _twice(BATCH), tool, told)
        assert tool.counts() == {"b1a": 1, "b1b": 1, "b1c": 1, "b1d": 1}
        assert [o.status for o in outcomes] == ["ok"] * 4
        assert sorted(told.lines) == sorted(
            [*(("invoke", op) for op, _ in BATCH), *(("ack", op) for op, _ in BATCH)]
        )

    def test_without_the_per_op_turn_a_safe_op_runs_twice(self, tmp_path: Path) -> None:
        """``no-op-lock``: the idempotent install is run again by its second delivery while
        the first is in flight; an unsafe call is run again only by a duplicate that came
        while the first's intent was being made durable (else it is answered at once)."""
        tool = SlowTool(0.05)
        with NoOpLock.open(tmp_path / "journal", table=TABLE) as runtime:
            run_batch_threads(runtime, _twice(BATCH), tool, Told())
        assert tool.count("b1b") == 2
        assert tool.count("b1a") in (1, 2) and tool.count("b1d") in (1, 2)


class TestStaleOffsetTruncate:
    """The broken writer cuts other threads' durable records after a failed append."""

    def test_one_thread_loses_nothing(self, tmp_path: Path) -> None:
        """Alone, the offset it last saw is where the failed append began: nothing is cut."""
        path = tmp_path / "journal"
        with StaleOffsetTruncate.open(path, table=TABLE) as runtime:
            runtime.call("a", "app_install", {"package": "p"}, FakeTool())
            before = path.read_bytes()
            arm(parse_failpoints("journal.append@1=enospc", source="test"))
            try:
                with pytest.raises(JournalWriteError):
                    runtime.call("b", "app_install", {"package": "q"}, FakeTool())
            finally:
                disarm()
        assert path.read_bytes() == before

    def test_another_threads_intent_is_cut(self, tmp_path: Path) -> None:
        """A thread appends, another appends an intent, the first fails: the intent is gone
        though the other thread went on to run its tool."""
        path = tmp_path / "journal"
        with StaleOffsetTruncate.open(path, table=TABLE) as runtime:
            journal = runtime.journal
            first = IntentRecord("a", "app_install", TABLE.classify("app_install"), {}, "", 1, 1)
            journal.append(first)  # the main thread's last end is after this record

            def other() -> None:
                journal.append(IntentRecord("b", "alarm", TABLE.classify("alarm"), {}, "", 1, 1))

            worker = threading.Thread(target=other)
            worker.start()
            worker.join()
            arm(parse_failpoints("journal.append@1=enospc", source="test"))
            try:
                with pytest.raises(JournalWriteError):
                    journal.append(first)
            finally:
                disarm()
        records = [s.record for s in scan_journal(path).records]
        ops = [r.op_id for r in records if isinstance(r, IntentRecord)]
        assert ops == ["a"]


class TestImports:
    """The agent pays for threads only when a plan runs its batches on them."""

    def test_no_threading_without_it_and_no_asyncio_with_it(self, tmp_path: Path) -> None:
        """The agent's modules import neither threading nor asyncio; a threaded batch brings
        in threading but never asyncio."""
        code = (
            "import sys\n"
            "import harness.agent.__main__\n"
            "assert not {'threading', 'asyncio'} & set(sys.modules), 'at start-up'\n"
            "from harness.agent.plan import PlanStep\n"
            "from harness.agent.threads import run_batch_threads\n"
            "from harness.runtime import Runtime, ToolTable\n"
            "steps = [(o, PlanStep(1, o, 'logcat', {'tag': 't'}, batch=1)) for o in 'ab']\n"
            f"with Runtime.open({str(tmp_path / 'journal')!r}, table=ToolTable.shipped()) as r:\n"
            "    run_batch_threads(r, steps, lambda t, a, c: {}, lambda *told: None)\n"
            "assert 'threading' in sys.modules and 'asyncio' not in sys.modules\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env()
        )
        assert done.returncode == 0, done.stderr
