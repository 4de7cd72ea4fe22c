"""The journal's one face (``harness.runtime.store.Journal``): the runtime asks nothing else.

A journal kept in memory, written here against the face alone, carries the
runtime's calls, recovery and compaction; the core runtime imports no driver; a
PostgreSQL URL without psycopg installed is refused in one line naming the extra.
"""

from __future__ import annotations

import subprocess
import sys
import zlib
from collections.abc import Iterable
from pathlib import Path

from harness.runtime import Compaction, Decision, Runtime, ToolTable
from harness.runtime.errors import FailpointTriggered
from harness.runtime.hooks import set_crash_hook
from harness.runtime.journal import (
    CompactionBuild,
    IndexBuild,
    JournalScan,
    ScannedRecord,
    Written,
)
from harness.runtime.records import Record
from harness.runtime.store import Journal, is_database_url
from tests.conftest import NI, RO, FakeTool

TABLE = ToolTable({"read": RO, "pay": NI}, source="<test>")


class MemoryJournal:
    """Records in a list that outlives the runtimes opening it (as a store outlives a
    process): the face's contract and nothing more."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.journal_id = "0" * 32
        self.scan = JournalScan(
            tuple(ScannedRecord(i, i + 1, r) for i, r in enumerate(records)),
            len(records),
            None,
            self.journal_id,
        )
        self.size = len(records)
        self._deferred: list[Record] = []

    name = "memory"
    proven = True
    poisoned = False

    @property
    def synced_size(self) -> int:
        return len(self.records)

    def prove(self) -> None:
        pass

    def check_writable(self) -> None:
        pass

    def defer(self, records: Iterable[Record]) -> None:
        self._deferred.extend(records)

    def append(self, record: Record, *, sync: bool = True) -> int:
        return self.append_many((record,), sync=sync)

    def append_many(self, records: Iterable[Record], *, sync: bool = True) -> int:
        written = self.write(records, sync=sync)
        self.settle(written)
        return written.offset

    def write(self, records: Iterable[Record], *, sync: bool = True) -> Written:
        start = len(self.records) + len(self._deferred)
        self.records.extend([*self._deferred, *records])
        self._deferred.clear()
        self.size = len(self.records)
        return Written(start, len(self.records), False, 0)

    def settle(self, written: Written) -> None:
        pass

    def compact(self, build: CompactionBuild) -> int:
        crc = zlib.crc32(repr(self.records).encode())
        self.records[:] = build(list(self.records), len(self.records), crc)
        self.scan = JournalScan(
            tuple(ScannedRecord(i, i + 1, r) for i, r in enumerate(self.records)),
            len(self.records),
            None,
            self.journal_id,
        )
        self.size = len(self.records)
        return self.size

    def append_index(self, build: IndexBuild) -> bool:
        return False

    def remove(self) -> None:
        self.records.clear()

    def close(self) -> None:
        pass


class TestTheFace:
    def test_a_third_store_carries_calls_recovery_and_compaction(self) -> None:
        """Written against the face alone, a journal in memory recovers a crash as a file
        does: the success answered, the unsafe op left running verified, the safe one
        retried; compaction keeps every answer."""
        kept: list[Record] = []
        tool = FakeTool()
        store: Journal = MemoryJournal(kept)
        with Runtime.open(store, table=TABLE, compaction=Compaction.never()) as runtime:
            runtime.recover(tool)
            runtime.call("s1", "pay", {"n": 1}, tool)
            for op_id, name in (("s2", "pay"), ("s3", "read")):

                def crash(point: str, at: str, op_id: str = op_id) -> None:
                    if (point, at) == ("op.after_effect", op_id):
                        raise FailpointTriggered(point)

                set_crash_hook(crash)
                try:
                    runtime.call(op_id, name, {"n": op_id}, tool)
                except FailpointTriggered:
                    pass
                finally:
                    set_crash_hook(None)
        with Runtime.open(MemoryJournal(kept), table=TABLE) as runtime:
            report = runtime.recover(tool)
            decided = {d.op_id: d.decision for d in report.decisions}
            assert decided == {"s1": Decision.SKIP, "s2": Decision.VERIFY, "s3": Decision.RETRY}
            before = runtime.outcome_of("s1")
            runtime.compact()
            assert runtime.outcome_of("s1") == before
        assert tool.counts() == {"s1": 1, "s2": 1, "s3": 2}

    def test_which_sources_name_a_database(self) -> None:
        """Only a postgresql:// or postgres:// string names a database; paths are files."""
        assert is_database_url("postgresql://h/db?journal=t")
        assert is_database_url("postgres://h/db?journal=t")
        assert not is_database_url(Path("postgresql:") / "x")
        assert not is_database_url("agent.journal")


class TestNoDriverInTheCore:
    def test_a_file_journal_imports_no_driver(self, tmp_path: Path) -> None:
        """The runtime on a file loads no psycopg, nor its own PostgreSQL module."""
        code = (
            "import sys\n"
            "from harness.runtime import Runtime\n"
            f"Runtime.open({str(tmp_path / 'j')!r}).close()\n"
            "assert not {'psycopg', 'harness.runtime.postgres'} & set(sys.modules)\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)

    def test_a_url_without_psycopg_names_the_extra(self) -> None:
        """Without psycopg, a PostgreSQL journal is refused in one line naming the extra."""
        code = (
            "import sys\n"
            "sys.modules['psycopg'] = None  # as if not installed\n"
            "from harness.runtime import JournalError, Runtime\n"
            "try:\n"
            "    Runtime.open('postgresql://127.0.0.1:1/db?journal=t')\n"
            "except JournalError as exc:\n"
            "    print(exc)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
        )
        said = done.stdout.strip()
        assert "pip install 'agent-crash-harness[postgres]'" in said and "\n" not in said
