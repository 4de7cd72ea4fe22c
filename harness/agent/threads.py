"""A batch on threads: each call of a batch on a thread of its own, on one shared ``Runtime``.

A service shares one runtime among its threads. ``run_batch_threads`` runs
each call of a batch on a worker of its own (a ``ThreadPoolExecutor`` with one
worker per call) against the life's synchronous ``Runtime``: no event loop.
Each call tells the supervisor ``invoke`` as it starts and its outcome as soon
as it is back; a call that came back ``info`` with a hint (a lost reply) is
left to the model, which verifies it once every call of the batch is back, as
``harness.agent.batch`` does.

The full note: docs/reference/modules.md (``harness/agent/threads.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from harness.agent.plan import PlanStep
from harness.runtime import CallContext, CallOutcome, JournalWriteError, Runtime, ToolFunction

__all__ = ["run_batch_threads"]


class Tell(Protocol):
    """``tell(what, op_id, result, answered_by)``: the model's word to the supervisor
    (``ScriptedModel.tell``); ``result`` is what an ``ack`` was handed, ``answered_by``
    the op that answered the call by content."""

    def __call__(
        self, what: str, op_id: str, result: object = None, answered_by: str | None = None, /
    ) -> None: ...


class _Op:
    """One op of the batch: its deliveries' answers, whether it was told, when it started."""

    __slots__ = ("go", "outcome", "ready", "told")

    def __init__(self) -> None:
        self.go = threading.Event()  # set when the op's turn to start has come
        self.ready = threading.Event()  # set once the op's tool starts or a delivery is back
        self.told = False
        self.outcome: CallOutcome | None = None


def run_batch_threads(
    runtime: Runtime,
    calls: Sequence[tuple[str, PlanStep]],
    execute: ToolFunction,
    tell: Tell,
) -> list[CallOutcome]:
    """Run ``calls`` (op id, plan step) at once, each on a thread; their outcomes, in the
    calls' order.

    A call that comes to ``ok``, ``fail``, or ``info`` without a hint is told at
    once; one that came back ``info`` with a hint is not: the caller verifies it
    and tells what that finds. An exception of a call (a failed append) is raised
    once every call is back, the first in the calls' order.
    """
    ops: dict[str, _Op] = {op_id: _Op() for op_id, _ in calls}
    guard = threading.Lock()  # who tells an op's outcome
    world = threading.RLock()  # the world's one connection: its tools take turns

    def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        op = ops.get(ctx.op_id)
        if op is not None:
            op.ready.set()  # its intent is durable: the next call may start
        with world:
            return execute(name, args, ctx)

    def told(what: str, op_id: str, result: object, answered_by: str | None) -> None:
        # Telling may run a step's check against the world (a proof run): its turn too.
        with world:
            tell(what, op_id, result, answered_by)

    def deliver(op_id: str, step: PlanStep) -> CallOutcome:
        op = ops[op_id]
        op.go.wait()
        try:
            outcome = runtime.call(op_id, step.tool, step.args, tool)
        except JournalWriteError as exc:  # a full disk: the life ends once all are back
            with guard:
                first, op.told = not op.told, True
            if first and exc.op_id == op_id and exc.outcome_unknown is False:  # as in run()
                told("fail", op_id, None, None)
            raise
        finally:
            op.ready.set()
        with guard:
            first, op.told = not op.told, True
            if first:
                op.outcome = outcome
        if first and (outcome.status != "info" or outcome.hint is None):
            told("ack" if outcome.ok else outcome.status, op_id, outcome.result, outcome.matched)
        return outcome

    deliveries = sum(2 if step.duplicate else 1 for _, step in calls)
    futures: list[Future[CallOutcome]] = []
    with ThreadPoolExecutor(max_workers=deliveries, thread_name_prefix="batch") as pool:
        # Every thread first, each waiting for its call's turn: a call then starts in the
        # moment it may, not a thread's start-up later, and the calls overlap as a
        # service's threads do.
        for op_id, step in calls:
            futures += [pool.submit(deliver, op_id, step) for _ in range(1 + step.duplicate)]
        for op_id, _ in calls:
            tell("invoke", op_id)
            ops[op_id].go.set()
            ops[op_id].ready.wait()  # its tool started, or it is back
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
    outcomes = []
    for op_id, _ in calls:
        outcome = ops[op_id].outcome
        assert outcome is not None  # every delivery came back without an exception
        outcomes.append(outcome)
    return outcomes
