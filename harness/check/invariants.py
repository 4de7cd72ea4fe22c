"""The invariants of DESIGN.md §4 as checkers over a trial's files.

Each checker is a function of a ``TrialEvidence`` that returns a ``Verdict``:
pass, fail, or unknown (the evidence cannot decide, or reading it failed),
with the evidence that decided. ``check_trial`` runs them all and never
raises: an exception inside a checker becomes ``unknown`` carrying the error.

The effect ledger is the ground truth for "did it run": each real execution
of a tool is one ledger row, written with the effect, carrying the journal's
size at that moment (``journal_pos``). So "ran after its finish was durable"
is ``journal_pos > finish offset``, and "ran before its intent was durable" is
``journal_pos < intent end``, whatever the runtime under test believes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness.check.evidence import TrialEvidence
from harness.runtime.classes import ToolTable
from harness.runtime.errors import JournalCorruptError
from harness.runtime.journal import scan_journal
from harness.runtime.matrix import Decision, OpState, decide
from harness.runtime.records import (
    FinishRecord,
    HintRecord,
    IncarnationRecord,
    TailDroppedRecord,
)
from harness.world.store import EffectRow, step_of

__all__ = ["INVARIANTS", "Verdict", "check_trial"]

Status = Literal["pass", "fail", "unknown"]
EXIT_REFUSED = 2  # the agent's status when it refuses to start (harness.agent.__main__)

# World tables that are not effects: asking a person again is harmless by the
# seed's definition, so the question log is left out of the end-state check.
NOT_EFFECTS = frozenset({"questions"})
# Tables whose rows are a cost, not state (a second download of the same app,
# a second identical git blob): compared as sets, not multisets.
SET_TABLES = frozenset({"downloads", "repo_blobs", "directories"})
MAX_EVIDENCE = 12


@dataclass(frozen=True, slots=True)
class Verdict:
    invariant: str
    title: str
    status: Status
    evidence: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "invariant": self.invariant,
            "title": self.title,
            "status": self.status,
            "evidence": list(self.evidence),
        }


def _verdict(key: str, problems: Iterable[str], fine: str) -> Verdict:
    found = list(problems)
    if found:
        shown = found[:MAX_EVIDENCE]
        if len(found) > MAX_EVIDENCE:
            shown.append(f"... and {len(found) - MAX_EVIDENCE} more")
        return Verdict(key, TITLES[key], "fail", tuple(shown))
    return Verdict(key, TITLES[key], "pass", (fine,))


def _unknown(key: str, why: str) -> Verdict:
    return Verdict(key, TITLES[key], "unknown", (why,))


def _ran_after(ev: TrialEvidence, op_id: str, offset: int, what: str) -> list[str]:
    """Executions of ``op_id`` that happened once the journal held its ``what`` at ``offset``."""
    return [
        f"{op_id} ({entry.tool}) ran again in life {entry.incarnation} (ledger #{entry.seq}, "
        f"journal at byte {entry.journal_pos}) after its {what} was journaled at byte {offset}"
        for entry in ev.ledger_of(op_id)
        if entry.journal_pos is not None and entry.journal_pos > offset
    ]


def check_success_not_rerun(ev: TrialEvidence) -> Verdict:
    """I1: a success is never re-executed once durable, nor once reported to the user.

    Durable: a ledger row for the op after its SUCCEEDED finish was in the
    journal. Reported: a ledger row after the agent acknowledged the op's
    success to the outside world (a runtime that reports success before the
    finish is durable breaks this after a power loss).
    """
    problems = []
    checked = 0
    for op_id, finishes in ev.finishes.items():
        success = next(
            (f for f in finishes if isinstance(f.record, FinishRecord) and f.record.succeeded),
            None,
        )
        if success is None:
            continue
        checked += 1
        problems += _ran_after(ev, op_id, success.offset, "success")
    for op_id, acked_ns in ev.acks.items():
        checked += 1
        for entry in ev.ledger_of(op_id):
            if entry.time_ns > acked_ns:
                problems.append(
                    f"{op_id} ({entry.tool}) ran again (ledger #{entry.seq}, pid {entry.pid}) "
                    f"after its success was reported to the user"
                )
    return _verdict("I1", problems, f"{checked} successes, none re-executed")


def check_unknown_outcome_verified(ev: TrialEvidence) -> Verdict:
    """I2: a RUNNING op of a non-idempotent or unknown class is VERIFYed, hinted, never re-run."""
    problems = []
    checked = 0
    for life in sorted(ev.decisions):
        before = ev.ops_before_life(life)
        for op_id, op in before.items():
            cls = op.snapshot
            if op.resolved or op.state is not OpState.RUNNING or cls.retry_safe:
                continue
            decision = ev.decisions[life].get(op_id)
            if decision is None and life not in ev.recovered_lives:
                continue  # a power cut tore this life's decision batch: not judged here
            checked += 1
            if decision is None or decision.decision is not Decision.VERIFY:
                got = (
                    "no decision"
                    if decision is None
                    else (f"{decision.decision.value} (as {decision.state.value})")
                )
                problems.append(
                    f"{op_id} ({op.tool}, {cls.idempotency.value}) was RUNNING at the start of "
                    f"life {life} and got {got}, not VERIFY"
                )
            hints = ev.records_of(HintRecord, life)
            hinted = any(getattr(s.record, "op_id", None) == op_id for s in hints)
            if life in ev.recovered_lives and not hinted:
                problems.append(f"{op_id}: VERIFY hint never reached the model in life {life}")
            again = [e for e in ev.ledger_of(op_id) if e.incarnation >= life]
            if again:
                problems.append(
                    f"{op_id} ({op.tool}) executed again under its own id in life "
                    f"{again[0].incarnation} (ledger #{again[0].seq}) instead of being verified"
                )
            if _finished(ev) and op_id not in ev.resolutions:
                problems.append(f"{op_id}: the model never resolved its VERIFY")
    problems += _unsafe_ran_twice(ev)
    return _verdict("I2", problems, f"{checked} unknown outcomes verified, none replayed")


def _unsafe_ran_twice(ev: TrialEvidence) -> list[str]:
    """Ledger alone, for any runtime: an unsafe op id never runs twice.

    The class is the intent's snapshot when the runtime journals one, else the
    default table's. A runtime that verifies redoes a step under a new op id.
    """
    table = ToolTable.default()
    ops = ev.final_ops
    problems = []
    for op_id, count in Counter(e.op_id for e in ev.ledger).items():
        if count < 2:
            continue
        tool = ev.ledger_of(op_id)[0].tool
        cls = ops[op_id].snapshot if op_id in ops else table.classify(tool)
        if not cls.retry_safe:
            problems.append(
                f"{op_id} ({tool}, {cls.idempotency.value}) ran {count} times: "
                f"a {cls.idempotency.value} call was replayed"
            )
    return problems


def check_safe_outcome_retried(ev: TrialEvidence) -> Verdict:
    """I3: a RUNNING read-only, idempotent or ask-user op is RETRYed under the same op id."""
    problems = []
    checked = 0
    for life in sorted(ev.decisions):
        for op_id, op in ev.ops_before_life(life).items():
            if op.resolved or op.state is not OpState.RUNNING or not op.snapshot.retry_safe:
                continue
            decision = ev.decisions[life].get(op_id)
            if decision is None and life not in ev.recovered_lives:
                continue  # a power cut tore this life's decision batch: not judged here
            checked += 1
            if decision is None or decision.decision is not Decision.RETRY:
                got = "no decision" if decision is None else decision.decision.value
                problems.append(
                    f"{op_id} ({op.tool}) was RUNNING at life {life}: got {got}, not RETRY"
                )
                continue
            retried = (op_id, op.attempt + 1) in ev.intents
            if life in ev.recovered_lives and not retried:
                problems.append(
                    f"{op_id}: decided RETRY in life {life} but no attempt "
                    f"{op.attempt + 1} under the same op id"
                )
    return _verdict("I3", problems, f"{checked} safe unknown outcomes retried under their id")


def _final_failures(ev: TrialEvidence) -> Iterable[tuple[str, int]]:
    """(op id, offset) of every FAILED finish that settled its op (not retried in-process)."""
    for s in ev.records:
        r = s.record
        if isinstance(r, FinishRecord) and not r.succeeded and not r.retrying:
            yield r.op_id, s.offset


def check_settled_skipped(ev: TrialEvidence) -> Verdict:
    """I4: FAILED and NOT_STARTED ops get SKIP, and a FAILED op is not re-executed."""
    problems = []
    checked = 0
    for life, by_op in sorted(ev.decisions.items()):
        before = ev.ops_before_life(life)
        for op_id, decision in by_op.items():
            op = before.get(op_id)
            settled = (decision.state is OpState.NOT_STARTED and op is None) or (
                op is not None and op.state is OpState.FAILED
            )
            if settled:
                checked += 1
                if decision.decision is not Decision.SKIP:
                    problems.append(
                        f"{op_id}: {decision.state.value} op got "
                        f"{decision.decision.value} in life {life}, not SKIP"
                    )
    for op_id, offset in _final_failures(ev):
        problems += _ran_after(ev, op_id, offset, "failure")
    return _verdict("I4", problems, f"{checked} settled ops skipped, no failure re-run")


def check_snapshot_decides(ev: TrialEvidence) -> Verdict:
    """I5: every decision is the matrix cell of the journal state and the intent's snapshot."""
    problems = []
    checked = 0
    for life, by_op in sorted(ev.decisions.items()):
        before = ev.ops_before_life(life)
        for op_id, decision in by_op.items():
            op = before.get(op_id)
            if op is None:
                continue  # NOT_STARTED: no snapshot exists (I4 holds it to SKIP)
            checked += 1
            expected = decide(op.state, op.snapshot)
            if decision.decision is not expected or decision.snapshot != op.snapshot:
                problems.append(
                    f"{op_id} ({op.tool}) in life {life}: decided {decision.decision.value} from "
                    f"class {decision.snapshot.idempotency.value}; its intent snapshotted "
                    f"{op.snapshot.idempotency.value}, which decides {expected.value}"
                )
    return _verdict("I5", problems, f"{checked} decisions follow their snapshot")


def check_write_ahead(ev: TrialEvidence) -> Verdict:
    """I6: every ledger row has an intent for its (op, attempt) durable before the effect."""
    problems = []
    unknown = 0
    for entry in ev.ledger:
        intent = ev.intents.get((entry.op_id, entry.attempt))
        if entry.journal_pos is None:
            unknown += 1
        elif intent is None:
            problems.append(
                f"{entry.op_id} ({entry.tool}) attempt {entry.attempt} ran in life "
                f"{entry.incarnation} with no intent record at all"
            )
        elif intent.end > entry.journal_pos:
            problems.append(
                f"{entry.op_id} ({entry.tool}) attempt {entry.attempt} ran when the "
                f"journal ended at byte {entry.journal_pos}, before its intent "
                f"(bytes {intent.offset}-{intent.end}) was written"
            )
    if unknown and not problems:
        return _unknown("I6", f"{unknown} ledger rows carry no journal position")
    return _verdict("I6", problems, f"{len(ev.ledger)} executions, each after its intent")


def _finished(ev: TrialEvidence) -> bool:
    return bool(ev.lives) and ev.lives[-1].killed is None and ev.lives[-1].returncode == 0


def check_liveness(ev: TrialEvidence) -> Verdict:
    """I7: the trial finished within its restart budget and every step is accounted for."""
    problems = []
    if ev.corrupted and ev.lives and ev.lives[-1].returncode == EXIT_REFUSED:
        # The trial ends on the corruption it injected; I9 judges the refusal.
        return Verdict(
            "I7", TITLES["I7"], "pass", ("stopped on injected corruption, as it must (see I9)",)
        )
    if not ev.lives:
        problems.append("no life was run")
    elif not _finished(ev):
        last = ev.lives[-1]
        how = f"killed ({last.killed})" if last.killed else f"exit status {last.returncode}"
        tail = last.stderr.strip().splitlines()[-1:] or [""]
        problems.append(f"life {last.life} of {len(ev.lives)} ended {how} {tail[0]}".rstrip())
    if len(ev.lives) > ev.restart_budget:
        problems.append(f"{len(ev.lives)} lives exceed the budget of {ev.restart_budget}")
    if not ev.has_journal:
        problems += _steps_settled_in_history(ev)
        return _verdict(
            "I7", problems, f"done in {len(ev.lives)} lives, {len(ev.plan.steps)} steps settled"
        )
    ops = ev.final_ops
    for step in ev.plan.steps:
        op = ops.get(step.op_id)
        if op is None:
            problems.append(f"step {step.index} ({step.op_id} {step.tool}) never started")
        elif op.state is OpState.RUNNING and not op.resolved:
            problems.append(f"step {step.index} ({step.op_id} {step.tool}) left unresolved")
    return _verdict(
        "I7", problems, f"done in {len(ev.lives)} lives, {len(ev.plan.steps)} steps accounted for"
    )


def _steps_settled_in_history(ev: TrialEvidence) -> list[str]:
    last = {entry["op"]: entry["type"] for entry in ev.history}
    return [
        f"step {step.index} ({step.op_id} {step.tool}) ended as "
        f"{last.get(step.op_id, 'never invoked')}"
        for step in ev.plan.steps
        if last.get(step.op_id) not in ("ok", "fail")
    ]


def _unverifiable_steps(ev: TrialEvidence) -> set[str]:
    return {
        op_id.split(".", 1)[0]
        for op_id, r in ev.resolutions.items()
        if r.resolution.startswith("unverifiable")
    }


def _world_counter(rows: Iterable[EffectRow], skip_steps: set[str]) -> Counter[tuple[str, ...]]:
    counted: Counter[tuple[str, ...]] = Counter()
    for row in rows:
        table = row.table
        op_id = row.op_id
        if table in NOT_EFFECTS or step_of(op_id) in skip_steps:
            continue
        key = (table, *row.values)
        counted[key] = 1 if table in SET_TABLES else counted[key] + 1
    return counted


def check_end_state(ev: TrialEvidence) -> Verdict:
    """I8: after verification the world equals the golden run's, where effects are checkable."""
    golden = ev.golden_world
    if golden is None:
        return _unknown("I8", "no golden run to compare with")
    if ev.corrupted:
        return Verdict(
            "I8",
            TITLES["I8"],
            "pass",
            ("not compared: the trial ends on injected corruption (see I9)",),
        )
    if not _finished(ev):
        return _unknown("I8", "the trial did not finish; its end state is not final")
    skip = _unverifiable_steps(ev)
    mine, theirs = _world_counter(ev.world, skip), _world_counter(golden, skip)
    extra, missing = mine - theirs, theirs - mine
    problems = [f"extra effect {k!r} x{n}" for k, n in sorted(extra.items(), key=repr)]
    problems += [f"missing effect {k!r} x{n}" for k, n in sorted(missing.items(), key=repr)]
    note = f" (steps {', '.join(sorted(skip))} unverifiable, left out)" if skip else ""
    return _verdict("I8", problems, f"world equals golden{note}")


def check_journal_integrity(ev: TrialEvidence) -> Verdict:
    """I9: a torn tail is dropped, never misread; corruption stops the agent before any tool.

    A tear is judged by the first life that opened the journal after it: that
    life must report the dropped tail exactly where the torn bytes began and as
    long as they were. A later fault before any life opened the journal (another
    power cut) replaces the tail to expect; a life killed before its incarnation
    record leaves the tear unjudged, since it may have cut it already. After
    injected corruption, the next life must refuse, naming the damaged record's
    offset and number, with no tool run.
    """
    problems = []
    checked = 0
    opened = {
        s.record.pid: s.record.incarnation
        for s in ev.records
        if isinstance(s.record, IncarnationRecord)
    }
    dropped = {
        s.record.incarnation: s.record
        for s in ev.records
        if isinstance(s.record, TailDroppedRecord)
    }
    faults = {int(f["life"]): f for f in ev.faults}
    pending: dict[str, Any] | None = None
    for life in ev.lives:
        incarnation = opened.get(life.pid)
        if incarnation is not None and pending is not None:
            checked += 1
            problems += _tail_dropped(pending, dropped.get(incarnation), life.life)
        if incarnation is not None or life.killed is not None:
            # A life killed before its incarnation record may have cut the tail
            # (the cut comes first) without living to report it: not judged.
            pending = None
        fault = faults.get(life.life)
        if fault is not None and "torn" in fault:
            pending = fault if fault["torn"] else None
        if fault is not None and fault.get("corrupted") is not None:
            checked += 1
            problems += _refused_corruption(ev, fault)
    try:
        scan_journal(ev.trial_dir / "journal")
    except JournalCorruptError as exc:
        if not ev.corrupted:
            problems.append(f"the journal is corrupt without injected corruption: {exc}")
    return _verdict("I9", problems, f"{checked} injected tears and corruptions handled")


def _tail_dropped(fault: dict[str, Any], report: TailDroppedRecord | None, life: int) -> list[str]:
    at, torn = fault["valid_end"], fault["torn"]
    if report is None:
        return [
            f"life {life} opened the journal with a torn tail of {torn} bytes at byte "
            f"{at} ({fault['fault']}) and never reported it dropped"
        ]
    if (report.offset, report.length) != (at, torn):
        return [
            f"life {life} dropped {report.length} bytes at byte {report.offset}; "
            f"the tear left {torn} bytes at byte {at}"
        ]
    return []


def _refused_corruption(ev: TrialEvidence, fault: dict[str, object]) -> list[str]:
    after = [life for life in ev.lives if life.life > int(str(fault["life"]))]
    if not after:
        return ["no life started after the corruption"]
    refused = after[0]
    expected = f"byte {fault['record_offset']} (record #{fault['record']})"
    problems = []
    if refused.returncode != EXIT_REFUSED or expected not in refused.stderr:
        problems.append(
            f"life {refused.life} did not refuse the corrupt journal naming "
            f"{expected}: exit {refused.returncode}, {refused.stderr.strip()[-200:]}"
        )
    ran = [e for e in ev.ledger if e.pid == refused.pid]
    if ran:
        problems.append(f"life {refused.life} ran {ran[0].op_id} on a corrupt journal")
    return problems


TITLES = {
    "I1": "success never re-executed once durable or reported",
    "I2": "unknown outcome of an unsafe op verified, not replayed",
    "I3": "unknown outcome of a safe op retried under its id",
    "I4": "failed and not-started ops skipped",
    "I5": "decisions follow the snapshot",
    "I6": "write-ahead: intent durable before effect",
    "I7": "liveness: finished, every step accounted for",
    "I8": "end state equals the golden run",
    "I9": "journal integrity: torn tail dropped, corruption refused",
}

INVARIANTS: dict[str, Callable[[TrialEvidence], Verdict]] = {
    "I1": check_success_not_rerun,
    "I2": check_unknown_outcome_verified,
    "I3": check_safe_outcome_retried,
    "I4": check_settled_skipped,
    "I5": check_snapshot_decides,
    "I6": check_write_ahead,
    "I7": check_liveness,
    "I8": check_end_state,
    "I9": check_journal_integrity,
}


_NEEDS_JOURNAL = frozenset({"I3", "I4", "I5", "I6", "I9"})


def check_trial(
    trial_dir: Path, golden_dir: Path | None, *, restart_budget: int = 8
) -> tuple[Verdict, ...]:
    """Every invariant's verdict for one trial; never raises."""
    ev = TrialEvidence(trial_dir, golden_dir, restart_budget)
    verdicts = []
    for key, checker in INVARIANTS.items():
        if key in _NEEDS_JOURNAL and not ev.has_journal:
            verdicts.append(_unknown(key, "the runtime under test keeps no journal to judge"))
            continue
        try:
            verdicts.append(checker(ev))
        except Exception as exc:  # a checker's error is an unknown verdict, not a crash
            verdicts.append(_unknown(key, f"checker error: {type(exc).__name__}: {exc}"))
    return tuple(verdicts)
