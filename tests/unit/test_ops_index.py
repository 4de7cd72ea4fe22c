"""The ops index a runtime writes at close: the next start reads none of the settled ops it
maps, writes nothing for them, and still refuses damage anywhere in the file."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.runtime import (
    CallContext,
    JournalCorruptError,
    JournalWriteError,
    Runtime,
    ToolTable,
)
from harness.runtime.aio import AsyncRuntime
from harness.runtime.journal import (
    HEADER_SIZE,
    Appended,
    JournalEvent,
    JournalWriter,
    scan_journal,
)
from harness.runtime.records import (
    DecisionRecord,
    FinishRecord,
    IncarnationRecord,
    OpsIndexRecord,
    RecoveredRecord,
    record_from_json,
    record_from_payload,
)
from harness.runtime.settled import IndexedOps, _encode, _Packed
from tests.conftest import journal_records

TABLE = ToolTable.shipped()
OPS = 200


def _tool(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
    return {"n": args["n"], "text": "x" * 100}


def _history(path: Path, ops: int = OPS, *, start: int = 0) -> None:
    """One life of ``ops`` settled calls, closed (so indexed)."""
    with Runtime.open(path, table=TABLE) as rt:
        rt.recover(_tool)
        for n in range(start, start + ops):
            rt.call(f"op{n}", "write_file", {"n": n}, _tool)


@pytest.fixture(autouse=True)
def _small_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(JournalWriter, "INDEX_MIN_BYTES", 1024)


class TestWrittenAtClose:
    def test_a_close_appends_one_index_of_the_whole_file(self, tmp_path: Path) -> None:
        """The index is the file's last record and covers every byte before it."""
        path = tmp_path / "journal"
        _history(path)
        scanned = scan_journal(path).records
        last = scanned[-1]
        assert isinstance(last.record, OpsIndexRecord)
        assert last.record.size == last.offset and last.end == path.stat().st_size
        assert sum(isinstance(s.record, OpsIndexRecord) for s in scanned) == 1

    def test_no_index_for_a_few_bytes(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Below ``INDEX_MIN_BYTES`` written since the last index, a close writes none."""
        monkeypatch.setattr(JournalWriter, "INDEX_MIN_BYTES", 1 << 30)
        path = tmp_path / "journal"
        _history(path)
        assert not any(isinstance(r, OpsIndexRecord) for r in journal_records(path))


class TestAStartThroughTheIndex:
    def test_a_start_reads_and_writes_nothing_for_settled_ops(self, tmp_path: Path) -> None:
        """The second start decodes no settled op and journals only its life's records."""
        path = tmp_path / "journal"
        _history(path)
        before = path.stat().st_size
        written: list[JournalEvent] = []
        with Runtime.open(path, table=TABLE, listener=written.append) as rt:
            assert isinstance(rt.journal.scan.settled, IndexedOps)
            assert rt.journal.scan.settled.count == OPS
            assert len(rt.journal.scan.records) < 5  # lives' records only
            report = rt.recover(_tool)
            assert rt.ops._loaded == {}
            assert len(report.decisions) == OPS  # every op skipped, none read to say so
            start = [r for e in written if isinstance(e, Appended) for r in e.records]
            assert [type(r) for r in start] == [IncarnationRecord, RecoveredRecord]
            assert rt.outcome_of("op7").result == {"n": 7, "text": "x" * 100}
            assert set(rt.ops._loaded) == {"op7"}
        assert not any(isinstance(r, DecisionRecord) for r in journal_records(path))
        assert path.stat().st_size > before

    def test_records_after_the_index_are_read_as_ever(self, tmp_path: Path) -> None:
        """A life killed after the index (no close, no new index): its records are read."""
        path = tmp_path / "journal"
        _history(path)
        rt = Runtime.open(path, table=TABLE)
        rt.recover(_tool)
        rt.call("late", "write_file", {"n": -1}, _tool)
        rt.journal.close()  # as a kill would leave it: no index at the end
        with Runtime.open(path, table=TABLE) as again:
            assert isinstance(again.journal.scan.settled, IndexedOps)
            assert again.outcome_of("late").result == {"n": -1, "text": "x" * 100}
            assert again.outcome_of("op0").status == "ok"
            assert again.call("op3", "write_file", {"n": 3}, _tool).executed is False

    def test_later_indexes_carry_the_earlier_ones_ops(self, tmp_path: Path) -> None:
        """A second life's index maps its ops and the first life's, read from the first."""
        path = tmp_path / "journal"
        _history(path)
        _history(path, start=OPS)
        with Runtime.open(path, table=TABLE) as rt:
            settled = rt.journal.scan.settled
            assert isinstance(settled, IndexedOps) and settled.count == 2 * OPS
            assert rt.outcome_of("op1").result == {"n": 1, "text": "x" * 100}
            assert rt.outcome_of(f"op{2 * OPS - 1}").status == "ok"

    def test_damage_in_the_covered_bytes_is_refused_before_a_tool_runs(
        self, tmp_path: Path
    ) -> None:
        """A byte changed in a settled op's record fails the index's CRC, proved while the
        start goes on: the first tool waits for it and never runs, the file is read record
        by record to name the damaged record, and the writer takes no more appends."""
        path = tmp_path / "journal"
        _history(path)
        finish = next(s for s in scan_journal(path).records if isinstance(s.record, FinishRecord))
        data = bytearray(path.read_bytes())
        data[finish.end - 5] ^= 0x01
        path.write_bytes(bytes(data))
        ran: list[str] = []

        def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            ran.append(ctx.op_id)
            return {}

        with Runtime.open(path, table=TABLE) as rt:
            rt.recover(tool)  # no tool to run: the damaged record is never read
            with pytest.raises(JournalCorruptError) as caught:
                rt.call("new", "write_file", {"n": -1}, tool)
            assert caught.value.offset == finish.offset
            with pytest.raises(JournalWriteError):
                rt.call("other", "write_file", {"n": -2}, tool)
        assert ran == []
        with Runtime.open(path, table=TABLE) as again, pytest.raises(JournalCorruptError):
            again.call("again", "write_file", {"n": -3}, tool)

        async def on_the_loop() -> None:
            async with await AsyncRuntime.open(path, table=TABLE) as runtime:
                await runtime.call("async", "write_file", {"n": -4}, tool)

        with pytest.raises(JournalCorruptError):
            asyncio.run(on_the_loop())
        assert ran == []


class TestTheIndexReadInPlace:
    def test_its_payload_reads_as_the_json_parser_reads_it(self, tmp_path: Path) -> None:
        """An ops index's long arrays, taken as they stand, make the same record as the
        JSON parser makes of the whole payload."""
        path = tmp_path / "journal"
        _history(path)
        last = scan_journal(path).records[-1]
        payload = path.read_bytes()[last.offset + HEADER_SIZE : last.end]
        assert record_from_payload(payload) == record_from_json(json.loads(payload))
        assert record_from_payload(payload) == last.record

    def test_an_escaped_array_is_read_by_the_json_parser(self, tmp_path: Path) -> None:
        """A payload not as the runtime writes it (an escape in an array) is parsed whole."""
        path = tmp_path / "journal"
        _history(path)
        last = scan_journal(path).records[-1]
        payload = path.read_bytes()[last.offset + HEADER_SIZE : last.end]
        payload = payload.replace(b'"ids":"', b'"ids":"\\u0041', 1)
        assert record_from_payload(payload) == record_from_json(json.loads(payload))

    def test_a_start_decodes_no_array_whole(self, tmp_path: Path) -> None:
        """Open and recovery look up what they need in the arrays' text; a lookup decodes a
        few elements, and only a walk over every op decodes an array whole."""
        path = tmp_path / "journal"
        _history(path)
        with Runtime.open(path, table=TABLE) as rt:
            rt.recover(_tool)
            settled = rt.journal.scan.settled
            assert isinstance(settled, IndexedOps)
            arrays = [settled._ids, settled._starts, settled._offsets]
            assert rt.outcome_of("op7").status == "ok"
            assert rt.call("op3", "write_file", {"n": 3}, _tool).executed is False
            assert all(array._whole is None for array in arrays)
            assert len(list(settled.entries())) == OPS
            assert all(array._whole is not None for array in arrays)

    @pytest.mark.parametrize("width", [4, 8])
    def test_any_element_or_run_reads_as_the_whole_array(self, width: int) -> None:
        """Every element and every run of elements, decoded from its base64 groups alone,
        is what decoding the whole array gives."""
        values = [(n * 2_654_435_761) % (1 << (8 * width)) for n in range(23)]
        text = _encode(values, width)
        packed = _Packed(text, width)
        assert len(packed) == len(values)
        assert [packed[n] for n in range(len(values))] == values
        assert packed[-1] == values[-1]
        for start in range(len(values) + 1):
            for stop in range(start, len(values) + 1):
                assert list(packed[start:stop]) == values[start:stop]
        with pytest.raises(IndexError):
            packed[len(values)]
        assert list(packed) == values
