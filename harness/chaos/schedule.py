"""Crash schedules: which faults each life of the agent meets, as plain data.

A schedule lists lives (incarnations) in order; each may arm failpoints (a
``kill`` there is delivered from outside by the supervisor), be killed at a
random moment ``kill_after_ms`` after the agent said it was ready, and run
with a changed tool table. Lives past the list run clean until the plan is
done. A schedule, a seed and a scenario are all a trial needs to replay.

``exhaustive_schedules`` enumerates every failpoint hit a crash-free run made,
plus kills during recovery and a tool-table change; ``random_schedules``
draws time-based kills from a seed. Both are pure functions.
"""

from __future__ import annotations

import functools
import json
import math
import random
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from harness.blackbox import (
    AGENT_COMMAND_ENV,
    AGENT_HOME_ENV,
    BLACKBOX_POINTS,
    CALL_POINTS,
    resolve_command,
)
from harness.chaos import observer
from harness.chaos.faults import FLEET_KINDS, parse_after_death
from harness.errors import FailpointSpecError
from harness.failpoint_spec import MODEL_REPLY_POINT, MODEL_WIRE_FAULTS
from harness.failpoints import FAILPOINTS, parse_failpoints

if TYPE_CHECKING:
    from harness.adapters import Adapter
    from harness.chaos.services import ServiceSpec

__all__ = [
    "BLACK_BOX_CUTS",
    "COMPACTION_FAILPOINTS",
    "FILE_FAULTS",
    "JOURNAL_FAULTS",
    "MODEL_ANSWER_FAULTS",
    "OP_FAILPOINTS",
    "PAUSE_HOLD_MS",
    "RECONCILE_FAILPOINT",
    "RECOVERY_FAILPOINTS",
    "BatchCall",
    "Call",
    "CrashSchedule",
    "Life",
    "Window",
    "answer_hits",
    "appends_in_batches",
    "black_box_schedules",
    "exhaustive_schedules",
    "model_fault_spec",
    "not_applicable",
    "pause_schedules",
    "random_schedule",
    "unobserved",
    "unobserved_services",
]

OP_FAILPOINTS = (
    "op.before_intent",
    "op.after_intent",
    "op.mid_effect",
    "op.after_effect",
    "op.after_finish",
)
RECOVERY_FAILPOINTS = ("recovery.after_decision", "recovery.before_retry", "recovery.after_hint")
RECONCILE_FAILPOINT = "recovery.reconcile"
"""Where a restart that asks a reconciler is killed: after its answer, before it is written."""
COMPACTION_FAILPOINTS = (
    "compact.before_write",
    "compact.mid_write",
    "compact.before_rename",
    "compact.before_dir_fsync",
    "compact.after_dir_fsync",
)

PAUSE_HOLD_MS = 200
"""How long a pause holds a life stopped before the next one starts beside it, unless the
campaign is told otherwise (``chaos --pause-ms``): past nothing in particular for this
project's runtime (it has no timeout); an engine's activity or step timeout is what a
campaign of it holds past."""


DISK_FULL_HITS = (1, 2, 3, 5, 8, 13, 21, 34)
"""Which appends of a crash-free run meet a full disk: spread over the run."""


def appends_in_batches(
    moments: Sequence[float], batches: Sequence[tuple[float, float]]
) -> tuple[int, ...]:
    """The hits of ``journal.append`` (their ``moments``, ms after ready) of a crash-free
    run that came inside a batch (``batches``: each one's first start and last end): for
    a batch run on threads, a full disk there may meet other threads appending."""
    return tuple(
        hit
        for hit, moment in enumerate(moments, 1)
        if any(start <= moment <= end for start, end in batches)
    )


JOURNAL_FAULTS = frozenset(
    {
        "corrupt",
        "corrupt-crc",
        "sector",
        "disk-full",
        "disk-full-mid-write",
        "unlisted",
        "version-skew",
    }
)
"""Fault kinds that act on this project's journal."""

AGENT_LOOP_FAULTS = frozenset({"recover-in-flight", "both-apis"})
"""Fault kinds the harness's own agent loop makes (it uses its runtime again while a call
is in flight): at a failpoint every adapter hits, but acted on only by that loop."""

MODEL_ANSWER_KINDS = frozenset(MODEL_WIRE_FAULTS.values())
"""Fault kinds of the model's answer: a black box's scripted model fails on the wire."""

FILE_FAULTS = frozenset({"power-loss"})
"""Fault kinds that act on whatever files the runtime keeps in the trial folder (our
journal, a framework's database): rebuilt from what the agent asked the kernel."""


def not_applicable(kind: str, adapter: Adapter, services: Sequence[ServiceSpec] = ()) -> str | None:
    """Why a fault of ``kind`` has nothing to act on in ``adapter``'s runtime, or None.

    Damage at rest, a full disk and a changed table act on this project's journal and
    table; a power loss on any files the runtime keeps in the trial folder (our
    journal, a framework's database), and only where the observer it is rebuilt
    from can be had and can load into the agent's program and every one of its
    ``services`` (a scenario's servers); the agent loop's own misuse only where that loop
    runs; a fault of the model's answer only where a black box asks the model over HTTP; a
    fault of a fleet only in ``make chaos-fleet``."""
    if kind in FLEET_KINDS:
        return "a fault of a fleet on the PostgreSQL journal: make chaos-fleet injects it"
    if kind in JOURNAL_FAULTS and not adapter.journal:
        return f"{adapter.name} keeps no journal"
    if kind in MODEL_ANSWER_KINDS and not adapter.black_box:
        return f"{adapter.name} asks no model over HTTP: these faults act on a black box's"
    if kind in AGENT_LOOP_FAULTS and not adapter.takes_model:
        return f"{adapter.name} does not run harness.agent's loop, which this fault acts through"
    if kind in FILE_FAULTS:
        if not adapter.keeps_files:
            return f"{adapter.name} keeps no files in the trial folder"
        return observer.unavailable() or unobserved(adapter) or unobserved_services(services)
    return None


def unobserved(adapter: Adapter) -> str | None:
    """Why a black box's program cannot be observed (a static binary), or None."""
    if not adapter.black_box:
        return None  # an agent program of Python, started by the harness's own interpreter
    try:
        words = resolve_command(adapter.env[AGENT_COMMAND_ENV], adapter.env.get(AGENT_HOME_ENV))
    except ValueError:
        return None  # a command that cannot be read is refused before any trial
    why = observer.unobservable(words)
    return None if why is None else f"{adapter.name} cannot be observed: {why}"


def unobserved_services(services: Sequence[ServiceSpec]) -> str | None:
    """Why a service of the system under test cannot be observed (its command starts a
    static binary), or None. A power cut takes the services down with the agent and
    rebuilds their files too, so one service the observer cannot see leaves every cut
    unjudgeable: better said once, before any trial. A command that starts such a program
    through a launcher of its own (a script that spawns it) is not seen here; the cut then
    finds the changes it made unseen and refuses (the trial is unjudged, never a pass)."""
    for service in services:
        try:
            words = resolve_command(service.command, service.home)
        except ValueError:
            continue  # a command that cannot be read fails at its start, with its log
        why = observer.unobservable(words)
        if why is not None:
            # Its program as the service names it, not as found on this machine.
            named = shlex.split(service.command)[0]
            return f"its service {service.name} cannot be observed: " + why.replace(
                words[0], named, 1
            )
    return None


TABLE_VARIANTS = ("reclassified", "unlisted")
"""Tool-table variants a life may run with (built by ``harness.chaos.tables``)."""


_ACTION_FAULTS = (
    ("=enospc", "disk-full"),
    ("=enospc-mid", "disk-full-mid-write"),
    ("=lost-reply", "lost-reply"),
    ("=lost-request", "lost-request"),
    ("=cancel", "cancel"),
    ("=reuse-id", "reused-id"),
    ("=async-tool", "async-tool"),
    ("=recover", "recover-in-flight"),
    ("=lag", "lagging-lookup"),
    ("=sync-call", "both-apis"),
    ("=pause", "pause"),
    *((f"={action}", kind) for action, kind in MODEL_WIRE_FAULTS.items()),
)
"""The fault each failpoint action in a life's spec injects (a kill is told apart above)."""

_LIFE_KEYS = ("failpoints", "kill_after_ms", "aim", "table", "after_death", "pause_ms")


@dataclass(frozen=True, slots=True)
class Life:
    """The faults one incarnation meets.

    ``kill_after_ms`` is a random-time kill: so many ms after the agent says it
    is ready, or after ``aim``: a point of one call (``op.after_intent s004``, the
    failpoint's name and the op it serves) or its invoke (``invoke s004``). A kill
    aimed at a call is timed from inside it, not from a start-up whose length
    varies more than a call lasts. The agent arms the timer itself when it gets
    there (``harness.failpoints.AIM_ENV``): no supervisor sharing the
    CPUs wakes up within the tenth of a millisecond a call lasts in RAM.
    ``after_death`` is a fault applied to its files once it is dead (see
    ``harness.chaos.faults``): ``power-loss:drop``, ``power-loss:tear:<keep>:<garbage>``,
    ``power-loss:state:<k>``, ``corrupt:<where>``, ``version-skew`` and the others it lists.
    ``pause_ms`` turns the random-time kill into a pause at that moment, held so many ms
    while the next life runs beside it (``pause(MS)`` does the same at a failpoint).
    """

    failpoints: str = ""
    kill_after_ms: float | None = None
    table: str | None = None
    after_death: str | None = None
    aim: str | None = None
    pause_ms: int | None = None

    def hold_ms(self, reached: str | None) -> int:
        """How long the pause at ``reached`` (``op.after_intent 2 s002``, as the agent said
        it; ``timer ...`` for a random moment) holds the life stopped."""
        if (reached or "").startswith("timer"):
            return self.pause_ms or 0
        name, _, rest = (reached or "").partition(" ")
        hit = rest.partition(" ")[0]
        for spec in parse_failpoints(self.failpoints):
            here = spec.hit is None or str(spec.hit) == hit
            if spec.action == "pause" and spec.name == name and here:
                return spec.arg or 0
        return 0

    @property
    def kill_since(self) -> str:
        """Where a random-time kill is timed from: ``ready``, or its ``aim``."""
        return self.aim or "ready"

    def describe(self) -> str:
        parts = [self.failpoints] if self.failpoints else []
        if self.kill_after_ms is not None:
            since = f" after {self.aim}" if self.aim else ""
            what = "kill" if self.pause_ms is None else f"pause({self.pause_ms})"
            parts.append(f"{what}@{self.kill_after_ms:.3f}ms{since}")
        if self.table:
            parts.append(f"table={self.table}")
        if self.after_death:
            parts.append(f"then {self.after_death}")
        return " ".join(parts) or "clean"

    def to_json(self) -> dict[str, Any]:
        # Not "if value": a kill 0.0 ms after ready is a kill, and must replay as one.
        return {key: value for key in _LIFE_KEYS if (value := getattr(self, key)) not in (None, "")}

    @classmethod
    def from_json(cls, item: Any) -> Life:
        """A life from its JSON form, checked whole: ``ValueError`` names the key and the problem.

        Failpoints must parse (known names and actions), a kill time is a
        finite number of milliseconds >= 0, a table one of ``TABLE_VARIANTS``,
        and an after-death fault a spec ``harness.chaos.faults`` knows.
        """
        if not isinstance(item, dict) or set(item) - set(_LIFE_KEYS):
            raise ValueError(f"bad life {item!r}: keys are {', '.join(_LIFE_KEYS)}")
        failpoints = item.get("failpoints", "")
        if not isinstance(failpoints, str):
            raise ValueError(
                f"failpoints: {failpoints!r} is not a string like op.after_effect@3=kill"
            )
        try:
            parse_failpoints(failpoints, source="failpoints")
        except FailpointSpecError as exc:
            raise ValueError(str(exc)) from None
        kill = item.get("kill_after_ms")
        if kill is not None and (
            isinstance(kill, bool)
            or not isinstance(kill, int | float)
            or not math.isfinite(kill)
            or kill < 0
        ):
            raise ValueError(f"kill_after_ms: {kill!r} is not a number of milliseconds >= 0")
        table = item.get("table")
        if table is not None and table not in TABLE_VARIANTS:
            raise ValueError(
                f"table: {table!r} is not a table variant ({', '.join(TABLE_VARIANTS)})"
            )
        after_death = item.get("after_death")
        if after_death is not None:
            if not isinstance(after_death, str):
                raise ValueError(f"after_death: {after_death!r} is not a fault spec string")
            parse_after_death(after_death)
        aim = item.get("aim")
        if aim is not None and (kill is None or not _is_aim(aim)):
            raise ValueError(
                f"aim: {aim!r} must be 'invoke <op>' or '<failpoint> <op>' (a point of a "
                f"call: {', '.join(AIM_POINTS)}), beside a kill_after_ms"
            )
        pause = item.get("pause_ms")
        if pause is not None and (
            isinstance(pause, bool) or not isinstance(pause, int) or pause < 0 or kill is None
        ):
            raise ValueError(
                f"pause_ms: {pause!r} must be a whole number of milliseconds >= 0, beside a "
                "kill_after_ms (the moment of the pause)"
            )
        kill_ms = None if kill is None else float(kill)
        return cls(failpoints, kill_ms, table, after_death, aim, pause)


AIM_POINTS = ("op.before_intent", "op.after_intent", "op.reply", "op.after_finish")
"""The points of a call a random-time kill can be timed from (every adapter hits them)."""


def _is_aim(aim: object) -> bool:
    if not isinstance(aim, str):
        return False
    point, _, op = aim.partition(" ")
    return point in ("invoke", *AIM_POINTS, *CALL_POINTS) and bool(op) and " " not in op


@dataclass(frozen=True, slots=True)
class CrashSchedule:
    lives: tuple[Life, ...] = field(default_factory=tuple)

    @property
    def kills(self) -> int:
        timed = [life.kill_after_ms is not None and life.pause_ms is None for life in self.lives]
        return sum(("=kill" in life.failpoints) for life in self.lives) + sum(timed)

    @property
    def pauses(self) -> tuple[int, ...]:
        """The milliseconds each pause of its lives holds a life stopped."""
        return tuple(
            hold
            for life in self.lives
            for hold in (
                *(s.arg or 0 for s in parse_failpoints(life.failpoints) if s.action == "pause"),
                *([] if life.pause_ms is None else [life.pause_ms]),
            )
        )

    @property
    def fault_kinds(self) -> frozenset[str]:
        """The kinds of fault this schedule injects (sigkill, power-loss, ...)."""
        return frozenset().union(*map(_life_faults, self.lives))

    @property
    def failpoint_names(self) -> frozenset[str]:
        """Every failpoint a life of this schedule arms."""
        return frozenset(
            entry.split("@", 1)[0].split("=", 1)[0]
            for life in self.lives
            for entry in life.failpoints.split(",")
            if entry
        )

    @property
    def needs_journal(self) -> bool:
        """Whether it acts on this project's journal or tool table (corruption, a full disk,
        a changed table): faults with nothing to act on in another runtime."""
        return bool(self.fault_kinds & JOURNAL_FAULTS) or any(life.table for life in self.lives)

    @property
    def needs_files(self) -> bool:
        """Whether it acts on the files the runtime keeps in the trial folder (a power loss):
        nothing to act on in a runtime that keeps none."""
        return bool(self.fault_kinds & FILE_FAULTS)

    @property
    def crash_state(self) -> int | None:
        """The crash state its power cuts are judged in (``power-loss:state:<k>``), or None
        for cuts of another mode (drop, tear) or none."""
        for life in self.lives:
            kind, _, rest = (life.after_death or "").partition(":")
            if kind == "power-loss" and rest.startswith("state:"):
                return int(rest.split(":")[1])
        return None

    @property
    def cuts_drop(self) -> bool:
        """Whether it cuts power, and every cut drops what was not synced (``drop``): the
        cut whose other crash states a campaign judges too."""
        cuts = [
            life.after_death
            for life in self.lives
            if (life.after_death or "").startswith("power-loss")
        ]
        return bool(cuts) and all(cut == "power-loss:drop" for cut in cuts)

    def at_crash_state(self, state: int, model: str = "ordered") -> CrashSchedule:
        """The same lives, each power cut replaced by crash state ``state`` of its cut
        (``power-loss:state:<state>``, with ``:weak`` in the weak file-system model)."""
        spec = f"power-loss:state:{state}" + ("" if model == "ordered" else f":{model}")
        return CrashSchedule(
            tuple(
                replace(life, after_death=spec)
                if (life.after_death or "").startswith("power-loss")
                else life
                for life in self.lives
            )
        )

    def describe(self) -> str:
        return " | ".join(life.describe() for life in self.lives) or "no faults"

    def to_json(self) -> str:
        return json.dumps([life.to_json() for life in self.lives], separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> CrashSchedule:
        """A schedule from JSON; ``ValueError`` names the life (from 1) and what is wrong."""
        try:
            data: Any = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"not JSON: {exc}") from None
        if not isinstance(data, list):
            raise ValueError("a crash schedule is a JSON list of lives")
        lives = []
        for number, item in enumerate(data, 1):
            try:
                lives.append(Life.from_json(item))
            except ValueError as exc:
                raise ValueError(f"life {number}: {exc}") from None
        return cls(tuple(lives))


@functools.lru_cache(maxsize=1 << 14)
def _life_faults(life: Life) -> frozenset[str]:
    """The kinds of fault one life's schedule injects: read once a life, since the
    self-check's plan sorts thousands of trials by them, many times over."""
    kinds = set()
    if "=kill" in life.failpoints or (life.kill_after_ms is not None and life.pause_ms is None):
        kinds.add("sigkill")
    if life.pause_ms is not None:
        kinds.add("pause")
    actions = {f"={spec.action}" for spec in parse_failpoints(life.failpoints)}
    kinds.update(kind for action, kind in _ACTION_FAULTS if action in actions)
    if life.after_death:
        kinds.add(life.after_death.split(":", 1)[0])
    if life.table == "unlisted":
        kinds.add("unlisted")
    return frozenset(kinds)


InFlightSafe = Callable[[str, int], "bool | None"]
"""Given a failpoint and a hit: whether the op in flight there is retry-safe (None: unknown)."""

BatchCall = Callable[[str, int], "str | None"]
"""Given a failpoint and a hit: the op id of the batch call it served (None: no batch call)."""

Reconciled = Callable[[str, int], bool]
"""Given a failpoint and a hit: whether the op in flight there, left unknown, is put to a
reconciler at the next start (decided VERIFY, and its tool's provider asked by key)."""

UnsafeCall = Callable[[str, int], bool]
"""Given a failpoint and a hit: whether the call it served is of a class that must not run
twice (non-idempotent or unknown)."""

CANCEL_AFTER_EFFECT_EVERY = 3
"""Of a run's batch calls, every third (the first, the fourth, ...) is also cancelled at
its ``op.after_effect``: the finish is being written when the cancellation lands."""


def recovery_points(retry_safe: bool | None) -> tuple[str, ...]:
    """The recovery failpoints a restart hits with one op in flight of that kind.

    A retry-safe op is retried (``recovery.before_retry``), any other is handed
    to the model (``recovery.after_hint``); both are decided first.
    """
    if retry_safe is None:
        return RECOVERY_FAILPOINTS
    kept = "recovery.before_retry" if retry_safe else "recovery.after_hint"
    return tuple(p for p in RECOVERY_FAILPOINTS if p in ("recovery.after_decision", kept))


def exhaustive_schedules(
    hits: Mapping[str, int],
    in_flight_safe: InFlightSafe | None = None,
    batch_call: BatchCall | None = None,
    *,
    threads: bool = False,
    disk_full: Sequence[int] = (),
    group_writes: Sequence[tuple[str, int]] = (),
    unsafe_call: UnsafeCall | None = None,
    compacts: bool = False,
    reconciled: Reconciled | None = None,
    reconciled_in_life: Reconciled | None = None,
    reusable: Callable[[int], bool] | None = None,
    pause_ms: int = PAUSE_HOLD_MS,
) -> Iterator[tuple[str, CrashSchedule]]:
    """Every op failpoint at every hit the crash-free run made, then recovery kills.

    Yields (label, schedule). Kills during recovery follow a kill that leaves an
    op in flight (after its intent or its effect), at the recovery points the
    restart will hit for that op (``in_flight_safe`` says which: a kill at a
    point the restart never reaches would not land); a table change follows a
    kill after an intent, so that decisions must come from the snapshot. A kill
    after an effect or a finish is also followed by a power loss, and so is a
    kill between every journal write and its fsync (dropping or tearing it).
    Twice per scenario a kill is followed by a corrupted record, which the next
    start must refuse, and once by a frame of a newer format (``version-skew``),
    which it must refuse too; a few appends meet a full disk; every tool call
    of the run once loses its reply after its effect (``lost-reply``), and every
    call ``unsafe_call`` says must not run twice once loses its request before it
    (``lost-request``): the caller cannot tell the two timeouts apart. Twice per
    scenario the model issues a call under an earlier call's op id (``reused-id``), and
    once with an ``async def`` tool on the synchronous API (``async-tool``); a lost reply
    of a call ``reconciled_in_life`` says a reconciler answers for in the same life is
    also lost once with that reconciler's lookup lagging the provider's writes
    (``lagging-lookup``). Each call
    of a batch (``batch_call`` says which hits served one) is cancelled once after
    its intent, and a few after their effect (``cancel``).

    ``threads``: the run's batches run on threads, so which calls are in flight at
    a hit is not repeatable; a kill during recovery then comes only at
    ``recovery.after_decision``, which every restart with an op left in flight
    reaches. ``disk_full`` adds appends that meet a full disk (for such a run, the
    ones made inside its batches: ``appends_in_batches``). A thread has no task to
    cancel: such a run is given no ``batch_call``.

    ``group_writes``: the hits (point, N) at which a batch's calls write together (an
    event loop's shared append, ``journal.append``; threads' shared fsync,
    ``journal.before_fsync``): each meets a disk that fills up in the middle of it
    (``disk-full-mid-write``), which leaves some callers' intent frames whole.

    ``compacts``: the agent compacts its journal as a restarted life starts (a
    scenario's ``compact_at``). Each kill that leaves an op in flight (after its
    intent or its effect) is then also followed by a kill inside the next life's
    compaction, at each compaction point in turn, so that every point meets an
    open op carried into the new file, once as it is and once followed by a
    power cut (the file is as the compaction's fsyncs left it); and each kill
    after an intent by a kill of the next life once its work is done, so that a
    third life compacts the ops the second one recovered and resolved, once
    alone and once followed by a power cut.

    ``reconciled``: which kills leave an op that the next start puts to a reconciler.
    Its answer closes the op without a hint, so the next life is killed at
    ``recovery.reconcile`` instead of ``recovery.after_hint`` (the life after must
    ask again and decide the same); after a kill following an intent (the effect
    absent: the reconciler redoes it), also inside that redo once its effect is made,
    so that the life after finds the redo itself unknown and asks by the same key.
    """
    compaction = 0
    for name in OP_FAILPOINTS:
        for hit in range(1, hits.get(name, 0) + 1):
            first = Life(f"{name}@{hit}=kill")
            yield f"{name}@{hit}", CrashSchedule((first,))
            if name in ("op.after_intent", "op.after_effect", "op.mid_effect"):
                safe = None if in_flight_safe is None else in_flight_safe(name, hit)
                points = (RECOVERY_FAILPOINTS[0],) if threads else recovery_points(safe)
                asked = not threads and reconciled is not None and reconciled(name, hit)
                if asked:
                    points = (RECOVERY_FAILPOINTS[0], RECONCILE_FAILPOINT)
                    if name == "op.after_intent":  # the first effect of the next life: the redo's
                        points += ("op.after_effect",)
                for point in points:
                    yield (
                        f"{name}@{hit}+{point}@1",
                        CrashSchedule((first, Life(f"{point}@1=kill"))),
                    )
            if compacts and name in ("op.after_intent", "op.after_effect"):
                point = COMPACTION_FAILPOINTS[compaction % len(COMPACTION_FAILPOINTS)]
                compaction += 1
                yield f"{name}@{hit}+{point}@1", CrashSchedule((first, Life(f"{point}@1=kill")))
                # The same kill, then a power cut: what the compaction made durable stays.
                cut = Life(f"{point}@1=kill", after_death="power-loss:drop")
                yield f"{name}@{hit}+{point}@1+power-loss", CrashSchedule((first, cut))
                if name == "op.after_intent":
                    # Done, then killed: the next life compacts what recovery resolved.
                    done = Life("agent.before_exit@1=kill")
                    yield f"{name}@{hit}+agent.before_exit@1", CrashSchedule((first, done))
                    # The same, then a power cut: the journal that holds what the life did
                    # after its compaction must be the one under the journal's name.
                    cut = Life("agent.before_exit@1=kill", after_death="power-loss:drop")
                    label = f"{name}@{hit}+agent.before_exit@1+power-loss"
                    yield label, CrashSchedule((first, cut))
            if name == "op.after_intent":
                yield f"{name}@{hit}+table", CrashSchedule((first, Life(table="reclassified")))
                unlisted = replace(first, table="unlisted")
                yield f"{name}@{hit}+unlisted", CrashSchedule((unlisted, Life(table="unlisted")))
            if name != "op.after_intent":
                lost = Life(first.failpoints, after_death="power-loss:drop")
                yield f"{name}@{hit}+power-loss", CrashSchedule((lost,))
    finishes = hits.get("op.after_finish", 0)
    for hit in sorted({2, finishes} & set(range(2, finishes + 1))):
        broken = Life(f"op.after_finish@{hit}=kill", after_death="corrupt:0.5")
        yield f"op.after_finish@{hit}+corrupt", CrashSchedule((broken,))
        for fault, where in (
            ("corrupt-crc", "corrupt-crc:0.5"),
            ("sector-zero", "sector:zero:0.5"),
            ("sector-stale", "sector:stale:0.9"),
        ):
            damaged = Life(f"op.after_finish@{hit}=kill", after_death=where)
            yield f"op.after_finish@{hit}+{fault}", CrashSchedule((damaged,))
    if finishes:
        # A rolled-back upgrade's frame needs no record before it: one finish will do.
        hit = min(2, finishes)
        skewed = Life(f"op.after_finish@{hit}=kill", after_death="version-skew")
        yield f"op.after_finish@{hit}+version-skew", CrashSchedule((skewed,))
    for hit in range(1, hits.get("op.reply", 0) + 1):
        yield f"op.reply@{hit}+lost-reply", CrashSchedule((Life(f"op.reply@{hit}=lost-reply"),))
        if reconciled_in_life is not None and reconciled_in_life("op.reply", hit):
            # The same lost reply, its reconciler's lookup lagging the provider's writes by
            # less than the runtime's backoff: a lookup made at once would miss the effect.
            lagging = Life(f"op.reply@{hit}=lost-reply,reconcile.lookup=lag({LOOKUP_LAG_MS})")
            yield f"op.reply@{hit}+lagging-lookup", CrashSchedule((lagging,))
    for hit in range(1, hits.get("op.request", 0) + 1):
        if unsafe_call is not None and unsafe_call("op.request", hit):
            lost = Life(f"op.request@{hit}=lost-request")
            yield f"op.request@{hit}+lost-request", CrashSchedule((lost,))
    yield from _recover_in_flight_schedules(hits, batch_call, in_flight_safe)
    yield from _both_apis_schedules(hits, batch_call)
    issued = hits.get("model.issue", 0)
    # The first and last issue whose call has an earlier call of other content to take
    # the id of (``reusable``; a call that repeats every earlier one has none).
    candidates = [hit for hit in range(2, issued + 1) if reusable is None or reusable(hit)]
    for hit in sorted({candidates[0], candidates[-1]} if candidates else ()):
        # The model issues a call under an earlier call's id: the runtime must refuse it.
        reused = Life(f"model.issue@{hit}=reuse-id")
        yield f"model.issue@{hit}+reused-id", CrashSchedule((reused,))
    if issued:
        # ... and once with an async tool on the synchronous API, refused the same way.
        hit = (issued + 1) // 2
        awaited = Life(f"model.issue@{hit}=async-tool")
        yield f"model.issue@{hit}+async-tool", CrashSchedule((awaited,))
    appends = hits.get("journal.append", 0)
    for hit in sorted(hit for hit in {*DISK_FULL_HITS, *disk_full} if hit <= appends):
        full = Life(f"journal.append@{hit}=enospc")
        yield f"journal.append@{hit}+disk-full", CrashSchedule((full,))
    for name, hit in group_writes:
        if hit <= hits.get(name, 0):
            full = Life(f"{name}@{hit}=enospc-mid")
            yield f"{name}@{hit}+disk-full-mid-write", CrashSchedule((full,))
    yield from pause_schedules(hits, ("op.after_intent", "op.reply"), pause_ms)
    for hit in range(1, hits.get("journal.before_fsync", 0) + 1):
        how = ("drop", "tear", "tear-sector")[hit % 3]
        fault = {
            "drop": "power-loss:drop",
            "tear": f"power-loss:tear:0.5:{hit % 7}",
            "tear-sector": "power-loss:tear-sector",
        }[how]
        lost = Life(f"journal.before_fsync@{hit}=kill", after_death=fault)
        yield f"journal.before_fsync@{hit}+{how}", CrashSchedule((lost,))
    if batch_call is not None:
        yield from _cancel_schedules(hits, batch_call)


def pause_schedules(
    hits: Mapping[str, int], points: Sequence[str], hold_ms: int = PAUSE_HOLD_MS
) -> Iterator[tuple[str, CrashSchedule]]:
    """A pause at each of ``points``: the first hit of the first, the middle hit of the
    others. The life is stopped there, held ``hold_ms``, the next life runs beside it to
    its end, then it is resumed (``pause``)."""
    for index, name in enumerate(points):
        count = hits.get(name, 0)
        if count:
            hit = 1 if index == 0 else (count + 1) // 2
            paused = Life(f"{name}@{hit}=pause({hold_ms})")
            yield f"{name}@{hit}+pause", CrashSchedule((paused,))


LOOKUP_LAG_MS = 150
"""How far a lagging lookup (``lagging-lookup``) trails the provider's writes: less than
the runtime's ``RECONCILE_BACKOFF``, which a reconciler asked after a lost reply waits."""

RECOVER_IN_FLIGHT_HITS = 2
"""How many calls of a run meet the agent's ``recover()`` while they are in flight."""


def _recover_in_flight_schedules(
    hits: Mapping[str, int], batch_call: BatchCall | None, in_flight_safe: InFlightSafe | None
) -> Iterator[tuple[str, CrashSchedule]]:
    """The first calls of a run (``RECOVER_IN_FLIGHT_HITS``) each meet the agent's
    ``recover()`` once their intent is durable: calls of one step or of a thread; and the
    first call of a batch on an event loop with a retry-safe call in flight (there
    ``recover()`` runs as a task beside the calls: a recovery that went ahead would run
    such a call again once its success is durable, where an unsafe one's hint waits for
    the batch)."""
    plain = batched = 0
    for hit in range(1, hits.get("op.after_intent", 0) + 1):
        on_loop = batch_call is not None and batch_call("op.after_intent", hit) is not None
        if on_loop:
            # In flight there: none unsafe, or some of each (None); a retry-safe one to rerun.
            some_safe = in_flight_safe is not None and in_flight_safe("op.after_intent", hit)
            if batched or some_safe is False:
                continue
            batched += 1
        elif plain == RECOVER_IN_FLIGHT_HITS:
            continue
        else:
            plain += 1
        recover = Life(f"op.after_intent@{hit}=recover")
        yield f"op.after_intent@{hit}+recover-in-flight", CrashSchedule((recover,))


def _both_apis_schedules(
    hits: Mapping[str, int], batch_call: BatchCall | None
) -> Iterator[tuple[str, CrashSchedule]]:
    """The first two calls of batches on an event loop each called again, once its intent
    is durable, through the synchronous API (``both-apis``): the runtime must refuse it."""
    seen: list[str] = []
    for hit in range(1, hits.get("op.after_intent", 0) + 1):
        op = None if batch_call is None else batch_call("op.after_intent", hit)
        if op is None or op in seen:
            continue  # not a batch call's, or a later attempt of one
        seen.append(op)
        both = Life(f"op.after_intent@{hit}=sync-call")
        yield f"op.after_intent@{hit}+both-apis", CrashSchedule((both,))
        if len(seen) == 2:
            return


def _cancel_schedules(
    hits: Mapping[str, int], batch_call: BatchCall
) -> Iterator[tuple[str, CrashSchedule]]:
    """Each batch call cancelled at its first ``op.after_intent`` (before its tool runs),
    and every ``CANCEL_AFTER_EFFECT_EVERY``-th at its first ``op.after_effect``."""
    for name, every in (("op.after_intent", 1), ("op.after_effect", CANCEL_AFTER_EFFECT_EVERY)):
        seen: list[str] = []
        for hit in range(1, hits.get(name, 0) + 1):
            op = batch_call(name, hit)
            if op is None or op in seen:
                continue  # not a batch call's, or a later attempt of one
            seen.append(op)
            if (len(seen) - 1) % every == 0:
                yield f"{name}@{hit}+cancel", CrashSchedule((Life(f"{name}@{hit}=cancel"),))


START_UP_SHARE = 0.05
"""Of random-time kills, this share is timed from the agent's "ready" and drawn over the
whole span of its work (start-up and recovery included); the others are aimed at a
window of a tool call of the golden run and timed from the point that opens it."""


RESTART_SHARE = 0.5
"""A restarted life's start-up and recovery, as a share of a first life's (which also makes
its world and journal): where the calls left to it begin. Measured: in 1,175 restarted
lives of a 1,500-trial random campaign, the first hint or call came at a median 0.47 of
the golden run's first call (deciles 0.26 to 0.80). Only the kills timed from "ready"
use it, to guess how far they got."""

RECOVERY_SHARE = 0.15
"""Of the random-time kills of restarted lives, this share is timed from "ready" into
the recovery (a moment of the first ``RESTART_SHARE`` of the golden run's start-up)."""

NEAR_WINDOWS = 3
"""A restarted life aims at one of the next few calls left to it, so that a trial's
kills follow its work rather than jump to its end."""

DAMAGE_SHARE = 1 / 8
"""Random trials whose journal is damaged at rest: a kill after a finish (there are
records before the tail), then corruption, checksum-only corruption or a bad sector."""

UNLISTED_SHARE = 1 / 6
"""Random trials whose every life runs with a table that leaves the writing tools out."""

LOST_REPLY_SHARE = 1 / 6
"""Random trials whose first life loses the reply of one call and is killed at a later
call's reply (the effect done, the finish not yet written)."""

PAUSE_SHARE = 1 / 10
"""Of the random kills of this project's agent aimed inside a call and not followed by a
power cut, this share are pauses instead (held the campaign's pause, the next life run beside
the stopped one; one whose moment never comes lands at the agent's last point)."""


class Window(NamedTuple):
    """A window of the protocol inside a call, in the golden run (ms after ready)."""

    point: str
    """The point it opens at."""
    opened_ms: float
    closed_ms: float


class Call(NamedTuple):
    """A tool call of the golden run (a list in ``golden.json``: ``Call.from_json``)."""

    op: str
    start_ms: float
    """Its first intent (or a black box's first point), in ms after ready."""
    end_ms: float
    """Its last finish (or a black box's last point), in ms after ready."""
    windows: tuple[Window, ...]
    """Between its points: before intent, intent-effect, effect-finish."""

    @classmethod
    def from_json(cls, item: Sequence[Any]) -> Call:
        op_id, start, end, *rest = item
        windows = tuple(Window(str(p), float(a), float(b)) for p, a, b in (rest[0] if rest else ()))
        return cls(str(op_id), float(start), float(end), windows)


def _kill_moment(
    rng: random.Random, span_ms: float, calls: Sequence[Call], done: int, restarted: bool
) -> tuple[float, str | None, int] | None:
    """A random-time kill for a life that begins after the golden run's first ``done``
    calls: (ms, its aim or None for "ready", how many calls it leaves done); None when
    no call is left to hit. A kill aimed at a call picks one of its windows and is
    timed from the point that opens it, to land inside it."""
    left = calls[done:]
    if calls and not left:
        return None
    if restarted and left and rng.random() < RECOVERY_SHARE:
        return rng.uniform(0.0, calls[0].start_ms * RESTART_SHARE), None, done
    if not left or rng.random() < START_UP_SHARE:
        moment = rng.uniform(0.0, span_ms)
        if not left:
            return moment, None, done
        # How far a kill timed from "ready" got: a restarted life starts over first.
        first = left[0].start_ms
        offset = first - (calls[0].start_ms * RESTART_SHARE if restarted else first)
        passed = sum(1 for call in left if call.end_ms - offset <= moment)
        return moment, None, done + passed
    aimed = rng.randrange(min(len(left), NEAR_WINDOWS) if restarted else len(left))
    call = left[aimed]
    window = (
        rng.choice(call.windows) if call.windows else Window("invoke", call.start_ms, call.end_ms)
    )
    span = max(window.closed_ms - window.opened_ms, 0.0)
    return rng.uniform(0.0, span), f"{window.point} {call.op}", done + aimed + 1


def _after_a_kill(rng: random.Random) -> str | None:
    """What a power cut after a random kill does: drop (1/6), tear (1/6), or nothing."""
    roll = rng.random()
    if roll < 1 / 6:
        return "power-loss:drop"
    if roll < 1 / 3:
        return f"power-loss:tear:{rng.random():.3f}:{rng.randrange(16)}"
    return None


def random_schedule(
    rng: random.Random,
    ready_to_exit_ms: float,
    *,
    journal: bool = True,
    hits: Mapping[str, int] | None = None,
    calls: Sequence[Call] = (),
    power_loss: bool | None = None,
    answers: Sequence[int] = (),
    pause_ms: int = PAUSE_HOLD_MS,
) -> CrashSchedule:
    """One to three kills at random moments of a crash-free run's working time.

    Kills are aimed at the work: most at a random moment inside a window of
    the protocol (before intent, intent-effect, effect-finish: one drawn evenly)
    of one of the golden run's tool calls (``calls``), timed from the point
    that opens it in the life it kills, the rest (``START_UP_SHARE``) at a moment of
    the whole span timed from "ready", start-up included. A later life aims
    at one of the next calls the earlier kills left, and none is drawn once no
    call is left; a restarted life is killed in its recovery instead
    (``RECOVERY_SHARE``); a kill whose moment comes after the life's work (or
    whose call never comes) lands at its last point (the supervisor holds it there).

    For a runtime that keeps its state in files (``power_loss``, by default
    ``journal``: our journal, or a framework's database), a third of the kills are
    followed by a power loss (drop or tear). For one that keeps a journal
    (``journal``): ``PAUSE_SHARE`` of the other kills are pauses instead, held ``pause_ms``
    (the last kill drawn: the next life runs beside the stopped one), ``DAMAGE_SHARE`` of the trials
    instead kill after a random finish and damage the journal at rest (a
    flipped byte, a changed digit only the CRC sees, a zeroed or stale sector,
    at a random record), and ``UNLISTED_SHARE`` run every life with the
    unlisted table. ``LOST_REPLY_SHARE`` of the trials first lose a random
    call's reply and kill at a later reply of the same life (``hits``, the
    golden run's failpoint hits, says how many there are). For a black box (``answers``:
    the hits of its model's answers that asked for a call), ``MODEL_FAULT_SHARE`` of the
    trials instead meet one fault of the model's answer, drawn with the answer it hits.
    """
    hits = hits or {}
    if answers and rng.random() < MODEL_FAULT_SHARE:
        spec = model_fault_spec(rng.choice(MODEL_ANSWER_FAULTS), rng.choice(answers))
        return CrashSchedule((Life(spec),))
    cut = journal if power_loss is None else power_loss
    finishes, replies = hits.get("op.after_finish", 0), hits.get("op.reply", 0)
    if journal and finishes >= 2 and rng.random() < DAMAGE_SHARE:
        where = f"{rng.random():.3f}"
        damage = rng.choice(
            (
                f"corrupt:{where}",
                f"corrupt-crc:{where}",
                f"sector:zero:{where}",
                f"sector:stale:{where}",
            )
        )
        at = f"op.after_finish@{rng.randrange(2, finishes + 1)}=kill"
        return CrashSchedule((Life(at, after_death=damage),))
    table = "unlisted" if journal and rng.random() < UNLISTED_SHARE else None
    lives = []
    done = 0  # how many of the golden run's calls the earlier kills left behind, roughly
    kills = rng.choice((1, 1, 2, 3))
    if replies >= 2 and rng.random() < LOST_REPLY_SHARE:
        # The life that lost a reply has at least the golden run's replies (the lost
        # one is verified or retried, both of which reply), so a later one comes.
        lost = rng.randrange(1, replies)
        killed = rng.randrange(lost + 1, replies + 1)
        failpoints = f"op.reply@{lost}=lost-reply,op.reply@{killed}=kill"
        lives.append(Life(failpoints, table=table, after_death=_after_a_kill(rng) if cut else None))
        done = min(killed, len(calls))
        kills -= 1
    for _ in range(kills):
        drawn = _kill_moment(rng, ready_to_exit_ms, calls, done, restarted=bool(lives))
        if drawn is None:
            break
        moment, aim, done = drawn
        fault = _after_a_kill(rng) if cut else None
        # A pause instead of a kill (this project's agent: it holds itself at the moment):
        # the next life runs beside the stopped one to its end, so it is the last drawn.
        paused = journal and fault is None and aim is not None and rng.random() < PAUSE_SHARE
        lives.append(
            Life(
                kill_after_ms=round(moment, 3),
                aim=aim,
                table=table,
                after_death=fault,
                pause_ms=pause_ms if paused else None,
            )
        )
        if paused:
            break
    if table and lives:
        lives.append(Life(table=table))  # the life that finishes runs with it too
    return CrashSchedule(tuple(lives))


BLACK_BOX_CUTS = ("model.received", "agent.before_exit")
"""Where a black box's exhaustive trials follow a kill with a power cut: each time it asks
its model (what it keeps of the results it was shown is written by then), and once it
has exited 0 (all it keeps is written)."""


MODEL_ANSWER_FAULTS = (
    "rate-limit",
    "server-error",
    "overloaded",
    "stream-cut",
    "stream-hang",
    "lost-answer",
)
"""The faults of the model's answer a campaign draws, in this order (``MODEL_WIRE_FAULTS``)."""

HANG_MS = 2000
"""How long a drawn hung answer hangs before the model closes the connection, as a
provider's idle timeout does (``stream-hang`` with no milliseconds hangs until the life
ends: a replay can ask for it, a campaign does not draw it)."""

MODEL_FAULT_SHARE = 1 / 6
"""Random trials of a black box whose one fault is a fault of the model's answer."""


def model_fault_spec(action: str, hit: int) -> str:
    """The failpoint entry of a fault of the model's answer at ``hit`` of its answers."""
    timed = {"rate-limit": "(200)", "stream-hang": f"({HANG_MS})"}.get(action, "")
    return f"{MODEL_REPLY_POINT}@{hit}={action}{timed}"


def answer_hits(hits: Mapping[str, int], op_at: Callable[[str, int], str | None]) -> list[int]:
    """The hits of ``model.before_reply`` of a crash-free run whose answer asked for a call
    (``op_at`` names its first call's op; none for the final answer)."""
    return [
        hit for hit in range(1, hits.get(MODEL_REPLY_POINT, 0) + 1) if op_at(MODEL_REPLY_POINT, hit)
    ]


def black_box_schedules(
    hits: Mapping[str, int],
    op_at: Callable[[str, int], str | None] | None = None,
    pause_ms: int = PAUSE_HOLD_MS,
) -> Iterator[tuple[str, CrashSchedule]]:
    """A black box's exhaustive trials: a kill at every point of the harness's servers at
    every hit its crash-free run made (``harness.blackbox.BLACKBOX_POINTS``, in protocol
    order), then every reply lost once after its effect (``lost-reply``: the response is
    dropped), then a kill at every hit of ``BLACK_BOX_CUTS`` followed by a power cut that
    drops what it did not fsync (``power-loss``; applicable where it can be observed), a
    pause inside its first call, its effect made (``pause``, held ``pause_ms``), then each
    fault of the model's answer once (``MODEL_ANSWER_FAULTS``), at the middle one of the
    answers that asked for a call after an earlier call's result (``op_at``: the golden
    run's op at each hit; none, no such trials)."""
    for name in (point for point in FAILPOINTS if point in BLACKBOX_POINTS):
        for hit in range(1, hits.get(name, 0) + 1):
            yield f"{name}@{hit}", CrashSchedule((Life(f"{name}@{hit}=kill"),))
    for hit in range(1, hits.get("op.reply", 0) + 1):
        yield f"op.reply@{hit}+lost-reply", CrashSchedule((Life(f"op.reply@{hit}=lost-reply"),))
    for name in BLACK_BOX_CUTS:
        for hit in range(1, hits.get(name, 0) + 1):
            cut = Life(f"{name}@{hit}=kill", after_death="power-loss:drop")
            yield f"{name}@{hit}+power-loss", CrashSchedule((cut,))
    # Stopped inside its first call, its effect made, as a worker that stops answering while
    # it runs: the next life starts beside it.
    yield from pause_schedules(hits, ("op.reply",), pause_ms)
    later = answer_hits(hits, op_at)[1:] if op_at is not None else []
    if later:
        hit = later[len(later) // 2]
        for action in MODEL_ANSWER_FAULTS:
            yield (
                f"{MODEL_REPLY_POINT}@{hit}+{action}",
                CrashSchedule((Life(model_fault_spec(action, hit)),)),
            )
