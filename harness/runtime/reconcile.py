"""Reconcilers: code that asks a tool's provider whether an op's effect is there.

An op of unknown outcome (left RUNNING by a crash, or its reply lost in a life)
whose tool has a reconciler is first put to it, before the model sees a VERIFY
hint: ``reconciler(args, ctx)`` looks the effect up by ``ctx.idempotency_key``
(a payment provider's "get the charge of this key") and answers:

    PRESENT   the effect is there: the op is closed as ``EFFECT_PRESENT``
    ABSENT    it is not: the op is redone as a new op in the same key chain
    UNKNOWN   it cannot tell: the op goes to VERIFY, as without a reconciler

A reconciler that raises, answers anything else, or does not answer within the
runtime's ``reconcile_timeout`` counts as UNKNOWN. Every answer that closes an op
is journaled as a model's resolution is, so a start after a kill mid-reconcile
asks again and decides the same.

Reconcilers are asked on threads of their own, never under the runtime's lock or
on its event loop, and the questions of one start all at once under one deadline.
A question left unanswered keeps its thread (Python cannot stop one): while it
hangs, that tool's reconciler is not asked again, and its ops go to VERIFY.
"""

from __future__ import annotations

import _thread
import enum
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.runtime.steps import CallContext

__all__ = ["Answer", "Asking", "Question", "Reconciled", "Reconciler", "ask_reconciler"]


class Reconciled(enum.Enum):
    """A reconciler's answer about one op's effect."""

    PRESENT = "present"
    ABSENT = "absent"
    UNKNOWN = "unknown"


Reconciler = Callable[[Mapping[str, Any], CallContext], "Reconciled | str"]
"""``reconciler(args, ctx) -> Reconciled`` (or its value, ``"present"``...); read-only."""

Answer = tuple[Reconciled, str]
"""A reconciler's answer and a note saying how it came."""


@dataclass(frozen=True, slots=True)
class Question:
    """One op put to its tool's reconciler."""

    reconciler: Reconciler
    args: Mapping[str, Any]
    ctx: CallContext


class Asking:
    """Puts questions to reconcilers, each on a daemon thread, and remembers the threads
    of questions that never answered, so that a hung provider holds one thread per
    question it hangs on, not one per ask."""

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._hung: dict[str, list[Any]] = {}

    def ask_all(
        self, questions: Sequence[Question], timeout: float, *, delay: float = 0.0
    ) -> list[Answer]:
        """Every question's answer, in order, asked at once after ``delay`` seconds; each
        UNKNOWN that raised, gave no ``Reconciled``, or had not answered ``timeout`` seconds
        after the questions were put (one deadline for them all)."""
        import threading  # here: an agent that reconciles nothing starts without it

        if delay > 0:
            time.sleep(delay)
        answers: list[Answer | None] = [None] * len(questions)
        workers: list[tuple[int, Any, list[object], list[BaseException]]] = []
        for at, question in enumerate(questions):
            tool = question.ctx.tool
            with self._lock:
                hung = [t for t in self._hung.get(tool, ()) if t.is_alive()]
                self._hung[tool] = hung
            if hung:
                answers[at] = (
                    Reconciled.UNKNOWN,
                    f"the reconciler has not yet answered {len(hung)} earlier question(s)",
                )
                continue
            answer: list[object] = []
            failure: list[BaseException] = []
            worker = threading.Thread(
                target=_ask,
                args=(question, answer, failure),
                name=f"reconcile {question.ctx.op_id}",
                daemon=True,
            )
            worker.start()
            workers.append((at, worker, answer, failure))
        deadline = time.monotonic() + timeout
        for at, worker, answer, failure in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                with self._lock:
                    self._hung.setdefault(questions[at].ctx.tool, []).append(worker)
                answers[at] = (
                    Reconciled.UNKNOWN,
                    f"the reconciler gave no answer within {timeout:g} s",
                )
            else:
                answers[at] = _answer(answer, failure)
        return [a for a in answers if a is not None]


def _ask(question: Question, answer: list[object], failure: list[BaseException]) -> None:
    try:
        answer.append(question.reconciler(question.args, question.ctx))
    except BaseException as exc:  # whatever it raised is an answer of UNKNOWN
        failure.append(exc)


def _answer(answer: list[object], failure: list[BaseException]) -> Answer:
    if failure:
        exc = failure[0]
        return Reconciled.UNKNOWN, f"the reconciler raised {type(exc).__name__}: {exc}"
    try:
        found = Reconciled(answer[0])
    except ValueError:
        return Reconciled.UNKNOWN, f"the reconciler answered {answer[0]!r}"
    return found, f"reconciled: {found.value}"


def ask_reconciler(
    reconciler: Reconciler, args: Mapping[str, Any], ctx: CallContext, timeout: float
) -> Answer:
    """One reconciler's answer (``Asking.ask_all`` of one question)."""
    return Asking().ask_all([Question(reconciler, args, ctx)], timeout)[0]
