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
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any

from harness.runtime.steps import CallContext

__all__ = ["Reconciled", "Reconciler", "ask_reconciler"]


class Reconciled(enum.Enum):
    """A reconciler's answer about one op's effect."""

    PRESENT = "present"
    ABSENT = "absent"
    UNKNOWN = "unknown"


Reconciler = Callable[[Mapping[str, Any], CallContext], "Reconciled | str"]
"""``reconciler(args, ctx) -> Reconciled`` (or its value, ``"present"``...); read-only."""


def ask_reconciler(
    reconciler: Reconciler, args: Mapping[str, Any], ctx: CallContext, timeout: float
) -> tuple[Reconciled, str]:
    """The reconciler's answer and a note saying how it came; UNKNOWN when it raised, gave
    no answer of ``Reconciled`` or took longer than ``timeout`` seconds (its thread is
    left to finish on its own: a daemon, it never holds the process up)."""
    import threading  # here: an agent that reconciles nothing starts without it

    answer: list[object] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            answer.append(reconciler(args, ctx))
        except BaseException as exc:  # whatever it raised is an answer of UNKNOWN
            failure.append(exc)

    worker = threading.Thread(target=run, name=f"reconcile {ctx.op_id}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return Reconciled.UNKNOWN, f"the reconciler gave no answer within {timeout:g} s"
    if failure:
        exc = failure[0]
        return Reconciled.UNKNOWN, f"the reconciler raised {type(exc).__name__}: {exc}"
    try:
        found = Reconciled(answer[0])
    except ValueError:
        return Reconciled.UNKNOWN, f"the reconciler answered {answer[0]!r}"
    return found, f"reconciled: {found.value}"
