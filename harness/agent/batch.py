"""A batch: the calls a model issues in one turn, run at once on an asyncio event loop.

``run_batch`` runs each call of a batch as its own task on an ``AsyncRuntime``
that borrows the life's runtime: each call journals its own intent and waits
for it to be durable before its tool runs, and the calls' appends share the
journal's writes (``harness.runtime.aio``). The simulated tools run on the loop
and await nothing, so a batch runs the same way in every life and every run:
the failpoints its calls hit come in the same order (a kill at a hit lands at
the same call in a trial as in its crash-free run).

Each call tells the supervisor ``invoke`` as it starts and its outcome as soon
as it is back, while the others are still in flight. A call whose outcome came
back unknown in this life (a lost reply) is left to the model, which verifies
it once every call of the batch is back, as it would in its next turn.

This module imports asyncio, which the agent needs for batches only: the model
imports it when a plan has one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from harness.agent.plan import PlanStep
from harness.runtime import CallOutcome, Runtime, ToolFunction
from harness.runtime.aio import AsyncRuntime

__all__ = ["run_batch"]

Tell = Callable[[str, str], None]
"""``tell(what, op_id)``: the model's word to the supervisor (``ScriptedModel.tell``)."""


def run_batch(
    runtime: Runtime,
    calls: Sequence[tuple[str, PlanStep]],
    execute: ToolFunction,
    tell: Tell,
) -> list[CallOutcome]:
    """Run ``calls`` (op id, plan step) at once; their outcomes, in the calls' order.

    A call that comes to ``ok``, ``fail``, or ``info`` without a hint is told at
    once; one that came back ``info`` with a hint (its outcome is unknown now)
    is not: the caller verifies it and tells what that finds.
    """
    return asyncio.run(_batch(runtime, calls, execute, tell))


async def _batch(
    runtime: Runtime,
    calls: Sequence[tuple[str, PlanStep]],
    execute: ToolFunction,
    tell: Tell,
) -> list[CallOutcome]:
    async with AsyncRuntime(runtime) as batch:

        async def issue(op_id: str, step: PlanStep) -> CallOutcome:
            tell("invoke", op_id)
            outcome = await batch.call(op_id, step.tool, step.args, execute)
            if outcome.status != "info" or outcome.hint is None:
                tell("ack" if outcome.ok else outcome.status, op_id)
            return outcome

        return list(await asyncio.gather(*(issue(op_id, step) for op_id, step in calls)))
