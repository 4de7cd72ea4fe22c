"""A worker of a fleet: pulls tasks from the world's queue and runs each through the runtime.

    python -m harness.agent.fleet WORLD JOURNALS

JOURNALS is a PostgreSQL URL (each task's journal is ``&journal=<task>`` on it) or
a folder (each task's journal is a file in it). A task is three calls: ``s1`` a
``put`` (an idempotent write), ``s2`` and ``s3`` a ``pay`` (not idempotent). The
worker claims the task's journal, recovers it, and calls each step; an op whose
outcome is unknown (``info``) is checked in the world, and called again under a
new op id (``s2.r1``) only if its effect is not there, as a model told to verify
does. A step told ``fail`` is called again under a new op id too. After a journal
write failure the worker opens the journal again and goes on. A fenced worker
drops the task; a worker refused a claim gives the delivery back for later.

What the worker says goes to stdout, one line each: ``pulled``, ``claimed``,
``busy``, ``fenced``, ``done``, ``told <task> <op> <status>`` (what the user was
told of each call), ``held <op>`` (it waits for a line on stdin, at the intent
of the op ``HARNESS_FLEET_HOLD`` names) and ``long <task> <op>`` (a long call
begins). The supervisor schedules its faults from these lines and checks the
``told`` claims against the world's ledger; it never takes them as evidence of
what ran.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.agent.fleet_broken import FLEET_BROKEN
from harness.runtime import CallContext, Runtime, ToolTable
from harness.runtime.classes import IdempotencyClass
from harness.runtime.errors import (
    JournalError,
    JournalFencedError,
    JournalLockedError,
    JournalWriteError,
)
from harness.runtime.hooks import set_crash_hook
from harness.runtime.postgres import PostgresJournal
from harness.runtime.store import is_database_url
from harness.world.fleet import FleetWorld, Pulled

__all__ = ["HOLD_ENV", "LONG_ENV", "RUNTIME_ENV", "STEPS", "TABLE", "main"]

RUNTIME_ENV = "HARNESS_FLEET_RUNTIME"
"""``real`` (the default), or the name of a broken journal (``FLEET_BROKEN``)."""
HOLD_ENV = "HARNESS_FLEET_HOLD"
"""``<task>/<op id>``: the first call of that op of that task in a worker waits for a line
on stdin once its intent is durable, saying ``held <op>`` (the supervisor pauses it)."""
LONG_ENV = "HARNESS_FLEET_LONG"
"""``<task>/<seconds>``: that task's ``s2`` call takes so long before its effect."""
STEPS = (("s1", "put"), ("s2", "pay"), ("s3", "pay"))
"""A task's calls: op id and tool."""
TABLE = ToolTable(
    {"put": IdempotencyClass.IDEMPOTENT_WRITE, "pay": IdempotencyClass.NON_IDEMPOTENT},
    source="<fleet>",
)
GIVE_BACK = 0.3
"""Seconds a delivery refused a claim stays invisible before it is pulled again."""
REOPENS = 20
"""How many times a worker opens a task's journal again after failed writes."""


def say(*words: object) -> None:
    print(*words, flush=True)


class _Reopen(Exception):
    """A journal write failed: open the journal again and go on."""


class Worker:
    """One worker process's loop (see the module docstring)."""

    def __init__(self, world: FleetWorld, journals: str, runtime: str, long: str) -> None:
        self.world = world
        self.journals = journals
        self.journal_class = PostgresJournal if runtime == "real" else FLEET_BROKEN[runtime]
        self.long_task, _, seconds = long.partition("/")
        self.long = float(seconds or 0)
        self.pid = os.getpid()
        self.task = ""
        self.held = False

    def run(self) -> int:
        while True:
            pulled = self.world.pull(self.pid)
            if pulled is None:
                return 0
            if not isinstance(pulled, Pulled):  # none visible yet
                time.sleep(0.05)
                continue
            say("pulled", pulled.task, pulled.delivery)
            self.task = pulled.task
            self.run_task(pulled.task, pulled.delivery)

    def open(self, task: str) -> Runtime:
        if is_database_url(self.journals):
            journal = self.journal_class.open(f"{self.journals}&journal={task}")
            return Runtime.open(journal, table=TABLE)
        return Runtime.open(Path(self.journals) / f"{task}.journal", table=TABLE)

    def run_task(self, task: str, delivery: int) -> None:
        ids = {step: step for step, _ in STEPS}  # the op id each step is called under now
        for _ in range(REOPENS):
            try:
                runtime = self.open(task)
            except JournalLockedError:
                say("busy", task)
                self.world.give_back(delivery, GIVE_BACK)
                return
            except JournalError as exc:  # the database unreachable: later, from the queue
                say("unreachable", task, str(exc).splitlines()[0][:120])
                self.world.give_back(delivery, GIVE_BACK)
                return
            try:
                with runtime:
                    say("claimed", task)
                    self.steps(runtime, task, ids)
                self.world.ack(task, self.pid)
                say("done", task)
                return
            except JournalFencedError:
                say("fenced", task)
                return
            except _Reopen:
                continue
        say("gave-up", task)
        self.world.give_back(delivery, GIVE_BACK)

    def steps(self, runtime: Runtime, task: str, ids: dict[str, str]) -> None:
        def execute(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            step = str(args["step"])
            if step == "s2" and task == self.long_task:
                say("long", task, ctx.op_id)
                time.sleep(self.long)
            self.world.run_effect(task, step, ctx.op_id, tool, 1, self.pid)
            return {"ran": ctx.op_id}

        try:
            runtime.recover(execute)
        except JournalWriteError:
            raise _Reopen from None
        for step, tool in STEPS:
            while True:
                op_id = ids[step]
                try:
                    outcome = runtime.call(op_id, tool, {"task": task, "step": step}, execute)
                except JournalWriteError as exc:
                    told = "info" if exc.outcome_unknown else "fail"
                    say("told", task, op_id, told)
                    if told == "fail":  # it did not run, says the runtime: called anew
                        ids[step] = _next(op_id)
                    raise _Reopen from None
                say("told", task, op_id, outcome.status)
                if outcome.status == "ok":
                    break
                if outcome.status == "info" and self.world.has_effect(task, step):
                    break  # verified: the effect is in the world
                ids[step] = _next(op_id)


def _next(op_id: str) -> str:
    step, _, n = op_id.partition(".r")
    return f"{step}.r{int(n or 0) + 1}"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m harness.agent.fleet WORLD JOURNALS", file=sys.stderr)
        return 2
    runtime = os.environ.get(RUNTIME_ENV, "real")
    if runtime != "real" and runtime not in FLEET_BROKEN:
        print(f"{RUNTIME_ENV}={runtime!r}: not real nor a broken journal", file=sys.stderr)
        return 2
    with FleetWorld(Path(argv[0])) as world:
        worker = Worker(world, argv[1], runtime, os.environ.get(LONG_ENV, ""))
        hold_task, _, hold_op = os.environ.get(HOLD_ENV, "").partition("/")

        def hook(name: str, op_id: str) -> None:
            point = (name, op_id, worker.task)
            if point == ("op.after_intent", hold_op, hold_task) and not worker.held:
                worker.held = True
                say("held", op_id)
                sys.stdin.readline()

        if hold_op:
            set_crash_hook(hook)
        return worker.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
