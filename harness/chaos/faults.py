"""The fault registry: everything the harness can do to an agent, by kind.

The full note: docs/reference/modules.md (``harness/chaos/faults.py``).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.chaos import observer
from harness.chaos.observer import TRACE_FOLDER
from harness.check.journal import FILE_HEADER, PRISTINE_JOURNAL, JournalEntry, read_journal_bytes

__all__ = [
    "AT_REST",
    "FAULT_KINDS",
    "FLEET_KINDS",
    "PRISTINE_JOURNAL",
    "apply_after_death",
    "parse_after_death",
]

FAULT_KINDS = {
    "sigkill": "SIGKILL at a failpoint; at a random moment, a kernel timer kills it alike",
    "power-loss": "names and files as their last fsync left them; drop or tear the rest",
    "disk-full": "an append fails with ENOSPC",
    "disk-full-mid-write": (
        "the disk fills up mid group write: a short write, or the group's fsync refused"
    ),
    "corrupt": "a byte inside an earlier journal record is flipped",
    "lost-reply": "a call's effect commits, then its reply is lost (a timeout)",
    "corrupt-crc": "a digit inside an earlier record changed: still JSON, only the CRC tells",
    "sector": "a 512-byte block of the journal zeroed or stale",
    "unlisted": "the tool table does not list the scenario's writing tools",
    "version-skew": "a whole frame of a newer format appended, as a rolled-back upgrade leaves",
    "cancel": "a batch call is cancelled (CancelledError) after its intent or its effect",
    "lost-request": "an unsafe call's request is lost before its effect (the same timeout)",
    "reused-id": "the agent issues a call under an earlier call's op id (its ids collide)",
    "async-tool": "the agent hands an async tool to the synchronous runtime",
    "recover-in-flight": "the agent calls recover() while a call is in flight",
    "lagging-lookup": "a reply lost, and the reconciler's lookup lags the provider's writes",
    "both-apis": "the agent calls a batch's op in flight again through the synchronous API",
    "lease-pause": "a fleet's worker SIGSTOPped past its lease, its task taken over, then SIGCONT",
    "redelivery": "a fleet's task delivered twice, to two live workers",
    "cut-commit": "a fleet's connection cut before, during or after the COMMIT of a write",
    "db-crash": "kill -9 of a fleet's PostgreSQL postmaster mid-campaign, then a restart",
    "pause": (
        "the agent's process group stopped (SIGSTOP) in a call, held, the next life started "
        "beside it, then resumed (SIGCONT): two lives at once"
    ),
    "model-rate-limit": "the model answers 429 with retry-after (a black box's model)",
    "model-server-error": "the model answers 500 (a black box's model)",
    "model-overloaded": "the model is overloaded: 529 (Anthropic's API) or 503 (OpenAI's)",
    "model-stream-cut": "the model's answer breaks off inside a tool call's JSON arguments",
    "model-stream-hang": "the model's answer hangs: headers sent, then nothing",
    "model-lost-answer": "the model took the request and decided; the answer is lost whole",
}

FLEET_KINDS = frozenset({"lease-pause", "redelivery", "cut-commit", "db-crash"})
"""The faults of a fleet: they act on the PostgreSQL journal's lease, claims, connection and
server, so only ``make chaos-fleet`` (``harness.chaos.fleet.FLEET_FAULTS``) injects them."""

SECTOR = 512
"""The unit of damage of a disk: sector faults act on whole 512-byte blocks."""
_FRAME_HEAD = 11  # magic, version, length, CRC: the payload starts this far into a frame
_MAGIC = b"HJ"
AT_REST = frozenset({"corrupt", "corrupt-crc", "sector", "version-skew"})
"""After-death faults that change records at rest and keep ``PRISTINE_JOURNAL``."""
NEWER_VERSION = 2
"""The format version of the frame ``version-skew`` appends unless its spec names one."""


def _power_loss(trial_dir: Path, args: list[str]) -> dict[str, Any]:
    if not (trial_dir / TRACE_FOLDER).is_dir():
        why = observer.unavailable() or "this trial ran without it"
        return {
            "landed": False,
            "why": f"power loss is rebuilt from the file-system observer's trace: {why}",
            "lost": 0,
        }
    try:
        cut = observer.power_cut(
            trial_dir, args, ":".join(["power-loss", *args]), _trial_seed(trial_dir)
        )
    except observer.Refused as exc:
        return {"landed": False, "why": f"the observer's trace cannot be replayed: {exc}"}
    seen = cut["files"].get("journal")
    if seen is None:
        # The life died before it made a journal: a power cut takes nothing of it.
        return {**cut, "journal": (trial_dir / "journal").exists(), "lost": 0}
    torn = (trial_dir / "journal").read_bytes() if (trial_dir / "journal").exists() else b""
    reading = read_journal_bytes(torn)
    return {
        **cut,
        "synced": seen["synced"],
        "size": seen["size"],
        "kept": seen["kept"],
        "garbage": seen.get("garbage", 0),
        "lost": seen["lost"],
        "valid_end": reading.valid_end,
        "torn": 0 if reading.torn is None else reading.torn[1],
    }


def _trial_seed(trial_dir: Path) -> int | None:
    """The trial's seed (its plan's), which a cut's crash states are drawn from; None when
    the folder has no readable plan."""
    try:
        seed = json.loads((trial_dir / "plan.json").read_text("utf-8"))["seed"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return seed if isinstance(seed, int) else None


def _corrupt(trial_dir: Path, args: list[str]) -> dict[str, Any]:
    journal = trial_dir / "journal"
    if not journal.exists():
        return {"landed": False, "corrupted": None, "why": "there is no journal to corrupt"}
    data = journal.read_bytes()
    records = read_journal_bytes(data).entries
    if len(records) < 2:
        return {
            "landed": False,
            "corrupted": None,
            "why": "fewer than two records: nothing before the tail",
        }
    victim = records[min(int(float(args[0]) * (len(records) - 1)), len(records) - 2)]
    offset = (victim.offset + victim.end) // 2
    shutil.copyfile(journal, trial_dir / PRISTINE_JOURNAL)
    damaged = bytearray(data)
    damaged[offset] ^= 0xFF
    journal.write_bytes(bytes(damaged))
    # Landed when a reader now finds that very record damaged.
    landed = read_journal_bytes(bytes(damaged)).corrupt_offset == victim.offset
    return {
        "landed": landed,
        "corrupted": offset,
        "record": records.index(victim) + 1,
        "record_offset": victim.offset,
        **({} if landed else {"why": "the flipped byte left the record readable"}),
    }


_NUMBER_IN_PAYLOAD = re.compile(rb'"(?:incarnation|attempt|pid|decisions|offset|length)":\d+')


def _corrupt_crc(trial_dir: Path, args: list[str]) -> dict[str, Any]:
    """A digit of a record's payload changed: the frame keeps its length, the payload stays
    UTF-8 and JSON (only the CRC can tell), the record says something else."""
    journal = trial_dir / "journal"
    if not journal.exists():
        return {"landed": False, "corrupted": None, "why": "there is no journal to corrupt"}
    data = journal.read_bytes()
    records = read_journal_bytes(data).entries
    candidates = [
        (entry, match)
        for entry in records[:-1]
        for match in [_NUMBER_IN_PAYLOAD.search(data, entry.offset + _FRAME_HEAD, entry.end)]
        if match is not None
    ]
    if not candidates:
        return {"landed": False, "corrupted": None, "why": "no record before the last has a number"}
    victim, match = candidates[min(int(float(args[0]) * len(candidates)), len(candidates) - 1)]
    offset = match.end() - 1  # the number's last digit: never a leading zero
    digit = data[offset] - ord("0")
    return _damage(trial_dir, data, victim, {offset: ord("0") + (digit + 1) % 10}, "corrupt-crc")


def _sector(trial_dir: Path, args: list[str]) -> dict[str, Any]:
    """A 512-byte block of the journal zeroed, or stale (as it was before the last life wrote
    to it: its later bytes zero), as a disk that lost or misdirected a sector write does.

    Only a block with a whole record after it: damage that reaches the journal's
    end leaves nothing a reader could tell from a torn last write, and a torn
    write of records that were fsynced is beyond any journal without a second
    copy (the power-loss faults tear only what was never fsynced)."""
    journal = trial_dir / "journal"
    if not journal.exists():
        return {"landed": False, "why": "there is no journal to damage"}
    data = journal.read_bytes()
    records = read_journal_bytes(data).entries
    how, where = args[0], float(args[1])
    candidates = []
    for victim in records[:-1]:
        block = victim.offset // SECTOR * SECTOR
        first = max(block, len(FILE_HEADER)) if how == "zero" else victim.offset
        last = min(block + SECTOR, len(data))  # one past the damage
        if any(later.offset >= last for later in records):
            candidates.append((victim, range(first, last)))
    if not candidates:
        return {"landed": False, "why": "no 512-byte block has a whole record after it"}
    victim, damaged = candidates[min(int(where * len(candidates)), len(candidates) - 1)]
    return _damage(trial_dir, data, victim, dict.fromkeys(damaged, 0), f"sector:{how}")


def _damage(
    trial_dir: Path, data: bytes, victim: JournalEntry, changes: dict[int, int], what: str
) -> dict[str, Any]:
    """Apply byte changes to the journal (a copy kept first); what a reader now finds."""
    journal = trial_dir / "journal"
    shutil.copyfile(journal, trial_dir / PRISTINE_JOURNAL)
    damaged = bytearray(data)
    for at, byte in changes.items():
        damaged[at] = byte
    journal.write_bytes(bytes(damaged))
    reading = read_journal_bytes(bytes(damaged))
    first = min(changes)
    if reading.corrupt_offset is not None:
        number = next(i for i, e in enumerate(read_journal_bytes(data).entries, 1) if e.end > first)
        record = read_journal_bytes(data).entries[number - 1]
        return {
            "landed": True,
            "damage": what,
            "bytes": [first, max(changes) + 1],
            "corrupted": first,
            "record": number,
            "record_offset": record.offset,
        }
    # Not corruption in the middle: undone, and the trial says the fault did not land.
    (trial_dir / PRISTINE_JOURNAL).unlink()
    journal.write_bytes(data)
    why = "reads as a torn last write" if reading.torn is not None else "left every record readable"
    return {"landed": False, "corrupted": None, "why": f"{what} {why}"}


def _version_skew(trial_dir: Path, args: list[str]) -> dict[str, Any]:
    """One whole frame of a newer format appended, as a rolled-back upgrade leaves a journal.

    Built from the envelope alone (``HJ``, version, big-endian length, CRC-32 of
    version, length and payload): its checksum holds, so no reader may take it
    for a torn write. It follows whole records only: behind a torn tail it
    would turn the tail into damage in the middle."""
    journal = trial_dir / "journal"
    if not journal.exists():
        return {"landed": False, "why": "there is no journal to append to"}
    data = journal.read_bytes()
    reading = read_journal_bytes(data)
    if not data or reading.corrupt is not None or reading.torn is not None:
        state = "is empty" if not data else "does not end in a whole record"
        return {"landed": False, "why": f"the journal {state}"}
    version = int(args[0]) if args else NEWER_VERSION
    payload = json.dumps(_newer_record(reading.entries), separators=(",", ":")).encode()
    head = struct.pack(">BI", version, len(payload))
    frame = _MAGIC + head + struct.pack(">I", zlib.crc32(head + payload)) + payload
    shutil.copyfile(journal, trial_dir / PRISTINE_JOURNAL)
    with journal.open("ab") as file:
        file.write(frame)
    return {
        "landed": True,
        "offset": len(data),
        "length": len(frame),
        "version": version,
        "journal_size": len(data) + len(frame),
        "journal_crc": zlib.crc32(frame, zlib.crc32(data)),
    }


def _newer_record(entries: tuple[JournalEntry, ...]) -> dict[str, Any]:
    """What a newer runtime might have written next: the last call journaled, tried again in
    a life after the last one here, with a field format 1 does not have."""
    last = next((e.payload for e in reversed(entries) if e.kind == "intent"), _FIRST_CALL)
    lives = [e.payload.get("incarnation") for e in entries]
    return {
        "kind": "intent",
        **{key: last[key] for key in ("op_id", "tool", "snapshot", "args", "args_digest")},
        "attempt": int(last["attempt"]) + 1,
        "incarnation": max((n for n in lives if isinstance(n, int)), default=0) + 1,
        "lease_ms": 30000,
    }


_FIRST_CALL: dict[str, Any] = {
    "op_id": "s001",
    "tool": "read_file",
    "snapshot": {"class": "read_only", "ask_user": False},
    "args": {},
    "args_digest": "",
    "attempt": 0,
}
"""The call ``_newer_record`` stands for when the journal holds no intent."""


_AFTER_DEATH: dict[str, tuple[Callable[[Path, list[str]], dict[str, Any]], int, int]] = {
    "power-loss": (_power_loss, 1, 3),
    "corrupt": (_corrupt, 1, 1),
    "corrupt-crc": (_corrupt_crc, 1, 1),
    "sector": (_sector, 2, 2),
    "version-skew": (_version_skew, 0, 1),
}


def parse_after_death(spec: str) -> tuple[str, list[str]]:
    """Split and check a spec; ``ValueError`` names what is wrong."""
    kind, *args = spec.split(":")
    if kind not in _AFTER_DEATH:
        raise ValueError(f"unknown after-death fault {kind!r} (known: {', '.join(_AFTER_DEATH)})")
    _, least, most = _AFTER_DEATH[kind]
    if not least <= len(args) <= most:
        raise ValueError(f"{spec!r}: {kind} takes {least} to {most} parameters")
    if kind == "power-loss" and args[0] not in ("drop", "tear", "tear-sector", "state"):
        raise ValueError(
            f"{spec!r}: power-loss is drop, tear:<keep>:<garbage>, tear-sector or state:<n>[:weak]"
        )
    if kind == "power-loss" and args[0] == "state" and (len(args) < 2 or not args[1].isdigit()):
        raise ValueError(f"{spec!r}: state takes the crash state's number, a whole number >= 0")
    if kind == "power-loss" and args[0] == "state" and args[2:] not in ([], ["weak"]):
        raise ValueError(
            f"{spec!r}: after the state's number only the file-system model 'weak' may follow "
            "(state:<n> follows the default, ordered)"
        )
    if kind == "power-loss" and args[0] == "tear" and len(args) != 3:
        raise ValueError(f"{spec!r}: tear needs <keep fraction>:<garbage bytes>")
    if kind == "power-loss" and args[0] == "drop" and len(args) != 1:
        raise ValueError(f"{spec!r}: drop takes no parameters")
    if kind == "power-loss" and args[0] == "tear":
        _fraction(spec, "keep fraction", args[1])
        if not args[2].isdigit():
            raise ValueError(f"{spec!r}: garbage bytes {args[2]!r} is not a whole number >= 0")
    if kind in ("corrupt", "corrupt-crc"):
        _fraction(spec, "where", args[0])
    if kind == "sector":
        if args[0] not in ("zero", "stale"):
            raise ValueError(f"{spec!r}: sector damage is zero:<where> or stale:<where>")
        _fraction(spec, "where", args[1])
    if kind == "power-loss" and args[0] == "tear-sector" and len(args) != 1:
        raise ValueError(f"{spec!r}: tear-sector takes no parameters")
    if (
        kind == "version-skew"
        and args
        and not (re.fullmatch("[0-9]{1,3}", args[0]) and 1 < int(args[0]) < 256)
    ):
        raise ValueError(f"{spec!r}: the version {args[0]!r} is not a whole number from 2 to 255")
    return kind, args


def _fraction(spec: str, what: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:  # also refuses nan
        raise ValueError(f"{spec!r}: {what} {text!r} is not a fraction from 0 to 1")
    return value


def apply_after_death(trial_dir: Path, spec: str) -> dict[str, Any]:
    """Apply an after-death fault to a dead agent's files; returns what it did."""
    kind, args = parse_after_death(spec)
    done = {"fault": spec, **_AFTER_DEATH[kind][0](trial_dir, args)}
    if kind in AT_REST and done.get("landed"):
        # Damage at rest is on disk: a later power cut keeps it, and the observer's check
        # must not take it for a change the agent made unseen.
        observer.harness_wrote(trial_dir, ["journal"])
    return done
