"""The supervisor: the only code that starts, kills and reaps agent processes.

For each life of a trial it starts an agent incarnation (a fork of a warm,
pre-imported process, or ``python -I -m harness.agent TRIAL_DIR``: see
``harness.chaos.launch``) in its own process group with a pipe for failpoint
hand-shakes, arms the life's failpoints, and then waits for one of: the agent
exits; the agent reports ``reached <failpoint>`` (the supervisor SIGKILLs its
group from outside); a random-time kill's timer, which the agent arms itself at
the moment it is timed from (``ready`` or the invoke of the call it aims at),
expires and its signal ends the agent as SIGKILL would (``AIMED_KILL_SIGNAL``);
the trial's time runs out (SIGKILL, and the trial stops). Killed lives are
restarted until the plan is done or the restart budget is spent.

The full note: docs/reference/modules.md (``harness/chaos/supervisor.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sqlite3
import sys
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import IO, Any

from harness.adapters import Adapter, get_adapter
from harness.agent.model import PROOF_ENV
from harness.chaos import observer
from harness.chaos.faults import apply_after_death
from harness.chaos.forkserver import FORK_SERVER_MODULE
from harness.chaos.launch import LAUNCHERS, AgentProcess, launch
from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.services import RunningServices, read_services
from harness.chaos.services import stop_all as stop_services
from harness.chaos.tables import BASE
from harness.check.journal import read_journal_bytes
from harness.check.stitch import checkpoint_of
from harness.errors import SupervisorError
from harness.exits import AGENT_WRITE_FAILED
from harness.failpoints import (
    AIM_ENV,
    AIM_PAUSE_ENV,
    AIMED_KILL_SIGNAL,
    CHANNEL_ENV,
    COUNTS_ENV,
    EXIT_HOLD_POINT,
    FAILPOINTS_ENV,
)
from harness.world.store import TRIAL_CLOCK_ENV, life_clock

__all__ = ["LifeResult", "Supervisor", "kill_all", "sweep_agents", "time_limit"]

_LIVE: dict[int, AgentProcess] = {}
TABLE_ENV = "HARNESS_TOOL_TABLE"
EXIT_HOLD = f"{EXIT_HOLD_POINT}=kill"
"""Armed in a life with a random-time kill: the agent waits at its last point to be killed."""
_INTERRUPTS = {signal.SIGINT, signal.SIGTERM}


def kill_all() -> None:
    """SIGKILL and reap every agent process group still alive, then end the trials'
    services and remove their files (interrupt path)."""
    for pid, proc in list(_LIVE.items()):
        _sigkill(proc)
        proc.wait()
        _LIVE.pop(pid, None)
    stop_services()


def sweep_agents(under: Path) -> int:
    """SIGKILL any agent process whose trial folder lies under ``under``; returns how many.

    The last line of defence after an interrupt: an agent whose worker died
    before it could reap it has been re-parented and is found by its command
    line (an exec'd one names its trial folder; a forked one carries the
    command line of the fork server that forked it). A fork server kills its
    agents itself when its worker dies; one that outlived this process's
    start and still runs is swept too.
    """
    import psutil  # supervisor side only: the agent never imports this module

    me = psutil.Process()
    my_start = me.create_time()
    victims = []
    for proc in psutil.process_iter(["cmdline", "create_time"]):
        cmdline = proc.info["cmdline"] or []
        execed = "-I" in cmdline and any(a.startswith(str(under)) for a in cmdline[2:])
        # Fork servers and their agents: started after this process, by it or its workers.
        forked = (
            FORK_SERVER_MODULE in cmdline
            and proc.pid != me.pid
            and (proc.info["create_time"] or 0) >= my_start
            and _descends_from(proc, me.pid)
        )
        if execed or forked:
            with contextlib.suppress(psutil.Error):
                proc.kill()
                victims.append(proc)
    psutil.wait_procs(victims, timeout=5)
    return len(victims)


def _descends_from(proc: Any, ancestor: int) -> bool:
    """Whether ``proc`` (a fork server, or an agent it forked) was started under ``ancestor``.

    Judged by the command line, not the process tree: a fork server leads a
    session of its own, and once its worker dies it is re-parented. Its last
    two arguments are the pid that started it and that process's parent (a
    pool worker's parent is the campaign's process); its agents carry the same.
    """
    owners = (proc.info["cmdline"] or [])[-2:]
    return str(ancestor) in owners


@dataclass(frozen=True, slots=True)
class LifeResult:
    """One incarnation as the supervisor saw it."""

    life: int
    pid: int
    returncode: int
    killed: str | None  # "failpoint", "timed", "timeout" or None
    reached: str | None  # "op.after_intent 3 s002" for a failpoint kill
    ready_ms: float | None  # from spawn to "ready"
    duration_ms: float
    stderr: str

    @property
    def done(self) -> bool:
        return self.killed is None and self.returncode == 0


def time_limit(timeout_s: float, schedule: CrashSchedule) -> float:
    """A trial's time: ``timeout_s`` for each life its planned kills make, all its lives
    sharing it. Each kill costs a restart, for a black box mostly its start-up: a limit
    flat over the lives timed out ADK trials of four lives that no life of which hung.
    A pause makes a life too (the one that takes over), and adds the time it holds."""
    pauses = schedule.pauses
    return timeout_s * (1 + schedule.kills + len(pauses)) + sum(pauses) / 1000


class Supervisor:
    def __init__(
        self,
        *,
        python: str = sys.executable,
        restart_budget: int = 8,
        timeout_s: float = 60.0,
        extra_env: Mapping[str, str] | None = None,
        launch: str = "fork",
    ) -> None:
        if launch not in LAUNCHERS:
            raise ValueError(f"unknown launcher {launch!r} (known: {', '.join(LAUNCHERS)})")
        self.launch = launch
        self.python = python
        self.restart_budget = restart_budget
        self.timeout_s = timeout_s
        self.extra_env = dict(extra_env or {})

    def run(
        self,
        trial_dir: Path,
        schedule: CrashSchedule,
        *,
        runtime: str = "real",
        tables: Mapping[str, Path] | None = None,
        counts_file: Path | None = None,
        proof_file: Path | None = None,
    ) -> list[LifeResult]:
        """Run lives until the plan is done, the budget is spent or time runs out.

        ``proof_file``: the agent proves each step's check right after the step there
        (``harness.agent.model.PROOF_ENV``), for a crash-free run that proves the scenario.
        """
        adapter = get_adapter(runtime)
        deadline = time.monotonic() + time_limit(self.timeout_s, schedule)
        results: list[LifeResult] = []
        # A power cut is rebuilt from what each life asked the kernel (harness.chaos.observer):
        # every life of such a trial runs observed, from a baseline of the folder as made.
        lib = observer.library() if "power-loss" in schedule.fault_kinds else None
        observed = {} if lib is None else observer.observer_env(trial_dir, lib)
        if observed:
            observer.start_trace(trial_dir)
        with (
            open(trial_dir / "events.jsonl", "a", encoding="utf-8") as events,
            open(trial_dir / "history.jsonl", "a", encoding="utf-8") as history_file,
        ):
            services = RunningServices(
                trial_dir,
                read_services(trial_dir),
                observed=observed,
                event=lambda kind, **fields: _event(events, kind, **fields),
            )
            try:
                # Before the first life, kept across the agent's kills; the time it takes
                # is not the agent's.
                deadline += services.start()
                self._lives(
                    trial_dir,
                    schedule,
                    adapter,
                    services,
                    results,
                    events,
                    History(history_file),
                    deadline,
                    env_of=lambda life: {
                        **self._env(trial_dir, life, adapter, tables or {}, counts_file),
                        **observed,
                        **services.env(),
                    },
                    proof_file=proof_file,
                )
            finally:
                services.stop()  # at the end, and on Ctrl-C
        return results

    def _lives(
        self,
        trial_dir: Path,
        schedule: CrashSchedule,
        adapter: Adapter,
        services: RunningServices,
        results: list[LifeResult],
        events: IO[str],
        history: History,
        deadline: float,
        *,
        env_of: Callable[[Life], dict[str, str]],
        proof_file: Path | None,
    ) -> None:
        """Run the lives of ``run`` into ``results``.

        A life paused at a failpoint (``pause(MS)``) is held stopped while the next life
        runs beside it (the take-over, to its end), then resumed and followed to its own
        end: both go into ``results``, in the order they ended."""

        def life_of(number: int) -> Life:
            return schedule.lives[number - 1] if number <= len(schedule.lives) else Life()

        def run_life(number: int) -> tuple[LifeResult, list[LifeResult]]:
            env = env_of(life_of(number))
            env[TRIAL_CLOCK_ENV] = life_clock(trial_dir, number)  # keys age per restart
            if proof_file is not None:
                env[PROOF_ENV] = str(proof_file)
            taken_over: list[LifeResult] = []

            def take_over() -> None:
                # The next life starts while this one is stopped; what it leaves behind
                # (its own take-over included) comes before this life's resumption.
                if number + len(taken_over) < self.restart_budget:
                    result, later = run_life(number + 1)
                    taken_over.extend([result, *later])

            result = self._run_life(
                trial_dir,
                number,
                life_of(number),
                env,
                deadline,
                events,
                history,
                adapter.module,
                take_over=take_over,
            )
            return result, taken_over

        life_no = 0
        while life_no < self.restart_budget:
            life_no += 1
            life = life_of(life_no)
            result, taken_over = run_life(life_no)
            # In the order they ended: a paused life ends after the one that took over.
            results.extend([*taken_over, result])
            if life.after_death and result.killed != "timeout":
                cut = life.after_death.startswith("power-loss")
                if cut:
                    services.power_cut()  # the machine goes down with the agent
                # A fault for a runtime that is still alive, or that never
                # died where the schedule says, is applied all the same: the
                # checkers learn from the trial's lives whether it landed.
                _event(
                    events,
                    "fault",
                    life=life_no,
                    **apply_after_death(trial_dir, life.after_death),
                )
                if cut:
                    deadline += services.start()  # back up, on the files the cut rebuilt
            life_no += len(taken_over)
            if not _restart(result, life, adapter.black_box):
                break

    def _env(
        self,
        trial_dir: Path,
        life: Life,
        adapter: Adapter,
        tables: Mapping[str, Path],
        counts_file: Path | None,
    ) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
        env.update(self.extra_env)
        env.update(adapter.env)
        env[FAILPOINTS_ENV] = life.failpoints
        if life.kill_after_ms is not None:
            # A random moment past the end of the life's work: the kill lands
            # at its last point, before it exits, instead of never (see _run_life).
            # A pause past it never comes: F says so.
            if life.pause_ms is None:
                env[FAILPOINTS_ENV] = ",".join(filter(None, (life.failpoints, EXIT_HOLD)))
            else:
                env[AIM_PAUSE_ENV] = "1"
            env[AIM_ENV] = f"{life.kill_since}@{life.kill_after_ms / 1000:.6f}"
        table = life.table if life.table is not None else BASE if BASE in tables else None
        if table is not None:
            env[TABLE_ENV] = str(tables[table])
        if counts_file is not None:
            env[COUNTS_ENV] = str(counts_file)
        return env

    def _run_life(
        self,
        trial_dir: Path,
        life_no: int,
        life: Life,
        env: dict[str, str],
        deadline: float,
        events: IO[str],
        history: History,
        module: str,
        *,
        take_over: Callable[[], None] | None = None,
    ) -> LifeResult:
        """One life: start it, follow its channel (``LifeWatch``) until it exits or is to
        be killed, kill it then, and note its exit. Paused (``pause(MS)``), it is held
        stopped for MS, ``take_over`` runs the next life beside it, then it is resumed
        (SIGCONT) and followed again."""
        handed = _read(trial_dir / "journal")  # the journal this life starts with
        started = time.monotonic()
        proc, read_fd = self._spawn(trial_dir, life_no, env, module)
        _event(
            events,
            "spawn",
            life=life_no,
            pid=proc.pid,
            faults=life.describe(),
            journal_size=None if handed is None else len(handed),
            journal_crc=None if handed is None else zlib.crc32(handed),
            table=env.get(TABLE_ENV),
            clock=float(env.get(TRIAL_CLOCK_ENV) or 0),
            **_torn_tail(handed),
        )
        watch = LifeWatch(life_no, started, events, history, LedgerWatch(trial_dir / "world.db"))
        try:
            channel = ChannelReader(read_fd, deadline)
            timed = life.kill_after_ms is not None and life.pause_ms is None
            watch.follow(channel, timed=timed)
            while watch.state is LifeState.PAUSED:
                self._hold(proc, watch, life, events, deadline)
                if take_over is not None:
                    take_over()
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGCONT)
                _event(events, "resume", life=life_no, pid=proc.pid)
                watch.on(Seen.RESUMED)
                watch.follow(channel, timed=timed)
            if watch.state is LifeState.EXITED and timed and proc.wait() == -AIMED_KILL_SIGNAL:
                watch.on(Seen.AIMED_SIGNAL)  # by the timer it armed (AIM_ENV)
            if watch.killed is not None:
                _sigkill(proc)
                proc.wait()
                watch.after_kill(channel, proc.pid, life)
            returncode = proc.wait()
        finally:
            if proc.poll() is None:
                _sigkill(proc)
                proc.wait()
            _LIVE.pop(proc.pid, None)
            os.close(read_fd)
            watch.ledger.close()
        return self._end_life(trial_dir, life_no, proc.pid, returncode, watch, handed, events)

    def _hold(
        self, proc: AgentProcess, watch: LifeWatch, life: Life, events: IO[str], deadline: float
    ) -> None:
        """A life that said ``paused``: see it stopped, note the pause, and hold it for the
        spec's time. The life stops its own group (``harness.failpoints``), right after
        the line: a SIGSTOP sent from here too could land before its own, which the
        SIGCONT would then meet first, and leave it stopped for good."""
        stopped = _wait_stopped(proc.pid)
        hold_ms = life.hold_ms(watch.reached)
        _event(
            events,
            "pause",
            life=watch.life_no,
            pid=proc.pid,
            at=watch.reached,
            hold_ms=hold_ms,
            stopped=stopped,
        )
        time.sleep(max(0.0, min(hold_ms / 1000, deadline - time.monotonic())))

    def _spawn(
        self, trial_dir: Path, life_no: int, env: dict[str, str], module: str
    ) -> tuple[AgentProcess, int]:
        """Start one incarnation with the channel's write end; the read end is returned.
        ``SupervisorError`` when the launcher cannot start it."""
        read_fd, write_fd = os.pipe()
        env[CHANNEL_ENV] = str(write_fd)
        stderr_path = trial_dir / f"agent-{life_no}.stderr"
        # An interrupt between the start of an agent and its registration would
        # leave it unknown to kill_all, so it waits until the agent is on the list.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
        try:
            # Observed, it is handed the trial folder's real path: the one its trace names.
            where = Path(os.path.realpath(trial_dir)) if observer.ENV_ROOT in env else trial_dir
            proc = launch(
                self.launch, self.python, where, env, write_fd, stderr_path, module=module
            )
            _LIVE[proc.pid] = proc
        except OSError as exc:
            os.close(read_fd)
            raise SupervisorError(
                f"{trial_dir}: life {life_no}: the agent {module} could not be started "
                f"({self.launch}, {self.python}): {exc}"
            ) from exc
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return proc, read_fd

    def _end_life(
        self,
        trial_dir: Path,
        life_no: int,
        pid: int,
        returncode: int,
        watch: LifeWatch,
        handed: bytes | None,
        events: IO[str],
    ) -> LifeResult:
        """Close the life's history, keep its stderr if it said anything, and note its exit."""
        watch.history.ended(life_no)
        duration_ms = (time.monotonic() - watch.started) * 1000
        stderr_path = trial_dir / f"agent-{life_no}.stderr"
        stderr_text = stderr_path.read_text("utf-8", errors="replace")[-2000:]
        if not stderr_text:
            stderr_path.unlink()
        _event(
            events,
            "exit",
            life=life_no,
            pid=pid,
            returncode=returncode,
            ms=round(duration_ms, 3),
            **_journal_left(handed, _read(trial_dir / "journal")),
        )
        return LifeResult(
            life_no,
            pid,
            returncode,
            watch.killed,
            watch.reached,
            watch.ready_ms,
            duration_ms,
            stderr_text,
        )


class ChannelReader:
    """The agent's channel (the failpoint hand-shake pipe), read a line at a time.

    ``next`` waits no later than the trial's deadline; ``rest`` is for after a
    kill, when the writer is gone and every line it wrote is already there.
    """

    def __init__(self, fd: int, deadline: float) -> None:
        self._fd = fd
        self._deadline = deadline
        self._buffer = b""

    def next(self) -> str | Seen:
        """The next whole line, or ``Seen.CLOSED`` (the agent exited and closed its end,
        or its timer killed it) or ``Seen.TIMEOUT`` (the trial's time ran out)."""
        while b"\n" not in self._buffer:
            wait_s = max(0.0, self._deadline - time.monotonic())
            readable, _, _ = select.select([self._fd], [], [], wait_s)
            if not readable:
                return Seen.TIMEOUT
            chunk = os.read(self._fd, 4096)
            if not chunk:
                return Seen.CLOSED
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode(errors="replace")

    def rest(self) -> list[str]:
        """Every line not yet read, to EOF, the last one even if cut short."""
        while chunk := os.read(self._fd, 4096):
            self._buffer += chunk
        rest, self._buffer = self._buffer, b""
        return rest.decode(errors="replace").splitlines()


class LifeState(Enum):
    """Where a running life stands, as the supervisor sees it."""

    RUNNING = "running"  # waiting for the agent's next line
    EXITED = "exited"  # it closed its channel: it exited, or its own timer killed it
    FAILPOINT = "failpoint"  # it reported an armed point: the supervisor kills it there
    TIMED = "timed"  # a random-time kill: held at its exit, or by the timer it armed
    TIMEOUT = "timeout"  # the trial's time ran out: killed, and the trial stops
    PAUSED = "paused"  # it stopped its group at a pause point: held, then resumed


class Seen(Enum):
    """What moves a life from one state to another."""

    REACHED = "reached"  # "reached <failpoint>"
    HELD_AT_EXIT = "held at exit"  # "reached <exit hold point>" in a life with a timed kill
    CLOSED = "closed"  # EOF on the channel
    TIMEOUT = "timeout"  # no line before the trial's deadline
    AIMED_SIGNAL = "aimed signal"  # it died by the signal its own timer sends
    PAUSED = "paused"  # "paused <failpoint>": it stopped its process group there
    RESUMED = "resumed"  # the supervisor sent SIGCONT after the take-over


_TRANSITIONS: dict[tuple[LifeState, Seen], LifeState] = {
    (LifeState.RUNNING, Seen.REACHED): LifeState.FAILPOINT,
    (LifeState.RUNNING, Seen.HELD_AT_EXIT): LifeState.TIMED,
    (LifeState.RUNNING, Seen.CLOSED): LifeState.EXITED,
    (LifeState.RUNNING, Seen.TIMEOUT): LifeState.TIMEOUT,
    (LifeState.EXITED, Seen.AIMED_SIGNAL): LifeState.TIMED,
    (LifeState.RUNNING, Seen.PAUSED): LifeState.PAUSED,
    (LifeState.PAUSED, Seen.RESUMED): LifeState.RUNNING,
}
"""Every change of a life's state; a pair not listed is a bug of the supervisor."""


class LifeWatch:
    """One running life: its state, where it was killed, and what its lines tell."""

    def __init__(
        self,
        life_no: int,
        started: float,
        events: IO[str],
        history: History,
        ledger: LedgerWatch,
    ) -> None:
        self.life_no = life_no
        self.started = started
        self.events = events
        self.history = history
        self.ledger = ledger
        self.state = LifeState.RUNNING
        self.reached: str | None = None  # "op.after_intent 3 s002" for a failpoint kill
        self.ready_ms: float | None = None

    @property
    def killed(self) -> str | None:
        """How the supervisor's side ended the life, in ``LifeResult``'s words."""
        ends = (LifeState.FAILPOINT, LifeState.TIMED, LifeState.TIMEOUT)
        return self.state.value if self.state in ends else None

    def on(self, seen: Seen) -> None:
        self.state = _TRANSITIONS[(self.state, seen)]

    def follow(self, channel: ChannelReader, *, timed: bool) -> None:
        """Read the agent's lines until it is to be killed, or its channel closes."""
        while self.state is LifeState.RUNNING:
            line = channel.next()
            if isinstance(line, Seen):
                self.on(line)
            elif line.startswith("paused "):
                self.reached = line.removeprefix("paused ")
                self.on(Seen.PAUSED)
            elif line.startswith("reached "):
                self.reached = line.removeprefix("reached ")
                # A random moment after the life's work (or aimed at a call it
                # never made): the agent waits at its exit to be killed.
                at_exit = self.reached.startswith(EXIT_HOLD_POINT) and timed
                self.on(Seen.HELD_AT_EXIT if at_exit else Seen.REACHED)
            else:
                if line == "ready":
                    self.ready_ms = (time.monotonic() - self.started) * 1000
                    _event(self.events, "ready", life=self.life_no, ms=round(self.ready_ms, 3))
                elif line.startswith("agent "):  # a black box's host started its agent
                    how, _, said = line.removeprefix("agent ").partition(" ")
                    _event(self.events, "agent", life=self.life_no, start=how, said=said)
                    continue
                self.history.note(line, self.life_no, self.events, self.ledger)  # not "ready"

    def after_kill(self, channel: ChannelReader, pid: int, life: Life) -> None:
        """Note the kill, once the lines the victim wrote before it died are read: its
        acks still count, and a point it reached first is where it was killed."""
        for line in channel.rest():
            if not line.startswith("reached "):
                self.history.note(line, self.life_no, self.events, self.ledger)
            elif self.reached is None:
                self.reached = line.removeprefix("reached ")  # it got there first
        timed = self.killed == "timed"
        _event(
            self.events,
            "kill",
            life=self.life_no,
            pid=pid,
            how=self.killed,
            at=self.reached,
            after_ms=life.kill_after_ms if timed else None,
            since=life.kill_since if timed else None,
        )


class History:
    """What the user saw of each step, in Jepsen's words, written to ``history.jsonl``.

    ``invoke`` when the agent starts a step; then ``ok``, ``fail``, or ``info``:
    the agent said the outcome is unknown, or the life ended with the step in
    flight, so nobody can know whether it happened. An outcome the runtime gave
    from another op (identity by content) carries it as ``answered_by``.
    """

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._in_flight: dict[int, set[str]] = {}
        """By life: two lives run at once when one is paused."""

    def note(self, message: str, life: int, events: IO[str], ledger: LedgerWatch) -> None:
        kind, _, op_id = message.partition(" ")
        if kind == "fault":  # "fault lost-reply op.reply 3 s003": an in-life fault landed
            fault, _, at = op_id.partition(" ")
            _event(events, fault, life=life, at=at)
            return
        if kind == "check":  # "check s003 <digest> present": what a check of a hint found
            op_id, _, rest = op_id.partition(" ")
            told, _, found = rest.partition(" ")
            _event(events, "check", life=life, op=op_id, result=told or None, found=found)
            return
        # "ack s003 <digest>": the result it was handed; then, when another op answered the
        # call by content (I12), that op: "ack s004b~2 <digest> s004a", "info s004b~2 s004a".
        op_id, *words = op_id.split(" ")
        handed = words.pop(0) if kind == "ack" and words else None
        answered_by = words[0] if words else None
        if kind not in ("invoke", "ack", "fail", "info", "hint") or not op_id:
            return
        if kind == "hint":
            _event(events, "hint", life=life, op=op_id)  # the model read a VERIFY hint (I2)
            return
        if kind == "ack":
            # I1 holds the op to this promise: no execution of it the world
            # commits after this point of its ledger; I11 to the result it was handed.
            seq = ledger.last_seq()
            _event(events, "ack", life=life, op=op_id, ledger_seq=seq, result=handed)
        by = {"answered_by": answered_by} if answered_by and kind != "invoke" else {}
        self._write("ok" if kind == "ack" else kind, op_id, life, **by)
        if kind == "invoke":
            self._in_flight.setdefault(life, set()).add(op_id)
        else:
            self._in_flight.get(life, set()).discard(op_id)

    def ended(self, life: int) -> None:
        for op_id in sorted(self._in_flight.pop(life, set())):
            self._write("info", op_id, life, why="in flight when the life ended")

    def _write(self, kind: str, op_id: str, life: int, **extra: str) -> None:
        record = {"type": kind, "op": op_id, "life": life, "t_ns": time.time_ns(), **extra}
        self._out.write(json.dumps(record) + "\n")
        self._out.flush()


class LedgerWatch:
    """The supervisor's own look at the world's ledger while a life runs.

    ``last_seq`` is the sequence number of the last execution the world has
    committed, read when an ack arrives: an execution of that op numbered
    higher ran after the user was told it succeeded. The connection is read
    only, opened at the first ack (a world the agent has not made yet has no
    ledger: None), and a reader never blocks the agent's writes (WAL).
    """

    def __init__(self, db_path: Path) -> None:
        self._path = db_path
        self._db: sqlite3.Connection | None = None

    def last_seq(self) -> int | None:
        try:
            if self._db is None:
                if not self._path.exists():
                    return None
                uri = self._path.resolve().as_uri() + "?mode=ro"
                self._db = sqlite3.connect(uri, uri=True, isolation_level=None)
            row = self._db.execute("SELECT max(seq) FROM ledger").fetchone()
        except sqlite3.Error:
            return None
        return None if row is None or row[0] is None else int(row[0])

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _torn_tail(handed: bytes | None) -> dict[str, int | None]:
    """Where the checkers' reader finds a torn tail in the journal a life is handed, and the
    CRC-32 of the bytes before it: the one part of it the life may cut (I9)."""
    torn = None if handed is None else read_journal_bytes(handed).torn
    if handed is None or torn is None:
        return {"journal_torn_at": None, "journal_valid_crc": None}
    return {"journal_torn_at": torn[0], "journal_valid_crc": zlib.crc32(handed[: torn[0]])}


def _journal_left(handed: bytes | None, left: bytes | None) -> dict[str, Any]:
    """The journal at a life's end (before any after-death fault): its size, CRC-32, how many
    bytes of the journal the life was handed are still in place (I9) and, when the life
    compacted it, the size and CRC-32 of the file the compaction replaced."""
    if left is None:
        return {"journal_size": None, "journal_crc": None, "journal_kept": None}
    kept = None if handed is None else _common_prefix(handed, left)
    seen: dict[str, Any] = {
        "journal_size": len(left),
        "journal_crc": zlib.crc32(left),
        "journal_kept": kept,
    }
    if kept is not None and kept < len(handed or b""):
        # A compaction in this life: the file it replaced, as the new file's checkpoint names
        # it (a power cut may yet undo the rename; the checkers then need to know).
        checkpoint = checkpoint_of(left)
        if checkpoint is not None:
            seen["journal_compacted_from"] = list(checkpoint[:2])
    return seen


def _common_prefix(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (slices compare in C)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    same, differs = 0, n  # a[:same] == b[:same]; a[:differs] != b[:differs]
    while differs - same > 1:
        mid = (same + differs) // 2
        if a[:mid] == b[:mid]:
            same = mid
        else:
            differs = mid
    return same


def _restart(result: LifeResult, life: Life, black_box: bool) -> bool:
    """Whether another life follows: after a kill, after an injected full disk, after a
    power cut that followed the life's end (the machine comes back, so does the agent), and
    for a black box after any exit but 0, as a supervisor (systemd's Restart=on-failure, a
    Kubernetes pod) restarts a program that failed."""
    if result.killed in ("failpoint", "timed"):
        return True
    if black_box and result.killed is None and result.returncode != 0:
        return True
    if life.after_death and result.killed is None and result.returncode == 0:
        return True
    return result.returncode == AGENT_WRITE_FAILED and "=enospc" in life.failpoints


def _wait_stopped(pid: int, timeout_s: float = 5.0) -> bool:
    """Whether the process ``pid`` is seen stopped (state ``T`` in ``/proc``) in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False  # gone, or no /proc: not seen stopped
        if stat.rpartition(")")[2].split()[0] in ("T", "t"):
            return True
        time.sleep(0.005)
    return False


def _sigkill(proc: AgentProcess) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone: nothing to kill
        os.killpg(proc.pid, signal.SIGKILL)


def _event(events: IO[str], kind: str, **fields: Any) -> None:
    events.write(json.dumps({"event": kind, "t_ns": time.time_ns(), **fields}) + "\n")
    events.flush()


def life_results_to_json(results: list[LifeResult]) -> list[dict[str, Any]]:
    return [asdict(r) for r in results]
