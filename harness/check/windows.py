"""Which window of the write-ahead protocol a random-time kill landed in.

A kill at a random moment has no failpoint to name it; afterwards the journal
and the ledger tell where the victim stood:

- ``start-up``: before the life's first append (no incarnation record: it
  goes out with the life's first decisions);
- ``during recovery``: the incarnation began but never finished recovering;
- ``before intent``: recovered, no intent yet in this life;
- ``intent-effect``: the last intent has no ledger row (the effect had not run);
- ``effect-finish``: the effect ran (ledger row) but the finish was not written;
- ``after finish``: the last op of the life had finished.
"""

from __future__ import annotations

from harness.check.evidence import TrialEvidence
from harness.runtime.records import FinishRecord, IncarnationRecord, IntentRecord

__all__ = ["WINDOWS", "kill_windows"]

WINDOWS = (
    "start-up",
    "during recovery",
    "before intent",
    "intent-effect",
    "effect-finish",
    "after finish",
)


def kill_windows(ev: TrialEvidence) -> list[str]:
    """The window of each random-time kill of the trial, in life order."""
    by_pid = {
        s.record.pid: s.record.incarnation
        for s in ev.records
        if isinstance(s.record, IncarnationRecord)
    }
    windows = []
    for life in ev.lives:
        if life.killed != "timed":
            continue
        incarnation = by_pid.get(life.pid)
        windows.append("start-up" if incarnation is None else _window(ev, incarnation))
    return windows


def _window(ev: TrialEvidence, incarnation: int) -> str:
    if incarnation not in ev.recovered_lives:
        return "during recovery"
    last = None
    for s in ev.records:
        r = s.record
        if isinstance(r, IntentRecord | FinishRecord) and r.incarnation == incarnation:
            last = r
    if last is None:
        return "before intent"
    if isinstance(last, FinishRecord):
        return "after finish"
    ran = any(
        e.op_id == last.op_id and e.attempt == last.attempt and e.incarnation == incarnation
        for e in ev.ledger
    )
    return "effect-finish" if ran else "intent-effect"
