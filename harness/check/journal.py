"""The checkers' own reader of a runtime's journal, written from its format alone.

A checker that judged a journal with the runtime's reader, fold and matrix
would share their bugs: a fold that loses a record would be invisible to the
invariants that fold the same way. So this module reads the bytes itself,
from the format the journal documents (``harness/runtime/journal.py`` and
docs/runtime.md), and imports nothing of ``harness.runtime``:

    header  b"%HJOURNAL 1\n"
    frame   magic b"HJ" | version u8 (1) | length u32 | crc32 u32 | payload
            (big-endian; the CRC covers version, length and payload; the
            payload is a JSON object with a ``kind``)

A compacted journal begins with a ``checkpoint`` (after the identity), then
(written since compactions index their block) a ``settled_index`` record, then
one ``settled`` record per settled op it folded and the whole records of the
ops still open; a ``retired`` record closes a finished task's journal; an
``ops_index`` record (a map of the file before it, written at a runtime's close)
names no op. This reader reads every record of the block, the settled ones
included.

The full note: docs/reference/modules.md (``harness/check/journal.py``).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "PRISTINE_JOURNAL",
    "SAFE_CLASSES",
    "JournalEntry",
    "JournalReading",
    "OpView",
    "expected_decision",
    "fold_ops",
    "read_journal",
    "read_journal_bytes",
    "retry_safe",
    "settles",
]

FILE_HEADER = b"%HJOURNAL 1\n"
PRISTINE_JOURNAL = "journal.before-corruption"
"""The journal as it was before a fault changed it at rest (corruption, sector damage, a
newer frame), kept beside it by ``harness.chaos.faults`` for the checkers."""
_FRAME = struct.Struct(">2sBII")
_MAGIC = b"HJ"
_VERSION = 1
_MAX_PAYLOAD = 16 * 1024 * 1024

SAFE_CLASSES = frozenset({"read_only", "idempotent_write"})
"""Classes whose call may run again (with the ask-user family), as docs/runtime.md lists them."""

# Which fields each record kind must carry, and their JSON types: a provable
# frame whose payload lacks one is damage the CRC did not catch (or a bug).
_STR, _INT, _BOOL, _OBJ = (str,), (int,), (bool,), (dict,)
_ANY = (object,)
_OPT_STR = (str, type(None))
_FIELDS: Mapping[str, Mapping[str, tuple[type, ...]]] = {
    "journal": {"journal_id": _STR},
    "incarnation": {"incarnation": _INT, "pid": _INT},
    "intent": {
        "op_id": _STR,
        "tool": _STR,
        "snapshot": _OBJ,
        "args": _OBJ,
        "args_digest": _STR,
        "attempt": _INT,
        "incarnation": _INT,
    },
    "finish": {
        "op_id": _STR,
        "succeeded": _BOOL,
        "result": _ANY,
        "result_digest": _STR,
        "transient": _BOOL,
        "attempt": _INT,
        "incarnation": _INT,
    },
    "decision": {
        "op_id": _STR,
        "state": _STR,
        "snapshot": _OBJ,
        "decision": _STR,
        "incarnation": _INT,
    },
    "hint": {"op_id": _STR, "incarnation": _INT, "hint": _STR},
    "resolved": {"op_id": _STR, "incarnation": _INT, "resolution": _STR},
    "recovered": {"incarnation": _INT, "decisions": _INT},
    "tail_dropped": {"offset": _INT, "length": _INT, "reason": _STR, "incarnation": _INT},
    "checkpoint": {
        "incarnation": _INT,
        "settled": _INT,
        "carried": _INT,
        "forgotten": _INT,
        "replaced_size": _INT,
        "replaced_crc": _INT,
    },
    "settled": {
        "op_id": _STR,
        "tool": _STR,
        "snapshot": _OBJ,
        "args_digest": _STR,
        "state": _STR,
        "attempt": _INT,
        "result": _ANY,
        "result_digest": _STR,
    },
    "settled_index": {
        "size": _INT,
        "crc": _INT,
        "records": _INT,
        "ids": _STR,
        "id_offsets": _STR,
        "contents": _STR,
        "content_offsets": _STR,
        "unskipped": _STR,
        "resolved": _STR,
        "carried": _STR,
        "oldest": (int, float, type(None)),
    },
    "ops_index": {
        "size": _INT,
        "crc": _INT,
        "records": _INT,
        "journal_id": _STR,
        "incarnation": _INT,
        "width": _INT,
        "ids": _STR,
        "starts": _STR,
        "offsets": _STR,
        "contents": _STR,
        "content_ops": _STR,
        "carried": _STR,
        "oldest": (int, float, type(None)),
    },
    "retired": {"incarnation": _INT, "retired_at": (int, float)},
}
_STATES = frozenset({"not_started", "running", "succeeded", "failed"})
_DECISIONS = frozenset({"skip", "retry", "verify"})
_CLASSES = frozenset({"read_only", "idempotent_write", "non_idempotent", "unknown"})
_RESOLUTIONS = frozenset({"effect present", "redone", "unverifiable"})


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One provable record: where it lies and its payload."""

    offset: int
    end: int
    kind: str
    payload: Mapping[str, Any]

    @property
    def op_id(self) -> str | None:
        value = self.payload.get("op_id")
        return value if isinstance(value, str) else None

    def snapshot(self) -> tuple[str, bool]:
        """``(class, ask_user)`` of an intent's or a decision's snapshot."""
        snap = self.payload["snapshot"]
        return str(snap["class"]), bool(snap["ask_user"])


@dataclass(frozen=True, slots=True)
class JournalReading:
    """What a journal file holds: its records up to any damage, and the damage."""

    entries: tuple[JournalEntry, ...]
    valid_end: int
    torn: tuple[int, int] | None = None
    """``(offset, length)`` of a torn tail."""
    corrupt: str | None = None
    """Why the journal is corrupt before its tail, naming the byte offset and record."""
    corrupt_offset: int | None = None
    exists: bool = True


def read_journal(path: Path) -> JournalReading:
    """Read the journal at ``path`` (a missing file reads as empty and not existing)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return JournalReading((), 0, exists=False)
    return read_journal_bytes(data)


def read_journal_bytes(data: bytes) -> JournalReading:
    """Every provable record of a journal's bytes, and what damage follows them.

    The last journals read are kept, up to ``_KEPT_BYTES`` of them: a trial's checkers,
    its stitching and its faults read the same bytes many times over. A reading is
    shared, so never change one.
    """
    kept = _readings.pop(data, None)
    if kept is None:
        kept = _read(data)
    _readings[data] = kept  # the most recent last
    while sum(map(len, _readings)) > _KEPT_BYTES and len(_readings) > 1:
        del _readings[next(iter(_readings))]
    return kept


_KEPT_BYTES = 1 << 20
"""How many bytes of journals ``read_journal_bytes`` keeps parsed (their records take
about ten times as much)."""
_readings: dict[bytes, JournalReading] = {}


def _read(data: bytes) -> JournalReading:
    if not data:
        return JournalReading((), 0)
    if not data.startswith(FILE_HEADER):
        return JournalReading((), 0, corrupt="byte 0 (record #1): not a journal", corrupt_offset=0)
    entries: list[JournalEntry] = []
    pos = len(FILE_HEADER)
    while pos < len(data):
        frame = _frame_at(data, pos)
        if frame is None:
            if _provable_frame_after(data, pos):
                return _corrupt(entries, pos, "a bad frame with a valid one after it")
            return JournalReading(tuple(entries), pos, torn=(pos, len(data) - pos))
        end, payload, version = frame
        if version != _VERSION:  # whole, yet of a format newer than the one documented here
            return _corrupt(entries, pos, f"a frame of format {version}")
        entry = _entry(pos, end, payload)
        if entry is None:
            return _corrupt(entries, pos, "the checksum holds but the payload is not a record")
        entries.append(entry)
        pos = end
    return JournalReading(tuple(entries), pos)


def _corrupt(entries: list[JournalEntry], pos: int, why: str) -> JournalReading:
    message = f"byte {pos} (record #{len(entries) + 1}): {why}"
    return JournalReading(tuple(entries), pos, corrupt=message, corrupt_offset=pos)


def _frame_at(data: bytes, pos: int) -> tuple[int, bytes, int] | None:
    """A provable frame at ``pos`` (its checksum holds), whatever its version."""
    if len(data) - pos < _FRAME.size:
        return None
    magic, version, length, crc = _FRAME.unpack_from(data, pos)
    if magic != _MAGIC or length > _MAX_PAYLOAD:
        return None
    end = pos + _FRAME.size + length
    if end > len(data):
        return None
    payload = data[pos + _FRAME.size : end]
    if zlib.crc32(data[pos + 2 : pos + 7] + payload) != crc:
        return None
    return end, payload, version


def _provable_frame_after(data: bytes, pos: int) -> bool:
    start = pos + 1
    while (found := data.find(_MAGIC, start)) >= 0:
        if _frame_at(data, found) is not None:
            return True
        start = found + 1
    return False


def _entry(offset: int, end: int, payload: bytes) -> JournalEntry | None:
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
        return None
    fields = _FIELDS.get(value["kind"])
    if fields is None:
        return None
    for name, types in fields.items():
        item = value.get(name)
        if name not in value or not isinstance(item, types):
            return None
        if types == _INT and isinstance(item, bool):
            return None
    if not _well_formed(value):
        return None
    return JournalEntry(offset, end, value["kind"], value)


def _well_formed(value: Mapping[str, Any]) -> bool:
    kind = value["kind"]
    if kind in ("intent", "decision", "settled"):
        snap = value["snapshot"]
        cls = snap.get("class")
        if not isinstance(cls, str) or cls not in _CLASSES:
            return False
        if not isinstance(snap.get("ask_user"), bool):
            return False
    if kind == "decision":
        return value["state"] in _STATES and value["decision"] in _DECISIONS
    if kind == "settled":  # fields at their defaults are left out
        return (
            value["state"] in _STATES
            and value.get("resolution") in (None, *_RESOLUTIONS)
            and isinstance(value.get("skipped", False), bool)
        )
    if kind == "finish":
        return (
            isinstance(value.get("retrying", False), bool)
            and isinstance(value.get("unknown", False), bool)
            and isinstance(value.get("error"), _OPT_STR)
        )
    if kind == "intent":
        return isinstance(value.get("redo_of"), _OPT_STR) and isinstance(
            value.get("fresh", False), bool
        )
    if kind == "resolved":
        return (
            value["resolution"] in _RESOLUTIONS
            and isinstance(value.get("redo_op"), _OPT_STR)
            and isinstance(value.get("note", ""), str)
        )
    return True


# -- the recovery semantics, written again ---------------------------------------------------


@dataclass(slots=True)
class OpView:
    """One op as the checker folds it: state, first intent, resolution."""

    op_id: str
    tool: str
    first_intent: JournalEntry
    state: str = "running"
    intents: list[JournalEntry] = field(default_factory=list)
    resolved: bool = False

    @property
    def snapshot(self) -> tuple[str, bool]:
        return self.first_intent.snapshot()


def fold_ops(entries: Iterable[JournalEntry]) -> dict[str, OpView]:
    """Each op's state after ``entries``, in the order of its first intent."""
    ops: dict[str, OpView] = {}
    for entry in entries:
        op_id = entry.op_id
        if op_id is None:
            continue
        op = ops.get(op_id)
        if entry.kind == "settled":  # a settled op a compaction folded: its end state
            op = ops[op_id] = OpView(op_id, str(entry.payload["tool"]), entry)
            op.state = str(entry.payload["state"])
            op.resolved = entry.payload.get("resolution") is not None
        elif entry.kind == "intent":
            if op is None:
                op = ops[op_id] = OpView(op_id, str(entry.payload["tool"]), entry)
            op.state = "running"
            op.intents.append(entry)
        elif op is None:
            continue
        elif entry.kind == "finish" and settles(entry):
            op.state = "succeeded" if entry.payload["succeeded"] else "failed"
        elif entry.kind == "resolved":
            op.resolved = True
    return ops


def settles(finish: JournalEntry) -> bool:
    """Whether a finish settles its op (not retried in-process, not of unknown outcome)."""
    return not (finish.payload.get("retrying", False) or finish.payload.get("unknown", False))


def retry_safe(cls: str, ask_user: bool) -> bool:
    return ask_user or cls in SAFE_CLASSES


def expected_decision(state: str, cls: str, ask_user: bool) -> str:
    """The recovery decision for an op in ``state`` of class ``cls`` (docs/runtime.md)."""
    if state != "running":
        return "skip"
    return "retry" if retry_safe(cls, ask_user) else "verify"
