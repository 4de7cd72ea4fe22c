"""A batch: the calls a model issues in one turn, run at once on an asyncio event loop.

``run_batch`` runs each call of a batch as its own task on an ``AsyncRuntime``
that borrows the life's runtime: each call journals its own intent and waits
for it to be durable before its tool runs, and the calls' appends share the
journal's writes (``harness.runtime.aio``). The simulated tools run on the
loop and await nothing, so a batch runs the same way in every life and every
run: the failpoints its calls hit come in the same order (a kill at a hit
lands at the same call in a trial as in its crash-free run), and no tool runs
while the journal's writer thread is writing (a runtime that forgot to await
an intent is caught the same way every run).

A call cancelled before its tool ran (a cancellation asked for at its
``op.after_intent``) is cancelled before its effect: its tool then awaits once
(``asyncio.sleep(0)``), where the ``CancelledError`` lands, as at a real async
tool's first await. An unconditional await would do the same for a cancel,
but would let the journal's writer race every tool it let run.

The full note: docs/reference/modules.md (``harness/agent/batch.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from harness.agent.plan import PlanStep
from harness.failpoints import set_agent_hook, tell_supervisor
from harness.runtime import CallContext, CallOutcome, JournalWriteError, Runtime, ToolFunction
from harness.runtime.aio import AsyncRuntime

__all__ = ["Cancelled", "run_batch"]


class Tell(Protocol):
    """``tell(what, op_id, result, answered_by)``: the model's word to the supervisor
    (``ScriptedModel.tell``); ``result`` is what an ``ack`` was handed, ``answered_by``
    the op that answered the call by content."""

    def __call__(
        self, what: str, op_id: str, result: object = None, answered_by: str | None = None, /
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Cancelled:
    """A call of a batch that was cancelled: it came back without an outcome."""

    op_id: str
    reason: str


def run_batch(
    runtime: Runtime,
    calls: Sequence[tuple[str, PlanStep]],
    execute: ToolFunction,
    tell: Tell,
) -> list[CallOutcome | Cancelled]:
    """Run ``calls`` (op id, plan step) at once; their outcomes, in the calls' order.

    A call that comes to ``ok``, ``fail``, or ``info`` without a hint is told at
    once; one that came back ``info`` with a hint (its outcome is unknown now)
    is not: the caller verifies it and tells what that finds. A cancelled call
    is told ``info`` and comes back as ``Cancelled``.
    """
    return asyncio.run(_batch(runtime, calls, execute, tell))


async def _batch(
    runtime: Runtime,
    calls: Sequence[tuple[str, PlanStep]],
    execute: ToolFunction,
    tell: Tell,
) -> list[CallOutcome | Cancelled]:
    async def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # Cancelled before its tool ran (at op.after_intent): the cancellation lands
            # here, before the effect, as at a real async tool's first await.
            await asyncio.sleep(0)
        return execute(name, args, ctx)

    async with AsyncRuntime(runtime) as batch:

        async def issue(op_id: str, step: PlanStep) -> CallOutcome | Cancelled:
            tell("invoke", op_id)
            try:
                outcome = await batch.call(op_id, step.tool, step.args, tool)
            except JournalWriteError as exc:  # a full disk: the life ends once all are back
                if exc.op_id == op_id and exc.outcome_unknown is False:  # ScriptedModel.run
                    tell("fail", op_id)
                raise
            except asyncio.CancelledError as exc:
                # This call only: the runtime journaled its outcome as unknown; the
                # others go on. The task takes the cancellation back, as it is handled.
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                tell("info", op_id)
                return Cancelled(op_id, str(exc) or "cancelled")
            if outcome.status != "info" or outcome.hint is None:
                tell(
                    "ack" if outcome.ok else outcome.status, op_id, outcome.result, outcome.matched
                )
            return outcome

        # The recover fault, on an event loop: recover() as a task of its own beside the
        # calls (the model's recover, on the synchronous API, would be refused as such).
        recovering: list[asyncio.Task[None]] = []

        async def recover_beside() -> None:
            with contextlib.suppress(RuntimeError):  # refused, as it must be
                await batch.recover(tool)

        def recover_soon(at: str) -> None:
            tell_supervisor(f"fault recover-in-flight {at}")
            recovering.append(asyncio.get_running_loop().create_task(recover_beside()))

        # The sync-call fault: the same op called again through the synchronous API while
        # this AsyncRuntime drives the runtime, as code that mixes the two APIs does.
        steps = dict(calls)

        def call_synchronously(at: str) -> None:
            op_id = at.rsplit(" ", 1)[-1]
            step = steps.get(op_id)
            if step is None:
                return
            tell_supervisor(f"fault both-apis {at}")
            try:
                outcome = runtime.call(op_id, step.tool, step.args, execute)
            except RuntimeError:  # refused (RuntimeUsageError), as it must be
                return
            tell("ack" if outcome.ok else outcome.status, op_id, outcome.result, outcome.matched)

        earlier = set_agent_hook("recover", recover_soon)
        earlier_call = set_agent_hook("sync-call", call_synchronously)
        try:
            outcomes = await asyncio.gather(*(issue(op_id, step) for op_id, step in calls))
            for task in recovering:
                await task
        finally:
            set_agent_hook("recover", earlier)
            set_agent_hook("sync-call", earlier_call)
        return list(outcomes)
