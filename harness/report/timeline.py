"""A trial's timeline: each life of the agent, what the supervisor saw and what was written.

``read_timeline`` reads a trial folder (``events.jsonl``, ``lives.json``, the
journal and the world's effect ledger) into rows, one list per life:

- the supervisor's events (spawn, ready, kill, exit, and an after-death
  fault applied to the dead agent's files), kills named as such;
- the journal records of that incarnation, in journal order;
- the ledger rows (real executions) of that incarnation, each placed after the
  last journal record that ended at or before the row's ``journal_pos``: the
  execution happened when the journal was that long;
- the agent's ``ack`` of each success it reported to its user.

A journal changed at rest on purpose (corrupted, or given a newer runtime's
frame) is shown from the copy the fault kept before, and says so.

Contract: it never raises. A file that cannot be read becomes a line in
``Timeline.problems`` and the rest is shown from what could be read; the
report describes, it never decides. ``render_timeline`` turns a timeline into
an HTML fragment (every string escaped); the page around it comes from
``harness.report.html``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.chaos.faults import PRISTINE_JOURNAL
from harness.runtime.classes import ToolClass
from harness.runtime.journal import ScannedRecord, scan_journal
from harness.runtime.matrix import Decision
from harness.runtime.records import (
    DecisionRecord,
    FinishRecord,
    HintRecord,
    IncarnationRecord,
    IntentRecord,
    RecoveredRecord,
    ResolvedRecord,
    TailDroppedRecord,
)
from harness.words import many
from harness.world.store import LedgerEntry, read_ledger

__all__ = ["LifeTimeline", "Row", "Timeline", "read_timeline", "render_timeline"]

# Tones, by what a reader must spot first: a kill (red), an unknown outcome
# handed to the model (amber), a real execution in the world (blue).
KILL, VERIFY, LEDGER, OK, FAILED, EVENT, QUIET, PLAIN = (
    "kill",
    "verify",
    "ledger",
    "ok",
    "failed",
    "event",
    "quiet",
    "plain",
)


@dataclass(frozen=True, slots=True)
class Row:
    """One line of a life: where (a byte offset, or empty), what kind, which op, and text."""

    tone: str
    tag: str
    text: str
    op: str = ""
    where: str = ""


@dataclass(frozen=True, slots=True)
class LifeTimeline:
    """One life (incarnation) of the agent, with a one-line summary."""

    title: str
    summary: str
    killed: bool
    rows: tuple[Row, ...]


@dataclass(frozen=True, slots=True)
class Timeline:
    """A trial's lives in order, with what could not be read and what to keep in mind."""

    lives: tuple[LifeTimeline, ...]
    problems: tuple[str, ...] = ()
    """What could not be read, in words (each source is read on its own)."""
    notes: tuple[str, ...] = ()


@dataclass
class _Segment:
    """The journal records of one incarnation, and the ledger rows placed among them."""

    incarnation: int | None
    pid: int | None
    records: list[ScannedRecord] = field(default_factory=list)
    ledger: list[LedgerEntry] = field(default_factory=list)


def read_timeline(trial_dir: Path, *, windows: Sequence[str] = ()) -> Timeline:
    """The trial's lives, read from its folder; ``windows`` names each random-time kill's window."""
    problems: list[str] = []
    notes: list[str] = []
    events = _read_events(trial_dir / "events.jsonl", problems)
    stderr = _read_stderr(trial_dir / "lives.json", problems)
    records: tuple[ScannedRecord, ...] = ()
    try:
        scan = scan_journal(trial_dir / "journal")
        records = scan.records
        if scan.torn is not None:
            notes.append(
                f"the journal ends with a torn tail of {scan.torn.length} bytes at byte "
                f"{scan.torn.offset} ({scan.torn.reason}): not a record, not shown"
            )
    except Exception as exc:  # a report must show what it could read, whatever broke
        problems.append(f"the journal could not be read: {_error(exc)}")
        records = _pristine_records(trial_dir, notes)
    ledger: list[LedgerEntry] = []
    try:
        ledger = read_ledger(trial_dir / "world.db")
    except Exception as exc:
        problems.append(f"the world's effect ledger (world.db) could not be read: {_error(exc)}")
    segments = _segments(records, ledger)
    lives = _assemble(events, stderr, segments, list(windows))
    return Timeline(tuple(lives), tuple(problems), tuple(notes))


def _pristine_records(trial_dir: Path, notes: list[str]) -> tuple[ScannedRecord, ...]:
    """The journal as it was before a fault changed it at rest, when the fault kept a copy."""
    pristine = trial_dir / PRISTINE_JOURNAL
    if not pristine.exists():
        return ()
    try:
        records = scan_journal(pristine).records
    except Exception:
        return ()
    notes.append(
        f"showing {PRISTINE_JOURNAL}, the journal as it was before a fault changed it "
        f"at rest: records written after it are not in this copy"
    )
    return records


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _read_events(path: Path, problems: list[str]) -> dict[int, list[dict[str, Any]]]:
    """Life number -> the supervisor's events of that life, in file order."""
    by_life: dict[int, list[dict[str, Any]]] = {}
    try:
        lines = path.read_text("utf-8").splitlines()
    except Exception as exc:
        problems.append(f"the supervisor's events (events.jsonl) could not be read: {_error(exc)}")
        return by_life
    bad = 0
    for line in lines:
        try:
            event = json.loads(line)
            life = int(event["life"])
            str(event["event"])
        except (ValueError, KeyError, TypeError):
            bad += 1
            continue
        by_life.setdefault(life, []).append(event)
    if bad:
        problems.append(f"events.jsonl: {bad} unreadable lines skipped")
    return by_life


def _read_stderr(path: Path, problems: list[str]) -> dict[int, str]:
    if not path.exists():
        return {}
    try:
        return {
            int(d["life"]): str(d.get("stderr") or "") for d in json.loads(path.read_text("utf-8"))
        }
    except Exception as exc:
        problems.append(f"lives.json could not be read: {_error(exc)}")
        return {}


def _segments(records: Iterable[ScannedRecord], ledger: list[LedgerEntry]) -> list[_Segment]:
    """Split the journal at each incarnation record; give each segment its ledger rows."""
    segments: list[_Segment] = []
    for scanned in records:
        record = scanned.record
        if isinstance(record, IncarnationRecord) or not segments:
            if isinstance(record, IncarnationRecord):
                segments.append(_Segment(record.incarnation, record.pid))
            else:  # records before any incarnation record: shown, not hidden
                segments.append(_Segment(None, None))
        segments[-1].records.append(scanned)
    by_incarnation = {s.incarnation: s for s in segments if s.incarnation is not None}
    by_pid = {s.pid: s for s in segments if s.pid is not None}
    for entry in ledger:
        home = by_incarnation.get(entry.incarnation) or by_pid.get(entry.pid)
        if home is None:
            # No journal record names this life (the journal is unreadable, or the
            # process died before writing): the ledger's pid still ties the row to a life.
            home = by_pid[entry.pid] = _Segment(None, entry.pid)
            segments.append(home)
        home.ledger.append(entry)
    return segments


def _assemble(
    events: dict[int, list[dict[str, Any]]],
    stderr: dict[int, str],
    segments: list[_Segment],
    windows: list[str],
) -> list[LifeTimeline]:
    by_pid = {s.pid: s for s in segments if s.pid is not None}
    used: set[int] = set()
    lives = []
    for life_no in sorted(events):
        life_events = events[life_no]
        pid = next((e.get("pid") for e in life_events if e["event"] == "spawn"), None)
        segment = by_pid.get(pid) if isinstance(pid, int) else None
        if segment is not None:
            used.add(id(segment))
        window = None
        if any(e["event"] == "kill" and e.get("how") == "timed" for e in life_events) and windows:
            window = windows.pop(0)
        lives.append(_life(life_no, life_events, segment, stderr.get(life_no, ""), window))
    for segment in segments:
        if id(segment) not in used:
            lives.append(_unmatched(segment))
    return lives


def _life(
    life_no: int,
    events: list[dict[str, Any]],
    segment: _Segment | None,
    stderr: str,
    window: str | None,
) -> LifeTimeline:
    rows: list[Row] = []
    opening = [e for e in events if e["event"] in ("spawn", "ready")]
    acks = [e for e in events if e["event"] == "ack"]
    hints = [e for e in events if e["event"] == "hint"]
    closing = [e for e in events if e["event"] not in ("spawn", "ready", "ack", "hint")]
    # After an after-death fault the journal no longer holds what the victim saw,
    # so what was in flight at the kill cannot be read from it.
    witness = None if any(e["event"] == "fault" for e in events) else segment
    rows.extend(_event_row(e, witness, window) for e in opening)
    if segment is None or not segment.records:
        rows.append(Row(QUIET, "journal", "no journal records read for this life"))
    body = _segment_rows(segment) if segment is not None else []
    body = _place_hints(body, [str(e.get("op")) for e in hints])
    rows.extend(_place_acks(body, [str(e.get("op")) for e in acks]))
    rows.extend(_event_row(e, witness, window) for e in closing)
    if stderr.strip():
        rows.append(Row(FAILED, "stderr", stderr.strip()[-600:]))
    spawn = next((e for e in opening if e["event"] == "spawn"), {})
    kill = next((e for e in closing if e["event"] == "kill"), None)
    end = next((e for e in closing if e["event"] == "exit"), None)
    parts = [f"pid {spawn.get('pid', '?')}", f"faults: {spawn.get('faults', '?')}"]
    if segment is not None:
        parts.append(_recovery_summary(segment))
    if kill is not None:
        parts.append(f"KILLED ({_kill_words(kill, window)})")
    elif end is not None:
        parts.append(f"exited {end.get('returncode')}")
    title = f"Life {life_no}"
    if segment is not None and segment.incarnation is not None:
        title += f" (incarnation {segment.incarnation})"
    return LifeTimeline(title, " · ".join(parts), kill is not None, tuple(rows))


def _place_acks(rows: list[Row], acks: list[str]) -> list[Row]:
    """Put each ``ack`` (the agent told its user an op succeeded) where it happened.

    Acks carry no journal offset, and the supervisor's clock stamps them when it
    reads the pipe, which may be after the next op ran. But the agent acks each
    plan step as its call returns, in plan order, once it has verified every
    hint: so an ack goes right after its op's SUCCEEDED finish when this life
    wrote one, else (a success answered from the journal) after the previous
    ack, the first one after the last resolution of a hint or the end of recovery.
    """
    out = list(rows)
    starts = [i + 1 for i, r in enumerate(out) if r.tag in ("recovered", "resolved")]
    cursor = starts[-1] if starts else len(out)
    for op_id in acks:
        done = next(
            (
                i
                for i in range(cursor, len(out))
                if out[i].tag == "finish" and out[i].tone == OK and out[i].op == op_id
            ),
            None,
        )
        cursor = cursor if done is None else done + 1
        out.insert(cursor, Row(EVENT, "ack", "reported done to the user", op_id))
        cursor += 1
    return out


def _place_hints(rows: list[Row], hints: list[str]) -> list[Row]:
    """Put each ``hint`` event (the model read an op's VERIFY hint) where it happened.

    Like acks, they carry no journal offset: the agent tells the supervisor as it
    hands the hint to its model, once the runtime has written the hint record and
    before the model resolves the op. So each goes right after its op's hint record,
    else (no hint record read) after the end of recovery, else at the end.
    """
    out = list(rows)
    for op_id in hints:
        hinted = [i for i, r in enumerate(out) if r.tag == "hint" and r.op == op_id]
        recovered = [i for i, r in enumerate(out) if r.tag == "recovered"]
        at = hinted[-1] + 1 if hinted else recovered[-1] + 1 if recovered else len(out)
        out.insert(at, Row(VERIFY, "hint read", "the model was handed the hint", op_id))
    return out


def _unmatched(segment: _Segment) -> LifeTimeline:
    if segment.incarnation is None and not segment.records:
        title = "Executions outside any known life"
        why = f"ledger rows of pid {segment.pid}, which neither the journal nor the events name"
    elif segment.incarnation is None:
        title, why = "Before any incarnation record", "journal records with no life"
    else:
        title = f"Incarnation {segment.incarnation}"
        why = f"pid {segment.pid}; the supervisor's events do not name this process"
    return LifeTimeline(title, why, False, tuple(_segment_rows(segment)))


def _recovery_summary(segment: _Segment) -> str:
    decisions = [s.record for s in segment.records if isinstance(s.record, DecisionRecord)]
    acted = [d for d in decisions if d.decision is not Decision.SKIP]
    words = [f"{d.op_id} {d.decision.value.upper()}" for d in acted]
    if not segment.records:
        return f"{many(len(segment.ledger), 'execution')}"
    recovery = f"recovery: {', '.join(words)}" if words else "recovery: all SKIP"
    return f"{recovery}; {many(len(segment.ledger), 'execution')}"


def _kill_words(event: dict[str, Any], window: str | None) -> str:
    how = event.get("how")
    if how == "failpoint":
        return f"at failpoint {event.get('at')}"
    if how == "timed":
        where = f", window {window}" if window else ""
        since = event.get("since") or "ready"
        return f"at a random time, {event.get('after_ms')} ms after {since}{where}"
    if how == "timeout":
        return "the trial's time ran out"
    return str(how)


def _event_row(event: dict[str, Any], segment: _Segment | None, window: str | None) -> Row:
    kind = str(event["event"])
    if kind == "spawn":
        return Row(
            EVENT,
            "spawn",
            f"supervisor started pid {event.get('pid')} with faults: {event.get('faults')}",
        )
    if kind == "ready":
        return Row(
            EVENT,
            "ready",
            f"imports done after {event.get('ms')} ms (random-time kills count from here)",
        )
    if kind == "kill":
        text = f"SIGKILL {_kill_words(event, window)}"
        flight = _in_flight(segment) if segment is not None else ""
        return Row(KILL, "KILL", text + (f"; {flight}" if flight else ""))
    if kind == "fault":
        spec = event.get("fault", "?")
        details = ", ".join(
            f"{k} {v}" for k, v in event.items() if k not in ("event", "t_ns", "life", "fault")
        )
        return Row(
            KILL,
            "fault",
            f"after death: {spec} applied to its files ({details}); the journal shown "
            f"may differ from what this life wrote",
        )
    if kind == "exit":
        code = event.get("returncode")
        tone = QUIET if code in (0, -9) else FAILED
        return Row(tone, "exit", f"process ended: returncode {code} after {event.get('ms')} ms")
    # An event newer than this report: its fields in words, in the order they came.
    fields = ", ".join(f"{k} {v}" for k, v in event.items() if k not in ("event", "t_ns", "life"))
    return Row(EVENT, kind, fields, str(event.get("op", "")))


def _in_flight(segment: _Segment) -> str:
    """The ops whose intent this life wrote and never finished: what the kill interrupted."""
    if not segment.records:
        return ""  # no journal to tell, and "nothing in flight" would be a guess
    open_ops: dict[tuple[str, int], str] = {}
    for scanned in segment.records:
        r = scanned.record
        if isinstance(r, IntentRecord):
            open_ops[r.op_id, r.attempt] = r.tool
        elif isinstance(r, FinishRecord):
            open_ops.pop((r.op_id, r.attempt), None)
    if not open_ops:
        return "no op was in flight"
    parts = []
    for (op_id, attempt), tool in open_ops.items():
        ran = any(e.op_id == op_id and e.attempt == attempt for e in segment.ledger)
        effect = "its effect had run (in the ledger)" if ran else "no effect in the ledger"
        parts.append(f"{op_id} ({tool}, attempt {attempt}) in flight, {effect}")
    return "; ".join(parts)


def _segment_rows(segment: _Segment) -> list[Row]:
    """Journal records in order, ledger rows after the last record ending at or before them."""
    placed: list[tuple[int, int, int, Row]] = []
    for i, scanned in enumerate(segment.records):
        placed.append((scanned.end, 0, i, _record_row(scanned)))
    unplaced = []
    for entry in segment.ledger:
        if entry.journal_pos is None:
            unplaced.append(_ledger_row(entry))
        else:
            placed.append((entry.journal_pos, 1, entry.seq, _ledger_row(entry)))
    placed.sort(key=lambda item: item[:3])
    return _group_skips([row for *_, row in placed] + unplaced)


def _group_skips(rows: list[Row]) -> list[Row]:
    """Fold runs of routine SKIP decisions with the same state into one row."""
    out: list[Row] = []
    for row in rows:
        last = out[-1] if out else None
        if row.tag == "skip" and last is not None and last.tag == "skip" and last.text == row.text:
            out[-1] = Row(QUIET, "skip", row.text, f"{last.op} {row.op}", last.where)
        else:
            out.append(row)
    return [_grouped(r) if r.tag == "skip" else r for r in out]


def _grouped(row: Row) -> Row:
    ops = row.op.split()
    if len(ops) == 1:
        return Row(row.tone, "decision", row.text, row.op, row.where)
    return Row(row.tone, "decision", f"{row.text}: {' '.join(ops)}", f"{len(ops)} ops", row.where)


def _snapshot(cls: ToolClass) -> str:
    words = cls.idempotency.value + (", ask_user" if cls.ask_user else "")
    return f"[{words}]"


def _record_row(scanned: ScannedRecord) -> Row:
    r = scanned.record
    at = f"@{scanned.offset}"
    if isinstance(r, IncarnationRecord):
        return Row(
            PLAIN,
            "incarnation",
            f"incarnation {r.incarnation} begins (pid {r.pid}); recovery reads the journal",
            where=at,
        )
    if isinstance(r, DecisionRecord):
        text = f"{r.state.value} {_snapshot(r.snapshot)} → {r.decision.value.upper()}"
        if r.decision is Decision.SKIP:
            return Row(QUIET, "skip", f"{r.state.value} → SKIP", r.op_id, at)
        return Row(
            VERIFY if r.decision is Decision.VERIFY else PLAIN, "decision", text, r.op_id, at
        )
    if isinstance(r, HintRecord):
        return Row(VERIFY, "hint", f"to the model: {r.hint}", r.op_id, at)
    if isinstance(r, IntentRecord):
        redo = f"; redo of {r.redo_of}" if r.redo_of else ""
        return Row(
            PLAIN,
            "intent",
            f"{r.tool} {_snapshot(r.snapshot)} attempt {r.attempt}{redo}",
            r.op_id,
            at,
        )
    if isinstance(r, FinishRecord):
        if r.succeeded:
            return Row(OK, "finish", f"SUCCEEDED attempt {r.attempt}", r.op_id, at)
        transient = " (transient)" if r.transient else ""
        return Row(
            FAILED, "finish", f"FAILED attempt {r.attempt}{transient}: {r.error}", r.op_id, at
        )
    if isinstance(r, ResolvedRecord):
        redo = f" → {r.redo_op}" if r.redo_op else ""
        return Row(
            PLAIN,
            "resolved",
            f"the model resolved it: {r.resolution.value}"
            + (f" ({r.note})" if r.note else "")
            + redo,
            r.op_id,
            at,
        )
    if isinstance(r, RecoveredRecord):
        return Row(
            PLAIN,
            "recovered",
            f"recovery done ({many(r.decisions, 'decision')}); the normal flow starts",
            where=at,
        )
    if isinstance(r, TailDroppedRecord):
        return Row(
            VERIFY,
            "tail dropped",
            f"a torn tail of {r.length} bytes at byte {r.offset} was cut off at open ({r.reason})",
            where=at,
        )
    # A record kind newer than this report: show it raw rather than hide it.
    return Row(PLAIN, str(getattr(r, "kind", type(r).__name__)), repr(r), where=at)


def _ledger_row(entry: LedgerEntry) -> Row:
    pos = (
        "no journal position"
        if entry.journal_pos is None
        else (f"journal at byte {entry.journal_pos}")
    )
    return Row(
        LEDGER,
        "executed",
        f"{entry.tool} attempt {entry.attempt} really ran in the world "
        f"(ledger #{entry.seq}, {pos})",
        entry.op_id,
        "" if entry.journal_pos is None else f"@{entry.journal_pos}",
    )


# -- rendering --------------------------------------------------------------------------

LEGEND = (
    (KILL, "SIGKILL"),
    (VERIFY, "VERIFY decision, hint to the model"),
    (LEDGER, "real execution (effect ledger)"),
    (OK, "finish SUCCEEDED"),
    (FAILED, "finish FAILED, stderr"),
    (EVENT, "supervisor event"),
)


def _e(value: object) -> str:
    return html.escape(str(value))


def render_timeline(timeline: Timeline, marks: Mapping[str, Sequence[str]] | None = None) -> str:
    """The timeline as an HTML fragment: problems, notes, a legend, then one block per life.

    ``marks``: op -> the invariants whose evidence names it; that op's rows are marked."""
    marks = marks or {}
    parts = []
    for problem in timeline.problems:
        parts.append(f'<p class="problem">{_e(problem)}</p>')
    for note in timeline.notes:
        parts.append(f'<p class="note">{_e(note)}</p>')
    legend = "".join(f'<span class="r {tone}">{_e(words)}</span>' for tone, words in LEGEND)
    if marks:
        legend += '<span class="r mark">the op of a failed invariant\'s evidence</span>'
    parts.append(
        f'<p class="legend">{legend}<br><span class="at">@n</span>: a record starts at '
        f"byte n of the journal; an execution happened when the journal was n bytes "
        f"long, so it sits after the last record written before it</p>"
    )
    if not timeline.lives:
        parts.append('<p class="problem">nothing to show: no events, journal or ledger</p>')
    for life in timeline.lives:
        rows = "".join(
            _render_lanes(part, marks) if isinstance(part, tuple) else _render_row(part, marks)
            for part in _side_by_side(life.rows)
        )
        killed = " killed" if life.killed else ""
        parts.append(
            f'<section class="life{killed}"><h3>{_e(life.title)} '
            f'<span class="sum">{_e(life.summary)}</span></h3><ol class="tl">{rows}</ol></section>'
        )
    return "\n".join(parts)


def _mark(row: Row, marks: Mapping[str, Sequence[str]]) -> tuple[str, str]:
    """The class and title that mark a row of an op a failed invariant's evidence names."""
    broke = marks.get(row.op)
    if not broke:
        return "", ""
    return " mark", f' title="{_e("named by the evidence of " + ", ".join(broke))}"'


def _render_row(row: Row, marks: Mapping[str, Sequence[str]]) -> str:
    mark, title = _mark(row, marks)
    return (
        f'<li class="r {_e(row.tone)}{mark}"{title}><span class="at">{_e(row.where)}</span>'
        f'<span class="tag">{_e(row.tag)}</span><span class="op">{_e(row.op)}</span>'
        f'<span class="tx">{_e(row.text)}</span></li>'
    )


def _side_by_side(rows: Sequence[Row]) -> list[Row | tuple[Row, ...]]:
    """The rows, with each stretch where two calls or more were in flight at once (a
    batch) gathered into a tuple, to be shown a column per call."""
    parts: list[Row | tuple[Row, ...]] = []
    since_open: list[Row] = []  # the rows since an op was last alone in flight, or none was
    together = False
    in_flight: set[str] = set()
    for row in rows:
        if row.tag == "intent":
            in_flight.add(row.op)
            together = together or len(in_flight) > 1
        if in_flight or since_open:
            since_open.append(row)
        else:
            parts.append(row)
        if row.tag == "finish" and "(transient)" not in row.text:
            in_flight.discard(row.op)
        if since_open and not in_flight:
            parts.extend([tuple(since_open)] if together else since_open)
            since_open, together = [], False
    if since_open:
        parts.extend([tuple(since_open)] if together else since_open)
    return parts


def _render_lanes(rows: tuple[Row, ...], marks: Mapping[str, Sequence[str]]) -> str:
    """Calls in flight together, side by side: a column per op, a line per record or
    execution in journal order, each in the column of its op."""
    ops = list(dict.fromkeys(row.op for row in rows if row.op))
    head = "".join(f"<th>{_e(op)}</th>" for op in ops)
    lines = []
    for row in rows:
        cell = f'<span class="tag">{_e(row.tag)}</span> <span class="tx">{_e(row.text)}</span>'
        cells = "".join(f"<td>{cell if row.op == op else ''}</td>" for op in ops)
        if row.op not in ops:
            cells = f'<td colspan="{len(ops)}">{cell}</td>'
        mark, title = _mark(row, marks)
        lines.append(
            f'<tr class="r {_e(row.tone)}{mark}"{title}><td class="at">{_e(row.where)}</td>'
            f"{cells}</tr>"
        )
    return (
        f'<li class="lanes"><table class="lanes"><tr><th>calls at once</th>{head}</tr>'
        f"{''.join(lines)}</table></li>"
    )
