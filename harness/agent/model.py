"""The scripted model: follows a plan and reacts to VERIFY hints like a careful agent.

On every start it recovers first, then handles each hint the runtime hands it:

- the step has a verification: run the read-only check as its own op
  (``<op>.check``), and redo the step as a new op linked to the old one
  (``<op>.redo``) only when the effect is absent;
- the step has none: record the op as unverifiable and do not redo it.

A call whose outcome is unknown in the same life (its reply was lost: the
runtime answers ``info`` with a hint) is verified at once, the same way. A
step is redone at most ``MAX_REDOES`` times in a chain.

The full note: docs/reference/modules.md (``harness/agent/model.py``).
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from harness.agent.plan import Plan, PlanStep, batches, plan_id, reissued_id
from harness.failpoints import ModelFault, failpoint, set_agent_hook, tell_supervisor
from harness.runtime import (
    CallContext,
    CallOutcome,
    JournalWriteError,
    OpConflictError,
    Resolution,
    Runtime,
    ToolFunction,
    VerifyHint,
)
from harness.world.store import result_digest

if TYPE_CHECKING:
    from harness.agent.batch import Cancelled

__all__ = [
    "MODELS",
    "PROOF_ENV",
    "DriftingModel",
    "ReissuingModel",
    "ReplanningModel",
    "ScriptedModel",
    "drifted",
]

Told = tuple[str, str, object, str | None]
"""What the model tells of a call: ack, fail or info; the op; the result it was handed;
the op that answered it by content, if another did."""

PROOF_ENV = "HARNESS_PROOF_FILE"
"""Set for a crash-free run that proves the scenario's checks: after every step told
``ack`` the model runs that step's ``verify`` check against the world, directly (not
journaled), and appends what it found to this file as one JSON line."""
PROOF_SUFFIX = ".proof"

CHECK_SUFFIX = ".check"
REDO_SUFFIX = ".redo"
MAX_REDOES = 8
"""A step is redone at most this many times in a chain: a careful agent then gives up.

Each redo in a chain was verified absent first, so in the simulated world, where
a redo that ran shows its effect, a chain grows only by redoes killed before
they ran: one per life. The supervisor restarts an agent at most 8 times, so no
trial makes this model give up (with 2, three random kills in a row inside one
step's redoes did, and the step was left undone)."""


class ScriptedModel:
    """Issues the plan's calls under the plan's ids, the same in every life."""

    def __init__(self, runtime: Runtime, plan: Plan, execute: ToolFunction) -> None:
        self.runtime = runtime
        self.plan = plan
        self.execute = execute
        self._steps: Mapping[str, PlanStep] = {s.op_id: s for s in plan.steps}
        self._proofs = os.environ.get(PROOF_ENV)

    def issued_id(self, step: PlanStep) -> str:
        """The id under which this life issues a plan step's call."""
        return step.op_id

    def call_args(self, step: PlanStep) -> Mapping[str, object]:
        """The arguments with which this life issues a plan step's call: the plan's."""
        return step.args

    def run(self) -> None:
        report = self.runtime.recover(
            self.execute, not_started={self.issued_id(s): s.tool for s in self.plan.steps}
        )
        for hint in self.verify_at_start(report.hints):
            self.verify(hint)
        set_agent_hook("recover", self.recover_in_flight)
        for issued in batches(self.plan.steps):
            if issued[0].batch is not None:
                self.issue_batch(self.batch_order(issued))
                continue
            step = issued[0]
            op_id = self.issued_id(step)
            self.tell("invoke", op_id)
            try:
                told = self.issue(step, op_id)
            except JournalWriteError as exc:
                # A full disk ends the life. The user is told "failed" when the runtime
                # says so of this call (no intent on disk: it never runs unless called
                # again); an outcome it calls unknown, or a failure of another call made
                # for it (a check, a redo), is left in flight, as a kill leaves it.
                if exc.op_id == op_id and exc.outcome_unknown is False:
                    self.tell("fail", op_id)
                raise
            self.tell(*told)
        self.after_plan()

    def verify_at_start(self, hints: tuple[VerifyHint, ...]) -> tuple[VerifyHint, ...]:
        """The hints of this start's recovery the model verifies before its first call: all."""
        return hints

    def after_plan(self) -> None:
        """What the model does once every plan call was issued: nothing more."""

    def recover_in_flight(self, at: str) -> None:
        """The ``recover`` fault: the agent calls ``recover()`` while a call is in flight (at
        ``at``), as a service that recovers on a timer would. The runtime must refuse it;
        any hint it hands out instead is verified at once, as a careful model would."""
        tell_supervisor(f"fault recover-in-flight {at}")
        try:
            report = self.runtime.recover(self.execute)
        except RuntimeError:  # refused (RuntimeUsageError), as it must be
            return
        for hint in report.hints:
            try:
                self.verify(hint)
            except (ValueError, RuntimeError):
                return  # the op is still in flight: the runtime may refuse to resolve it

    def batch_order(self, steps: tuple[PlanStep, ...]) -> tuple[PlanStep, ...]:
        """The order in which this life issues a batch's calls: the plan's."""
        return steps

    def issue(self, step: PlanStep, op_id: str) -> Told:
        """Run a step as ``op_id`` (the journal answers what it knows); what came of it (ack,
        fail or info), the op id, the result the model was handed, and the op that
        answered it by content (if one did).

        A step whose op was verified answers with its resolution: the effect
        was found (ack), it was redone (the redo's outcome), or it could not
        be verified (info). Returned as the words to tell: what, the op and the
        result the model was handed.

        At ``model.issue`` a fault of the model's own (``ModelFault``) makes it
        first issue the call as a buggy agent would: the runtime must refuse it,
        and the model then issues it as it should. Whatever the runtime answers
        instead is taken as the step's answer.
        """
        try:
            failpoint("model.issue", op_id)
        except ModelFault as fault:
            answered = self.misuse(fault, step, op_id)
            if answered is not None:
                return answered
        return self.settle(
            step, op_id, self.runtime.call(op_id, step.tool, self.call_args(step), self.execute)
        )

    def misuse(self, fault: ModelFault, step: PlanStep, op_id: str) -> Told | None:
        """Issue the step's call with the fault's bug; what the runtime answered, or None
        when it refused (or the bug had nothing to act on)."""
        if fault.kind == "reuse-id":
            reused = self.reused_id(step)
            if reused is None:
                return None
            tell_supervisor(f"fault reuse-id {fault.at} {reused}")
            try:
                outcome = self.runtime.call(reused, step.tool, step.args, self.execute)
            except OpConflictError:
                return None  # refused, as it must be: issued under its own id
            return self.settle(step, op_id, outcome)
        execute = self.execute

        async def tool(name: str, args: Mapping[str, object], ctx: CallContext) -> object:
            return execute(name, args, ctx)

        tell_supervisor(f"fault async-tool {fault.at}")
        try:
            outcome = self.runtime.call(op_id, step.tool, step.args, tool)
        except TypeError:
            return None  # refused before anything was journaled: issued with the plain tool
        return self.settle(step, op_id, outcome)

    def reused_id(self, step: PlanStep) -> str | None:
        """The id an agent whose ids collide would give ``step``: the nearest earlier
        step's of another tool or other arguments (None when there is none)."""
        steps = tuple(self.plan.steps)
        for earlier in reversed(steps[: steps.index(step)]):
            if (earlier.tool, earlier.args) != (step.tool, step.args):
                return self.issued_id(earlier)
        return None

    def issue_batch(self, steps: tuple[PlanStep, ...]) -> None:
        """Run a batch's calls at once (on an event loop or threads), then verify each whose
        outcome came back unknown, and issue again each that was cancelled, one after
        another, and tell what that found."""
        calls = [(self.issued_id(step), step) for step in steps]
        outcomes: Sequence[CallOutcome | Cancelled]
        if self.plan.batch_driver == "threads":
            # threading, for plans whose batches run on threads only (no asyncio)
            from harness.agent.threads import run_batch_threads

            outcomes = run_batch_threads(self.runtime, calls, self.execute, self.tell)
        else:
            from harness.agent.batch import run_batch  # asyncio, for plans with batches only

            outcomes = run_batch(self.runtime, calls, self.execute, self.tell)
        for (op_id, step), outcome in zip(calls, outcomes, strict=True):
            if not isinstance(outcome, CallOutcome):  # Cancelled (an event loop's only)
                # Told info already. Issued again under the same id, as an agent re-issues
                # a cancelled call: the runtime runs a retry-safe op again and answers an
                # unsafe one with its VERIFY hint, which is verified as a lost reply is.
                self.tell("invoke", op_id)
                self.tell(*self.issue(step, op_id))
            elif outcome.status == "info" and outcome.hint is not None:
                self.tell(*self.settle(step, op_id, outcome))

    def settle(self, step: PlanStep, op_id: str, outcome: CallOutcome) -> Told:
        """What a call came to (ack, fail or info), once a lost reply is verified: what to
        tell, the op, the result the model was handed, and the op that answered it by
        content (if one did)."""
        if outcome.status == "info" and outcome.hint is not None:
            # The call's outcome is unknown now (a lost reply): say so, verify it at
            # once as after a restart, then answer from what was found. The op to
            # verify is the one the journal holds (another, when content answered).
            self.tell("info", op_id, answered_by=outcome.matched)
            journaled = outcome.matched or op_id
            self.verify(VerifyHint(journaled, step.tool, step.args, outcome.hint))
            outcome = self.runtime.outcome_of(op_id)
        return ("ack" if outcome.ok else outcome.status), op_id, outcome.result, outcome.matched

    def tell(
        self, what: str, op_id: str, result: object = None, answered_by: str | None = None
    ) -> None:
        """Tell the outside world (the supervisor, standing for the user) about a step:
        ``invoke``, then ``ack`` (it succeeded) with the digest of the result it was
        handed, ``fail`` or ``info`` (outcome unknown); then the op that answered it
        when that is another op (identity by content)."""
        digest = f" {result_digest(result)}" if what == "ack" else ""
        by = f" {answered_by}" if answered_by else ""
        tell_supervisor(f"{what} {op_id}{digest}{by}")
        if what == "ack" and self._proofs:
            self.prove(op_id, self._proofs)

    def prove(self, op_id: str, proofs: str) -> None:
        """Run the step's check right after the step, and record whether it holds."""
        step = self.step_of(op_id)
        if step is None or step.verify is None:
            return
        check = step.verify
        ctx = CallContext(op_id + PROOF_SUFFIX, check.tool, 1, self.runtime.incarnation)
        try:
            result = self.execute(check.tool, check.args, ctx)
            holds, seen = check.holds(result), result
        except Exception as exc:  # a check that cannot run proves nothing either
            holds, seen = False, f"{type(exc).__name__}: {exc}"
        line = {"op_id": op_id, "index": step.index, "tool": step.tool, "holds": holds}
        with open(proofs, "a", encoding="utf-8") as out:
            out.write(json.dumps({**line, "seen": seen}, default=repr) + "\n")

    def step_of(self, op_id: str) -> PlanStep | None:
        """The plan step an op stands for: ``s003``, ``s003~2``, ``s003.redo`` -> ``s003``."""
        return self._steps.get(plan_id(op_id).split(".", 1)[0])

    def verify(self, hint: VerifyHint) -> None:
        """Check a possibly-run op's real effect; redo it only if the effect is absent."""
        self.tell("hint", hint.op_id)  # the supervisor holds I2 to this: the hint was read
        step = self.step_of(hint.op_id)
        if hint.op_id.endswith(CHECK_SUFFIX) or step is None:
            self.runtime.resolve(
                hint.op_id, Resolution.UNVERIFIABLE, note="a check, not a step: nothing to redo"
            )
            return
        if step.verify is None:
            self.runtime.resolve(
                hint.op_id, Resolution.UNVERIFIABLE, note="no read-only tool reveals it"
            )
            return
        check = self.runtime.call(
            hint.op_id + CHECK_SUFFIX, step.verify.tool, step.verify.args, self.execute, fresh=True
        )
        if not check.ok:
            self.runtime.resolve(
                hint.op_id, Resolution.UNVERIFIABLE, note=f"the check came to {check.status}"
            )
            return
        holds = step.verify.holds(check.result)
        # What the check was handed and what it found: an ack of the effect found rests on it.
        found = "present" if holds else "absent"
        tell_supervisor(f"check {hint.op_id} {result_digest(check.result)} {found}")
        if holds:
            self.runtime.resolve(hint.op_id, Resolution.EFFECT_PRESENT, note="not redone")
            return
        if hint.op_id.count(REDO_SUFFIX) >= MAX_REDOES:
            self.runtime.resolve(
                hint.op_id,
                Resolution.UNVERIFIABLE,
                note=f"the effect is absent after {MAX_REDOES} redoes: given up",
            )
            return
        redo_op = hint.op_id + REDO_SUFFIX
        redo = self.runtime.call(redo_op, step.tool, step.args, self.execute, redo_of=hint.op_id)
        self.runtime.resolve(
            hint.op_id, Resolution.REDONE, redo_op=redo_op, note="the effect was absent"
        )
        if redo.status == "info" and redo.hint is not None:  # the redo's reply was lost too
            self.verify(VerifyHint(redo_op, step.tool, step.args, redo.hint))


class ReissuingModel(ScriptedModel):
    """Issues every plan call under a new id in each life after the first, as an LLM
    that re-runs inference does with its tool-call ids: ``s003~<incarnation>``.

    The incarnation is the runtime's (the count of lives the journal holds, plus
    one), so a replayed trial issues the same ids, and every id names its plan
    call (``harness.agent.plan.plan_id`` folds it back) without the journal.
    """

    def issued_id(self, step: PlanStep) -> str:
        return reissued_id(step.op_id, self.runtime.incarnation)


class ReplanningModel(ReissuingModel):
    """Re-issues its calls as ``ReissuingModel`` does and, in each life after the first,
    issues each batch's calls in another order: a seeded shuffle, never the plan's.

    The calls of a batch are independent (the plan issues them together), so an LLM
    that re-plans may well ask for them in another order. The shuffle's seed is the
    plan's seed, the runtime's incarnation and the batch, so a replayed trial issues
    them in the same order.
    """

    def batch_order(self, steps: tuple[PlanStep, ...]) -> tuple[PlanStep, ...]:
        life = self.runtime.incarnation
        if life <= 1 or len(steps) < 2:
            return steps
        seed = f"{self.plan.seed}:{life}:{steps[0].batch}"
        # A shuffle with no import beyond zlib (the agent's start-up stays light): each
        # call's place is a checksum of the shuffle's seed and its id.
        shuffled = tuple(
            sorted(steps, key=lambda step: zlib.crc32(f"{seed}:{step.op_id}".encode()))
        )
        return shuffled if shuffled != steps else steps[::-1]


DRIFT_MARK = "~"
"""Between a volatile argument's value and the life that drifted it: ``r-17~2``."""


def drifted(value: object, life: int) -> object:
    """A volatile argument's value as a re-issue in ``life`` sends it: text gets the life
    appended, a whole number the life added; anything else is left as it is."""
    if life <= 1:
        return value
    if isinstance(value, str):
        return f"{value}{DRIFT_MARK}{life}"
    if isinstance(value, int) and not isinstance(value, bool):
        return value + life
    return value


class DriftingModel(ReissuingModel):
    """Re-issues its calls as ``ReissuingModel`` does, with their volatile arguments changed
    (a new request id, as an LLM that re-synthesizes a call does), and reads a hint only
    from a call's answer, as a model behind a proxy guard does.

    In each life after the first a call's arguments that the scenario's table declares
    volatile (``Plan.content``) are drifted by the life (``drifted``): the same every
    time that life is replayed. Recovery's hints of plan calls are not verified at the
    start: the re-issued call is answered with its hint, and verified then (the hints of
    checks and redoes, which no plan call re-issues, are verified at once; any hint still
    open after the plan, at the end).
    """

    _deferred: tuple[VerifyHint, ...] = ()

    def call_args(self, step: PlanStep) -> Mapping[str, object]:
        rule = self.plan.content.get(step.tool)
        life = self.runtime.incarnation
        if rule is None or life <= 1:
            return step.args
        volatile = rule.get("volatile", ())
        return {name: drifted(v, life) if name in volatile else v for name, v in step.args.items()}

    def verify_at_start(self, hints: tuple[VerifyHint, ...]) -> tuple[VerifyHint, ...]:
        self._deferred = tuple(h for h in hints if plan_id(h.op_id) in self._steps)
        return tuple(h for h in hints if plan_id(h.op_id) not in self._steps)

    def after_plan(self) -> None:
        for hint in self._deferred:
            op = self.runtime.ops.get(hint.op_id)
            if op is not None and not op.settled and not op.resolved:
                self.verify(hint)


MODELS: Mapping[str, type[ScriptedModel]] = {
    "scripted": ScriptedModel,
    "reissue": ReissuingModel,
    "replan": ReplanningModel,
    "drift": DriftingModel,
}
"""The models a plan (``Plan.model``) may name."""
