"""Mutations of a recorded trial folder: damage no runtime made, that one invariant must see.

A broken runtime proves an invariant can fail through real processes. Some
promises are easier to prove by changing the evidence itself: an effect in
the world that no call made (only I8 looks at the world's end state), a
journal corrupted at rest (I9), an execution by a process the supervisor
never started (I6), a VERIFY hint the model never reported reading (I2).
Each mutation picks a passing trial of the campaign it fits, copies its
folder, changes one file of the copy, and the checkers judge the copy again;
the self-check requires that the mutation's invariant fails.

Contract: the campaign's own trial folders are never changed; a mutation
acts only on its copy, under the run folder's ``self-check/`` folder.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.chaos.faults import AT_REST
from harness.chaos.trial import TrialResult
from harness.check.evidence import TrialEvidence
from harness.check.journal import read_journal

__all__ = ["MUTATIONS", "Mutation"]


@dataclass(frozen=True, slots=True)
class Mutation:
    name: str
    invariant: str
    """The invariant that must fail on the mutated copy."""
    damage: str
    fits: Callable[[TrialResult], bool]
    """Whether a passing trial has what the mutation changes."""
    apply: Callable[[Path], None]

    def copy_and_apply(self, trial: TrialResult, into: Path) -> Path:
        """Copy ``trial``'s folder to ``into/<name>`` and damage the copy; returns the copy."""
        target = into / self.name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(trial.directory, target)
        self.apply(target)
        return target


def _write_world(trial_dir: Path, sql: str, *params: object) -> None:
    db = sqlite3.connect(trial_dir / "world.db", isolation_level=None)
    try:
        db.execute(sql, params)
    finally:
        db.close()


def _extra_effect(trial_dir: Path) -> None:
    # Under an op id no step has: a row of a step I8 leaves out (its effect unverifiable,
    # as a step killed after its effect with no check is) would go unseen, rightly.
    _write_world(
        trial_dir,
        "INSERT INTO log (tag, line, op_id) VALUES (?, ?, ?)",
        "mutation",
        "an effect no tool call made",
        "m000",
    )


def _foreign_execution(trial_dir: Path) -> None:
    _write_world(trial_dir, "UPDATE ledger SET pid = 1 WHERE seq = (SELECT min(seq) FROM ledger)")


def _corrupt_at_rest(trial_dir: Path) -> None:
    journal = trial_dir / "journal"
    entries = read_journal(journal).entries
    victim = entries[len(entries) // 2 - 1]
    data = bytearray(journal.read_bytes())
    data[(victim.offset + victim.end) // 2] ^= 0xFF
    journal.write_bytes(bytes(data))


def _unreported_hint(trial_dir: Path) -> None:
    events = trial_dir / "events.jsonl"
    kept = [
        line
        for line in events.read_text("utf-8").splitlines()
        if line and json.loads(line)["event"] != "hint"
    ]
    events.write_text("".join(f"{line}\n" for line in kept), "utf-8")


def _verdict_passed(result: TrialResult, key: str) -> bool:
    return any(v.invariant == key and v.status == "pass" for v in result.verdicts)


def _has_events(result: TrialResult, kind: str) -> bool:
    path = result.directory / "events.jsonl"
    return path.exists() and f'"event": "{kind}"' in path.read_text("utf-8")


def _hint_read_at_a_restart(result: TrialResult) -> bool:
    """A hint the model read for an op a restart found running, in a life that went on
    (a hint read in the life whose call lost its outcome is not one I2 requires)."""
    if not _has_events(result, "hint"):
        return False
    ev = TrialEvidence(result.directory, None)
    return any(
        op_id in ev.ops_at_start(life.life) and ev.invoked_in(life.life)
        for life in ev.lives
        for op_id in ev.hinted_in(life.life)
    )


def _journal_entries(result: TrialResult) -> int:
    return len(read_journal(result.directory / "journal").entries)


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "extra-effect",
        "I8",
        "a row in the world that no tool call wrote",
        lambda r: _verdict_passed(r, "I8") and r.spec.schedule.fault_kinds <= {"sigkill"},
        _extra_effect,
    ),
    Mutation(
        "foreign-execution",
        "I6",
        "the first execution's pid changed to one no life had",
        lambda r: r.spec.runtime == "real" and _verdict_passed(r, "I6"),
        _foreign_execution,
    ),
    Mutation(
        "corrupt-at-rest",
        "I9",
        "a byte flipped inside a record of a journal no fault corrupted",
        lambda r: not r.spec.schedule.fault_kinds & AT_REST and _journal_entries(r) >= 4,
        _corrupt_at_rest,
    ),
    Mutation(
        "unreported-hint",
        "I2",
        "the model's reports of the VERIFY hints it read removed from the events",
        _hint_read_at_a_restart,
        _unreported_hint,
    ),
)
"""Every mutation the self-check applies, each with the invariant it must make fail."""
