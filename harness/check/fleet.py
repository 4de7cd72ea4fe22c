"""The fleet's invariants: what a fleet of workers did, judged from evidence they cannot forge.

The evidence (``FleetEvidence``) is the world's ledger (every real run of a
tool, in the order runs took effect), the tasks the supervisor queued, and the
supervisor's own observations: when it stopped and woke a worker (as marks in
the ledger's order) and what each worker told its user (``told`` lines: claims,
checked against the ledger, never taken as what ran). Each check returns a
``FleetVerdict``; none raises.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.world.fleet import FleetLedgerRow

__all__ = [
    "FLEET_INVARIANTS",
    "FleetEvidence",
    "FleetVerdict",
    "Pause",
    "Told",
    "check_fleet",
]

FLEET_INVARIANTS = {
    "one-runner": "no op run by two workers: an unsafe step's effect runs at most once",
    "no-task-lost": "no task lost: every task queued is done, each of its steps in the world",
    "no-fenced-write": (
        "no write by a fenced worker: a worker stopped while another ran its task "
        "writes nothing for that task once woken"
    ),
    "fail-no-effect": "a call its worker was told did not run (fail) never takes effect",
}
"""Every fleet invariant, by key, in the order verdicts are given."""


@dataclass(frozen=True, slots=True)
class Told:
    """What a worker told its user of one call: ``ok``, ``fail`` or ``info``."""

    pid: int
    task: str
    op_id: str
    status: str


@dataclass(frozen=True, slots=True)
class Pause:
    """A worker the supervisor stopped (SIGSTOP) while it ran ``task``, and woke
    (SIGCONT): the ledger's last ``seq`` at each moment."""

    pid: int
    task: str
    stopped_at: int
    woken_at: int


@dataclass(frozen=True, slots=True)
class FleetEvidence:
    """What a fleet trial's checks read (see the module docstring)."""

    tasks: tuple[str, ...]
    steps: tuple[str, ...]
    unsafe_steps: frozenset[str]
    """The steps whose tool is not retry-safe: their effect must run at most once."""
    ledger: tuple[FleetLedgerRow, ...]
    done: Mapping[str, int]
    told: tuple[Told, ...] = ()
    pauses: tuple[Pause, ...] = ()


@dataclass(frozen=True, slots=True)
class FleetVerdict:
    """One invariant's verdict on one trial, with the evidence it read."""

    invariant: str
    status: Literal["pass", "fail", "unknown"]
    evidence: str


def _one_runner(ev: FleetEvidence) -> FleetVerdict:
    runs: dict[tuple[str, str], list[FleetLedgerRow]] = defaultdict(list)
    for row in ev.ledger:
        if row.step in ev.unsafe_steps:
            runs[(row.task, row.step)].append(row)
    twice = {key: rows for key, rows in runs.items() if len(rows) > 1}
    if not twice:
        return FleetVerdict("one-runner", "pass", f"{len(runs)} unsafe steps ran once each")
    said = "; ".join(
        f"{task} {step} ran {len(rows)} times: "
        + ", ".join(f"op {r.op_id} by pid {r.pid} (ledger #{r.seq})" for r in rows)
        for (task, step), rows in sorted(twice.items())
    )
    return FleetVerdict("one-runner", "fail", said)


def _no_task_lost(ev: FleetEvidence) -> FleetVerdict:
    ran = {(r.task, r.step) for r in ev.ledger}
    lost = []
    for task in ev.tasks:
        missing = [s for s in ev.steps if (task, s) not in ran]
        if task not in ev.done or missing:
            why = "not done" if task not in ev.done else "done"
            lost.append(f"{task} ({why}; steps not in the world: {', '.join(missing) or 'none'})")
    if lost:
        return FleetVerdict("no-task-lost", "fail", "; ".join(lost))
    return FleetVerdict("no-task-lost", "pass", f"{len(ev.tasks)} tasks done, every step ran")


def _no_fenced_write(ev: FleetEvidence) -> FleetVerdict:
    if not ev.pauses:
        return FleetVerdict("no-fenced-write", "pass", "no worker was paused")
    said = []
    for pause in ev.pauses:
        while_stopped = [
            r
            for r in ev.ledger
            if r.task == pause.task
            and r.pid != pause.pid
            and pause.stopped_at < r.seq <= pause.woken_at
        ]
        if not while_stopped:
            return FleetVerdict(
                "no-fenced-write",
                "unknown",
                f"pid {pause.pid} was stopped on {pause.task}, but no other worker ran it "
                "meanwhile: nothing to fence it from",
            )
        late = [r for r in ev.ledger if r.pid == pause.pid and r.task == pause.task]
        late = [r for r in late if r.seq > pause.woken_at]
        if late:
            return FleetVerdict(
                "no-fenced-write",
                "fail",
                f"pid {pause.pid}, stopped while pid {while_stopped[0].pid} ran {pause.task} "
                f"(ledger #{pause.stopped_at + 1} to #{pause.woken_at}), ran "
                + ", ".join(f"op {r.op_id} (ledger #{r.seq})" for r in late)
                + " once woken",
            )
        said.append(
            f"pid {pause.pid} stopped on {pause.task}, {len(while_stopped)} runs by others "
            "meanwhile, none by it once woken"
        )
    return FleetVerdict("no-fenced-write", "pass", "; ".join(said))


def _fail_no_effect(ev: FleetEvidence) -> FleetVerdict:
    failed = [t for t in ev.told if t.status == "fail"]
    ran = {(r.task, r.op_id): r for r in ev.ledger}
    broken = [(t, ran[(t.task, t.op_id)]) for t in failed if (t.task, t.op_id) in ran]
    if broken:
        return FleetVerdict(
            "fail-no-effect",
            "fail",
            "; ".join(
                f"{t.task} op {t.op_id}: pid {t.pid} was told it did not run, yet pid "
                f"{r.pid} ran it (ledger #{r.seq})"
                for t, r in broken
            ),
        )
    return FleetVerdict("fail-no-effect", "pass", f"{len(failed)} calls told fail, none ran")


_CHECKS: dict[str, Callable[[FleetEvidence], FleetVerdict]] = {
    "one-runner": _one_runner,
    "no-task-lost": _no_task_lost,
    "no-fenced-write": _no_fenced_write,
    "fail-no-effect": _fail_no_effect,
}


def check_fleet(
    evidence: FleetEvidence, only: Collection[str] | None = None
) -> Sequence[FleetVerdict]:
    """Every fleet invariant's verdict (or those ``only`` names), in ``FLEET_INVARIANTS``'s
    order; a check that raises gives ``unknown`` with the error."""
    verdicts = []
    for key in FLEET_INVARIANTS:
        if only is not None and key not in only:
            continue
        try:
            verdicts.append(_CHECKS[key](evidence))
        except Exception as exc:  # a checker's bug must not pass a trial
            verdicts.append(FleetVerdict(key, "unknown", f"the check raised {exc!r}"))
    return verdicts
