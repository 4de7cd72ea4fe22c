"""The checkers' journal reader against the runtime's: the same bytes, the same reading.

``harness.check.journal.read_journal_bytes`` is written from the journal's
documented format alone, so that the invariant checkers do not share the
runtime's bugs. This differential test feeds it and the runtime's
``scan_bytes`` the same bytes (valid journals, journals torn by a cut or by
garbage after them, journals with a flipped byte, a zeroed 512-byte block or
a checksummed payload that is not a record, and random bytes) and requires one
of two outcomes:

- both accept, with the same records at the same offsets and ends (the
  checker's payload being the runtime's record in JSON form), the same
  ``valid_end`` and the same torn tail;
- both refuse the bytes as corrupt at the same byte offset (the runtime
  raising ``JournalCorruptError``, the checker reporting ``corrupt``), the
  checker's records before it being what the runtime reads up to it.

The strategies for valid records follow ``tests/property/test_journal_fuzz.py``.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from hypothesis import currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from harness.check.journal import JournalReading, read_journal_bytes
from harness.runtime.classes import ToolClass
from harness.runtime.errors import JournalCorruptError, JournalVersionError
from harness.runtime.journal import FILE_HEADER, JournalScan, encode_frame, scan_bytes
from harness.runtime.records import (
    Record,
    RecoveredRecord,
    record_from_json,
    record_to_json,
)
from tests.property.test_journal_fuzz import json_values, records, tool_classes  # shared

START = len(FILE_HEADER)  # where the first frame of a journal begins
MAGIC = b"HJ"
BLOCK = 512  # a disk sector: the unit a crash or a bad disk zeroes

# Modest by default (the file runs in a few seconds); HYPOTHESIS_PROFILE=audit runs more.
EXAMPLES = 2000 if os.environ.get("HYPOTHESIS_PROFILE") == "audit" else 150
DIFF = settings(max_examples=EXAMPLES, deadline=2000)

Verdict = Literal["clean", "torn", "corrupt"]


# -- strategies: valid records and journals ------------------------------------------------------


@dataclass(frozen=True)
class Journal:
    """A valid journal: its records and where each frame starts and ends."""

    records: tuple[Record, ...]
    data: bytes
    spans: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, records: list[Record]) -> Journal:
        data, spans = FILE_HEADER, []
        for record in records:
            frame = encode_frame(record)
            spans.append((len(data), len(data) + len(frame)))
            data += frame
        return cls(tuple(records), data, tuple(spans))


# Up to 16 records: often longer than a 512-byte block, so a zeroed block can miss the tail.
journals = st.lists(records, max_size=16).map(Journal.of)
nonempty_journals = st.lists(records, min_size=1, max_size=16).map(Journal.of)


def raw_frame(payload: bytes) -> bytes:
    """A frame with a correct checksum around any payload, built from the documented layout."""
    body = b"\x01" + len(payload).to_bytes(4, "big")
    return MAGIC + body + zlib.crc32(payload, zlib.crc32(body)).to_bytes(4, "big") + payload


# -- strategies: damage ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Damaged:
    """A valid journal, the bytes made of it, and how (for the failure report)."""

    journal: Journal
    how: str
    data: bytes


@st.composite
def cut_journals(draw: st.DrawFn) -> Damaged:
    """A valid journal cut at any byte, the header included."""
    journal = draw(journals)
    cut = draw(st.integers(0, len(journal.data)))
    return Damaged(journal, f"cut at {cut}", journal.data[:cut])


header_fragments = st.sampled_from(
    [MAGIC, MAGIC + b"\x01", MAGIC + b"\x01\x00\x00", MAGIC + b"\x01\x00\x00\x00\x00", MAGIC * 3]
)


@st.composite
def garbage_after(draw: st.DrawFn) -> Damaged:
    """A valid journal and random bytes after it: garbage, zeros to a block, or a frame's start.

    Sometimes a whole valid frame follows the garbage, which makes it corruption, not a tail.
    """
    journal = draw(journals)
    n = len(journal.data)
    garbage = draw(
        st.one_of(
            st.binary(min_size=1, max_size=64),
            st.just(b"\x00" * (-n % BLOCK or BLOCK)),  # a file extended by zeros to its block
            header_fragments,
            st.tuples(st.binary(max_size=16), header_fragments).map(b"".join),
        )
    )
    how = f"append {garbage!r}"
    if draw(st.booleans()):
        garbage += encode_frame(draw(records))
        how += " and a whole frame"
    return Damaged(journal, how, journal.data + garbage)


@st.composite
def flipped_journals(draw: st.DrawFn) -> Damaged:
    """A valid journal with one byte XORed with a nonzero mask."""
    journal = draw(journals)
    at = draw(st.integers(0, len(journal.data) - 1))
    mask = draw(st.integers(1, 255))
    data = bytearray(journal.data)
    data[at] ^= mask
    return Damaged(journal, f"flip byte {at} ^ {mask:#04x}", bytes(data))


@st.composite
def zeroed_block_journals(draw: st.DrawFn) -> Damaged:
    """A valid journal with one 512-byte-aligned block (the last one may be short) zeroed."""
    journal = draw(journals)
    n = len(journal.data)
    block = draw(st.integers(0, (n - 1) // BLOCK))
    start, stop = block * BLOCK, min((block + 1) * BLOCK, n)
    data = journal.data[:start] + b"\x00" * (stop - start) + journal.data[stop:]
    return Damaged(journal, f"zero bytes {start}:{stop}", data)


def is_record(value: Any) -> bool:
    try:
        record_from_json(value)
    except ValueError:
        return False
    return True


@st.composite
def tampered_record_json(draw: st.DrawFn) -> dict[str, Any]:
    """A real record's JSON with a field deleted, replaced by any JSON, or its kind changed."""
    fields = record_to_json(draw(records))
    key = draw(st.sampled_from(sorted(fields)))
    action = draw(st.sampled_from(["delete", "replace", "kind"]))
    if action == "delete":
        del fields[key]
    elif action == "replace":
        fields[key] = draw(json_values)
    else:
        fields["kind"] = draw(st.sampled_from(["", "Intent", "unknown", "finished"]) | json_values)
    return fields


non_record_json = st.one_of(json_values, tampered_record_json()).filter(
    lambda value: not is_record(value)
)
# Every optional or kind-specific field name of the format, and one it does not have.
FIELD_NAMES = ("snapshot", "redo_of", "error", "retrying", "redo_op", "args", "state", "note")


@st.composite
def extra_field_json(draw: st.DrawFn) -> dict[str, Any]:
    """A real record's JSON with a field added or overwritten, named for some kind or none."""
    fields = record_to_json(draw(records))
    extra = draw(
        st.dictionaries(
            st.sampled_from(FIELD_NAMES) | st.text(max_size=8),
            json_values | tool_classes.map(ToolClass.to_json),
            min_size=1,
            max_size=2,
        )
    )
    return {**fields, **extra}


def json_bytes(value: Any, *, compact: bool) -> bytes:
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps(value, separators=separators).encode()


@st.composite
def replaced_payloads(
    draw: st.DrawFn, payloads: st.SearchStrategy[Any]
) -> tuple[Damaged, int, bytes]:
    """A journal with one frame replaced by a checksummed frame around other JSON.

    Returns the damaged journal, the replaced frame's offset and the new payload.
    """
    journal = draw(nonempty_journals)
    index = draw(st.integers(0, len(journal.spans) - 1))
    start, end = journal.spans[index]
    payload = json_bytes(draw(payloads), compact=draw(st.booleans()))
    data = journal.data[:start] + raw_frame(payload) + journal.data[end:]
    return Damaged(journal, f"frame at {start} holds {payload!r}", data), start, payload


soup_parts = st.one_of(
    records.map(encode_frame),
    st.one_of(st.binary(max_size=40), json_values.map(lambda v: json.dumps(v).encode())).map(
        raw_frame
    ),
    (tampered_record_json() | extra_field_json()).map(lambda v: raw_frame(json.dumps(v).encode())),
    st.binary(max_size=24),
    header_fragments,
    st.integers(min_value=1, max_value=1024).map(lambda n: b"\x00" * n),
)
heads = st.sampled_from([FILE_HEADER, FILE_HEADER, b"", FILE_HEADER[:5], b"%HJOURNAL 2\n"])
random_files = st.tuples(heads, st.binary(max_size=4096)).map(b"".join)
frame_soups = st.tuples(heads, st.lists(soup_parts, max_size=10)).map(
    lambda head_parts: head_parts[0] + b"".join(head_parts[1])
)


def note(what: str) -> None:
    """Count an outcome in Hypothesis's statistics (``--hypothesis-show-statistics``)."""
    if currently_in_test_context():
        event(what)


# -- the comparison --------------------------------------------------------------------------------

# The optional fields a payload may omit, and the value the runtime's record then holds.
OPTIONAL_DEFAULTS: Mapping[str, Any] = {
    "redo_of": None,
    "error": None,
    "retrying": False,
    "unknown": False,
    "note": "",
    "redo_op": None,
}
_ABSENT = object()


def assert_same_record(data: bytes, offset: int, end: int, payload: Any, record: Record) -> None:
    """The checker's payload is the runtime's record in JSON form.

    A frame the runtime would write (``encode_frame``) gives exactly ``record_to_json``;
    a forged one may omit optional fields or carry extra ones, which the record drops.
    """
    expected = record_to_json(record)
    if data[offset:end] == encode_frame(record):
        assert payload == expected, f"record at byte {offset}"
        return
    seen = {key: payload.get(key, OPTIONAL_DEFAULTS.get(key, _ABSENT)) for key in expected}
    assert seen == expected, f"forged record at byte {offset}: {dict(payload)!r}"


def read_both(data: bytes) -> Verdict:
    """Read ``data`` with both readers, assert that they agree, and return their verdict."""
    runtime: JournalScan | JournalCorruptError | JournalVersionError
    try:
        runtime = scan_bytes(data)
    except (JournalCorruptError, JournalVersionError) as err:
        runtime = err  # a newer format is refused as damage is: the checker calls both corrupt
    checker = read_journal_bytes(data)  # documented never to raise: any exception fails
    if isinstance(runtime, JournalCorruptError | JournalVersionError):
        assert checker.corrupt is not None, (
            f"the runtime refuses at byte {runtime.offset} ({runtime}); "
            f"the checker accepts: {checker!r}"
        )
        assert checker.corrupt_offset == runtime.offset, (checker.corrupt, str(runtime))
        if isinstance(runtime, JournalCorruptError):
            assert f"record #{runtime.record_number}" in checker.corrupt, checker.corrupt
        assert checker.torn is None
        # Up to the damage, both read the same records: the runtime reads that prefix clean.
        prefix = scan_bytes(data[: runtime.offset])
        assert prefix.torn is None
        assert checker.valid_end == prefix.valid_end == runtime.offset
        assert_same_records(data, checker, prefix)
        note(f"both corrupt ({'at 0' if runtime.offset == 0 else 'in a frame'})")
        return "corrupt"
    assert checker.corrupt is None, (
        f"the checker refuses ({checker.corrupt}); the runtime accepts: {runtime!r}"
    )
    assert checker.corrupt_offset is None
    assert_same_records(data, checker, runtime)
    assert checker.valid_end == runtime.valid_end
    torn = None if runtime.torn is None else (runtime.torn.offset, runtime.torn.length)
    assert checker.torn == torn, (checker.torn, runtime.torn)
    verdict: Verdict = "clean" if torn is None else "torn"
    note(f"both {verdict}")
    return verdict


def assert_same_records(data: bytes, checker: JournalReading, runtime: JournalScan) -> None:
    # The runtime keeps the journal's identity apart from its records; the checker lists it.
    entries = [entry for entry in checker.entries if entry.kind != "journal"]
    spans = [(entry.offset, entry.end) for entry in entries]
    assert spans == [(scanned.offset, scanned.end) for scanned in runtime.records]
    for entry, scanned in zip(entries, runtime.records, strict=True):
        assert entry.kind == scanned.record.kind
        assert_same_record(data, entry.offset, entry.end, entry.payload, scanned.record)


# -- the properties --------------------------------------------------------------------------------


class TestCheckReaderAgreesWithRuntime:
    def test_empty_input_is_an_empty_journal_for_both(self) -> None:
        """Empty bytes are an empty, undamaged journal for both readers."""
        assert read_both(b"") == "clean"
        reading = read_journal_bytes(b"")
        assert (reading.entries, reading.valid_end, reading.torn) == ((), 0, None)

    @DIFF
    @given(journal=journals)
    def test_valid_journals_read_the_same(self, journal: Journal) -> None:
        """The checker's reader and the runtime's agree on every valid journal."""
        assert read_both(journal.data) == "clean"
        reading = read_journal_bytes(journal.data)
        assert [(e.offset, e.end) for e in reading.entries] == list(journal.spans)
        assert [e.payload for e in reading.entries] == [record_to_json(r) for r in journal.records]

    @DIFF
    @given(case=cut_journals())
    def test_cut_journals_read_the_same(self, case: Damaged) -> None:
        """A valid journal cut at any byte reads the same (a cut inside the header refuses)."""
        verdict = read_both(case.data)
        assert (verdict == "corrupt") == (0 < len(case.data) < START), case.how

    @DIFF
    @given(case=garbage_after())
    def test_garbage_after_a_journal_reads_the_same(self, case: Damaged) -> None:
        """Random bytes after a valid journal are the same torn tail (or corruption) for both."""
        verdict = read_both(case.data)
        if verdict != "corrupt":
            reading = read_journal_bytes(case.data)
            assert len(reading.entries) >= len(case.journal.records), case.how

    @DIFF
    @given(case=flipped_journals())
    def test_a_flipped_byte_reads_the_same(self, case: Damaged) -> None:
        """A valid journal with one flipped byte is read, torn or refused alike by both."""
        assert read_both(case.data) != "clean", case.how

    @DIFF
    @given(case=zeroed_block_journals())
    def test_a_zeroed_block_reads_the_same(self, case: Damaged) -> None:
        """A valid journal with a zeroed 512-byte-aligned block is read alike by both."""
        read_both(case.data)

    @DIFF
    @given(case=replaced_payloads(non_record_json))
    def test_a_checksummed_non_record_is_corrupt_for_both(
        self, case: tuple[Damaged, int, bytes]
    ) -> None:
        """A frame whose checksum holds over JSON that is not a record is corrupt at its offset."""
        damaged, offset, _ = case
        assert read_both(damaged.data) == "corrupt", damaged.how
        assert read_journal_bytes(damaged.data).corrupt_offset == offset, damaged.how

    @DIFF
    @given(case=replaced_payloads(tampered_record_json()))
    def test_a_tampered_record_reads_the_same(self, case: tuple[Damaged, int, bytes]) -> None:
        """A record's JSON with a field removed or changed, or another kind, reads alike."""
        read_both(case[0].data)

    @DIFF
    @given(case=replaced_payloads(extra_field_json()))
    def test_a_record_with_extra_fields_reads_the_same(
        self, case: tuple[Damaged, int, bytes]
    ) -> None:
        """A record's JSON with a field added or overwritten is a record for both or neither."""
        read_both(case[0].data)

    @DIFF
    @given(data=random_files)
    def test_random_bytes_read_the_same(self, data: bytes) -> None:
        """Random bytes, after the header or not, are read, torn or refused alike by both."""
        read_both(data)

    @DIFF
    @given(data=frame_soups)
    def test_frame_soups_read_the_same(self, data: bytes) -> None:
        """Real frames, forged checksummed payloads and garbage in any order read alike."""
        read_both(data)

    @pytest.mark.parametrize(
        "extra",
        [{"note": "x"}, {"snapshot": {}}, {"snapshot": 0}, {"redo_of": 0}],
        ids=["note", "empty-snapshot", "int-snapshot", "int-redo_of"],
    )
    def test_an_extra_field_on_a_record_reads_the_same(self, extra: dict[str, Any]) -> None:
        """A field a record's kind does not have is ignored alike by both readers."""
        payload = {**record_to_json(RecoveredRecord(0, 0)), **extra}
        assert read_both(FILE_HEADER + raw_frame(json_bytes(payload, compact=True))) == "clean"
