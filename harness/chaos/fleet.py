"""The fleet's campaign: worker processes pull tasks from a queue, and the faults of a fleet.

A fleet trial starts ``WORKERS`` processes of ``harness.agent.fleet`` on one
world (``harness.world.fleet``: the queue and the effects) and one store of
journals: a folder of files, or a database of the harness's own PostgreSQL server
(``harness.chaos.postgres``). The supervisor here is the only code that signals
the workers or touches the database server; it injects one fault
(``FLEET_FAULTS``), waits for the workers to finish every task (or for
``TRIAL_SECONDS``), and judges the trial by ``harness.check.fleet`` from the
world's ledger and its own observations.

Every fault but ``sigkill`` acts on what only the PostgreSQL journal has (a
lease, a claim, a connection, a server): on the file journal it is refused in one
line (``FleetSpecError``). Every random choice comes from the trial's seed.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Literal

from harness.agent.fleet import HOLD_ENV, LONG_ENV, RUNTIME_ENV, STEPS, TABLE
from harness.agent.fleet_broken import FLEET_BROKEN
from harness.chaos.postgres import PostgresServer
from harness.chaos.wirecut import CommitCutter, Cut
from harness.check.fleet import (
    FleetEvidence,
    FleetVerdict,
    Pause,
    Told,
    check_fleet,
)
from harness.errors import HarnessError
from harness.world.fleet import FleetWorld, ledger_mark, read_done, read_fleet_ledger

__all__ = [
    "FLEET_FAULTS",
    "LEASE",
    "FleetSpecError",
    "FleetTrialResult",
    "FleetTrialSpec",
    "campaign_specs",
    "fault_kind",
    "run_fleet_trial",
]

WORKERS = 3
TASKS = 4
LEASE = 2.0
"""The claims' lease in the fleet's trials (seconds): short, so a takeover is quick, yet a
renewal every ``RENEW`` seconds keeps it on a busy machine."""
RENEW = 0.5
LONG_CALL = 4 * LEASE
"""How long the long call of ``redelivery:long-call`` takes: four leases."""
TRIAL_SECONDS = 60.0
"""A trial whose workers have not finished by then is ended: its tasks left are lost."""
LOCK_WAIT = 10.0
"""How long ``redelivery:claim`` waits for the two claims to meet at its row lock."""

FLEET_FAULTS = {
    "sigkill": "SIGKILL of a worker mid-task; the queue delivers its task again at once",
    "lease-pause": (
        "a worker SIGSTOPped past its lease with an intent durable and its tool not run; "
        "its task delivered again; SIGCONT once another worker finished it"
    ),
    "redelivery:claim": (
        "a task delivered twice at once: two live workers claim it together (their "
        "claims meet behind a row lock the supervisor holds, then go on at once)"
    ),
    "redelivery:long-call": (
        "a task delivered again to a second live worker while the first is in a call "
        "four leases long"
    ),
    **{
        f"cut:{when}:{what}": (
            f"the connection cut {when} the COMMIT of the first {what} written "
            "(a proxy between workers and server)"
        )
        for what in ("intent", "finish")
        for when in ("before", "during", "after")
    },
    "db-crash": (
        "kill -9 of the postmaster and its backends mid-campaign, then a restart "
        "(it recovers from its WAL)"
    ),
}
"""The faults of a fleet, by spec: what each does."""
POSTGRES_ONLY = frozenset(FLEET_FAULTS) - {"sigkill"}


def fault_kind(spec: str) -> str:
    """The kind of the fault catalogue (``harness.chaos.faults.FAULT_KINDS``) a fleet
    fault's spec is of: ``redelivery:claim`` is a ``redelivery``, ``cut:after:intent`` a
    ``cut-commit``."""
    head = spec.split(":", 1)[0]
    return "cut-commit" if head == "cut" else head


class FleetSpecError(HarnessError):
    """A fleet trial asked for something it cannot have (a fault on a store without it).

    Remedy: the message names the fault and the store; run PostgreSQL's faults on the
    PostgreSQL journal (``--journal postgres``).
    """


@dataclass(frozen=True, slots=True)
class FleetTrialSpec:
    """One fleet trial: its store, its runtime, its fault and its seed."""

    journal: Literal["file", "postgres"]
    fault: str | None
    runtime: str = "real"
    seed: int = 0

    @property
    def name(self) -> str:
        return f"{self.journal}/{self.fault or 'plain'}"

    def check(self) -> None:
        """``FleetSpecError`` in one line if this trial cannot be run."""
        if self.fault is not None and self.fault not in FLEET_FAULTS:
            raise FleetSpecError(
                f"fleet fault {self.fault!r}: not one of {', '.join(FLEET_FAULTS)}"
            )
        if self.journal == "file" and self.fault in POSTGRES_ONLY:
            raise FleetSpecError(
                f"fleet fault {self.fault!r} acts on the PostgreSQL journal (a lease, a "
                "claim, a connection, a server): the file journal has none; use "
                "--journal postgres"
            )
        if self.runtime != "real" and self.runtime not in FLEET_BROKEN:
            raise FleetSpecError(
                f"fleet runtime {self.runtime!r}: real or one of {', '.join(FLEET_BROKEN)}"
            )


@dataclass(frozen=True, slots=True)
class FleetTrialResult:
    """A fleet trial's verdicts, whether its fault landed, and where its folder is."""

    spec: FleetTrialSpec
    verdicts: tuple[FleetVerdict, ...]
    landed: bool
    fault_note: str
    folder: Path
    seconds: float

    @property
    def status(self) -> Literal["pass", "fail", "unknown"]:
        if any(v.status == "fail" for v in self.verdicts):
            return "fail"
        if not self.landed or any(v.status == "unknown" for v in self.verdicts):
            return "unknown"
        return "pass"

    @property
    def failed(self) -> tuple[str, ...]:
        return tuple(v.invariant for v in self.verdicts if v.status == "fail")


def campaign_specs(seed: int, runtime: str = "real", postgres: bool = True) -> list[FleetTrialSpec]:
    """The campaign's trials: plain and SIGKILL on each store, then every fault of
    PostgreSQL; each trial's seed drawn from the campaign's."""
    names: list[tuple[Literal["file", "postgres"], str | None]] = [
        ("file", None),
        ("file", "sigkill"),
    ]
    if postgres:
        names += [("postgres", None), ("postgres", "sigkill")]
        names += [("postgres", fault) for fault in FLEET_FAULTS if fault in POSTGRES_ONLY]
    return [
        FleetTrialSpec(journal, fault, runtime, trial_seed(seed, journal, fault))
        for journal, fault in names
    ]


def trial_seed(seed: int, journal: str, fault: str | None) -> int:
    """A trial's seed: the same trial of the same campaign seed has the same one."""
    return zlib.crc32(f"{seed}/{journal}/{fault}".encode())


# -- a trial ---------------------------------------------------------------------------


@dataclass
class _Worker:
    process: subprocess.Popen[str]
    task: str | None = None


@dataclass
class _Trial:
    """What the supervisor saw and did during one trial."""

    world: Path
    workers: list[_Worker] = field(default_factory=list)
    events: queue.Queue[tuple[int, str]] = field(default_factory=queue.Queue)
    told: list[Told] = field(default_factory=list)
    pauses: list[Pause] = field(default_factory=list)
    landed: bool = False
    note: str = ""


def run_fleet_trial(
    spec: FleetTrialSpec, folder: Path, server: PostgresServer | None
) -> FleetTrialResult:
    """Run one trial in ``folder`` (made here; it keeps the world and the workers'
    output) on ``server``'s new database (``postgres``) or a folder of journals."""
    spec.check()
    started = time.monotonic()
    folder.mkdir(parents=True)
    draw = random.Random(spec.seed)
    tasks = [f"t{n}" for n in range(TASKS)]
    target = draw.choice(tasks)
    world = folder / "world.db"
    FleetWorld.create(world, tasks, twice=target if spec.fault == "redelivery:claim" else None)
    env = {**os.environ, RUNTIME_ENV: spec.runtime, "PYTHONUNBUFFERED": "1"}
    env.pop(HOLD_ENV, None)
    env.pop(LONG_ENV, None)
    if spec.fault == "lease-pause":
        env[HOLD_ENV] = f"{target}/s2"
    if spec.fault == "redelivery:long-call":
        env[LONG_ENV] = f"{target}/{LONG_CALL}"
    trial = _Trial(world)
    with contextlib.ExitStack() as stack:
        if spec.journal == "postgres":
            if server is None:
                raise FleetSpecError("a PostgreSQL trial needs the harness's server")
            database = f"fleet_{spec.seed}_{os.getpid()}"
            url = server.create_database(database)
            stack.callback(server.drop_database, database)
            port = server.port
            if spec.fault is not None and spec.fault.startswith("cut:"):
                cutter = stack.enter_context(CommitCutter(server.port))
                _, when, what = spec.fault.split(":")
                cutter.arm(_CUTS[when], within=f'"kind":"{what}"'.encode())
                port = cutter.port
                stack.callback(_cut_landed, trial, cutter)
            journals = url.replace(f":{server.port}/", f":{port}/", 1)
            journals += f"&lease={LEASE:g}&renew={RENEW:g}"
        else:
            journals = str(folder / "journals")
            (folder / "journals").mkdir()
        if spec.fault == "redelivery:claim":
            assert server is not None
            stack.enter_context(_claims_meet(trial, url, target))
        _run_workers(spec, trial, stack, folder, journals, env, draw, server)
    verdicts = check_fleet(
        FleetEvidence(
            tasks=tuple(tasks),
            steps=tuple(step for step, _ in STEPS),
            unsafe_steps=frozenset(
                step for step, tool in STEPS if not TABLE.classify(tool).retry_safe
            ),
            ledger=tuple(read_fleet_ledger(world)),
            done=read_done(world),
            told=tuple(trial.told),
            pauses=tuple(trial.pauses),
        )
    )
    landed = trial.landed or spec.fault is None
    result = FleetTrialResult(
        spec,
        tuple(verdicts),
        landed,
        trial.note,
        folder,
        time.monotonic() - started,
    )
    (folder / "verdicts.json").write_text(
        json.dumps(
            {
                "spec": asdict(spec),
                "status": result.status,
                "landed": landed,
                "fault": trial.note,
                "verdicts": [asdict(v) for v in verdicts],
                "told": [asdict(t) for t in trial.told],
                "pauses": [asdict(p) for p in trial.pauses],
            },
            indent=1,
        )
    )
    return result


_CUTS = {"before": Cut.BEFORE_COMMIT, "during": Cut.DURING_COMMIT, "after": Cut.AFTER_COMMIT}


def _cut_landed(trial: _Trial, cutter: CommitCutter) -> None:
    trial.landed = cutter.cuts > 0
    trial.note = (
        "one connection cut at its COMMIT" if trial.landed else "no COMMIT of the kind was sent"
    )


@contextlib.contextmanager
def _claims_meet(trial: _Trial, url: str, task: str) -> Iterator[None]:
    """Hold an uncommitted row of ``task``'s journal while the workers start, until two
    claims wait behind it (or ``LOCK_WAIT``), then roll it back: the two claims go on at
    the same moment, as two deliveries of one task would."""
    import psycopg

    from harness.runtime.postgres import _SCHEMA

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(_SCHEMA)
        conn.execute("BEGIN")
        conn.execute(
            "INSERT INTO harness_journals (name, journal_id, token, holder, lease_until) "
            "VALUES (%s, 'placeholder', 0, 'the supervisor', now())",
            (task,),
        )
        released = threading.Event()

        def release() -> None:
            deadline = time.monotonic() + LOCK_WAIT
            waiting = 0
            with psycopg.connect(url, autocommit=True) as watch:
                while time.monotonic() < deadline:
                    row = watch.execute(  # waiting for the supervisor's transaction
                        "SELECT count(*) FROM pg_locks "
                        "WHERE NOT granted AND locktype = 'transactionid'"
                    ).fetchone()
                    waiting = int(row[0]) if row else 0
                    if waiting >= 2:
                        break
                    time.sleep(0.02)
            trial.landed = waiting >= 2
            trial.note = (
                f"two claims of {task} met behind the supervisor's row lock"
                if trial.landed
                else f"{waiting} claim(s) of {task} waited in {LOCK_WAIT:g} s, not two"
            )
            conn.execute("ROLLBACK")
            released.set()

        releaser = threading.Thread(target=release, daemon=True)
        releaser.start()
        try:
            yield
        finally:
            releaser.join()


def _run_workers(
    spec: FleetTrialSpec,
    trial: _Trial,
    stack: contextlib.ExitStack,
    folder: Path,
    journals: str,
    env: dict[str, str],
    draw: random.Random,
    server: PostgresServer | None,
) -> None:
    """Start the workers, act on what they say as the fault needs, and end them all."""
    kill_after = draw.randint(1, 6)  # sigkill and db-crash: after this many calls told
    stack.callback(_end_workers, trial)
    for n in range(WORKERS):
        log = stack.enter_context(open(folder / f"worker{n}.err", "w"))  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, "-m", "harness.agent.fleet", str(trial.world), journals],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            start_new_session=True,  # a Ctrl-C is the supervisor's to pass on
        )
        trial.workers.append(_Worker(process))
        out = stack.enter_context(open(folder / f"worker{n}.out", "w"))  # noqa: SIM115
        threading.Thread(target=_read_lines, args=(trial, n, process, out), daemon=True).start()
    deadline = time.monotonic() + TRIAL_SECONDS
    told = 0
    acted = False
    while time.monotonic() < deadline:
        try:
            n, line = trial.events.get(timeout=0.05)
        except queue.Empty:
            if all(w.process.poll() is not None for w in trial.workers):
                break
            continue
        if not line:
            continue
        worker = trial.workers[n]
        words = line.split()
        if words[0] in ("pulled", "claimed"):
            worker.task = words[1]
        elif words[0] == "told" and len(words) == 4:
            trial.told.append(Told(worker.process.pid, words[1], words[2], words[3]))
            told += 1
        if acted:
            continue
        if spec.fault == "lease-pause" and words[0] == "held":
            acted = True
            _pause(trial, worker, deadline)
        elif spec.fault == "redelivery:long-call" and words[0] == "long":
            acted = True
            time.sleep(1.5 * LEASE)  # the first worker's lease would end by now, unrenewed
            FleetWorld(trial.world).redeliver(words[1])
            trial.landed = True
            trial.note = f"{words[1]} delivered again 1.5 leases into its long call"
        elif spec.fault == "sigkill" and words[0] == "told" and told >= kill_after:
            acted = True
            task = worker.task
            _kill(worker.process)
            assert task is not None
            FleetWorld(trial.world).redeliver(task)
            trial.landed = True
            trial.note = f"pid {worker.process.pid} killed after {told} call(s) told, on {task}"
        elif spec.fault == "db-crash" and words[0] == "told" and told >= kill_after:
            acted = True
            assert server is not None
            server.crash_and_restart()
            trial.landed = True
            trial.note = f"the server crashed and restarted after {told} call(s) told"
    else:
        trial.note += f"; workers still running after {TRIAL_SECONDS:g} s were ended"
    for n, worker in enumerate(trial.workers):
        status = worker.process.poll()
        if status not in (None, 0, -signal.SIGKILL):  # a crash of the worker's own
            trial.note += f"; worker {n} exited with {status} (worker{n}.err)"


def _read_lines(trial: _Trial, n: int, process: subprocess.Popen[str], out: IO[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        out.write(line)
        out.flush()
        trial.events.put((n, line.strip()))


def _pause(trial: _Trial, worker: _Worker, deadline: float) -> None:
    """Stop the held worker, deliver its task again once its lease is over, wake it once
    another worker finished the task (or at the deadline)."""
    process, task = worker.process, worker.task
    assert task is not None and process.stdin is not None
    os.kill(process.pid, signal.SIGSTOP)
    stopped = ledger_mark(trial.world)
    process.stdin.write("go\n")  # read once it runs again
    process.stdin.flush()
    time.sleep(1.5 * LEASE)
    FleetWorld(trial.world).redeliver(task)
    while task not in read_done(trial.world) and time.monotonic() < deadline:
        time.sleep(0.05)
    trial.landed = task in read_done(trial.world)
    trial.note = (
        f"pid {process.pid} stopped at {task}'s s2 intent; "
        + ("another worker finished the task" if trial.landed else "nobody finished the task")
        + "; then woken"
    )
    trial.pauses.append(Pause(process.pid, task, stopped, ledger_mark(trial.world)))
    os.kill(process.pid, signal.SIGCONT)


def _kill(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
        os.killpg(process.pid, signal.SIGCONT)
    process.wait(10)


def _end_workers(trial: _Trial) -> None:
    for worker in trial.workers:
        if worker.process.poll() is None:
            _kill(worker.process)
        else:
            worker.process.wait()
        if worker.process.stdin is not None:
            with contextlib.suppress(OSError):
                worker.process.stdin.close()
