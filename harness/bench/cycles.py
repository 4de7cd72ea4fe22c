"""Figure 1, the cycle rate: crash-restart cycles per second, harness against bare loops.

One harness cycle is one agent incarnation started by the real ``Supervisor``
(forked or exec'd, see ``harness.chaos.launch``): it recovers from its
journal, runs exactly one new journaled call (a ``write_file``), reaches
``op.after_finish``, hand-shakes, and is SIGKILLed from outside and reaped.
The trials are plans of ``CHUNK`` steps (the size of a shipped scenario), so
each life finds a journal of a realistic length; preparing the trial folders,
and starting the fork server with the agent's modules, is not timed.

The baselines do the least a crash loop can do:

- exec loop: spawn ``sys.executable -I -S`` running ``pass`` plus a one-byte
  hand-shake (so the SIGKILL lands in a started interpreter, as in the
  harness), SIGKILL, reap;
- fork loop: a warm parent forks a child that does one raw journaled call by
  hand (fsync'd append, one SQLite ``synchronous=FULL`` commit, fsync'd
  append), writes a byte to a pipe and waits; the parent SIGKILLs and reaps.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from harness.bench.figures import BenchError
from harness.exits import AGENT_ERROR

__all__ = [
    "CHUNK",
    "collect_phases",
    "exec_loop",
    "fork_loop",
    "harness_cycles",
    "prepare_cycle_trials",
]

CHUNK = 8
"""Steps (so lives) per trial folder: a shipped scenario has 6 to 9."""

_KILL_AT = "op.after_finish@1=kill"
_HANDSHAKE_TIMEOUT_S = 30.0
_RECORD = b"x" * 100

# `pass`, plus the hand-shake: say "started" on stdout, then block on stdin.
_EXEC_CHILD = "import os; os.write(1, b'.'); os.read(0, 1)"


def cycle_scenario_text(steps: int) -> str:
    """A scenario of ``steps`` ``write_file`` steps with distinct paths."""
    head = 'name = "bench_cycles"\ndescription = "One write per life, killed after its finish"\n'
    body = "".join(
        f'\n[[steps]]\ntool = "write_file"\n'
        f'args = {{ path = "/bench/f{n:03d}.txt", content = "cycle {n}" }}\n'
        for n in range(1, steps + 1)
    )
    return head + body


def prepare_cycle_trials(root: Path, cycles: int) -> list[tuple[Path, int]]:
    """Trial folders (with ``plan.json``) for ``cycles`` lives: (folder, lives in it)."""
    from harness.chaos.scenario import compile_plan, parse_scenario, write_plan

    plan = compile_plan(
        parse_scenario(cycle_scenario_text(CHUNK), source="<bench>"), seed=0, source="<bench>"
    )
    root.mkdir(parents=True, exist_ok=True)
    trials: list[tuple[Path, int]] = []
    remaining = cycles
    while remaining > 0:
        directory = root / f"t{len(trials):04d}"
        directory.mkdir()
        write_plan(plan, directory / "plan.json")
        lives = min(CHUNK, remaining)
        trials.append((directory, lives))
        remaining -= lives
    return trials


def harness_cycles(
    root: Path,
    cycles: int,
    launch: str,
    phases: dict[str, list[float]] | None = None,
    after_death: str | None = None,
) -> float:
    """Cycles per second of the real supervisor with launcher ``launch``.

    ``after_death``: a fault after each kill (``power-loss:drop``: every life then runs
    under the file-system observer, and the folder is rebuilt from its trace).

    ``phases``, when given, collects the milliseconds between consecutive
    supervisor events of every trial (``spawn->ready``, ``ready->ack``, ...),
    read from ``events.jsonl`` after the timing: where a cycle's time goes.
    """
    from harness.chaos.schedule import CrashSchedule, Life
    from harness.chaos.supervisor import Supervisor

    trials = prepare_cycle_trials(root, cycles)
    runs = [
        (
            directory,
            Supervisor(launch=launch, restart_budget=lives, timeout_s=60.0),
            CrashSchedule(tuple(Life(_KILL_AT, after_death=after_death) for _ in range(lives))),
        )
        for directory, lives in trials
    ]
    if launch == "fork":  # the server's start and imports, once per process: not a cycle's
        from harness.chaos.launch import ForkServer

        ForkServer.get(sys.executable).preload("harness.agent")
    results = []
    started = time.perf_counter_ns()
    for directory, supervisor, schedule in runs:
        results.extend(supervisor.run(directory, schedule))
    elapsed_ns = time.perf_counter_ns() - started
    wrong = [r for r in results if r.killed != "failpoint"]
    if wrong or len(results) != cycles:
        first = wrong[0] if wrong else None
        why = "" if first is None else f"; life {first.life}: {first.killed} {first.stderr[-300:]}"
        raise BenchError(
            f"{launch} harness cycles: {len(results)} lives, {len(wrong)} not killed at "
            f"the failpoint{why}"
        )
    if phases is not None:
        for directory, _ in trials:
            collect_phases(directory / "events.jsonl", phases)
    return cycles / (elapsed_ns / 1e9)


def collect_phases(events_file: Path, phases: dict[str, list[float]]) -> None:
    """Add the gaps between consecutive supervisor events, in ms, keyed ``a->b``."""
    from harness.check.evidence import read_jsonl

    events = read_jsonl(events_file)
    for before, after in itertools.pairwise(events):
        key = f"{before['event']}->{after['event']}"
        phases.setdefault(key, []).append((after["t_ns"] - before["t_ns"]) / 1e6)


def exec_loop(cycles: int) -> float:
    """Cycles per second of: spawn ``python -I -S``, wait for it to start, SIGKILL, reap."""
    command = [sys.executable, "-I", "-S", "-c", _EXEC_CHILD]
    started = time.perf_counter_ns()
    for _ in range(cycles):
        with subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        ) as proc:
            try:
                assert proc.stdout is not None
                if os.read(proc.stdout.fileno(), 1) != b".":
                    raise BenchError("exec loop: the child did not start")
            finally:
                proc.kill()
                proc.wait()
    return cycles / ((time.perf_counter_ns() - started) / 1e9)


def create_wal_db(path: Path) -> None:
    """A WAL database with one table, as the world keeps (created untimed)."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(
            "CREATE TABLE IF NOT EXISTS effects (id INTEGER PRIMARY KEY, op TEXT, body TEXT)"
        )
    finally:
        db.close()


def raw_child(journal: Path, db_path: Path, ready_fd: int, cycle: int) -> None:
    """The fork loop's child: a raw journaled call, a byte on the pipe, a wait; never returns."""
    try:
        fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, _RECORD)
        os.fsync(fd)
        db = sqlite3.connect(db_path, isolation_level=None)
        db.execute("PRAGMA synchronous=FULL")
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO effects (op, body) VALUES (?, ?)", (f"c{cycle}", "effect"))
        db.execute("COMMIT")
        os.write(fd, _RECORD)
        os.fsync(fd)
        os.write(ready_fd, b".")
        time.sleep(_HANDSHAKE_TIMEOUT_S)  # the SIGKILL arrives while we wait
    finally:
        os._exit(AGENT_ERROR)  # never killed, or failed before its hand-shake


def fork_loop(root: Path, cycles: int) -> float:
    """Cycles per second of: fork, raw journaled call, hand-shake, SIGKILL, reap."""
    root.mkdir(parents=True, exist_ok=True)
    journal, db_path = root / "raw.journal", root / "raw.db"
    create_wal_db(db_path)
    read_fd, write_fd = os.pipe()
    try:
        sys.stdout.flush()  # or a child could write the parent's pending output again
        sys.stderr.flush()
        started = time.perf_counter_ns()
        for cycle in range(cycles):
            pid = os.fork()
            if pid == 0:
                raw_child(journal, db_path, write_fd, cycle)
            try:
                ready, _, _ = select.select([read_fd], [], [], _HANDSHAKE_TIMEOUT_S)
                if not ready or os.read(read_fd, 1) != b".":
                    raise BenchError("fork loop: the child did not hand-shake")
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        elapsed_ns = time.perf_counter_ns() - started
    finally:
        os.close(read_fd)
        os.close(write_fd)
    return cycles / (elapsed_ns / 1e9)
