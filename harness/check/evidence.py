"""A trial's evidence: its files, read once, for the checkers to query.

The evidence is what the trial left on disk, read with the checkers' own
means: the journal through ``harness.check.journal`` (never the runtime's
reader), the world's effect ledger and state, the supervisor's record of each
life (``lives.json`` and the ``spawn`` events, which carry the journal's size
when the life began and the tool table the supervisor handed it, and the
``exit`` events, the journal as the life left it), what the
user was told (``history.jsonl``, ``ack`` events with the digest of the result
the model was handed, ``hint`` and ``check`` events, and the in-life faults the
agent reported), the trial's
spec (``trial.json``: its schedule), the compiled plan, and the golden world.

Lives are told apart by the supervisor's observations alone: a ledger row
belongs to the life whose pid the world recorded, and a journal record to the
life whose span of the file holds it (from the size the supervisor saw at the
life's spawn, or where a power cut left the valid end), never by the
incarnation or attempt numbers the runtime writes. Nothing here decides.

Calls are told apart by the plan: a model that re-issues its calls under new
ids names each after the plan call it stands for (``s003~2`` in its second
life: ``harness.agent.plan.reissued_id``), so the ledger's rows and the
user's reports of one call fold back to it by id alone (``plan_id``), never
by what the runtime's journal says it matched.
"""

from __future__ import annotations

import functools
import itertools
import json
import zlib
from collections import defaultdict
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from harness.agent.plan import Plan, load_plan, plan_id
from harness.check.journal import (
    PRISTINE_JOURNAL,
    JournalEntry,
    JournalReading,
    OpView,
    fold_ops,
    read_journal,
    read_journal_bytes,
    retry_safe,
)
from harness.check.lives import JournalSeen, LifeJournal
from harness.check.stitch import Epoch, Stitched, compaction_changes, stitch
from harness.check.tables import CheckTable, read_table
from harness.exits import AGENT_REFUSED
from harness.world.store import EffectRow, LedgerEntry, effect_rows, read_ledger

__all__ = ["EVIDENCE", "IN_LIFE_FAULTS", "LifeSeen", "TrialEvidence", "read_jsonl"]

EVIDENCE = frozenset({"journal", "ledger", "history", "world", "results"})
"""What a trial can offer to judge: this project's journal, the effect ledger,
what the user was told, the world's end state, and the digest of the result the
model was handed with each ``ack`` (``results``: the scripted model reports it)."""

IN_LIFE_FAULTS = ("lost-reply", "lost-request", "cancel")
"""Faults that land inside a life, each reported by the agent (``fault <kind> ...``)."""


_OPENING = frozenset({"incarnation", "tail_dropped", "journal"})
"""What a life journals as it opens the journal, before it decides anything (an identity
is given to a journal that has none at its open)."""


def _journal_at(event: dict[str, Any]) -> tuple[Any, Any]:
    """The journal's size and CRC-32 an event of the supervisor saw."""
    return event.get("journal_size"), event.get("journal_crc")


def read_jsonl(path: Path) -> tuple[dict[str, Any], ...]:
    """The objects of a JSON-lines file the supervisor wrote (none if it is missing)."""
    if not path.exists():
        return ()
    return tuple(json.loads(line) for line in path.read_text("utf-8").splitlines() if line)


@functools.lru_cache(maxsize=32)
def _golden_effects(db: Path, inode: int, size: int, mtime_ns: int) -> tuple[EffectRow, ...]:
    """A golden run's effect rows, read once per process: every trial of a campaign's
    worker checks against the same few golden worlds, which nothing writes again (the
    file's identity and size are in the key, so a folder made anew is read anew)."""
    return tuple(effect_rows(db))


@dataclass(frozen=True, slots=True)
class LifeSeen:
    """One life as the supervisor recorded it in ``lives.json`` and its ``spawn`` event."""

    life: int
    pid: int
    returncode: int
    killed: str | None
    reached: str | None
    stderr: str
    journal_size: int | None = None
    """The journal's size when the supervisor spawned this life (None: no journal yet)."""
    table: str | None = None
    """The tool table file the supervisor handed this life (None: the default table)."""
    journal_crc: int | None = None
    """The CRC-32 of the whole journal at its spawn (None: no journal, or not recorded)."""
    torn_at: int | None = None
    """Where the checkers' reader found a torn tail in the journal at its spawn (None: none)."""
    valid_crc: int | None = None
    """The CRC-32 of that journal's bytes before its torn tail (None: no torn tail)."""
    end_size: int | None = None
    """The journal's size at the life's end, before any after-death fault (None: no journal,
    or not recorded)."""
    end_crc: int | None = None
    """The CRC-32 of the whole journal at the life's end."""
    kept: int | None = None
    """How many bytes of the journal at its spawn were still in place at its end."""
    compacted_from: tuple[int, int] | None = None
    """The size and CRC-32 of the file a compaction in this life replaced, as the checkpoint
    of the journal at its end names them (None: it ended with no compaction of its own)."""
    clock: float = 0.0
    """The trial's clock the supervisor handed this life (``HARNESS_TRIAL_CLOCK``)."""


@dataclass
class TrialEvidence:
    trial_dir: Path
    golden_dir: Path | None
    restart_budget: int = 8
    offers: frozenset[str] = EVIDENCE

    # -- the supervisor's own records -------------------------------------------------

    @cached_property
    def events(self) -> tuple[dict[str, Any], ...]:
        """What the supervisor saw, in order (``events.jsonl``)."""
        return read_jsonl(self.trial_dir / "events.jsonl")

    @cached_property
    def history(self) -> tuple[dict[str, Any], ...]:
        """Each step as the user saw it (``history.jsonl``): invoke, ok, fail, info."""
        return read_jsonl(self.trial_dir / "history.jsonl")

    @cached_property
    def spec(self) -> dict[str, Any]:
        """The trial's spec (``trial.json``); empty for a golden run."""
        path = self.trial_dir / "trial.json"
        return dict(json.loads(path.read_text("utf-8"))) if path.exists() else {}

    @cached_property
    def schedule(self) -> tuple[dict[str, Any], ...]:
        return tuple(self.spec.get("schedule", ()))

    @cached_property
    def lives(self) -> tuple[LifeSeen, ...]:
        """Each life as the supervisor saw it; the journal's sizes and CRCs as they stand in
        the stitched journal when it was compacted (``harness.check.stitch``)."""
        if self._stitched is None:
            return self._lives_seen
        return tuple(self._place_life(life) for life in self._lives_seen)

    @cached_property
    def _lives_seen(self) -> tuple[LifeSeen, ...]:
        path = self.trial_dir / "lives.json"
        data = json.loads(path.read_text("utf-8")) if path.exists() else []
        spawns = {int(e["life"]): e for e in self.events if e["event"] == "spawn"}
        exits = {int(e["life"]): e for e in self.events if e["event"] == "exit"}
        data = [d for d in data if d["life"] not in self.stood_down]
        return tuple(
            LifeSeen(
                d["life"],
                d["pid"],
                d["returncode"],
                d["killed"],
                d["reached"],
                d["stderr"],
                spawns.get(d["life"], {}).get("journal_size"),
                spawns.get(d["life"], {}).get("table"),
                spawns.get(d["life"], {}).get("journal_crc"),
                spawns.get(d["life"], {}).get("journal_torn_at"),
                spawns.get(d["life"], {}).get("journal_valid_crc"),
                exits.get(d["life"], {}).get("journal_size"),
                exits.get(d["life"], {}).get("journal_crc"),
                exits.get(d["life"], {}).get("journal_kept"),
                _pair(exits.get(d["life"], {}).get("journal_compacted_from")),
                float(spawns.get(d["life"], {}).get("clock") or 0.0),
            )
            for d in data
        )

    @cached_property
    def stood_down(self) -> frozenset[int]:
        """The lives started beside a paused one (a ``pause`` fault) that stood down: each
        exited refused (``AGENT_REFUSED``: the journal was held), the journal the same at its
        end as at its spawn, no execution of its pid in the ledger. Such a life ran nothing
        of the task, so the checkers leave it out; the supervisor's records keep it."""
        beside: set[int] = set()
        paused: list[int] = []
        for e in self.events:
            if e["event"] == "pause":
                paused.append(int(e["life"]))
            elif e["event"] == "resume" and paused:
                paused.pop()
            elif e["event"] == "spawn" and paused:
                beside.add(int(e["life"]))
        if not beside:
            return frozenset()
        path = self.trial_dir / "lives.json"
        lives = json.loads(path.read_text("utf-8")) if path.exists() else []
        spawns = {int(e["life"]): e for e in self.events if e["event"] == "spawn"}
        exits = {int(e["life"]): e for e in self.events if e["event"] == "exit"}
        ran = {row.pid for row in read_ledger(self.trial_dir / "world.db")}
        return frozenset(
            d["life"]
            for d in lives
            if d["life"] in beside
            and d["returncode"] == AGENT_REFUSED
            and d["killed"] is None
            and d["pid"] not in ran
            and _journal_at(spawns.get(d["life"], {})) == _journal_at(exits.get(d["life"], {}))
        )

    @cached_property
    def life_journals(self) -> tuple[LifeJournal, ...]:
        """Each life's journal as the supervisor saw it at its spawn and its end, and what an
        after-death fault did after it: for I9's judgment of whole lives. In the order of
        their spawns, with where each spawn and end stands among the events (a paused life
        may end after the next)."""
        at = {(e["event"], int(e["life"])): n for n, e in enumerate(self.events) if "life" in e}
        return tuple(
            LifeJournal(
                life.life,
                _seen(life.journal_size, life.journal_crc),
                _seen(life.end_size, life.end_crc),
                life.kept,
                life.torn_at,
                life.valid_crc,
                self.fault_after(life.life) is not None,
                self._changed_from(life.life),
                at.get(("spawn", life.life)),
                at.get(("exit", life.life)),
            )
            for life in sorted(self.lives, key=lambda life: life.life)
        )

    def _changed_from(self, life: int) -> int | None:
        """The first byte the fault after ``life`` changed, in the stitched journal when it
        was compacted (damage at rest keeps the file's own offsets elsewhere)."""
        fault = self.fault_after(life)
        changed = _changed_from(fault)
        epochs = None if self._stitched is None else self._life_epochs.get(life)
        if changed is None or epochs is None or fault is None or "valid_end" in fault:
            return changed  # a power cut's offsets are placed already
        return epochs[1].place(changed)

    @cached_property
    def life_of_pid(self) -> dict[int, int]:
        return {life.pid: life.life for life in self.lives}

    def events_of(self, kind: str, life: int | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events
            if e["event"] == kind and (life is None or int(e.get("life", 0)) == life)
        ]

    @cached_property
    def faults(self) -> tuple[dict[str, Any], ...]:
        """After-death faults the supervisor applied (power loss, corruption, a newer frame)."""
        faults = tuple(self.events_of("fault"))
        if self._stitched is None:
            return faults
        return tuple(self._place_fault(f) for f in faults)

    def fault_after(self, life: int) -> dict[str, Any] | None:
        return next((f for f in self.faults if int(f["life"]) == life), None)

    def cut_after(self, life: int) -> bool:
        """Whether a power cut after ``life`` took bytes it had written (not yet fsynced)."""
        fault = self.fault_after(life)
        return fault is not None and int(fault.get("lost", 0)) > 0

    @cached_property
    def corrupted(self) -> bool:
        """Whether the harness changed the journal at rest (corruption, a bad sector, a newer
        frame): then the checkers read the copy it kept before."""
        return (self.trial_dir / PRISTINE_JOURNAL).exists()

    @cached_property
    def version_skew(self) -> dict[str, Any] | None:
        """The newer runtime's frame a ``version-skew`` fault appended (its life, offset,
        length, version, and the journal's size and CRC-32 it left), if one landed."""
        return next(
            (f for f in self.faults if f["fault"].startswith("version-skew") and f["landed"]),
            None,
        )

    @cached_property
    def journal_now(self) -> tuple[int, int] | None:
        """The journal file's size and CRC-32 as the trial left it (None: there is none): the
        file itself, as the fault that changed it at rest saw it."""
        try:
            data = (self.trial_dir / "journal").read_bytes()
        except FileNotFoundError:
            return None
        return len(data), zlib.crc32(data)

    @cached_property
    def journal_bytes(self) -> bytes | None:
        """The journal file as the trial left it (None: there is none), stitched when it was
        compacted."""
        return self._journal_file("journal")

    def _journal_file(self, name: str) -> bytes | None:
        try:
            data = (self.trial_dir / name).read_bytes()
        except FileNotFoundError:
            return None
        return data if self._stitched is None else self._stitched.join(data)

    @cached_property
    def _stitched(self) -> Stitched | None:
        """The journal's files, when it was compacted and every copy it needs is there (else
        the file as it is: I9 then finds the lives' journals changed)."""
        name = PRISTINE_JOURNAL if self.corrupted else "journal"
        try:
            data = (self.trial_dir / name).read_bytes()
        except FileNotFoundError:
            return None
        found = stitch(self.trial_dir, data)
        return None if found is None or found.problems else found

    @cached_property
    def compactions(self) -> list[tuple[int | None, list[str]]]:
        """Each compaction of the journal: the life that made it (None: not known) and what
        it changed of the ops of the journal it replaced (``stitch.compaction_changes``)."""
        if self._stitched is None:
            return []
        epochs = self._stitched.epochs
        made_by = {pair: life for life, pair in self._life_epochs.items()}
        return [
            (made_by.get((before, after)), compaction_changes(before.data, after))
            for before, after in itertools.pairwise(epochs)
        ]

    @cached_property
    def _life_epochs(self) -> dict[int, tuple[Epoch, Epoch]]:
        """Life -> the file of the journal's history it was handed, and the one it left."""
        assert self._stitched is not None
        epochs = self._stitched.epochs
        lives = self._lives_seen
        handed = [
            (x.torn_at, x.valid_crc) if x.torn_at is not None else (x.journal_size, x.journal_crc)
            for x in lives
        ]
        at = spawned = 0
        out = {}
        for n, life in enumerate(lives):
            if n and self._power_cut_after(lives[n - 1].life):
                # A power cut can undo the last life's compaction (its rename not yet
                # durable): this life may have been handed the file that one was.
                at = spawned
            at = _epoch_holding(epochs, at, *handed[n]) or at
            spawned = at
            left = _epoch_holding(epochs, at, life.end_size, life.end_crc)
            # A fault after it changed the file it left: the next life was handed what
            # remained of that same file; or a power cut after a later life that did not
            # compact (a file it left unsynced, cut), and the first life handed what
            # remained holds it.
            for m in range(n + 1, len(lives)):
                if left is not None:
                    break
                if m > n + 1 and not any(self._power_cut_after(x.life) for x in lives[n:m]):
                    break
                left = _epoch_holding(epochs, at, *handed[m])
                if lives[m].compacted_from is not None:
                    break  # it made a file of its own: what it was handed is the last clue
            at = left or at
            out[life.life] = (epochs[spawned], epochs[at])
        return out

    def handed_offset(self, life: int, offset: int) -> int:
        """An offset in the journal file ``life`` was handed (as its runtime names it: where a
        torn tail was cut), in the stitched journal when it was compacted."""
        epochs = None if self._stitched is None else self._life_epochs.get(life)
        return offset if epochs is None else epochs[0].place(offset)

    @cached_property
    def _stitched_reading(self) -> bytes:
        name = PRISTINE_JOURNAL if self.corrupted else "journal"
        return self._journal_file(name) or b""

    def _place_seen(self, epoch: Epoch, size: int | None, crc: int | None) -> tuple[Any, Any]:
        """A size and CRC the supervisor saw of a file, as they stand in the stitched journal:
        the CRC of the stitched bytes when the file's own bytes bear it out, else as seen."""
        if size is None:
            return None, crc
        placed = epoch.place(size)
        if crc is None:
            return placed, crc
        if epoch.holds(size, crc):
            return placed, zlib.crc32(self._stitched_reading[:placed])
        assert self._stitched is not None
        final = self._final_file
        # The last file after a fault changed it at rest: its bytes as the trial left them.
        last = epoch is self._stitched.epochs[-1]
        if last and final is not None and Epoch(final, 0, 0).holds(size, crc):
            return placed, zlib.crc32((self.journal_bytes or b"")[:placed])
        return placed, crc

    @cached_property
    def _final_file(self) -> bytes | None:
        try:
            return (self.trial_dir / "journal").read_bytes()
        except FileNotFoundError:
            return None

    def _power_cut_after(self, life: int) -> bool:
        """Whether a power cut followed ``life`` (as the supervisor logged it, unplaced)."""
        return any(str(f["fault"]).startswith("power-loss") for f in self.events_of("fault", life))

    def _place_life(self, life: LifeSeen) -> LifeSeen:
        spawned, left = self._life_epochs[life.life]
        size, crc = self._place_seen(spawned, life.journal_size, life.journal_crc)
        torn_at, valid_crc = self._place_seen(spawned, life.torn_at, life.valid_crc)
        end_size, end_crc = self._place_seen(left, life.end_size, life.end_crc)
        kept = life.kept
        undone = spawned is left and life.compacted_from is not None
        undone = undone and self._power_cut_after(life.life)
        if kept is not None and (spawned is not left or undone):
            # Compacted in this life: the stitched journal keeps every record it was handed
            # when the copy of the file it replaced begins with them.
            whole = life.torn_at if life.torn_at is not None else life.journal_size
            whole_crc = life.valid_crc if life.torn_at is not None else life.journal_crc
            held = whole is not None and whole_crc is not None and spawned.holds(whole, whole_crc)
            if undone and held:
                # Its compaction, undone by the power cut after it: it replaced the file this
                # life was handed (or that file with this life's appends), never less of it.
                assert life.compacted_from is not None and whole is not None
                replaced_size, replaced_crc = life.compacted_from
                held = replaced_size >= whole and spawned.holds(replaced_size, replaced_crc)
            kept = spawned.place(whole) if held and whole is not None else 0
        elif kept is not None:
            kept = spawned.place(kept)
        return replace(
            life,
            journal_size=size,
            journal_crc=crc,
            torn_at=torn_at,
            valid_crc=valid_crc,
            end_size=end_size,
            end_crc=end_crc,
            kept=kept,
        )

    def _place_fault(self, fault: dict[str, Any]) -> dict[str, Any]:
        """A power cut's offsets, in the file the life before it left, placed. Damage at rest
        ends the trial and is judged in the file itself (the refusal names its offsets)."""
        epoch = self._life_epochs.get(int(fault["life"]))
        if epoch is None or "valid_end" not in fault:
            return fault
        left = epoch[1]
        placed = dict(fault)
        for key in _FAULT_OFFSETS:
            if isinstance(placed.get(key), int) and not isinstance(placed[key], bool):
                placed[key] = left.place(placed[key])
        if isinstance(placed.get("bytes"), list):
            placed["bytes"] = [left.place(int(b)) for b in placed["bytes"]]
        return placed

    @cached_property
    def plan(self) -> Plan:
        return load_plan(self.trial_dir / "plan.json")

    def invoked_in(self, life: int) -> bool:
        """Whether the life got past recovery: the model told the user it began a step."""
        return any(h["type"] == "invoke" and int(h["life"]) == life for h in self.history)

    def hinted_in(self, life: int) -> set[str]:
        """The ops whose VERIFY hint the model reported reading in ``life``."""
        return {str(e["op"]) for e in self.events_of("hint", life)}

    # -- the world --------------------------------------------------------------------

    @cached_property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        """The world's executions; where the journal ended when each committed, placed in the
        stitched journal when it was compacted (a life compacts before it runs any tool)."""
        rows = tuple(read_ledger(self.trial_dir / "world.db"))
        if self._stitched is None:
            return rows
        placed = []
        for row in rows:
            life = self.life_of_pid.get(row.pid)
            epochs = None if life is None else self._life_epochs.get(life)
            if epochs is not None and row.journal_pos is not None:
                row = replace(row, journal_pos=epochs[1].place(row.journal_pos))
            placed.append(row)
        return tuple(placed)

    def ledger_of(self, op_id: str) -> list[LedgerEntry]:
        return list(self._ledger_index[0].get(op_id, ()))

    def runs_of_call(self, op_id: str) -> list[LedgerEntry]:
        """Executions of the plan call ``op_id`` stands for, under any id it was issued as
        (``s003``, ``s003~2``, ...; a redo, ``s003.redo``, is a call of its own)."""
        return list(self._ledger_index[1].get(plan_id(op_id), ()))

    def step_chain(self, op_id: str) -> list[LedgerEntry]:
        """Executions of an op's call and of the redoes that stand for it (``s003``,
        ``s003~2``, ``s003.redo``...), in ledger order."""
        return list(self._ledger_index[2].get(plan_id(op_id), ()))

    @cached_property
    def _ledger_index(
        self,
    ) -> tuple[
        dict[str, list[LedgerEntry]], dict[str, list[LedgerEntry]], dict[str, list[LedgerEntry]]
    ]:
        """The ledger by op id, by plan call, and by the call each row stands for (itself,
        or the call whose ``.redo`` it is): each looked up per op, so built once, in order."""
        by_id: dict[str, list[LedgerEntry]] = defaultdict(list)
        by_call: dict[str, list[LedgerEntry]] = defaultdict(list)
        chains: dict[str, list[LedgerEntry]] = defaultdict(list)
        for entry in self.ledger:
            call = plan_id(entry.op_id)
            by_id[entry.op_id].append(entry)
            by_call[call].append(entry)
            chains[call].append(entry)
            at = call.find(".redo")
            while at >= 0:  # a redo of call[:at] (of a redo of it, ...)
                chains[call[:at]].append(entry)
                at = call.find(".redo", at + 1)
        return by_id, by_call, chains

    def life_of_row(self, entry: LedgerEntry) -> int | None:
        """The life whose process ran this execution, by the pid the world recorded."""
        return self.life_of_pid.get(entry.pid)

    @cached_property
    def world(self) -> tuple[EffectRow, ...]:
        return tuple(effect_rows(self.trial_dir / "world.db"))

    @cached_property
    def golden_world(self) -> tuple[EffectRow, ...] | None:
        if self.golden_dir is None:
            return None
        db = self.golden_dir / "world.db"
        try:
            seen = db.stat()
        except FileNotFoundError:
            return tuple(effect_rows(db))  # says so as any reading of a world does
        return _golden_effects(db, seen.st_ino, seen.st_size, seen.st_mtime_ns)

    # -- the journal, read and split by life ------------------------------------------

    @cached_property
    def has_journal(self) -> bool:
        """Whether the runtime under test offers this project's journal to judge."""
        return "journal" in self.offers

    @cached_property
    def reading(self) -> JournalReading:
        name = PRISTINE_JOURNAL if self.corrupted else "journal"
        if self._stitched is not None:
            return read_journal_bytes(self._stitched_reading)
        return read_journal(self.trial_dir / name)

    @cached_property
    def final_reading(self) -> JournalReading:
        """The journal file as the trial left it (after any injected corruption), stitched
        when it was compacted."""
        if self._stitched is not None:
            return read_journal_bytes(self.journal_bytes or b"")
        if not self.corrupted:
            return self.reading  # the same file: read once
        return read_journal(self.trial_dir / "journal")

    @cached_property
    def entries(self) -> tuple[JournalEntry, ...]:
        return self.reading.entries

    @cached_property
    def life_starts(self) -> dict[int, int]:
        """Life -> the byte offset where its records begin in the journal.

        The size the supervisor saw at its spawn, unless a power cut left a torn
        tail that no life has dropped yet: then the tail's valid end, where the
        life drops it and writes from. The cut after the life before leaves such a
        tail; so does an earlier one, when every life since died before touching
        the journal (the same size and CRC at each of their spawns). A life that
        kept less of the journal than it was handed (the supervisor saw at its end
        how much) wrote from where it cut: the record holding that byte, if any.
        """
        starts = {}
        cut: int | None = None  # the valid end of a torn tail not dropped yet
        left: tuple[int | None, int | None] = (None, None)  # the journal as the cut left it
        for life in self.lives:
            size = life.journal_size or 0
            fault = self.fault_after(life.life - 1)
            if fault is not None and fault.get("valid_end") is not None:
                cut, left = int(fault["valid_end"]), (life.journal_size, life.journal_crc)
            elif cut is not None and (
                life.journal_crc is None or (life.journal_size, life.journal_crc) != left
            ):
                cut = None  # a life since dropped the tail (or the journal changed)
            starts[life.life] = size if cut is None else min(size, cut)
            if life.kept is not None and life.kept < size:
                starts[life.life] = min(starts[life.life], self._first_write(life.kept))
        return starts

    def _first_write(self, kept: int) -> int:
        """Where a life that kept only the first ``kept`` bytes of its journal wrote from: the
        record it wrote over them begins at or before ``kept`` (its first bytes, the frame's
        magic, may be the same), or at ``kept`` when it wrote nothing."""
        return next((e.offset for e in self.entries if e.offset <= kept < e.end), kept)

    def span_of(self, life: int) -> tuple[int, int]:
        start = self.life_starts.get(life, 0)
        later = [s for n, s in self.life_starts.items() if n > life]
        return start, min(later) if later else 1 << 62

    def entries_of(self, life: int) -> list[JournalEntry]:
        """The journal records the life wrote: those inside its span of the file."""
        found = self._entries_by_life.get(life)
        if found is None:
            start, end = self.span_of(life)
            found = self._entries_by_life[life] = [
                e for e in self.entries if start <= e.offset < end
            ]
        return list(found)

    @cached_property
    def _entries_by_life(self) -> dict[int, list[JournalEntry]]:
        return {}

    def life_of_offset(self, offset: int) -> int | None:
        for life in self.lives:
            start, end = self.span_of(life.life)
            if start <= offset < end:
                return life.life
        return None

    def ops_at_start(self, life: int) -> dict[str, OpView]:
        """Every op as the journal stood when ``life`` began."""
        start = self.life_starts.get(life, 0)
        return fold_ops(e for e in self.entries if e.end <= start)

    @cached_property
    def final_ops(self) -> dict[str, OpView]:
        return fold_ops(self.entries)

    def decisions_in(self, life: int) -> dict[str, JournalEntry]:
        """Op id -> the last decision the life journaled for it."""
        return {str(e.op_id): e for e in self.entries_of(life) if e.kind == "decision" and e.op_id}

    def progressed(self, life: int) -> bool:
        """Whether the life got as far as deciding: it journaled a decision or anything after
        one, or ran a tool. Its first append may only say it began and cut a torn tail."""
        pid = next((x.pid for x in self.lives if x.life == life), None)
        return any(e.kind not in _OPENING for e in self.entries_of(life)) or any(
            e.pid == pid for e in self.ledger
        )

    @cached_property
    def resolutions(self) -> dict[str, JournalEntry]:
        return {str(e.op_id): e for e in self.entries if e.kind == "resolved" and e.op_id}

    # -- classes, from the tables the supervisor handed out ----------------------------

    @cached_property
    def _tables(self) -> dict[str | None, CheckTable]:
        """Each table file handed out, read with the checkers' own reader (``check.tables``)."""
        tables: dict[str | None, CheckTable] = {None: read_table(None)}
        for life in self.lives:
            if life.table is not None and life.table not in tables:
                tables[life.table] = read_table(life.table)
        return tables

    def table_of(self, life: int | None) -> CheckTable:
        seen = next((x for x in self.lives if x.life == life), None)
        return self._tables[None if seen is None else seen.table]

    def class_of(self, op: OpView) -> tuple[str, bool]:
        """``(class, ask_user)`` of an op by the table handed to the life of its first intent."""
        return self.table_of(self.life_of_offset(op.first_intent.offset)).class_of(op.tool)

    def op_retry_safe(self, op: OpView, life: int | None = None) -> bool:
        """Retried at the start of ``life``: a safe class, or a keyed tool whose key is
        younger than its window there. The key's age is the clock the supervisor handed
        ``life`` less the one it handed the life of the first intent of the op's chain of
        redoes (they share its key); without ``life``, any keyed op counts as retried."""
        table = self.table_of(self.life_of_offset(op.first_intent.offset))
        window = table.keyed.get(op.tool)
        if retry_safe(*self.class_of(op)) or (window is not None and life is None):
            return True
        if window is None or life is None:
            return False
        age = self.clock_of(life) - self.clock_of(self.life_of_offset(self._key_root(op).offset))
        return 0 <= age < window

    def clock_of(self, life: int | None) -> float:
        """The trial's clock the supervisor handed ``life`` (0 when not known)."""
        return next((x.clock for x in self.lives if x.life == life), 0.0)

    def _key_root(self, op: OpView) -> JournalEntry:
        """The first intent of the first op of ``op``'s chain of redoes."""
        ops, first, seen = self.final_ops, op, {op.op_id}
        while (parent := first.first_intent.payload.get("redo_of")) in ops and parent not in seen:
            seen.add(parent)
            first = ops[parent]
        return first.first_intent

    def tool_retry_safe(self, tool: str, life: int | None) -> bool:
        table = self.table_of(life)
        return retry_safe(*table.class_of(tool)) or tool in table.keyed

    # -- what the user was told ---------------------------------------------------------

    @cached_property
    def acks(self) -> list[dict[str, Any]]:
        """Every ``ack`` the supervisor received: life, op, the ledger's seq at that moment, and
        the digest of the result the model was handed (``result``)."""
        return self.events_of("ack")

    @cached_property
    def in_life_faults(self) -> list[tuple[int, dict[str, Any]]]:
        """Every lost reply, lost request and cancel the agent reported, with its place among
        the events; the op it hit is the last word of its ``at``."""
        return [(i, e) for i, e in enumerate(self.events) if e["event"] in IN_LIFE_FAULTS]

    @cached_property
    def told_unknown(self) -> list[dict[str, Any]]:
        """Every ``info`` the model told (the supervisor's own, for a step in flight when a
        life ended, carries ``why`` and is left out)."""
        return [h for h in self.history if h["type"] == "info" and "why" not in h]

    @cached_property
    def last_told(self) -> dict[str, tuple[str, int]]:
        """Plan call id -> the last thing the user was told of it, and in which life."""
        return {plan_id(str(h["op"])): (str(h["type"]), int(h["life"])) for h in self._told}

    @cached_property
    def last_report(self) -> dict[str, str]:
        """Plan call id -> the last thing the user was told of it (invoke, ok, fail, info),
        under whichever id it was issued last (``s003~2`` reports on ``s003``)."""
        return {plan_id(str(h["op"])): str(h["type"]) for h in self._told}

    @cached_property
    def _told(self) -> tuple[dict[str, Any], ...]:
        """The history, less a call a paused life left in flight at its end (``info``) that
        a life run beside it answered (``ok`` or ``fail``) since the paused one invoked it:
        the user was told, by the life that took over. Lives one after the other never
        leave such an entry."""
        kept: list[dict[str, Any]] = []
        invoked: dict[tuple[str, int], int] = {}  # (call, life) -> where it was last invoked
        for at, h in enumerate(self.history):
            call, life = plan_id(str(h["op"])), int(h["life"])
            if h["type"] == "invoke":
                invoked[call, life] = at
            elif h["type"] == "info" and h.get("why") == "in flight when the life ended":
                since = invoked.get((call, life), at)
                answered = any(
                    plan_id(str(o["op"])) == call
                    and int(o["life"]) != life
                    and o["type"] in ("ok", "fail")
                    for o in self.history[since:at]
                )
                if answered:
                    continue
            kept.append(h)
        return tuple(kept)

    @cached_property
    def rows_by_op_and_life(self) -> dict[tuple[str, int | None], list[LedgerEntry]]:
        out: dict[tuple[str, int | None], list[LedgerEntry]] = defaultdict(list)
        for entry in self.ledger:
            out[entry.op_id, self.life_of_row(entry)].append(entry)
        return dict(out)


_FAULT_OFFSETS = (
    "valid_end",
    "kept",
    "size",
    "offset",
    "record_offset",
    "corrupted",
    "journal_size",
)
"""The fields of an after-death fault that are offsets in the journal file."""


def _epoch_holding(
    epochs: tuple[Epoch, ...], at: int, size: int | None, crc: int | None
) -> int | None:
    """The file of the journal's history a size and CRC the supervisor saw belong to: the
    one ``at``, or the next when a compaction replaced it (None: neither holds those bytes,
    a change I9 judges; ``at`` when nothing was seen)."""
    if size is None or crc is None or epochs[at].holds(size, crc):
        return at
    if at + 1 < len(epochs) and epochs[at + 1].holds(size, crc):
        return at + 1
    return None


def _pair(value: Any) -> tuple[int, int] | None:
    return None if value is None else (int(value[0]), int(value[1]))


def _seen(size: int | None, crc: int | None) -> JournalSeen | None:
    return None if size is None or crc is None else JournalSeen(size, crc)


def _changed_from(fault: dict[str, Any] | None) -> int | None:
    """The first byte an after-death fault changed or cut (None: it changed none in place).

    A power cut that lost bytes cut from what it kept; damage at rest changed bytes from
    the first it touched; a newer frame, or a cut that lost nothing, only appended."""
    if fault is None:
        return None
    if "kept" in fault:
        return int(fault["kept"]) if int(fault.get("lost", 0)) > 0 else None
    if fault.get("bytes"):
        return int(fault["bytes"][0])
    corrupted = fault.get("corrupted")
    return None if corrupted is None else int(corrupted)
