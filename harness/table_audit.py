"""The table audit: does a tool table class each tool as the tool really behaves?

For every tool a plan calls, its first call in that plan is made twice in a
scratch world (after the plan's earlier calls, as a crash-free run makes them),
the second as recovery RETRIES it: the same op id and arguments, the next
attempt. The world's state rows are compared before and after each call. A
keyed tool's replay carries the first call's key and must change nothing; a
third call under a new key must have its effect (else a note).

The full note: docs/reference/modules.md (``harness/table_audit.py``).
"""

from __future__ import annotations

import enum
import json
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from harness.agent.plan import Plan, PlanStep
from harness.check.invariants import NOT_EFFECTS
from harness.runtime.classes import IdempotencyClass, ToolClass, ToolTable
from harness.runtime.executor import CallContext, ToolFunction
from harness.world.declared import canonical_json
from harness.world.store import EFFECT_TABLES, EffectRow, WorldStore, effect_rows, world_digest
from harness.world.tools import make_tool_function

__all__ = [
    "KEYED_UNSAFE",
    "SCRATCH_PREFIX",
    "UNSAFE_FINDINGS",
    "AuditStatus",
    "CallObservation",
    "Finding",
    "RowChange",
    "TableAudit",
    "ToolAudit",
    "WorldTools",
    "audit_table",
    "family_of",
    "first_calls",
    "judge",
    "simulated_tools",
]

SCRATCH_PREFIX = "harness-check-table-"
"""The name of each scratch folder begins with this (under ``TMPDIR``)."""

AuditStatus = Literal["ok", "note", "unsafe", "unjudged"]
_RANK: Mapping[AuditStatus, int] = MappingProxyType(
    {"ok": 0, "note": 1, "unjudged": 2, "unsafe": 3}
)

WorldTools = Callable[[WorldStore, Plan], ToolFunction]
"""How a scenario's world gets its tools: ``tools(world, plan) -> execute(tool, args, ctx)``."""


def simulated_tools(world: WorldStore, plan: Plan) -> ToolFunction:
    """The tools of a scenario's world: the catalog's simulated tools and the tools the
    scenario declares (``plan.tools``)."""
    return make_tool_function(world, plan.tools)


class Finding(enum.Enum):
    """What a pair of calls can show that a retry-safe class forbids."""

    FIRST_CHANGED = "its first call changed the world"
    REPLAY_CHANGED = "its replay changed the world"
    REPLAY_FAILED = "its replay failed where its first call succeeded"


KEYED_UNSAFE = frozenset({Finding.REPLAY_CHANGED, Finding.REPLAY_FAILED})
"""What makes a keyed class unsafe, whatever its family: recovery retries it with the same
key, so a replay under that key must be dropped by its provider."""


UNSAFE_FINDINGS: Mapping[str, frozenset[Finding]] = MappingProxyType(
    {
        "ask_user": frozenset(Finding),
        IdempotencyClass.READ_ONLY.value: frozenset(Finding),
        IdempotencyClass.IDEMPOTENT_WRITE.value: frozenset(
            {Finding.REPLAY_CHANGED, Finding.REPLAY_FAILED}
        ),
        IdempotencyClass.NON_IDEMPOTENT.value: frozenset(),
        IdempotencyClass.UNKNOWN.value: frozenset(),
    }
)
"""Per class family (``family_of``), the findings that make the class unsafe.

Recovery RETRIES the first three families after a crash, so what a replay
does must be harmless; it VERIFIES the last two, which may do anything."""


def family_of(tool_class: ToolClass) -> str:
    """``ask_user`` for the ask-user family, else the idempotency class's value."""
    return "ask_user" if tool_class.ask_user else tool_class.idempotency.value


@dataclass(frozen=True, slots=True)
class RowChange:
    """One state row a call added (``+``) or removed (``-``); a changed row is both."""

    sign: Literal["+", "-"]
    row: EffectRow

    def describe(self) -> str:
        """``+ ui_taps(element='ok')``: the row's content columns, long values shortened."""
        columns = _CONTENT[self.row.table]
        shown = ", ".join(
            f"{name}={_shorten(value)}"
            for name, value in zip(columns, self.row.values, strict=True)
        )
        return f"{self.sign} {self.row.table}({shown})"


_CONTENT = MappingProxyType({table.name: table.content for table in EFFECT_TABLES})
_SHOWN_CHARS = 60


def _shorten(value: object) -> str:
    text = repr(value)
    if len(text) <= _SHOWN_CHARS:
        return text
    return f"{text[: _SHOWN_CHARS - 3]}... ({len(text)} chars)"


@dataclass(frozen=True, slots=True)
class CallObservation:
    """One call as the world saw it: its error (None when it succeeded) and its changes."""

    error: str | None
    changes: tuple[RowChange, ...]
    """The rows of effect tables it added or removed."""
    logged: tuple[RowChange, ...] = ()
    """The rows of tables that are not effects (the question log) it added or removed."""
    digest: str = ""
    """The ``world_digest`` after the call."""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def summary(self) -> str:
        """A table cell: ``no change``, ``+1 row``, ``+1 -1 rows``, ``asked, no effect``,
        ``failed (ToolError)``."""
        added = sum(1 for c in self.changes if c.sign == "+")
        removed = len(self.changes) - added
        counts = " ".join(f"{sign}{n}" for sign, n in (("+", added), ("-", removed)) if n)
        parts = [] if self.error is None else [f"failed ({self.error.split(':', 1)[0]})"]
        if counts:
            parts.append(f"{counts} row{'s' if len(self.changes) > 1 else ''}")
        if any(c.sign == "+" for c in self.logged):
            parts.append("asked" if counts else "asked, no effect")
        return ", ".join(parts) or "no change"


@dataclass(frozen=True, slots=True)
class ToolAudit:
    """One tool's first call in one plan, made twice, and what the table's class makes of it."""

    tool: str
    scenario: str
    source: str
    op_id: str
    args: Mapping[str, Any]
    tool_class: ToolClass
    listed: bool
    first: CallObservation
    replay: CallObservation
    status: AuditStatus
    reasons: tuple[str, ...]
    earlier_failures: tuple[str, ...] = ()
    """The plan's earlier calls that failed while the world was brought to this call."""
    rekeyed: CallObservation | None = None
    """A keyed tool's third call, under a new key (None: the tool is not keyed)."""

    @property
    def class_label(self) -> str:
        """``read_only``, ``ask_user (read_only)``, ``unknown (not listed)``."""
        value = self.tool_class.idempotency.value
        if not self.listed:
            return f"{value} (not listed)"
        if self.tool_class.key_window is not None:
            value = f"{value}, keyed {self.tool_class.key_window:g}s"
        return f"ask_user ({value})" if self.tool_class.ask_user else value

    def evidence(self) -> tuple[str, ...]:
        """The lines that back the verdict: each call's error and the rows it changed."""
        lines = [f"arguments: {json.dumps(self.args, sort_keys=True, ensure_ascii=False)}"]
        calls = [("first call", self.first), ("replay", self.replay)]
        if self.rekeyed is not None:
            calls.append(("call with a new key", self.rekeyed))
        for name, call in calls:
            if call.error is not None:
                lines.append(f"{name} failed: {call.error}")
            lines += [f"{name}: {change.describe()}" for change in call.changes]
            lines += [f"{name} (not an effect): {change.describe()}" for change in call.logged]
            if call.ok and not call.changes:
                lines.append(f"{name}: no change to the world")
        lines += [f"earlier call failed: {failure}" for failure in self.earlier_failures]
        return tuple(lines)


@dataclass(frozen=True, slots=True)
class TableAudit:
    """Every audited call of a table, in the order the plans make them."""

    table: str
    """Where the table came from (``ToolTable.source``)."""
    audits: tuple[ToolAudit, ...]

    @property
    def status(self) -> AuditStatus:
        """The worst status: unsafe, then unjudged, then note, then ok (ok when empty)."""
        return max((a.status for a in self.audits), key=_RANK.__getitem__, default="ok")

    def with_status(self, status: AuditStatus) -> tuple[ToolAudit, ...]:
        return tuple(a for a in self.audits if a.status == status)


def judge(
    tool_class: ToolClass,
    first: CallObservation,
    replay: CallObservation,
    rekeyed: CallObservation | None = None,
) -> tuple[AuditStatus, tuple[str, ...]]:
    """The verdict on a class given what its tool's two calls (and, keyed, its call under a
    new key) did, with its reasons."""
    family = family_of(tool_class)
    seen = {
        Finding.FIRST_CHANGED: first.changed,
        Finding.REPLAY_CHANGED: replay.changed,
        Finding.REPLAY_FAILED: first.ok and not replay.ok,
    }
    if tool_class.keyed:
        keyed = [f for f in Finding if seen[f] and f in KEYED_UNSAFE]
        if keyed:
            why = (
                f"classed keyed ({tool_class.key_window:g} s), which recovery retries with "
                "the same key, but under the same key"
            )
            return "unsafe", tuple(f"{why} {finding.value}" for finding in keyed)
        if first.ok and first.changed and rekeyed is not None and not rekeyed.changed:
            return "note", (
                "classed keyed, but its call under a new key changed nothing: "
                "is the key what its provider deduplicates by?",
            )
    unsafe = [f for f in Finding if seen[f] and f in UNSAFE_FINDINGS[family]]
    if unsafe:
        label = "in the ask-user family" if tool_class.ask_user else family
        why = f"classed {label}, which recovery retries after a crash, but"
        return "unsafe", tuple(f"{why} {finding.value}" for finding in unsafe)
    if not first.ok:
        return "unjudged", (f"its first call failed ({first.error}): no replay to compare",)
    if not tool_class.retry_safe and not tool_class.keyed and replay.ok and not replay.changed:
        if first.changed:
            found = "its replay changed nothing: could be idempotent_write"
        else:
            found = "neither call changed the world: could be read_only"
        return "note", (f"classed {family}, which recovery verifies, but {found}",)
    return "ok", ()


def first_calls(plan: Plan) -> list[PlanStep]:
    """Each tool's first step in the plan, in plan order."""
    return [plan.steps[position] for position in _first_positions(plan)]


def _first_positions(plan: Plan) -> list[int]:
    seen: dict[str, int] = {}
    for position, step in enumerate(plan.steps):
        seen.setdefault(step.tool, position)
    return sorted(seen.values())


def audit_table(
    table: ToolTable, plans: Sequence[Plan], *, tools: WorldTools = simulated_tools
) -> TableAudit:
    """Audit ``table`` against every tool's first call in each plan (see the module's doc)."""
    audits = [
        _audit_call(table, plan, position, tools)
        for plan in plans
        for position in _first_positions(plan)
    ]
    return TableAudit(table.source, tuple(audits))


@dataclass(frozen=True, slots=True)
class _Snapshot:
    rows: tuple[EffectRow, ...]
    digest: str


def _snapshot(db: Path) -> _Snapshot:
    return _Snapshot(tuple(effect_rows(db)), world_digest(db))


def _audit_call(table: ToolTable, plan: Plan, position: int, tools: WorldTools) -> ToolAudit:
    step = plan.steps[position]
    failures = []
    with tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX) as scratch:
        db = Path(scratch) / "world.db"
        with WorldStore.open(db) as world:
            # The records the scenario's world begins with, as a trial's world has them.
            world.seed((r.collection, r.key, canonical_json(r.value)) for r in plan.world)
            execute = tools(world, plan)
            for earlier in plan.steps[:position]:
                error = _call(execute, earlier, _past_gate(earlier), incarnation=1)
                if error is not None:
                    failures.append(f"{earlier.op_id} {earlier.tool}: {error}")
            before = _snapshot(db)
            attempt = _past_gate(step)
            first, after_first = _observe(execute, step, attempt, 1, db, before)
            replay, after_replay = _observe(execute, step, attempt + 1, 2, db, after_first)
            tool_class = table.classify(step.tool)
            rekeyed = None
            if tool_class.keyed:  # the same call once more, as a new op: under a new key
                rekeyed, _ = _observe(
                    execute, step, attempt, 2, db, after_replay, key_op=f"{step.op_id}.new-key"
                )
    status, reasons = judge(tool_class, first, replay, rekeyed)
    return ToolAudit(
        step.tool,
        plan.scenario,
        plan.source,
        step.op_id,
        step.args,
        tool_class,
        step.tool in table,
        first,
        replay,
        status,
        reasons,
        tuple(failures),
        rekeyed,
    )


def _past_gate(step: PlanStep) -> int:
    # The catalog's gate fails attempts up to fail_attempts before the tool runs.
    fail_attempts = step.args.get("fail_attempts", 0)
    return (fail_attempts if isinstance(fail_attempts, int) else 0) + 1


def _call(
    execute: ToolFunction,
    step: PlanStep,
    attempt: int,
    *,
    incarnation: int,
    key_op: str | None = None,
) -> str | None:
    """Make one call; its error as ``Type: message``, or None when it succeeded."""
    ctx = CallContext(step.op_id, step.tool, attempt, incarnation, key_op)
    try:
        execute(step.tool, step.args, ctx)
    except Exception as exc:  # a tool's failure, or its bug: either is what it did
        return f"{type(exc).__name__}: {exc}"
    return None


def _observe(
    execute: ToolFunction,
    step: PlanStep,
    attempt: int,
    incarnation: int,
    db: Path,
    before: _Snapshot,
    *,
    key_op: str | None = None,
) -> tuple[CallObservation, _Snapshot]:
    error = _call(execute, step, attempt, incarnation=incarnation, key_op=key_op)
    after = _snapshot(db)
    changes = () if after.digest == before.digest else _difference(before.rows, after.rows)
    effects = tuple(c for c in changes if c.row.table not in NOT_EFFECTS)
    logged = tuple(c for c in changes if c.row.table in NOT_EFFECTS)
    return CallObservation(error, effects, logged, after.digest), after


def _difference(before: Sequence[EffectRow], after: Sequence[EffectRow]) -> tuple[RowChange, ...]:
    """The multiset difference, op ids aside (as ``world_digest`` compares): removed, then added."""
    old = Counter(_content(row) for row in before)
    new = Counter(_content(row) for row in after)
    gone, came = old - new, new - old
    removed = [RowChange("-", row) for row in before if _consume(gone, _content(row))]
    added = [RowChange("+", row) for row in after if _consume(came, _content(row))]
    return tuple(removed + added)


def _content(row: EffectRow) -> tuple[str, tuple[str, ...]]:
    return row.table, row.values


def _consume(
    counts: Counter[tuple[str, tuple[str, ...]]], key: tuple[str, tuple[str, ...]]
) -> bool:
    """Whether ``counts`` still holds a copy of ``key`` (and take it)."""
    if counts[key] > 0:
        counts[key] -= 1
        return True
    return False
