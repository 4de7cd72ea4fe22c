"""Journal records: what the runtime writes ahead, and their JSON form.

Each record is a frozen dataclass with a ``kind`` tag. The journal frames and
checksums their JSON payloads; this module only maps records to and from
plain dicts, and refuses a dict it cannot map with ``ValueError`` (the journal
turns that into a corruption error naming the offset).
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from harness.runtime.classes import ToolClass
from harness.runtime.matrix import Decision, OpState

__all__ = [
    "CheckpointRecord",
    "DecisionRecord",
    "FinishRecord",
    "HintRecord",
    "IncarnationRecord",
    "IntentRecord",
    "JournalIdRecord",
    "OpsIndexRecord",
    "Record",
    "RecoveredRecord",
    "Resolution",
    "ResolvedRecord",
    "RetiredRecord",
    "SettledIndexRecord",
    "SettledRecord",
    "TailDroppedRecord",
    "UnknownRecordKind",
    "digest",
    "record_from_json",
    "record_from_payload",
    "record_to_json",
]

JSON: TypeAlias = Any


def digest(value: JSON) -> str:
    """A short, stable digest of a JSON value (canonical form, sha256)."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class JournalIdRecord:
    """The journal's identity: random, written once, before any other record.

    A journal made before identities existed is given one at its first open
    by a runtime that knows them (appended, durably, before anything else is
    written). Idempotency keys derive from it, so two journals never hand an
    API the same key for ops that share an id."""

    journal_id: str
    kind = "journal"


@dataclass(frozen=True, slots=True)
class IncarnationRecord:
    """One life of the process began: the first record it writes."""

    incarnation: int
    pid: int
    kind = "incarnation"


@dataclass(frozen=True, slots=True)
class IntentRecord:
    """STARTED: durable before the tool runs; carries the class snapshot."""

    op_id: str
    tool: str
    snapshot: ToolClass
    args: Mapping[str, JSON]
    args_digest: str
    attempt: int
    incarnation: int
    redo_of: str | None = None
    fresh: bool = False
    """A call that must look at the world now (a check after a VERIFY hint): under identity
    by content it is never matched to another op, nor another call to it. Written only
    when true, so that a journal without one reads as it did before the field."""
    at: float | None = None
    """When the intent was written, on the runtime's clock: only for a keyed tool, whose
    provider's window recovery measures from its first intent (written only when set)."""
    kind = "intent"


@dataclass(frozen=True, slots=True)
class FinishRecord:
    """FINISHED: the tool returned (SUCCEEDED) or raised (FAILED)."""

    op_id: str
    succeeded: bool
    result: JSON
    result_digest: str
    attempt: int
    incarnation: int
    error: str | None = None
    transient: bool = False
    retrying: bool = False
    """A transient failure the executor retries at once: the op is not settled."""
    unknown: bool = False
    """The call ended without an outcome the runtime can trust (the tool raised something
    other than ``ToolError``): the op is not settled, its outcome is unknown."""
    kind = "finish"


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """A recovery decision, journaled before it is acted on."""

    op_id: str
    state: OpState
    snapshot: ToolClass
    decision: Decision
    incarnation: int
    age: float | None = None
    """How old the op's key was (seconds since its first intent) when a keyed op RUNNING
    was decided: what chose RETRY (inside the window) or the class's cell (written only
    when set)."""
    kind = "decision"


@dataclass(frozen=True, slots=True)
class HintRecord:
    """A VERIFY hint was handed to the model."""

    op_id: str
    incarnation: int
    hint: str
    kind = "hint"


class Resolution(enum.Enum):
    """How the model closed an op whose outcome was unknown (after a VERIFY hint)."""

    EFFECT_PRESENT = "effect present"
    """A read-only check found the effect: the op counts as done, and is not redone."""
    REDONE = "redone"
    """The effect was absent: the op was redone as another op (``redo_op``)."""
    UNVERIFIABLE = "unverifiable"
    """No check could tell: the op is not redone, and its outcome stays unknown."""


@dataclass(frozen=True, slots=True)
class ResolvedRecord:
    """The model closed a VERIFY op (effect found, redone as another op, or unverifiable)."""

    op_id: str
    incarnation: int
    resolution: Resolution
    redo_op: str | None = None
    note: str = ""
    """Why, in the model's words (free text; the resolution itself is ``resolution``)."""
    kind = "resolved"


@dataclass(frozen=True, slots=True)
class RecoveredRecord:
    """Recovery of this incarnation finished; the normal flow starts after it."""

    incarnation: int
    decisions: int
    """How many decision records this start wrote (a SKIP already journaled is not repeated)."""
    kind = "recovered"


@dataclass(frozen=True, slots=True)
class TailDroppedRecord:
    """A torn tail of ``length`` bytes at ``offset`` was found and cut off at open."""

    offset: int
    length: int
    reason: str
    incarnation: int
    kind = "tail_dropped"


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """The head of a compacted journal: what the records it replaced came to.

    Followed by one ``SettledRecord`` per settled op the compaction kept
    (``settled`` of them) and the whole records of every op still open
    (``carried`` records), in the order of their first intent.
    ``replaced_size`` and ``replaced_crc`` name the file it replaced (its
    length and CRC-32), ``forgotten`` how many settled ops retention let go
    of, ``incarnation`` the last life the replaced records knew."""

    incarnation: int
    settled: int
    carried: int
    forgotten: int
    replaced_size: int
    replaced_crc: int
    kind = "checkpoint"


@dataclass(frozen=True, slots=True)
class SettledRecord:
    """One settled op, folded: everything a call, ``outcome_of`` and recovery read of it.

    Settled: SUCCEEDED, FAILED, or closed by a resolution (``state`` RUNNING).
    Its arguments are gone (only their digest stays, for identity by content);
    ``skipped`` says a SKIP for its state was journaled (not written again);
    ``settled_at`` is when a compaction first folded it (seconds since the
    epoch), which an age retention counts from."""

    op_id: str
    tool: str
    snapshot: ToolClass
    args_digest: str
    state: OpState
    attempt: int
    result: JSON
    result_digest: str
    error: str | None
    redo_of: str | None
    fresh: bool
    resolution: Resolution | None
    redo_op: str | None
    note: str
    resolved_in: int
    skipped: bool
    settled_at: float
    kind = "settled"


@dataclass(frozen=True, slots=True)
class SettledIndexRecord:
    """Right after a compaction's checkpoint: the block of records that follows it, proved
    whole by its length and CRC-32, and where its settled records lie, so that a start
    reads none of them (``harness.runtime.settled``).

    ``records`` frames of ``size`` bytes follow (the checkpoint's settled and carried
    records, in their order), their CRC-32 ``crc``. The other fields are little-endian
    arrays of unsigned 64-bit integers in base64; an offset counts from the block's first
    byte. ``ids``: a hash of each settled op's id, sorted, and ``id_offsets`` where its
    record lies; ``contents`` and ``content_offsets`` the same by a hash of tool and
    argument digest (ops identity by content may match), in the order of the records
    within one hash; ``unskipped`` the settled records (not resolved) whose SKIP is not journaled,
    ``resolved`` those a resolution closed, ``carried`` every carried record, each in
    block order. ``oldest``: the earliest ``settled_at`` (None: no settled op)."""

    size: int
    crc: int
    records: int
    ids: str
    id_offsets: str
    contents: str
    content_offsets: str
    unskipped: str
    resolved: str
    carried: str
    oldest: float | None
    kind = "settled_index"


@dataclass(frozen=True, slots=True)
class OpsIndexRecord:
    """A map of the journal up to it, written when a runtime closes, so that the next start
    reads none of the settled ops it maps (``harness.runtime.settled.IndexedOps``).

    It covers the file's first ``size`` bytes (its own offset, written last so that a
    start finds it from the file's end; ``records`` frames, the identity included),
    their CRC-32 ``crc``. The arrays are little-endian unsigned integers in base64:
    ``ids`` a hash of each settled op's id (32 bits), sorted; ``starts`` where each one's
    records begin in ``offsets`` (one more entry, the end); ``offsets`` the byte offset of
    every record of those ops, each op's in file order; ``contents`` a hash of tool and
    argument digest (32 bits) of the ops identity by content may match, sorted, and
    ``content_ops`` which op (its place in ``ids``) each is; ``carried`` every other
    record the bytes hold (of ops still open, a checkpoint), but earlier maps and the
    lives' own records (``incarnation`` names the last life). Places are
    ``width`` bytes wide (4, or 8 past 4 GiB). ``incarnation``: the last life they name;
    ``oldest``: the earliest time a compaction folded one of the ops (None: none was)."""

    crc: int
    records: int
    journal_id: str
    incarnation: int
    width: int
    ids: str
    starts: str
    offsets: str
    contents: str
    content_ops: str
    carried: str
    oldest: float | None
    size: int
    kind = "ops_index"


@dataclass(frozen=True, slots=True)
class RetiredRecord:
    """The task is over: the journal's last record. A runtime refuses to open it again."""

    incarnation: int
    retired_at: float
    kind = "retired"


Record: TypeAlias = (
    JournalIdRecord
    | IncarnationRecord
    | IntentRecord
    | FinishRecord
    | DecisionRecord
    | HintRecord
    | ResolvedRecord
    | RecoveredRecord
    | TailDroppedRecord
    | CheckpointRecord
    | SettledRecord
    | SettledIndexRecord
    | OpsIndexRecord
    | RetiredRecord
)


_WRITTEN_WHEN_TRUE = frozenset({"fresh"})
"""Flags added after the format's first records: left out when false."""
_WRITTEN_WHEN_SET = frozenset({"at", "age"})
"""Fields added for keyed tools: left out when None."""

_NO_DEFAULT = object()
_SETTLED_DEFAULTS: dict[str, JSON] = {
    "error": None,
    "redo_of": None,
    "resolution": None,
    "redo_op": None,
    "note": "",
    "resolved_in": 0,
    "skipped": False,
}
"""Fields of a ``settled`` record left out at these values (most ops have them): a
compacted journal is read at every start."""


def record_to_json(record: Record) -> dict[str, JSON]:
    data: dict[str, JSON] = {"kind": record.kind}
    for name in record.__slots__:
        value = getattr(record, name)
        if name in _WRITTEN_WHEN_TRUE and value is False:
            continue
        if name in _WRITTEN_WHEN_SET and value is None:
            continue
        default = (
            _SETTLED_DEFAULTS.get(name, _NO_DEFAULT) if record.kind == "settled" else _NO_DEFAULT
        )
        if default is not _NO_DEFAULT and value == default and type(value) is type(default):
            continue  # (0 and False are not one another's default)
        if isinstance(value, ToolClass):
            value = value.to_json()
        elif isinstance(value, OpState | Decision | Resolution):
            value = value.value
        elif isinstance(value, Mapping):
            value = dict(value)
        data[name] = value
    return data


def _str(data: Mapping[str, JSON], key: str) -> str:
    value = data[key]
    if not isinstance(value, str):
        raise ValueError(f"field {key!r} must be a string, got {type(value).__name__}")
    return value


def _opt_str(data: Mapping[str, JSON], key: str) -> str | None:
    return None if data.get(key) is None else _str(data, key)


def _int(data: Mapping[str, JSON], key: str) -> int:
    value = data[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"field {key!r} must be an integer, got {type(value).__name__}")
    return value


def _bool(data: Mapping[str, JSON], key: str) -> bool:
    value = data[key]
    if not isinstance(value, bool):
        raise ValueError(f"field {key!r} must be a boolean, got {type(value).__name__}")
    return value


def _snapshot(data: Mapping[str, JSON]) -> ToolClass:
    value = data["snapshot"]
    if not isinstance(value, dict):
        raise ValueError("field 'snapshot' must be an object")
    return ToolClass.from_json(value)


def _float(data: Mapping[str, JSON], key: str) -> float:
    value = data[key]
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"field {key!r} must be a number, got {type(value).__name__}")
    return float(value)


def _resolution(data: Mapping[str, JSON]) -> Resolution | None:
    value = data.get("resolution")
    return None if value is None else Resolution(value)


def _args(data: Mapping[str, JSON]) -> Mapping[str, JSON]:
    value = data["args"]
    if not isinstance(value, dict):
        raise ValueError("field 'args' must be an object")
    return value


_DECODERS: dict[str, Callable[[Mapping[str, JSON]], Record]] = {
    "journal": lambda d: JournalIdRecord(_str(d, "journal_id")),
    "incarnation": lambda d: IncarnationRecord(_int(d, "incarnation"), _int(d, "pid")),
    "intent": lambda d: IntentRecord(
        _str(d, "op_id"),
        _str(d, "tool"),
        _snapshot(d),
        _args(d),
        _str(d, "args_digest"),
        _int(d, "attempt"),
        _int(d, "incarnation"),
        _opt_str(d, "redo_of"),
        _bool(d, "fresh") if "fresh" in d else False,
        _float(d, "at") if "at" in d else None,
    ),
    "finish": lambda d: FinishRecord(
        _str(d, "op_id"),
        _bool(d, "succeeded"),
        d["result"],
        _str(d, "result_digest"),
        _int(d, "attempt"),
        _int(d, "incarnation"),
        _opt_str(d, "error"),
        _bool(d, "transient"),
        _bool(d, "retrying") if "retrying" in d else False,
        _bool(d, "unknown") if "unknown" in d else False,
    ),
    "decision": lambda d: DecisionRecord(
        _str(d, "op_id"),
        OpState(d["state"]),
        _snapshot(d),
        Decision(d["decision"]),
        _int(d, "incarnation"),
        _float(d, "age") if "age" in d else None,
    ),
    "hint": lambda d: HintRecord(_str(d, "op_id"), _int(d, "incarnation"), _str(d, "hint")),
    "resolved": lambda d: ResolvedRecord(
        _str(d, "op_id"),
        _int(d, "incarnation"),
        Resolution(d["resolution"]),
        _opt_str(d, "redo_op"),
        _str(d, "note") if "note" in d else "",
    ),
    "recovered": lambda d: RecoveredRecord(_int(d, "incarnation"), _int(d, "decisions")),
    "tail_dropped": lambda d: TailDroppedRecord(
        _int(d, "offset"),
        _int(d, "length"),
        _str(d, "reason"),
        _int(d, "incarnation"),
    ),
    "checkpoint": lambda d: CheckpointRecord(
        _int(d, "incarnation"),
        _int(d, "settled"),
        _int(d, "carried"),
        _int(d, "forgotten"),
        _int(d, "replaced_size"),
        _int(d, "replaced_crc"),
    ),
    "settled_index": lambda d: SettledIndexRecord(
        _int(d, "size"),
        _int(d, "crc"),
        _int(d, "records"),
        _str(d, "ids"),
        _str(d, "id_offsets"),
        _str(d, "contents"),
        _str(d, "content_offsets"),
        _str(d, "unskipped"),
        _str(d, "resolved"),
        _str(d, "carried"),
        None if d["oldest"] is None else _float(d, "oldest"),
    ),
    "ops_index": lambda d: OpsIndexRecord(
        _int(d, "crc"),
        _int(d, "records"),
        _str(d, "journal_id"),
        _int(d, "incarnation"),
        _int(d, "width"),
        _str(d, "ids"),
        _str(d, "starts"),
        _str(d, "offsets"),
        _str(d, "contents"),
        _str(d, "content_ops"),
        _str(d, "carried"),
        None if d["oldest"] is None else _float(d, "oldest"),
        _int(d, "size"),
    ),
    "retired": lambda d: RetiredRecord(_int(d, "incarnation"), _float(d, "retired_at")),
    "settled": lambda d: SettledRecord(
        _str(d, "op_id"),
        _str(d, "tool"),
        _snapshot(d),
        _str(d, "args_digest"),
        OpState(d["state"]),
        _int(d, "attempt"),
        d["result"],
        _str(d, "result_digest"),
        _opt_str(d, "error"),
        _opt_str(d, "redo_of"),
        _bool(d, "fresh") if "fresh" in d else False,
        _resolution(d),
        _opt_str(d, "redo_op"),
        _str(d, "note") if "note" in d else "",
        _int(d, "resolved_in") if "resolved_in" in d else 0,
        _bool(d, "skipped") if "skipped" in d else False,
        _float(d, "settled_at"),
    ),
}


class UnknownRecordKind(ValueError):
    """A payload whose ``kind`` is a string this version does not know (a newer one's)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        super().__init__(f"record kind {kind!r}")


def record_from_json(data: JSON) -> Record:
    """Map a decoded payload back to its record; ``ValueError`` if it is not one
    (``UnknownRecordKind`` for a kind this version does not know)."""
    if not isinstance(data, dict):
        raise ValueError("record payload must be a JSON object")
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise ValueError(f"unknown record kind {kind!r}")
    decoder = _DECODERS.get(kind)
    if decoder is None:
        raise UnknownRecordKind(kind)
    try:
        return decoder(data)
    except KeyError as exc:
        raise ValueError(f"{kind} record lacks field {exc.args[0]!r}") from None
    except (TypeError, AttributeError) as exc:
        raise ValueError(f"{kind} record is malformed: {exc}") from None


_INDEX_ARRAYS = ("ids", "starts", "offsets", "contents", "content_ops")
"""The long base64 arrays of an ops index, in the order ``record_to_json`` writes them."""


def record_from_payload(payload: bytes) -> Record:
    """``record_from_json(json.loads(payload))``, the same record, with an ops index's long
    arrays (megabytes of base64 for 100,000 ops) taken as they stand in the payload rather
    than scanned by the JSON parser: the rest of its payload is parsed as JSON. Raises
    what those raise."""
    if not payload.startswith(b'{"kind":"ops_index"'):
        return record_from_json(json.loads(payload))
    skeleton, arrays, pos = [], [], 0
    for name in _INDEX_ARRAYS:
        opening = f'"{name}":"'.encode()
        at = payload.find(opening, pos)
        end = payload.find(b'"', at + len(opening)) if at >= 0 else -1
        text = payload[at + len(opening) : end]
        if end < 0 or b"\\" in text:  # not as record_to_json writes it: the parser's way
            return record_from_json(json.loads(payload))
        skeleton.append(payload[pos : at + len(opening)])
        arrays.append(text.decode("ascii"))  # base64 is ASCII: else UnicodeDecodeError
        pos = end
    skeleton.append(payload[pos:])
    data = json.loads(b"".join(skeleton))  # each array left as ""
    if not isinstance(data, dict):
        raise ValueError("record payload must be a JSON object")
    data.update(zip(_INDEX_ARRAYS, arrays, strict=True))
    return record_from_json(data)
