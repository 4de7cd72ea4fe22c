"""Shapes of a plan that real agents' runs have: equal calls made on purpose.

A runtime that takes two equal calls for one passes every plan whose calls all
differ. These predicates say whether a compiled plan has a shape that exposes
such a mistake; the self-check reads them from the golden runs, and the
generated scenario (``harness.chaos.generated``) favours them.

- ``keyed_twice``: a tool whose provider deduplicates by key, called twice with
  equal arguments (two intended charges).
- ``write_repeated``: under identity by content, an idempotent write made again
  with a call of the same tool and other arguments between (a note written,
  changed and written back).
- ``compacted_repeats``: a journal compacted under identity by content, with two
  calls of equal content.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations

from harness.agent.plan import Plan, PlanStep
from harness.runtime.classes import IdempotencyClass, ToolTable
from harness.world.declared import canonical_json

__all__ = ["compacted_repeats", "equal_pairs", "keyed_twice", "plan_shapes", "write_repeated"]


def equal_pairs(plan: Plan) -> Iterator[tuple[int, int]]:
    """Positions ``(i, j)``, ``i < j``, of plan calls with the same tool and arguments."""
    content = [(step.tool, canonical_json(dict(step.args))) for step in plan.steps]
    for i, j in combinations(range(len(content)), 2):
        if content[i] == content[j]:
            yield i, j


def keyed_twice(plan: Plan) -> bool:
    """Whether a tool whose provider drops a repeated key is called twice alike."""
    keyed = {name for name, tool in plan.tools.items() if tool.dedupe is not None}
    return any(plan.steps[i].tool in keyed for i, _ in equal_pairs(plan))


def write_repeated(plan: Plan, table: ToolTable) -> bool:
    """Whether, under identity by content, an idempotent write is made again with a call
    of the same tool and other arguments between the two."""
    if plan.identity != "content":
        return False
    for i, j in equal_pairs(plan):
        step = plan.steps[i]
        if table.classify(step.tool).idempotency is not IdempotencyClass.IDEMPOTENT_WRITE:
            continue
        if any(_other_call(step, between) for between in plan.steps[i + 1 : j]):
            return True
    return False


def _other_call(step: PlanStep, other: PlanStep) -> bool:
    return other.tool == step.tool and dict(other.args) != dict(step.args)


def compacted_repeats(plan: Plan) -> bool:
    """Whether a journal compacted under identity by content holds two equal calls."""
    return (
        plan.compact_at is not None
        and plan.identity == "content"
        and next(equal_pairs(plan), None) is not None
    )


def plan_shapes(plan: Plan, table: ToolTable) -> tuple[str, ...]:
    """The names of the shapes ``plan`` has, in this module's order."""
    found = {
        "keyed-twice": keyed_twice(plan),
        "content-write-repeated": write_repeated(plan, table),
        "compacts-repeats": compacted_repeats(plan),
    }
    return tuple(name for name, has in found.items() if has)
