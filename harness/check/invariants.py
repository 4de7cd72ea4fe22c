"""The invariants (docs/reference/invariants.md) as checkers over a trial's files.

Each checker is a function of a ``TrialEvidence`` that returns a ``Verdict``
with the evidence that decided it, in one of four outcomes:

- ``pass``: the invariant held, and the evidence says what was judged;
  ``applied`` is False when there was nothing to judge (no op in flight at a
  restart, no fault to have landed...), a pass that tested nothing;
- ``fail``: it was broken, and the evidence says where;
- ``unknown``: it could not be decided (a checker error, evidence missing or
  unreadable, a fault that did not land): never a pass;
- ``not-judged``: it does not apply (the runtime under test offers no
  evidence of that kind, for example no journal of this project's).

A trial holds only when every verdict is ``pass`` or ``not-judged``.
``check_trial`` runs every checker and never raises: an exception inside a
checker becomes ``unknown`` carrying the error.

The full note: docs/reference/modules.md (``harness/check/invariants.py``).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.agent.plan import compared_args, plan_id
from harness.check.evidence import EVIDENCE, LifeSeen, TrialEvidence
from harness.check.journal import JournalEntry, expected_decision, retry_safe, settles
from harness.check.lives import lives_changed
from harness.exits import AGENT_REFUSED, AGENT_WRITE_FAILED
from harness.failpoint_spec import (
    AGENT_HOOKS,
    MODEL_FAULTS,
    MODEL_WIRE_FAULTS,
    FailpointSpec,
    parse_spec,
)
from harness.words import many
from harness.world.store import (
    EFFECT_TABLES,
    OK,
    EffectRow,
    LedgerEntry,
    result_digest,
    step_of,
)

__all__ = ["INVARIANTS", "OUTCOMES", "TITLES", "Status", "Verdict", "check_trial", "trial_status"]

Status = Literal["pass", "fail", "unknown", "not-judged"]
OUTCOMES: tuple[Status, ...] = ("pass", "fail", "unknown", "not-judged")

# World tables that are not effects: asking a person again is harmless by the
# recovery table's definition, so the question log is left out of the end-state check.
NOT_EFFECTS = frozenset({"questions"})
# Tables whose rows are a cost, not state (a second download of the same app,
# a second identical git blob, a declared tool's call prepared again): compared
# as sets, not multisets.
SET_TABLES = frozenset({"downloads", "repo_blobs", "directories", "prepared"})
MAX_EVIDENCE = 12
NOTHING_HANDED = result_digest(None)
"""The digest an ``ack`` carries when the model was handed no result: an op the model
closed after its check found the effect (``EFFECT_PRESENT``)."""
CHECK_SUFFIX = ".check"  # the model's read-only check of a hinted op (harness.agent.model)


@dataclass(frozen=True, slots=True)
class Verdict:
    invariant: str
    title: str
    status: Status
    evidence: tuple[str, ...] = ()
    applied: bool = True
    """Whether the checker had anything to judge; a pass with nothing to judge is False."""

    def to_json(self) -> dict[str, object]:
        return {
            "invariant": self.invariant,
            "title": self.title,
            "status": self.status,
            "evidence": list(self.evidence),
            "applied": self.applied,
        }


def trial_status(verdicts: Iterable[Verdict]) -> Status:
    """One rule for every command: any fail fails; else any unknown is unknown; else pass."""
    statuses = {v.status for v in verdicts}
    if "fail" in statuses:
        return "fail"
    if "unknown" in statuses:
        return "unknown"
    return "pass"


def _verdict(key: str, problems: Iterable[str], fine: str, *, applied: bool = True) -> Verdict:
    """A fail with the problems found, else a pass saying ``fine``; ``applied=False`` when
    the checker had nothing to judge (a failure always applied)."""
    found = list(problems)
    if found:
        shown = found[:MAX_EVIDENCE]
        if len(found) > MAX_EVIDENCE:
            shown.append(f"... and {len(found) - MAX_EVIDENCE} more")
        return Verdict(key, TITLES[key], "fail", tuple(shown))
    return Verdict(key, TITLES[key], "pass", (fine,), applied)


def _unknown(key: str, why: str) -> Verdict:
    return Verdict(key, TITLES[key], "unknown", (why,))


def _not_judged(key: str, why: str) -> Verdict:
    return Verdict(key, TITLES[key], "not-judged", (why,))


def _as(entry: LedgerEntry, op_id: str) -> str:
    """`` as s003~2`` when an execution of ``op_id``'s call ran under another id."""
    return "" if entry.op_id == op_id else f" as {entry.op_id}"


def _ran_after(ev: TrialEvidence, op_id: str, offset: int, what: str) -> list[str]:
    """Executions of ``op_id``'s call (under any id it was re-issued as) that happened once
    the journal held its ``what`` at ``offset``."""
    return [
        f"{op_id} ({entry.tool}) ran again{_as(entry, op_id)} in life {ev.life_of_row(entry)} "
        f"(ledger #{entry.seq}, journal at byte {entry.journal_pos}) after its {what} was "
        f"journaled at byte {offset}"
        for entry in ev.runs_of_call(op_id)
        if entry.journal_pos is not None and entry.journal_pos > offset
    ]


def _settling_finishes(ev: TrialEvidence) -> Iterable[JournalEntry]:
    return (e for e in ev.entries if e.kind == "finish" and settles(e))


def _step_chain(ev: TrialEvidence, op_id: str) -> list[LedgerEntry]:
    """Executions of an op's call and of the redoes that stand for it (``s003``, ``s003~2``,
    ``s003.redo``...)."""
    return ev.step_chain(op_id)


def check_success_not_rerun(ev: TrialEvidence) -> Verdict:
    """I1: a success is never re-executed once durable, nor once reported to the user.

    Durable: a ledger row for the op after its SUCCEEDED finish was in the
    journal. Reported: a ledger row for the step (or the redo that stands for
    it) that the world committed after the supervisor received the ack, by the
    ledger's own sequence, which the supervisor read when the ack arrived.
    """
    problems = []
    checked = 0
    if ev.has_journal:
        for finish in _settling_finishes(ev):
            if finish.payload["succeeded"] and finish.op_id:
                checked += 1
                problems += _ran_after(ev, finish.op_id, finish.offset, "success")
    for ack in ev.acks:
        checked += 1
        op_id, seen = str(ack["op"]), ack.get("ledger_seq")
        for entry in _step_chain(ev, op_id):
            life = ev.life_of_row(entry)
            after = entry.seq > seen if seen is not None else (life or 0) > int(ack["life"])
            if after:
                problems.append(
                    f"{entry.op_id} ({entry.tool}) ran again in life {life} (ledger "
                    f"#{entry.seq}) after {op_id}'s success was reported to the user in "
                    f"life {ack['life']} (the ledger stood at #{seen})"
                )
    return _verdict("I1", problems, f"{checked} successes, none re-executed", applied=checked > 0)


def check_unknown_outcome_verified(ev: TrialEvidence) -> Verdict:
    """I2: an op RUNNING at a restart whose class is unsafe is VERIFYed, hinted, never re-run.

    Every life is examined: such an op must be decided VERIFY in the life that
    found it, unless the life left no trace at all (killed before its first
    append); once the life went on to the plan, the model must have reported
    reading its hint; and no process ran it again under its own id.
    """
    problems: list[str] = []
    checked = 0
    if ev.has_journal:
        for life in ev.lives:
            for op_id, op in ev.ops_at_start(life.life).items():
                if op.resolved or op.state != "running" or ev.op_retry_safe(op, life.life):
                    continue
                if not ev.progressed(life.life):
                    continue  # killed before it wrote anything: it decided nothing
                checked += 1
                problems += _decided(ev, life.life, op_id, op.tool, "verify")
                if (
                    ev.invoked_in(life.life)
                    and op_id not in ev.hinted_in(life.life)
                    and not _reconciled_in(ev, life.life, op_id, op.tool)
                ):
                    problems.append(
                        f"{op_id}: the model never reported reading its VERIFY hint in "
                        f"life {life.life}"
                    )
                again = [e for e in ev.runs_of_call(op_id) if (ev.life_of_row(e) or 0) >= life.life]
                if again:
                    how = "under its own id" if again[0].op_id == op_id else _as(again[0], op_id)
                    problems.append(
                        f"{op_id} ({op.tool}) executed again {how.strip()} in life "
                        f"{ev.life_of_row(again[0])} (ledger #{again[0].seq}) instead of "
                        "being verified"
                    )
    problems += _unsafe_ran_twice(ev)
    in_life = _hinted_before_ack(ev)
    problems += [problem for problem in in_life if problem]
    if not ev.has_journal:
        checked = _unsafe_in_flight(ev)
    checked += len(in_life)
    return _verdict(
        "I2",
        problems,
        f"{many(checked, 'unknown outcome')} verified, none replayed",
        applied=checked > 0,
    )


def _reconciled_in(ev: TrialEvidence, life: int, op_id: str, tool: str) -> bool:
    """Whether a reconciler closed the op in that life instead of the model: the journal
    resolves it there, and its tool's provider can be asked by key (``dedupe`` or
    ``lookup``). What it claimed is the world's to confirm (I8)."""
    declared = ev.plan.tools.get(tool)
    if declared is None or not declared.by_key:
        return False
    return any(e.kind == "resolved" and e.op_id == op_id for e in ev.entries_of(life))


def _reconciled_present(ev: TrialEvidence, op_id: str) -> bool:
    """Whether a reconciler closed an op of the step as present (its tool's provider asked
    by key): the op itself, or the op a re-issued call of the step (``s003~2``) was
    answered from, whose resolution the journal holds under its own id (``s003``)."""
    tool = _tool_of(ev, op_id)
    declared = None if tool is None else ev.plan.tools.get(tool)
    if declared is None or not declared.by_key:
        return False
    step = step_of(op_id)
    return any(
        e.kind == "resolved"
        and e.op_id is not None
        and step_of(e.op_id) == step
        and e.payload["resolution"] == "effect present"
        for e in ev.entries
    )


def _unsafe_in_flight(ev: TrialEvidence) -> int:
    """Without a journal: the unsafe calls whose outcome the user was left without (an
    invoke with no ``ok`` or ``fail`` after it) in a life a restart followed, the
    outcomes I2's ledger check is there for."""
    tools = {s.op_id: s.tool for s in ev.plan.steps}
    restarted = {life.life for life in ev.lives[:-1]}
    open_calls: dict[tuple[int, str], str] = {}
    for h in ev.history:
        key = (int(h["life"]), plan_id(str(h["op"])))
        if h["type"] == "invoke":
            open_calls[key] = tools.get(key[1], str(h["op"]))
        elif h["type"] in ("ok", "fail"):
            open_calls.pop(key, None)
    return sum(
        life in restarted and not ev.tool_retry_safe(tool, life)
        for (life, _), tool in open_calls.items()
    )


def _fault_op(event: dict[str, object]) -> str:
    """The op an in-life fault hit: ``at`` is ``op.reply 3 s003``."""
    return str(event.get("at", "")).rpartition(" ")[2]


def _tool_of(ev: TrialEvidence, op_id: str) -> str | None:
    """The tool an op of the plan calls (a check of a hinted op: None, it is a read)."""
    if op_id.endswith(CHECK_SUFFIX):
        return None
    step = next((s for s in ev.plan.steps if s.op_id == step_of(op_id)), None)
    return None if step is None else step.tool


def _unsafe_op(ev: TrialEvidence, op_id: str, life: int) -> bool:
    tool = _tool_of(ev, op_id)
    return tool is not None and not ev.tool_retry_safe(tool, life)


def _hinted_before_ack(ev: TrialEvidence) -> list[str]:
    """In a life: an unsafe op whose reply or request was lost is not reported done before
    the model reported reading its VERIFY hint, unless a reconciler closed it in that life.
    One entry per such fault, "" if it held."""
    found = []
    for at, fault in ev.in_life_faults:
        op_id, life = _fault_op(fault), int(fault["life"])
        if fault["event"] == "cancel" or not _unsafe_op(ev, op_id, life):
            continue
        tool = _tool_of(ev, op_id)
        if tool is not None and _reconciled_in(ev, life, op_id, tool):
            found.append("")  # its provider, asked by key, closed it: no hint to read
            continue
        problem = ""
        for later in ev.events[at + 1 :]:
            if int(later.get("life", 0)) != life:
                continue
            if later["event"] == "hint" and later["op"] == op_id:
                break
            if later["event"] == "ack" and step_of(str(later["op"])) == step_of(op_id):
                problem = (
                    f"{op_id}: its {str(fault['event']).replace('-', ' ')} in life {life} "
                    f"({fault['at']}) left its outcome unknown, yet {later['op']} was reported "
                    "done before the model read its VERIFY hint"
                )
                break
        found.append(problem)
    return found


def _decided(ev: TrialEvidence, life: int, op_id: str, tool: str, want: str) -> list[str]:
    decision = ev.decisions_in(life).get(op_id)
    if decision is None and ev.cut_after(life):
        return []  # a power cut took what this life wrote last: its decision may be gone
    got = "no decision" if decision is None else str(decision.payload["decision"])
    if got == want:
        return []
    return [
        f"{op_id} ({tool}) was RUNNING at the start of life {life} and got {got}, "
        f"not {want.upper()}"
    ]


def _unsafe_ran_twice(ev: TrialEvidence) -> list[str]:
    """Ledger alone, for any runtime: an unsafe call never runs again after a restart.

    A call is its op id, or the plan call a re-issued id names (``s003~2`` is
    ``s003``). The class is the one the table handed to the life of its first
    execution gives. A runtime that verifies redoes a step under a new op id
    (``s003.redo``, a call of its own). Repeats inside one life are in-process
    retries: I10's to judge.
    """
    problems = []
    lives: dict[str, set[int | None]] = {}
    ids: dict[str, list[str]] = {}
    for entry in ev.ledger:
        call = plan_id(entry.op_id)
        lives.setdefault(call, set()).add(ev.life_of_row(entry))
        if entry.op_id not in ids.setdefault(call, []):
            ids[call].append(entry.op_id)
    for op_id, count in Counter(plan_id(e.op_id) for e in ev.ledger).items():
        if len(lives[op_id]) < 2:
            continue
        runs = ev.runs_of_call(op_id)
        first = runs[0]
        op = ev.final_ops.get(first.op_id) if ev.has_journal else None
        if op is not None:
            name, ask_user = ev.class_of(op)
        else:
            name, ask_user = ev.table_of(ev.life_of_row(first)).class_of(first.tool)
        if not retry_safe(name, ask_user):
            rows = ", #".join(str(e.seq) for e in runs)
            issued = f"; as {', '.join(ids[op_id])}" if len(ids[op_id]) > 1 else ""
            problems.append(
                f"{op_id} ({first.tool}, {name}) ran {count} times in {len(lives[op_id])} "
                f"lives (ledger #{rows}{issued}): a {name} call was replayed"
            )
    return problems


def check_safe_outcome_retried(ev: TrialEvidence) -> Verdict:
    """I3: an op RUNNING at a restart whose class is retry-safe is RETRYed under its op id."""
    problems: list[str] = []
    checked = 0
    for life in ev.lives:
        for op_id, op in ev.ops_at_start(life.life).items():
            if op.resolved or op.state != "running" or not ev.op_retry_safe(op, life.life):
                continue
            if not ev.progressed(life.life):
                continue
            checked += 1
            wrong = _decided(ev, life.life, op_id, op.tool, "retry")
            problems += wrong
            retried = any(e.kind == "intent" and e.op_id == op_id for e in ev.entries_of(life.life))
            if not wrong and ev.invoked_in(life.life) and not retried:
                problems.append(
                    f"{op_id}: decided RETRY in life {life.life} but never run again under "
                    "its id there"
                )
    return _verdict(
        "I3",
        problems,
        f"{checked} safe unknown outcomes retried under their id",
        applied=checked > 0,
    )


def check_settled_skipped(ev: TrialEvidence) -> Verdict:
    """I4: FAILED and NOT_STARTED ops get SKIP, and a FAILED op is not re-executed."""
    problems = []
    checked = 0
    for life in ev.lives:
        before = ev.ops_at_start(life.life)
        for op_id, decision in ev.decisions_in(life.life).items():
            op = before.get(op_id)
            state = "not_started" if op is None else op.state
            if state not in ("failed", "not_started"):
                continue
            checked += 1
            if decision.payload["decision"] != "skip":
                problems.append(
                    f"{op_id}: {state.upper()} op got {decision.payload['decision']} in life "
                    f"{life.life}, not SKIP"
                )
    failures = 0
    for finish in _settling_finishes(ev):
        if not finish.payload["succeeded"] and finish.op_id:
            failures += 1
            problems += _ran_after(ev, finish.op_id, finish.offset, "failure")
    return _verdict(
        "I4",
        problems,
        f"{checked} settled ops skipped, no failure re-run",
        applied=checked + failures > 0,
    )


def check_snapshot_decides(ev: TrialEvidence) -> Verdict:
    """I5: snapshots are the class the life's table gave; decisions carry the intent's snapshot.

    An op's first intent must snapshot the class of the tool table the
    supervisor handed the life that wrote it; every later intent of the op
    (a retry, in whatever life and under whatever table) the same snapshot;
    and every decision about it that snapshot, even after the table changed.
    """
    problems = []
    checked = 0
    for op_id, op in ev.final_ops.items():
        expected = ev.class_of(op)
        checked += 1
        if op.snapshot != expected:
            wrote = ev.life_of_offset(op.first_intent.offset)
            problems.append(
                f"{op_id} ({op.tool}): its intent in life {wrote} snapshotted "
                f"{_cls(op.snapshot)}; the table handed to that life says {_cls(expected)}"
            )
        for later in op.intents[1:]:
            if later.snapshot() != op.snapshot:
                problems.append(
                    f"{op_id} ({op.tool}): a later intent (byte {later.offset}) snapshotted "
                    f"{_cls(later.snapshot())}, not its first intent's {_cls(op.snapshot)}"
                )
    for life in ev.lives:
        before = ev.ops_at_start(life.life)
        for op_id, decision in ev.decisions_in(life.life).items():
            decided = before.get(op_id)
            if decided is None:
                continue  # NOT_STARTED: no snapshot exists (I4 holds it to SKIP)
            checked += 1
            cls = ev.class_of(decided)
            if decision.snapshot() != cls:
                problems.append(
                    f"{op_id} ({decided.tool}) in life {life.life}: decided "
                    f"{decision.payload['decision']} from class {_cls(decision.snapshot())}; "
                    f"its class is {_cls(cls)}, which decides "
                    f"{expected_decision(decided.state, *cls)}"
                )
    return _verdict(
        "I5", problems, f"{checked} snapshots and decisions follow the table", applied=checked > 0
    )


def _cls(snapshot: tuple[str, bool]) -> str:
    return snapshot[0] + (" (ask_user)" if snapshot[1] else "")


def check_write_ahead(ev: TrialEvidence) -> Verdict:
    """I6: every execution has an intent of its own, written by its life, durable before it.

    A ledger row belongs to the life whose pid the world recorded; it needs an
    intent for its op inside that life's span of the journal, ending at or
    before the journal's size when the effect committed, and one intent per
    execution (rows and intents of an op in a life are matched in order).
    """
    problems = []
    unknown = 0
    intents_of: dict[tuple[str | None, int], list[JournalEntry]] = defaultdict(list)
    for life_seen in ev.lives:
        for entry in ev.entries_of(life_seen.life):
            if entry.kind == "intent":
                intents_of[entry.op_id, life_seen.life].append(entry)
    for (op_id, life), rows in sorted(
        ev.rows_by_op_and_life.items(), key=lambda item: item[1][0].seq
    ):
        if life is None:
            problems.append(
                f"{op_id} ({rows[0].tool}) ran in pid {rows[0].pid}, a process the "
                "supervisor never started"
            )
            continue
        intents = intents_of.get((op_id, life), [])
        for row in rows:
            if row.journal_pos is None:
                unknown += 1
                continue
            ahead = next((i for i in intents if i.end <= row.journal_pos), None)
            if ahead is None:
                written = [i for i in intents if i.end > row.journal_pos]
                where = (
                    f"before its intent (bytes {written[0].offset}-{written[0].end}) was written"
                    if written
                    else "with no intent record of that life for it"
                )
                problems.append(
                    f"{op_id} ({row.tool}) ran in life {life} (ledger #{row.seq}) when the "
                    f"journal ended at byte {row.journal_pos}, {where}"
                )
                continue
            intents.remove(ahead)
    if unknown and not problems:
        return _unknown("I6", f"{unknown} ledger rows carry no journal position")
    return _verdict(
        "I6",
        problems,
        f"{many(len(ev.ledger), 'execution')}, each after its intent",
        applied=bool(ev.ledger),
    )


def _finished(ev: TrialEvidence) -> bool:
    return bool(ev.lives) and ev.lives[-1].killed is None and ev.lives[-1].returncode == 0


def check_liveness(ev: TrialEvidence) -> Verdict:
    """I7: the trial finished within its restart budget and every step is accounted for."""
    problems = []
    if ev.corrupted and ev.lives and ev.lives[-1].returncode == AGENT_REFUSED:
        # The trial ends on the corruption or newer frame it injected; I9 judges the refusal.
        return Verdict(
            "I7", TITLES["I7"], "pass", (f"stopped on {_at_rest(ev)}, as it must (see I9)",)
        )
    if not ev.lives:
        problems.append("no life was run")
    elif not _finished(ev):
        last = ev.lives[-1]
        how = f"killed ({last.killed})" if last.killed else f"exit status {last.returncode}"
        tail = last.stderr.strip().splitlines()[-1:] or [""]
        budget = (
            f": the restart budget of {ev.restart_budget} lives was spent"
            if last.killed != "timeout" and len(ev.lives) >= ev.restart_budget
            else ""
        )
        problems.append(f"life {last.life} of {len(ev.lives)} ended {how}{budget} {tail[0]}")
    if not ev.has_journal:
        problems += _steps_settled_in_history(ev)
        return _verdict(
            "I7", problems, f"done in {len(ev.lives)} lives, {len(ev.plan.steps)} steps settled"
        )
    ops_of: dict[str, list[str]] = {}
    for op_id, op in ev.final_ops.items():
        if op.state == "running" and not op.resolved:
            ops_of.setdefault(plan_id(op_id), []).append("unresolved")
        else:
            ops_of.setdefault(plan_id(op_id), []).append("settled")
    for step in ev.plan.steps:
        # A re-issued call (s003~2) that the runtime journaled as an op of its own is one
        # more op of the step: every op of it must be settled or resolved.
        states = ops_of.get(step.op_id)
        if states is None:
            problems.append(f"step {step.index} ({step.op_id} {step.tool}) never started")
        elif "unresolved" in states:
            problems.append(f"step {step.index} ({step.op_id} {step.tool}) left unresolved")
        elif _unexcused_unknown(ev, step.op_id):
            problems.append(
                f"step {step.index} ({step.op_id} {step.tool}) ended unknown (info), yet "
                "nothing left its outcome unknown: no kill in its flight, no lost reply or "
                "request, no cancel (or the model never read its hint)"
            )
    return _verdict(
        "I7", problems, f"done in {len(ev.lives)} lives, {len(ev.plan.steps)} steps accounted for"
    )


def _steps_settled_in_history(ev: TrialEvidence) -> list[str]:
    """Steps the user was last told neither ok nor fail, but for one no check can tell
    whose unknown outcome something excuses (as a journal's resolved op is)."""
    last = ev.last_report
    unverifiable = _unverifiable_steps(ev)
    return [
        f"step {step.index} ({step.op_id} {step.tool}) ended as "
        f"{last.get(step.op_id, 'never invoked')}"
        for step in ev.plan.steps
        if last.get(step.op_id) not in ("ok", "fail") and step.op_id not in unverifiable
    ]


def _unverifiable_steps(ev: TrialEvidence) -> set[str]:
    """Steps no read-only tool can check (the plan says so) whose outcome the user was
    told is unknown, where something could leave it so (``unknown_excused``): their
    world rows may differ from the golden run's."""
    last = ev.last_report
    return {
        s.op_id
        for s in ev.plan.steps
        if s.verify is None and last.get(s.op_id) == "info" and not _unexcused_unknown(ev, s.op_id)
    }


def _unexcused_unknown(ev: TrialEvidence, step: str) -> bool:
    """Whether the user was last told the step's outcome is unknown with nothing to excuse it."""
    told = ev.last_told.get(step)
    return told is not None and told[0] == "info" and unknown_excused(ev, step, told[1]) is None


def unknown_excused(ev: TrialEvidence, step: str, life: int) -> str | None:
    """Why the outcome of a plan step could be unknown to the model in ``life``, by the
    supervisor's own observations; None when nothing could leave it so.

    An op of the step (its call, a re-issued id, a redo) lost its reply or its request,
    or was cancelled, in that life or before; or it was in flight when an earlier life
    ended without finishing (killed, stopped by a full disk): the supervisor told the
    user it was in flight, the kill landed at one of its points, or the model was
    verifying it then; or a life was paused inside it (SIGSTOP) and this life took the
    task over; or the world times the call out on its first attempts (the
    plan's ``fail_attempts``), which for a class that must not run twice is no
    failure but an unknown outcome. An unsafe op's outcome stays unknown only once the
    model read its VERIFY hint after that (a retry-safe one is run again).
    """
    hints = [
        (i, int(e["life"]))
        for i, e in enumerate(ev.events)
        if e["event"] == "hint" and step_of(str(e["op"])) == step
    ]
    for at, fault in ev.in_life_faults:
        op_id, when = _fault_op(fault), int(fault["life"])
        if step_of(op_id) != step or when > life:
            continue
        if not _unsafe_op(ev, op_id, when) or any(i > at for i, _ in hints):
            return f"{fault['event']} of {op_id} in life {when}"
        if fault["event"] == "cancel" and _settled_later(ev, step, when):
            # The cancel came once the outcome was journaled: the call made again was
            # answered from it, with no hint to read.
            return f"cancel of {op_id} in life {when}, its outcome told since"
    for at, paused in enumerate(ev.events):
        # A life stopped inside the call past the engine's timeout: the life that took the
        # task over was told the call timed out, as a caller is after a kill.
        if paused["event"] != "pause" or step_of(_fault_op(paused)) != step:
            continue
        if int(paused["life"]) != life and any(i > at and h == life for i, h in hints):
            return f"paused in its flight in life {paused['life']}, taken over by life {life}"
    for seen in ev.lives:
        if seen.life >= life:
            break
        if _left_in_flight(ev, seen, step) and any(h > seen.life for _, h in hints):
            return f"in flight when life {seen.life} ended ({_ended(seen)})"
    planned = next((s for s in ev.plan.steps if s.op_id == step), None)
    if planned is not None and planned.args.get("fail_attempts") and hints:
        return f"the world times {step} out on its first {planned.args['fail_attempts']} attempts"
    return None


def _settled_later(ev: TrialEvidence, step: str, life: int) -> bool:
    """Whether the user was told in ``life`` that the step succeeded or failed, after an
    ``info``."""
    told = [h["type"] for h in ev.history if int(h["life"]) == life and step_of(h["op"]) == step]
    return "info" in told and any(t in ("ok", "fail") for t in told[told.index("info") :])


def _left_in_flight(ev: TrialEvidence, seen: LifeSeen, step: str) -> bool:
    """Whether a life ended without finishing while an op of the step was under way."""
    if seen.killed is None and seen.returncode == 0:
        return False
    if seen.reached and step_of((seen.reached or "").rpartition(" ")[2]) == step:
        return True
    told = [
        h
        for h in ev.history
        if int(h["life"]) == seen.life and step_of(str(h["op"])) == step and h["type"] != "invoke"
    ]
    if any("why" in h for h in told):
        return True  # the supervisor saw it invoked and never settled
    hinted = any(step_of(str(e["op"])) == step for e in ev.events_of("hint", seen.life))
    return hinted and (not told or told[-1]["type"] not in ("ok", "fail"))


_KEY_POSITIONS = {table.name: table.key_positions for table in EFFECT_TABLES}


def _row_key(row: EffectRow) -> tuple[str, ...] | None:
    """The row's place in a table written in place (its table and key), else None."""
    positions = _KEY_POSITIONS.get(row.table)
    return None if positions is None else (row.table, *(row.values[n] for n in positions))


def rows_left_out(
    worlds: Iterable[Iterable[EffectRow]], skip_steps: set[str]
) -> frozenset[tuple[str, ...]]:
    """The places (``_row_key``) a left-out step wrote in either world: a row written in
    place holds its last writer only, so an earlier step's value left there when the
    left-out step did not run is its value, not a wrong one."""
    return frozenset(
        key
        for rows in worlds
        for row in rows
        if step_of(row.op_id) in skip_steps and (key := _row_key(row)) is not None
    )


def _world_counter(
    rows: Iterable[EffectRow],
    skip_steps: set[str],
    skip_places: frozenset[tuple[str, ...]] = frozenset(),
) -> Counter[tuple[str, ...]]:
    counted: Counter[tuple[str, ...]] = Counter()
    for row in rows:
        table = row.table
        if table in NOT_EFFECTS or step_of(row.op_id) in skip_steps:
            continue
        if skip_places and _row_key(row) in skip_places:
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
        return _not_judged("I8", f"the trial ends on {_at_rest(ev)} (see I9)")
    if not _finished(ev):
        return _unknown("I8", "the trial did not finish; its end state is not final")
    skip = _unverifiable_steps(ev)
    places = rows_left_out((ev.world, golden), skip)
    mine, theirs = _world_counter(ev.world, skip, places), _world_counter(golden, skip, places)
    extra, missing = mine - theirs, theirs - mine
    problems = [f"extra effect {k!r} x{n}" for k, n in sorted(extra.items(), key=repr)]
    problems += [f"missing effect {k!r} x{n}" for k, n in sorted(missing.items(), key=repr)]
    note = f" (steps {', '.join(sorted(skip))} unverifiable, left out)" if skip else ""
    return _verdict("I8", problems, f"world equals golden{note}")


def _at_rest(ev: TrialEvidence) -> str:
    """What the harness did to the journal at rest, in a verdict's words."""
    return "an injected newer frame (version skew)" if ev.version_skew else "injected corruption"


def check_journal_integrity(ev: TrialEvidence) -> Verdict:
    """I9: a torn tail is dropped, never misread; corruption stops the agent before any tool.

    A tear is judged by the first life that wrote to the journal after it: it
    must report the dropped tail exactly where the torn bytes began and as
    long as they were. A later fault before any life wrote (another power
    cut) replaces the tail to expect; a life killed before it wrote anything
    leaves the tear unjudged, since it may have cut it already. After
    injected corruption, the next life must refuse, naming the damaged
    record's offset and number, with no tool run. After a newer runtime's
    frame was appended (version skew), the next life must refuse, naming the
    journal, the frame's offset and its version, no later life may run a tool,
    and the file must be left byte for byte as the fault left it: a newer
    frame is no torn tail to cut. And the journal must never be corrupt when
    no corruption was injected.

    Over whole lives (``harness.check.lives``): the journal each life was
    handed is a prefix of the final journal (its whole records, when it had a
    torn tail), unless an after-death fault changed bytes it held; each life
    kept the journal it started with, but for a torn tail; and between two
    lives only a fault changed it. A change names the life that made it. A
    compacted journal is judged stitched back together (``harness.check.stitch``),
    and each compaction must keep every op of the journal it replaced in the same
    state, resolved or not, an open op record for record (a settled one may go
    only as one the checkpoint says retention forgot).
    """
    problems = []
    checked = 0
    pending: dict[str, object] | None = None
    for life in ev.lives:
        wrote = ev.entries_of(life.life)
        if wrote and pending is not None:
            checked += 1
            report = next((e for e in wrote if e.kind == "tail_dropped"), None)
            problems += _tail_dropped(pending, report, life.life, ev.handed_offset)
        if wrote or life.killed is not None:
            pending = None
        fault = ev.fault_after(life.life)
        if fault is not None and "torn" in fault:
            pending = fault if fault["torn"] else None
        if fault is not None and fault.get("corrupted") is not None:
            checked += 1
            problems += _refused_corruption(ev, fault)
        if fault is not None and fault.get("landed") and fault["fault"].startswith("version-skew"):
            checked += 1
            problems += _refused_newer_frame(ev, fault)
    final = ev.final_reading
    if final.corrupt is not None and not ev.corrupted:
        problems.append(f"the journal is corrupt without injected corruption: {final.corrupt}")
    problems += lives_changed(ev.life_journals, ev.journal_bytes)
    for maker, changes in ev.compactions:
        checked += 1
        by = "a compaction" if maker is None else f"life {maker}'s compaction"
        problems += [f"{by} changed the journal's ops: {change}" for change in changes]
    handed = sum(1 for life in ev.life_journals if life.start is not None)
    return _verdict(
        "I9",
        problems,
        f"{checked} injected tears, corruptions, skews and compactions handled; {handed} lives "
        "kept the journal they were handed, but for torn tails",
        applied=checked > 0 or handed > 0,
    )


def _tail_dropped(
    fault: dict[str, object],
    report: JournalEntry | None,
    life: int,
    placed: Callable[[int, int], int],
) -> list[str]:
    at, torn = fault["valid_end"], fault["torn"]
    if report is None:
        return [
            f"life {life} opened the journal with a torn tail of {torn} bytes at byte "
            f"{at} ({fault['fault']}) and never reported it dropped"
        ]
    got = (placed(life, int(report.payload["offset"])), report.payload["length"])
    if got != (at, torn):
        return [
            f"life {life} dropped {got[1]} bytes at byte {got[0]}; "
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
    if refused.returncode != AGENT_REFUSED or expected not in refused.stderr:
        problems.append(
            f"life {refused.life} did not refuse the corrupt journal naming "
            f"{expected}: exit {refused.returncode}, {refused.stderr.strip()[-200:]}"
        )
    ran = [e for e in ev.ledger if e.pid == refused.pid]
    if ran:
        problems.append(f"life {refused.life} ran {ran[0].op_id} on a corrupt journal")
    return problems


def _refused_newer_frame(ev: TrialEvidence, fault: dict[str, object]) -> list[str]:
    """The life after a newer frame refused the journal, naming it, the frame's offset and its
    version; no later life ran a tool; the file is as the fault left it."""
    after = [life for life in ev.lives if life.life > int(str(fault["life"]))]
    if not after:
        return ["no life started after the newer frame was appended"]
    refused = after[0]
    offset, version = fault["offset"], fault["version"]
    expected = f"journal: at byte {offset}: a frame of format {version}"
    problems = []
    if refused.returncode != AGENT_REFUSED or expected not in refused.stderr:
        problems.append(
            f"life {refused.life} did not refuse the frame of format {version} at byte "
            f"{offset} naming the journal, the offset and the version: exit "
            f"{refused.returncode}, {refused.stderr.strip()[-200:] or 'nothing on stderr'}"
        )
    pids = {life.pid: life.life for life in after}
    ran = [e for e in ev.ledger if e.pid in pids]
    if ran:
        problems.append(
            f"life {pids[ran[0].pid]} ran {ran[0].op_id} ({ran[0].tool}) on a journal holding "
            f"a frame of format {version}"
        )
    left = (fault["journal_size"], fault["journal_crc"])
    now = ev.journal_now
    if now != left:
        gone = ev.final_reading.corrupt_offset != offset
        problems.append(
            f"the journal changed after the frame of format {version} was appended at byte "
            f"{offset}: the fault left {left[0]} bytes (CRC {left[1]:08x}), the trial "
            + ("left none" if now is None else f"{now[0]} bytes (CRC {now[1]:08x})")
            + (f"; the frame at byte {offset} is gone (cut as a torn tail?)" if gone else "")
        )
    return problems


def check_fail_means_no_effect(ev: TrialEvidence) -> Verdict:
    """I10: a step the user was told failed left no effect; no in-process retry repeated one.

    From the ledger, the world and what the user was told only, so that it
    holds for any runtime: a step whose last report is ``fail`` owns no row of
    world state (nor does a redo standing for it), and no op of a class that
    may not run twice executed twice inside one process (a retry of a call
    whose reply was lost repeats its effect). A step told ``fail`` is not run
    in a later life before the model calls it again (``LedgerEntry.called``):
    a runtime that told "failed" of an op whose intent it left on disk retries
    it, or hands it to the model to redo, at the next start.
    """
    problems = []
    repeated = 0
    ran_unasked = _failed_then_run(ev)
    problems += ran_unasked
    failed = [s.op_id for s in ev.plan.steps if ev.last_report.get(s.op_id) == "fail"]
    for step in failed:
        left = [r for r in ev.world if step_of(r.op_id) == step and r.table not in NOT_EFFECTS]
        if left:
            problems.append(
                f"{step} was reported failed, yet left {many(len(left), 'row')} of world state "
                f"(first: {left[0].table} {left[0].values!r} by {left[0].op_id})"
            )
    for (op_id, life), rows in ev.rows_by_op_and_life.items():
        if len(rows) < 2:
            continue
        repeated += 1
        name, ask_user = ev.table_of(life).class_of(rows[0].tool)
        if not retry_safe(name, ask_user):
            problems.append(
                f"{op_id} ({rows[0].tool}, {name}) ran {len(rows)} times in "
                f"life {life} (ledger #{', #'.join(str(r.seq) for r in rows)}): an in-process "
                "retry repeated its effect"
            )
    return _verdict(
        "I10",
        problems,
        f"{len(failed)} failed steps without effect, no unsafe call re-run in-process",
        applied=bool(failed) or repeated > 0 or bool(ran_unasked),
    )


def _failed_then_run(ev: TrialEvidence) -> list[str]:
    """Executions of a step (a redo standing for it included, a check not) that a later
    life made before the model called the step again, when the user's last word of the
    step before that life was ``fail``."""
    told: dict[tuple[str, int], str] = {}  # (step, life + 1): the last word in that life
    for entry in ev.history:
        told[step_of(str(entry["op"])), int(entry["life"]) + 1] = str(entry["type"])
    problems = []
    for row in ev.ledger:
        life = ev.life_of_row(row)
        if row.called is not False or life is None or row.op_id.endswith(CHECK_SUFFIX):
            continue
        word = next(
            (told[row.step, at] for at in range(life, 0, -1) if (row.step, at) in told), None
        )
        if word == "fail":
            problems.append(
                f"{row.step} was reported failed, yet life {life} ran it as {row.op_id} "
                f"(ledger #{row.seq}) before the model called it again"
            )
    return problems


def check_told_the_truth(ev: TrialEvidence) -> Verdict:
    """I11: what the model was told of each step is what the world did.

    From the ledger, the supervisor's events and the history only. Every ``ack``
    carries the digest of the result the model was handed: it must be the result
    an execution of the op returned (the world records each one's outcome and
    result digest with its effect), or of a redo standing for it, or of the call a
    re-issued id names, committed before the ack; or, when the model was handed no
    result, its check of a hinted op of the step must have found the effect (the
    digest the model reports for the check matching an execution of that check).
    Every ``info`` the model told must have a cause the supervisor saw
    (``unknown_excused``): a kill in the op's flight, a lost reply or request, a
    cancel, and for an unsafe op its VERIFY hint read since.
    """
    problems = []
    for ack in ev.acks:
        problems += _ack_matches(ev, ack)
    for op_id, life in dict.fromkeys((str(t["op"]), int(t["life"])) for t in ev.told_unknown):
        if unknown_excused(ev, step_of(op_id), life) is None:
            problems.append(
                f"{op_id} was reported unknown (info) in life {life}, yet nothing the "
                "supervisor saw left it so: no kill in its flight, no lost reply or request, "
                "no cancel (or the model never read its hint)"
            )
    return _verdict(
        "I11",
        problems,
        f"{many(len(ev.acks), 'ack')} matching what the world returned, "
        f"{many(len(ev.told_unknown), 'unknown')} with a cause",
        applied=bool(ev.acks or ev.told_unknown),
    )


def _ack_matches(ev: TrialEvidence, ack: dict[str, object]) -> list[str]:
    op_id, life, told = str(ack["op"]), ack["life"], ack.get("result")
    seen = ack.get("ledger_seq")
    if not isinstance(told, str):
        return [f"{op_id} was reported done in life {life} without the digest of its result"]
    runs = [
        e
        for e in _step_chain(ev, op_id)
        if e.outcome == OK
        and not e.op_id.endswith(CHECK_SUFFIX)
        and (not isinstance(seen, int) or e.seq <= seen)
    ]
    if any(e.result == told for e in runs):
        return []
    if told == NOTHING_HANDED and _effect_found(ev, op_id, ack):
        return []
    if told == NOTHING_HANDED and runs and _reconciled_present(ev, op_id):
        return []  # its provider, asked by key, found it: an execution of it did succeed
    ran = ", ".join(f"{e.op_id} #{e.seq} {str(e.result)[:12]}" for e in runs) or "none"
    handed = "no result" if told == NOTHING_HANDED else f"a result of digest {told[:12]}"
    return [
        f"{op_id} was reported done in life {life} with {handed}, which no execution of it "
        f"returned and no check of it found (executions that succeeded: {ran})"
    ]


def _effect_found(ev: TrialEvidence, op_id: str, ack: dict[str, object]) -> bool:
    """Whether, before this ack, a check of a hinted op of its step found the effect, and
    was handed what an execution of that check returned."""
    step = step_of(op_id)
    checks = {
        (e.op_id, e.result) for e in ev.ledger if e.outcome == OK and e.op_id.endswith(CHECK_SUFFIX)
    }
    for event in ev.events:
        if event is ack:
            return False
        if (
            event["event"] == "check"
            and event.get("found") == "present"
            and step_of(str(event["op"])) == step
            and (f"{event['op']}{CHECK_SUFFIX}", event.get("result")) in checks
        ):
            return True
    return False


def _pause_landed(ev: TrialEvidence, life: int, at: str) -> str | None:
    """None when the supervisor saw the pause land: the life stopped at that hit (every
    process of its group seen stopped), another life started while it was, and it was
    resumed; else what did not happen."""
    held = beside = False
    for event in ev.events:
        if event["event"] == "pause" and int(event["life"]) == life:
            if not str(event.get("at") or "").startswith(at):
                continue
            if not event.get("stopped"):
                return "was told, but the life was never seen stopped"
            held = True
            beside = False
        elif held and event["event"] == "spawn":
            beside = True
        elif held and event["event"] == "resume" and int(event["life"]) == life:
            return None if beside else "held the life stopped, but no life started beside it"
    return "never happened (the point was never hit)" if not held else "was never resumed"


def check_faults_landed(ev: TrialEvidence) -> Verdict:
    """F: every fault the schedule asked for happened, by the supervisor's own observation.

    A kill at a failpoint was delivered there (the victim reached that hit);
    a lost reply, a cancellation, a model's misuse (a reused op id, an async
    tool) and a fault of the model's answer were reported by the life at that hit; a
    random-time kill was delivered; a full disk made the life stop on its
    failed append; a pause held the life stopped at its hit while another life started,
    then resumed it; a power loss was rebuilt from the observer's trace (after a
    kill between a write and its fsync whose bytes another thread's fsync had covered,
    the cut had nothing to take: said beside the pass); a
    corruption changed a record. A fault that did not land leaves the trial
    ``unknown``: it did not test what its schedule says.
    """
    problems = []
    moot: list[str] = []
    landed = 0
    lives = {life.life: life for life in ev.lives}
    for number, planned in enumerate(ev.schedule, 1):
        life = lives.get(number)
        try:
            asked = parse_spec(str(planned.get("failpoints", "")), source=f"life {number}")
        except ValueError as exc:
            problems.append(f"its schedule cannot be read: {exc}")
            continue
        kills = [spec for spec in asked if spec.action == "kill"]
        losses = [spec for spec in asked if spec.action in ("lost-reply", "lost-request")]
        cancels = [spec for spec in asked if spec.action == "cancel"]
        misuses = [spec for spec in asked if spec.action in (*MODEL_FAULTS, *AGENT_HOOKS)]
        answers = [spec for spec in asked if spec.action in MODEL_WIRE_FAULTS]
        full_disk = any(spec.action in ("enospc", "enospc-mid") for spec in asked)
        pauses = [spec for spec in asked if spec.action == "pause"]
        wanted = len(kills) + len(losses) + len(cancels) + ("kill_after_ms" in planned)
        wanted += len(pauses)
        wanted += len(misuses) + len(answers)
        wanted += full_disk
        wanted += "after_death" in planned
        if not wanted:
            continue
        if life is None:
            problems.append(
                f"life {number} was scheduled ({_describe(planned)}) but never ran: the "
                f"trial ended after life {len(ev.lives)}"
            )
            continue
        lost = _loss_that_ended(ev, life, losses)
        for spec in kills:
            if life.killed == "failpoint" and (life.reached or "").startswith(spec.at):
                landed += 1
            elif lost is not None:
                moot.append(
                    f"life {number}: the kill at {spec} did not apply: the {lost} before it "
                    f"ended the life ({_ended(life)}), as the agent's answer to it"
                )
            else:
                problems.append(f"life {number}: the kill at {spec} never fired ({_ended(life)})")
        if "kill_after_ms" in planned and "pause_ms" in planned:
            held = _pause_landed(ev, number, "timer")
            if held is None:
                landed += 1
            else:
                since = planned.get("aim", "ready")
                problems.append(
                    f"life {number}: the pause {planned['kill_after_ms']} ms after {since} {held}"
                )
        elif "kill_after_ms" in planned:
            if life.killed == "timed":
                landed += 1
            else:
                since = planned.get("aim", "ready")
                problems.append(
                    f"life {number}: the kill {planned['kill_after_ms']} ms after {since} never "
                    f"fired ({_ended(life)})"
                )
        for spec in losses:
            if _reported_at(ev, spec.action, spec, number):
                landed += 1
            else:
                problems.append(
                    f"life {number}: the {spec.action.replace('-', ' ')} at {spec} never happened"
                )
        for spec in cancels:
            if _reported_at(ev, "cancel", spec, number):
                landed += 1
            else:
                problems.append(
                    f"life {number}: the cancel at {spec} never happened (no asyncio task "
                    "was running there, or the point was never hit)"
                )
        for spec in misuses:
            told = AGENT_HOOKS.get(spec.action, spec.action)
            if _reported_at(ev, told, spec, number):
                landed += 1
            else:
                problems.append(f"life {number}: {spec} never acted (no {told} was reported)")
        for spec in pauses:
            held = _pause_landed(ev, number, spec.at)
            if held is None:
                landed += 1
            else:
                problems.append(f"life {number}: the pause at {spec} {held}")
        for spec in answers:
            if _reported_at(ev, MODEL_WIRE_FAULTS[spec.action], spec, number):
                landed += 1
            else:
                problems.append(f"life {number}: {spec} never acted (the model never got there)")
        if full_disk:
            if life.returncode == AGENT_WRITE_FAILED:
                landed += 1
            else:
                problems.append(
                    f"life {number}: the full disk never stopped an append ({_ended(life)})"
                )
        if "after_death" in planned:
            missed = _after_death_landed(ev, life, str(planned["after_death"]))
            problems += missed
            landed += not missed
            covered = _cut_covered(ev, life, str(planned["after_death"]))
            if not missed and covered:
                moot.append(covered)
    if problems:
        return _unknown("F", "; ".join(problems))
    landed_words = f"{many(landed, 'scheduled fault')} landed"
    return Verdict("F", TITLES["F"], "pass", (landed_words, *moot), landed > 0)


def _loss_that_ended(ev: TrialEvidence, life: LifeSeen, losses: list[FailpointSpec]) -> str | None:
    """The lost reply (or request) that landed in a life which then ended by itself, with a
    status but 0, before the kill scheduled after it: a kill that could not come (the
    agent's own answer to the loss was to stop). None otherwise: a life that ended 0, or
    was killed, or lost nothing, had its kill to meet."""
    if life.killed is not None or life.returncode in (0, None):
        return None
    for spec in losses:
        if _reported_at(ev, spec.action, spec, life.life):
            return f"{spec.action.replace('-', ' ')} at {spec}"
    return None


def _reported_at(ev: TrialEvidence, event: str, spec: FailpointSpec, life: int) -> bool:
    """Whether the life reported an ``event`` (a lost reply, a cancel) at ``spec``'s hit."""
    return any(str(e.get("at", "")).startswith(spec.at) for e in ev.events_of(event, life))


def _after_death_landed(ev: TrialEvidence, life: LifeSeen, spec: str) -> list[str]:
    number = life.life
    # A power cut acts on whatever files the runtime keeps (a framework's database too).
    if not ev.has_journal and not spec.startswith("power-loss"):
        return [f"life {number}: the runtime keeps no journal, so {spec} had nothing to act on"]
    fault = ev.fault_after(number)
    if fault is None:
        return [f"life {number}: {spec} was never applied"]
    if not fault.get("landed", False):
        return [f"life {number}: {spec} did not land: {fault.get('why', 'no reason given')}"]
    return []


def _cut_covered(ev: TrialEvidence, life: LifeSeen, spec: str) -> str | None:
    """Why a power loss after a kill between a journal write and its fsync had nothing to
    take, when it had not: an fsync the observer saw already covered every byte. Threads
    that share a journal do this: an fsync another thread began after the write makes it
    durable, by the kernel's rule, before the writer's own turn comes. None otherwise."""
    fault = ev.fault_after(life.life)
    if fault is None or not spec.startswith("power-loss"):
        return None
    between_write_and_fsync = (life.reached or "").startswith("journal.before_fsync")
    if between_write_and_fsync and int(fault.get("synced", 0)) >= int(fault.get("size", 0)):
        return (
            f"life {life.life}: the cut had nothing to take: an fsync the observer saw (begun "
            "after the write, by another thread) had made every byte of the journal durable"
        )
    return None


def _describe(planned: dict[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in planned.items())


def _ended(life: LifeSeen) -> str:
    if life.killed:
        return f"it was killed ({life.killed}, {life.reached or 'no failpoint'})"
    return f"it ended with exit status {life.returncode}"


def check_answered_by_own_content(ev: TrialEvidence) -> Verdict:
    """I12: a call answered from another op by content was answered by an op of its own
    tool and arguments (the part of them the scenario's table says tells the action).

    What was asked comes from the plan, by the call's id (``s004b~2`` is the plan call
    ``s004b``: its tool and arguments), never from the runtime's journal; which op
    answered, from what the model told the user (``answered_by`` in the history, the
    ``matched`` of the runtime's answer); that op's tool and arguments, from its first
    intent in the journal, read with the checkers' own reader. An op the journal does
    not hold answers nothing, unless a power cut took what a life wrote.
    """
    problems = []
    steps = {step.op_id: step for step in ev.plan.steps}
    ops = ev.final_ops
    seen: set[tuple[int, str, str]] = set()
    for told in ev.history:
        by = told.get("answered_by")
        step = steps.get(plan_id(str(told["op"])))
        if by is None or step is None:
            continue
        call, life = str(told["op"]), int(told["life"])
        if (life, call, str(by)) in seen:
            continue
        seen.add((life, call, str(by)))
        asked = f"{step.tool} {_args(step.args)}"
        op = ops.get(str(by))
        if op is None:
            if not any(ev.cut_after(n) for n in range(life, len(ev.lives) + 1)):
                problems.append(
                    f"{call} ({asked}) was answered in life {life} from {by}, an op the "
                    "journal holds no intent for"
                )
            continue
        journaled = op.first_intent.payload.get("args")
        # Compared as the scenario's table declares the tool's action (its identity, or all
        # but its volatile arguments): a drifted re-issue is its op's call.
        own = compared_args(ev.plan, step.tool, step.args)
        if (
            op.tool != step.tool
            or not isinstance(journaled, dict)
            or compared_args(ev.plan, op.tool, journaled) != own
        ):
            problems.append(
                f"{call} ({asked}) was answered in life {life} from {by} "
                f"({op.tool} {_args(journaled)}): another call's content"
            )
    return _verdict(
        "I12",
        problems,
        f"{many(len(seen), 'call')} answered by content, "
        "each from an op of its own tool and arguments",
        applied=bool(seen),
    )


def _args(args: object) -> str:
    """Arguments as the evidence shows them: JSON, keys sorted, long ones shortened."""
    text = json.dumps(args, sort_keys=True, default=repr)
    return text if len(text) <= 80 else text[:77] + "..."


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
    "I10": "fail means no effect: no effect left, none repeated in-process",
    "I11": "told the truth: what the model was told matches the world",
    "I12": "a call answered by content, from an op of its tool and arguments",
    "F": "every scheduled fault landed",
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
    "I10": check_fail_means_no_effect,
    "I11": check_told_the_truth,
    "I12": check_answered_by_own_content,
    "F": check_faults_landed,
}

NEEDS: dict[str, frozenset[str]] = {
    "I1": frozenset({"ledger", "history"}),
    "I2": frozenset({"ledger"}),
    "I3": frozenset({"journal", "ledger"}),
    "I4": frozenset({"journal", "ledger"}),
    "I5": frozenset({"journal"}),
    "I6": frozenset({"journal", "ledger"}),
    "I7": frozenset({"history"}),
    "I8": frozenset({"world"}),
    "I9": frozenset({"journal"}),
    "I10": frozenset({"ledger", "history", "world"}),
    "I11": frozenset({"ledger", "history", "results"}),
    "I12": frozenset({"journal", "history"}),
    "F": frozenset(),
}
"""The evidence each invariant needs; without it the invariant is not judged."""


_JUDGED_WITHOUT_JOURNAL = frozenset({"I8", "I9", "I10", "I11", "F"})
"""Judged from the world, the journal file's bytes and the supervisor, readable or not."""


def _journal_unreadable(ev: TrialEvidence) -> str | None:
    """Why a runtime that keeps the journal left none the checkers can read, if so."""
    reading = ev.reading
    if not reading.exists:
        return "the runtime keeps a journal, but the trial left none"
    if reading.corrupt is not None:
        return f"the journal cannot be read: {reading.corrupt}"
    return None


def check_trial(
    trial_dir: Path,
    golden_dir: Path | None,
    *,
    restart_budget: int = 8,
    offers: frozenset[str] = EVIDENCE,
) -> tuple[Verdict, ...]:
    """Every invariant's verdict for one trial; never raises.

    ``offers`` is the evidence the runtime under test keeps (its adapter says).
    """
    ev = TrialEvidence(trial_dir, golden_dir, restart_budget, offers)
    verdicts = []
    for key, checker in INVARIANTS.items():
        missing = NEEDS[key] - offers
        if missing:
            verdicts.append(
                _not_judged(key, f"the runtime under test offers no {', '.join(sorted(missing))}")
            )
            continue
        try:
            unreadable = _journal_unreadable(ev) if ev.has_journal else None
            if unreadable is not None and key not in _JUDGED_WITHOUT_JOURNAL:
                verdicts.append(_unknown(key, unreadable))
                continue
            verdicts.append(checker(ev))
        except Exception as exc:  # a checker's error is an unknown verdict, not a crash
            verdicts.append(_unknown(key, f"checker error: {type(exc).__name__}: {exc}"))
    return tuple(verdicts)
