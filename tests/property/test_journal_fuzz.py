"""Fuzzing the journal reader: whatever the bytes, it proves, drops a torn tail, or refuses.

``scan_bytes`` is fed arbitrary bytes, soups of real frames, forged frames and
garbage, and valid journals (random sequences of real records) after random
mutations: flipped and replaced bytes, cuts, appended garbage, inserted and
deleted ranges, duplicated frames, two journals spliced together. Whatever it
is fed, it must do one of three things, and nothing else (no other exception,
no hang):

- refuse bytes that do not begin with the file header (``FILE_HEADER``) as
  "not a journal", at byte 0 (empty bytes are an empty journal);
- return only records it can prove, contiguous from the end of the header: each one's bytes
  carry the documented header and a matching CRC, and its JSON payload maps
  back to the very record returned;
- report a torn tail only at the end, covering every byte after the proven
  records, and only when no checksummed frame follows it;
- raise ``JournalCorruptError`` naming the source, the offset where proving
  stopped and the record number there (proven records before it, plus one).

A reference reader written here from the frame layout in the journal's
docstring decides which of the three is right, independently of the code
under test. ``JournalWriter`` opened on the same bytes must either refuse them
and leave the file as it was, or cut exactly the torn tail, after which an
append scans clean.

Forging a frame by chance needs a 32-bit CRC match, so random damage is taken
to never create a valid frame; the reference reader checks it anyway.
"""

from __future__ import annotations

import json
import os
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from harness.runtime import (
    Decision,
    IdempotencyClass,
    JournalCorruptError,
    JournalVersionError,
    OpState,
    ToolClass,
)
from harness.runtime.journal import (
    FILE_HEADER,
    JournalScan,
    JournalWriter,
    encode_frame,
    scan_bytes,
)
from harness.runtime.records import (
    DecisionRecord,
    FinishRecord,
    HintRecord,
    IncarnationRecord,
    IntentRecord,
    JournalIdRecord,
    Record,
    RecoveredRecord,
    Resolution,
    ResolvedRecord,
    TailDroppedRecord,
    record_from_json,
    record_to_json,
)

SOURCE = "/fuzz/agent.journal"
START = len(FILE_HEADER)  # where the first frame of a journal file begins
MAX_FUZZ_BYTES = 64 * 1024  # far below the reader's payload limit, so it never matters here
HEADER = 11  # magic b"HJ" | version u8 | length u32 | crc32 u32, big-endian
MAGIC = b"HJ"

# `make test` runs a modest number of examples; HYPOTHESIS_PROFILE=audit runs many more.
EXAMPLES = 5000 if os.environ.get("HYPOTHESIS_PROFILE") == "audit" else 300
FUZZ = settings(max_examples=EXAMPLES, deadline=2000)
FUZZ_WRITER = settings(max_examples=EXAMPLES * 2 // 3, deadline=2000)


# -- strategies: real records, forged frames, garbage -------------------------------------------

ids = st.text(min_size=1, max_size=12)
counts = st.integers(min_value=0, max_value=2**31)
json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=16)
)
json_values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
tool_classes = st.builds(ToolClass, st.sampled_from(IdempotencyClass), st.booleans())

records: st.SearchStrategy[Record] = st.one_of(
    st.builds(IncarnationRecord, counts, counts),
    st.builds(
        IntentRecord,
        ids,
        st.text(max_size=16),
        tool_classes,
        json_objects,
        st.text(max_size=16),
        counts,
        counts,
        st.none() | ids,
    ),
    st.builds(
        FinishRecord,
        ids,
        st.booleans(),
        json_values,
        st.text(max_size=16),
        counts,
        counts,
        st.none() | st.text(max_size=30),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    ),
    st.builds(
        DecisionRecord,
        ids,
        st.sampled_from(OpState),
        tool_classes,
        st.sampled_from(Decision),
        counts,
    ),
    st.builds(HintRecord, ids, counts, st.text(max_size=40)),
    st.builds(
        ResolvedRecord,
        ids,
        counts,
        st.sampled_from(Resolution),
        st.none() | ids,
        st.text(max_size=30),
    ),
    st.builds(RecoveredRecord, counts, counts),
    st.builds(TailDroppedRecord, counts, counts, st.text(max_size=30), counts),
)


def raw_frame(payload: bytes, *, version: int = 1) -> bytes:
    """A frame with a correct checksum around any payload, built from the documented layout."""
    body = version.to_bytes(1, "big") + len(payload).to_bytes(4, "big")
    return MAGIC + body + zlib.crc32(payload, zlib.crc32(body)).to_bytes(4, "big") + payload


@st.composite
def tampered_record_payloads(draw: st.DrawFn) -> bytes:
    """A real record's JSON with one field deleted or replaced: often no longer a record."""
    fields = record_to_json(draw(records))
    key = draw(st.sampled_from(sorted(fields)))
    if draw(st.booleans()):
        del fields[key]
    else:
        fields[key] = draw(json_values)
    return json.dumps(fields, ensure_ascii=False).encode()


forged_payloads = st.one_of(
    st.binary(max_size=40),
    json_values.map(lambda value: json.dumps(value).encode()),
    tampered_record_payloads(),
)
header_fragments = st.sampled_from(
    [MAGIC, MAGIC + b"\x01", MAGIC + b"\x01\x00\x00", MAGIC + b"\x01\x00\x00\x00\x00", MAGIC * 3]
)
soup_parts = st.one_of(
    records.map(encode_frame),
    forged_payloads.map(raw_frame),
    st.binary(max_size=24),
    header_fragments,
    st.integers(min_value=1, max_value=8192).map(lambda n: b"\x00" * n),
)
# Mostly behind a file header, so that the frames are read; sometimes without one.
file_heads = st.sampled_from([FILE_HEADER] * 4 + [b"", FILE_HEADER[:5]])
frame_soups = st.tuples(file_heads, st.lists(soup_parts, max_size=10)).map(
    lambda head_parts: (head_parts[0] + b"".join(head_parts[1]))[:MAX_FUZZ_BYTES]
)
random_files = st.tuples(file_heads, st.binary(max_size=MAX_FUZZ_BYTES)).map(
    lambda head_body: (head_body[0] + head_body[1])[:MAX_FUZZ_BYTES]
)
record_lists = st.lists(records, max_size=8)


# -- valid journals and their mutations ---------------------------------------------------------


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

    @property
    def boundaries(self) -> list[int]:
        return [0, START, *(end for _, end in self.spans)]


journals = record_lists.map(Journal.of)


@st.composite
def mutation_steps(draw: st.DrawFn, journal: Journal, data: bytes) -> tuple[str, bytes]:
    """One mutation of ``data`` (a possibly already mutated ``journal``): its name and result."""
    n = len(data)
    kind = draw(
        st.sampled_from(
            ["flip", "replace", "truncate", "append", "insert", "delete", "duplicate", "splice"]
        )
    )
    if kind == "flip" and n > 0:
        at, mask = draw(st.integers(0, n - 1)), draw(st.integers(1, 255))
        return f"flip {at} ^ {mask:#x}", data[:at] + bytes([data[at] ^ mask]) + data[at + 1 :]
    if kind == "replace":
        at, chunk = draw(st.integers(0, n)), draw(st.binary(min_size=1, max_size=16))
        return f"replace {at} +{len(chunk)}", data[:at] + chunk + data[at + len(chunk) :]
    if kind == "truncate":
        cut = draw(st.integers(0, n))
        return f"truncate {cut}", data[:cut]
    if kind == "insert":
        at, chunk = draw(st.integers(0, n)), draw(st.binary(min_size=1, max_size=32))
        return f"insert {at} +{len(chunk)}", data[:at] + chunk + data[at:]
    if kind == "delete" and n > 0:
        start = draw(st.integers(0, n - 1))
        stop = draw(st.integers(start + 1, n))
        return f"delete {start}:{stop}", data[:start] + data[stop:]
    if kind == "duplicate" and journal.spans:
        start, end = draw(st.sampled_from(journal.spans))
        at = draw(st.sampled_from([b for b in journal.boundaries if b <= n]) | st.integers(0, n))
        return f"duplicate {start}:{end} at {at}", data[:at] + journal.data[start:end] + data[at:]
    if kind == "splice":
        other = draw(journals)
        at = draw(st.sampled_from([b for b in journal.boundaries if b <= n]) | st.integers(0, n))
        other_at = draw(st.sampled_from(other.boundaries) | st.integers(0, len(other.data)))
        return f"splice {at} with other[{other_at}:]", data[:at] + other.data[other_at:]
    garbage = draw(st.binary(min_size=1, max_size=64))
    return f"append +{len(garbage)}", data + garbage


@dataclass(frozen=True)
class Mutated:
    """A valid journal and the bytes left after some mutations."""

    journal: Journal
    steps: tuple[str, ...]
    data: bytes


@st.composite
def mutated_journals(draw: st.DrawFn) -> Mutated:
    journal = draw(journals)
    data, steps = journal.data, []
    for _ in range(draw(st.integers(1, 3))):
        step, data = draw(mutation_steps(journal, data))
        steps.append(step)
    return Mutated(journal, tuple(steps), data[:MAX_FUZZ_BYTES])


@st.composite
def last_frame_mutations(draw: st.DrawFn) -> Mutated:
    """Damage confined to the last frame: flips, replacements, a cut inside it, garbage after."""
    journal = draw(record_lists.filter(bool).map(Journal.of))
    last, n = journal.spans[-1]
    data, steps = bytearray(journal.data), []
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(last, n - 1))
        if draw(st.booleans()):
            mask = draw(st.integers(1, 255))
            data[at] ^= mask
            steps.append(f"flip {at} ^ {mask:#x}")
        else:
            chunk = draw(st.binary(min_size=1, max_size=min(16, n - at)))
            data[at : at + len(chunk)] = chunk
            steps.append(f"replace {at} +{len(chunk)}")
    if draw(st.booleans()):
        cut = draw(st.integers(last, n))
        del data[cut:]
        steps.append(f"truncate {cut}")
    if draw(st.booleans()):
        garbage = draw(st.binary(min_size=1, max_size=64))
        data += garbage
        steps.append(f"append +{len(garbage)}")
    return Mutated(journal, tuple(steps), bytes(data))


# -- the reference reader -----------------------------------------------------------------------


def provable_payload(data: bytes, pos: int) -> bytes | None:
    """The payload of the frame at ``pos`` if its magic, version, length and CRC hold."""
    if len(data) - pos < HEADER or data[pos : pos + 2] != MAGIC or data[pos + 2] != 1:
        return None
    length = int.from_bytes(data[pos + 3 : pos + 7], "big")
    end = pos + HEADER + length
    if end > len(data):
        return None
    payload = data[pos + HEADER : end]
    crc = zlib.crc32(payload, zlib.crc32(data[pos + 2 : pos + 7]))
    return payload if crc == int.from_bytes(data[pos + 7 : pos + 11], "big") else None


def as_record(payload: bytes) -> Record | None:
    try:
        return record_from_json(json.loads(payload))
    except (ValueError, RecursionError):
        return None


def canonical(record: Record) -> str:
    return json.dumps(record_to_json(record), sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class Reference:
    """What the reader must do with some bytes, by the documented contract."""

    proven: tuple[tuple[int, int, Record], ...]
    stop: int
    verdict: Literal["clean", "torn", "corrupt"]


def reference_scan(data: bytes) -> Reference:
    """Check the header, prove frames after it; stop at the first unprovable one, and judge it."""
    proven: list[tuple[int, int, Record]] = []
    if not data:
        return Reference((), 0, "clean")
    if not data.startswith(FILE_HEADER):
        return Reference((), 0, "corrupt")
    pos = START
    while pos < len(data):
        payload = provable_payload(data, pos)
        if payload is None:
            later = any(
                provable_payload(data, q) is not None
                for q in range(pos + 1, len(data))
                if data.startswith(MAGIC, q)
            )
            return Reference(tuple(proven), pos, "corrupt" if later else "torn")
        record = as_record(payload)
        if record is None:  # a checksum holds over something that is not a record
            return Reference(tuple(proven), pos, "corrupt")
        end = pos + HEADER + len(payload)
        proven.append((pos, end, record))
        pos = end
    return Reference(tuple(proven), pos, "clean")


def scan_by_contract(data: bytes) -> JournalScan | JournalCorruptError | JournalVersionError:
    """Scan ``data`` and check the outcome against the contract; any other exception escapes."""
    reference = reference_scan(data)
    try:
        scan = scan_bytes(data, source=SOURCE)
    except JournalVersionError as err:
        # A header of a newer format, or a checksummed record of a kind this version does
        # not know: refused where the reference stops, as it refuses damage there.
        assert (reference.verdict, reference.stop) == ("corrupt", err.offset)
        assert err.path == SOURCE and f"byte {err.offset}" in str(err)
        event("refused: a newer format")
        return err
    except JournalCorruptError as err:
        assert err.path == SOURCE
        assert 0 <= err.offset < len(data)
        before = sum(1 for _, end, _ in reference.proven if end <= err.offset)
        assert err.record_number == before + 1
        assert (reference.verdict, reference.stop) == ("corrupt", err.offset)
        assert err.problem
        assert SOURCE in str(err)
        assert f"byte {err.offset}" in str(err)
        assert f"record #{err.record_number}" in str(err)
        event("corrupt: " + ("non-record payload" if "not a record" in err.problem else "damage"))
        return err
    position = START if data else 0
    for scanned in scan.records:
        assert scanned.offset == position, "records are contiguous from the header's end"
        payload = provable_payload(data, scanned.offset)
        assert payload is not None, f"unprovable frame returned at byte {scanned.offset}"
        assert scanned.end == scanned.offset + HEADER + len(payload)
        assert canonical(record_from_json(json.loads(payload))) == canonical(scanned.record)
        position = scanned.end
    assert scan.valid_end == position
    if scan.torn is None:
        assert scan.valid_end == len(data)
    else:
        assert scan.torn.offset == scan.valid_end
        assert scan.torn.offset + scan.torn.length == len(data)
        assert scan.torn.length > 0
        assert scan.torn.reason
    assert reference.verdict == ("clean" if scan.torn is None else "torn")
    assert [(s.offset, s.end) for s in scan.records] == [(o, e) for o, e, _ in reference.proven]
    event("torn" if scan.torn is not None else "clean")
    return scan


def common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


# -- the properties -----------------------------------------------------------------------------


class TestArbitraryBytes:
    @FUZZ
    @given(data=random_files)
    def test_random_bytes_follow_the_contract(self, data: bytes) -> None:
        """Random bytes are proven, dropped as a torn tail, or refused as corrupt; nothing else."""
        scan_by_contract(data)

    @FUZZ
    @given(data=frame_soups)
    def test_frame_soup_follows_the_contract(self, data: bytes) -> None:
        """Real frames, forged checksummed payloads and garbage in any order obey the contract."""
        scan_by_contract(data)


class TestMutatedJournals:
    @FUZZ
    @given(case=mutated_journals())
    def test_mutated_journal_follows_the_contract(self, case: Mutated) -> None:
        """After any mutations, the untouched whole frames before the damage read back unchanged."""
        data = case.data
        outcome = scan_by_contract(data)
        intact = common_prefix(case.journal.data, data)
        kept = [
            (span, record)
            for span, record in zip(case.journal.spans, case.journal.records, strict=True)
            if span[1] <= intact
        ]
        if isinstance(outcome, JournalCorruptError | JournalVersionError):
            assert outcome.offset >= (kept[-1][0][1] if kept else 0)
            return
        # A frame whose bytes are one of the original frames, wherever it now
        # stands (after a duplication or a shift), reads back as that record.
        originals = {encode_frame(record): record for record in case.journal.records}
        for scanned in outcome.records:
            frame = data[scanned.offset : scanned.end]
            if frame in originals:
                assert scanned.record == originals[frame]
        assert len(outcome.records) >= len(kept)
        for scanned, ((start, end), record) in zip(outcome.records, kept, strict=False):
            assert (scanned.offset, scanned.end) == (start, end)
            assert scanned.record == record
            assert encode_frame(scanned.record) == data[start:end]

    @FUZZ
    @given(first=journals, second=journals, data=st.data())
    def test_whole_frames_rearranged_read_back_exactly(
        self, first: Journal, second: Journal, data: st.DataObject
    ) -> None:
        """Whole frames duplicated, dropped, reordered or spliced from two journals all prove."""
        frames = [(record, encode_frame(record)) for record in (*first.records, *second.records)]
        assume(frames)
        picked = data.draw(st.lists(st.sampled_from(frames), max_size=12), label="frames")
        spliced = FILE_HEADER + b"".join(frame for _, frame in picked)
        outcome = scan_by_contract(spliced)
        assert isinstance(outcome, JournalScan)
        assert outcome.torn is None
        assert [s.record for s in outcome.records] == [record for record, _ in picked]

    @FUZZ
    @given(case=last_frame_mutations())
    def test_damage_confined_to_the_last_frame_never_raises(self, case: Mutated) -> None:
        """Damage to the last frame (or garbage after it) is a torn tail, never corruption."""
        journal, data = case.journal, case.data
        last, end = journal.spans[-1]
        outcome = scan_by_contract(data)
        assert isinstance(outcome, JournalScan), outcome
        if data[:end] == journal.data:  # the last frame survived; garbage may follow it
            assert [s.record for s in outcome.records] == list(journal.records)
            assert outcome.valid_end == end
        else:
            assert [s.record for s in outcome.records] == list(journal.records[:-1])
            assert outcome.valid_end == last
        assert (outcome.torn is None) == (outcome.valid_end == len(data))

    @FUZZ
    @given(journal=journals, data=st.data())
    def test_any_cut_keeps_exactly_the_whole_frames_before_it(
        self, journal: Journal, data: st.DataObject
    ) -> None:
        """A journal cut at any byte after its header never raises; it keeps the whole frames.

        (The header is durable before the file has its name, so no crash cuts it.)
        """
        cut = data.draw(st.integers(START, len(journal.data)), label="cut")
        outcome = scan_by_contract(journal.data[:cut])
        assert isinstance(outcome, JournalScan), outcome
        whole = [i for i, (_, end) in enumerate(journal.spans) if end <= cut]
        assert [s.record for s in outcome.records] == [journal.records[i] for i in whole]
        valid_end = journal.spans[whole[-1]][1] if whole else START
        assert outcome.valid_end == valid_end
        if cut == valid_end:
            assert outcome.torn is None
        else:
            assert outcome.torn is not None
            assert (outcome.torn.offset, outcome.torn.length) == (valid_end, cut - valid_end)


NEW_RECORD = HintRecord("op-after", 99, "appended after the writer opened")


class TestWriterOnDamagedJournals:
    @FUZZ_WRITER
    @given(case=st.one_of(mutated_journals(), last_frame_mutations()))
    def test_writer_refuses_untouched_or_cuts_exactly_the_torn_tail(self, case: Mutated) -> None:
        """A writer leaves a corrupt file untouched, or cuts its torn tail and appends cleanly."""
        expected = scan_by_contract(case.data)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "agent.journal"
            path.write_bytes(case.data)
            if isinstance(expected, JournalCorruptError | JournalVersionError):
                try:
                    JournalWriter(path, fsync=False)
                except (JournalCorruptError, JournalVersionError) as err:
                    assert type(err) is type(expected)
                    assert (err.path, err.offset) == (str(path), expected.offset)
                    if isinstance(err, JournalCorruptError):
                        assert isinstance(expected, JournalCorruptError)
                        assert err.record_number == expected.record_number
                else:
                    raise AssertionError("the writer opened a corrupt journal")
                assert path.read_bytes() == case.data
                return
            # An empty file is a new journal: the writer gives it its header. A journal
            # without an identity is given one, after its records.
            valid_end = expected.valid_end if case.data else START
            with JournalWriter(path, fsync=False) as writer:
                assert writer.scan.records == expected.records
                assert writer.scan.torn == expected.torn
                identity = (
                    b""
                    if expected.journal_id is not None
                    else encode_frame(JournalIdRecord(writer.journal_id))
                )
                assert writer.size == valid_end + len(identity)
                assert path.read_bytes() == (case.data or FILE_HEADER)[:valid_end] + identity
                offset = writer.append(NEW_RECORD)
                assert offset == valid_end + len(identity)
            rescan = scan_bytes(path.read_bytes(), source=str(path))
            assert rescan.torn is None
            assert rescan.records[:-1] == expected.records
            assert rescan.records[-1].record == NEW_RECORD
            assert rescan.records[-1].offset == valid_end + len(identity)
