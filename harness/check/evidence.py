"""A trial's evidence: its files, read once, for the checkers to query.

The evidence is what the trial left on disk: the agent's journal, the world's
effect ledger and state, the supervisor's record of each life
(``lives.json``), the compiled plan, and the golden (crash-free) world of the
same seed. Nothing here decides; it only reads and indexes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from harness.agent.plan import Plan, load_plan
from harness.chaos.faults import PRISTINE_JOURNAL
from harness.runtime.journal import ScannedRecord, scan_journal
from harness.runtime.records import (
    DecisionRecord,
    FinishRecord,
    IncarnationRecord,
    IntentRecord,
    RecoveredRecord,
    ResolvedRecord,
)
from harness.runtime.recovery import OpHistory, fold
from harness.world.store import EffectRow, LedgerEntry, effect_rows, read_ledger

__all__ = ["LifeSeen", "TrialEvidence", "read_jsonl"]


def read_jsonl(path: Path) -> tuple[dict[str, Any], ...]:
    """The objects of a JSON-lines file the supervisor wrote (none if it is missing)."""
    if not path.exists():
        return ()
    return tuple(json.loads(line) for line in path.read_text("utf-8").splitlines() if line)


@dataclass(frozen=True, slots=True)
class LifeSeen:
    """One life as the supervisor recorded it in ``lives.json``."""

    life: int
    pid: int
    returncode: int
    killed: str | None
    reached: str | None
    stderr: str


@dataclass
class TrialEvidence:
    trial_dir: Path
    golden_dir: Path | None
    restart_budget: int = 8

    @cached_property
    def has_journal(self) -> bool:
        """Whether the runtime under test keeps this project's journal (third parties do not)."""
        return (self.trial_dir / "journal").exists() or self.corrupted

    @cached_property
    def history(self) -> tuple[dict[str, Any], ...]:
        """Each step as the user saw it (``history.jsonl``): invoke, ok, fail, info."""
        return read_jsonl(self.trial_dir / "history.jsonl")

    @cached_property
    def corrupted(self) -> bool:
        """Whether the harness injected corruption (then the checkers read the copy before it)."""
        return (self.trial_dir / PRISTINE_JOURNAL).exists()

    @cached_property
    def records(self) -> tuple[ScannedRecord, ...]:
        name = PRISTINE_JOURNAL if self.corrupted else "journal"
        return scan_journal(self.trial_dir / name).records

    @cached_property
    def plan(self) -> Plan:
        return load_plan(self.trial_dir / "plan.json")

    @cached_property
    def lives(self) -> tuple[LifeSeen, ...]:
        path = self.trial_dir / "lives.json"
        data = json.loads(path.read_text("utf-8")) if path.exists() else []
        return tuple(
            LifeSeen(d["life"], d["pid"], d["returncode"], d["killed"], d["reached"], d["stderr"])
            for d in data
        )

    @cached_property
    def events(self) -> tuple[dict[str, Any], ...]:
        """What the supervisor saw, in order (``events.jsonl``)."""
        return read_jsonl(self.trial_dir / "events.jsonl")

    @cached_property
    def acks(self) -> dict[str, int]:
        """Op id -> when (ns) the agent first told the outside world it succeeded."""
        out: dict[str, int] = {}
        for event in self.events:
            if event["event"] == "ack":
                out.setdefault(event["op"], event["t_ns"])
        return out

    @cached_property
    def faults(self) -> tuple[dict[str, Any], ...]:
        """After-death faults the supervisor applied (power loss, corruption)."""
        return tuple(e for e in self.events if e["event"] == "fault")

    @cached_property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        return tuple(read_ledger(self.trial_dir / "world.db"))

    @cached_property
    def world(self) -> tuple[EffectRow, ...]:
        return tuple(effect_rows(self.trial_dir / "world.db"))

    @cached_property
    def golden_world(self) -> tuple[EffectRow, ...] | None:
        if self.golden_dir is None:
            return None
        return tuple(effect_rows(self.golden_dir / "world.db"))

    # -- journal views ------------------------------------------------------------------

    @cached_property
    def life_starts(self) -> dict[int, int]:
        """Incarnation -> index in ``records`` of its IncarnationRecord."""
        return {
            s.record.incarnation: i
            for i, s in enumerate(self.records)
            if isinstance(s.record, IncarnationRecord)
        }

    def ops_before_life(self, incarnation: int) -> dict[str, OpHistory]:
        """Every op's history as the journal stood when ``incarnation`` began."""
        end = self.life_starts.get(incarnation, len(self.records))
        return fold(s.record for s in self.records[:end])

    @cached_property
    def final_ops(self) -> dict[str, OpHistory]:
        return fold(s.record for s in self.records)

    @cached_property
    def decisions(self) -> dict[int, dict[str, DecisionRecord]]:
        """Incarnation -> op id -> the decision journaled in that life."""
        out: dict[int, dict[str, DecisionRecord]] = defaultdict(dict)
        for s in self.records:
            if isinstance(s.record, DecisionRecord):
                out[s.record.incarnation][s.record.op_id] = s.record
        return dict(out)

    @cached_property
    def recovered_lives(self) -> frozenset[int]:
        return frozenset(
            s.record.incarnation for s in self.records if isinstance(s.record, RecoveredRecord)
        )

    def records_of(self, kind: type[Any], incarnation: int | None = None) -> list[ScannedRecord]:
        return [
            s
            for s in self.records
            if isinstance(s.record, kind)
            and (incarnation is None or getattr(s.record, "incarnation", None) == incarnation)
        ]

    @cached_property
    def intents(self) -> dict[tuple[str, int], ScannedRecord]:
        """(op id, attempt) -> its first intent record."""
        out: dict[tuple[str, int], ScannedRecord] = {}
        for s in self.records:
            if isinstance(s.record, IntentRecord):
                out.setdefault((s.record.op_id, s.record.attempt), s)
        return out

    @cached_property
    def finishes(self) -> dict[str, list[ScannedRecord]]:
        out: dict[str, list[ScannedRecord]] = defaultdict(list)
        for s in self.records:
            if isinstance(s.record, FinishRecord):
                out[s.record.op_id].append(s)
        return dict(out)

    @cached_property
    def resolutions(self) -> dict[str, ResolvedRecord]:
        return {
            s.record.op_id: s.record for s in self.records if isinstance(s.record, ResolvedRecord)
        }

    def ledger_of(self, op_id: str) -> list[LedgerEntry]:
        return [e for e in self.ledger if e.op_id == op_id]
