"""The plan file: a compiled scenario, in plain JSON, for the agent process.

The supervisor validates a scenario (pydantic, Faker) and compiles it into this
form, so that the agent reads it with ``json`` alone and starts fast.

    {"format": 1, "scenario": "phone_task", "seed": 7, "source": "scenarios/phone_task.toml",
     "model": "scripted", "identity": "id",
     "steps": [{"index": 1, "op_id": "s001", "tool": "input_text",
                "args": {"field": "title", "text": "Buy milk"},
                "verify": {"tool": "ui_dump", "args": {}, "path": "fields.title",
                           "contains": "Buy milk"}}]}

The calls of a scenario step that is a batch (issued together, run at once) are
plan steps of their own, each with its op id (``s004a``, ``s004b``, ...), the
step's ``index`` and ``"batch": 4``; a step of one call has no ``batch``.
``batch_driver`` says how the agent runs a batch (``async``, the default, or
``threads``: ``harness.agent.threads``), and a batch's call marked
``"duplicate": true`` (under ``duplicate_delivery``) is issued twice at once
under its op id. Both are left out at their defaults. ``content`` holds what the
scenario's tool table declares makes two calls of a tool the same action
(``{"pay": {"identity": [...], "volatile": [...]}}``): the drifting model changes a
call's volatile arguments when it re-issues it, and the checkers compare calls by it.

The full note: docs/reference/modules.md (``harness/agent/plan.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harness.world.declared import DeclaredTool, WorldRecord

__all__ = [
    "PLAN_FORMAT",
    "REISSUE_MARK",
    "Plan",
    "PlanStep",
    "Verification",
    "batches",
    "compared_args",
    "load_plan",
    "plan_id",
    "plan_to_json",
    "reissued_id",
]

PLAN_FORMAT = 1
REISSUE_MARK = "~"
"""Between a plan call's id and the life that re-issued it: ``s003~2``."""


def reissued_id(op_id: str, life: int) -> str:
    """The id a re-issuing model gives the plan call ``op_id`` in its ``life``-th life.

    The plan's own id in the first life (``s003``), ``s003~2`` in the second: new in
    every life, and the same whenever that life is replayed.
    """
    return op_id if life <= 1 else f"{op_id}{REISSUE_MARK}{life}"


def batches(steps: tuple[PlanStep, ...]) -> list[tuple[PlanStep, ...]]:
    """The plan's steps as the model issues them: a step of one call alone, a batch's
    calls together, in plan order."""
    issued: list[tuple[PlanStep, ...]] = []
    for step in steps:
        if step.batch is not None and issued and issued[-1][-1].batch == step.batch:
            issued[-1] = (*issued[-1], step)
        else:
            issued.append((step,))
    return issued


def plan_id(op_id: str) -> str:
    """The plan's id of a call that may have been re-issued: ``s003~2`` -> ``s003``,
    ``s003~2.redo`` -> ``s003.redo``; any other id as it is."""
    head, dot, rest = op_id.partition(".")
    call, mark, life = head.partition(REISSUE_MARK)
    return f"{call}{dot}{rest}" if mark and life.isdigit() else op_id


@dataclass(frozen=True, slots=True)
class Verification:
    tool: str
    args: Mapping[str, Any]
    path: str
    contains: Any = None
    equals: Any = None

    def holds(self, result: Any) -> bool:
        """Whether a result of ``tool`` shows the effect."""
        value = result
        for part in self.path.split(".") if self.path else ():
            if not isinstance(value, Mapping) or part not in value:
                return False
            value = value[part]
        if self.equals is not None:
            return bool(value == self.equals)
        if isinstance(value, str) and isinstance(self.contains, str):
            return self.contains in value
        if isinstance(value, list):
            return self.contains in value
        return False


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One call of the plan. ``index`` is its scenario step (from 1); the calls of a
    batch share it, and ``batch`` (the same number) says they are issued together."""

    index: int
    op_id: str
    tool: str
    args: Mapping[str, Any]
    verify: Verification | None = None
    batch: int | None = None
    duplicate: bool = False
    """Issued twice at once under its op id, as a message delivered twice (threads only)."""


@dataclass(frozen=True, slots=True)
class Plan:
    scenario: str
    seed: int
    source: str
    steps: tuple[PlanStep, ...]
    tools: Mapping[str, DeclaredTool] = field(default_factory=lambda: MappingProxyType({}))
    """The scenario's declared tools, by name."""
    world: tuple[WorldRecord, ...] = ()
    """The records the world holds before the first life."""
    model: str = "scripted"
    identity: str = "id"
    batch_driver: str = "async"
    """How the agent runs a batch's calls: ``async`` (``harness.agent.batch``) or
    ``threads`` (``harness.agent.threads``)."""
    duplicate_delivery: bool = False
    compact_at: int | None = None
    """Each life whose journal is this many bytes or more compacts it as it starts."""
    clock_step: float | None = None
    """Seconds the trial's clock moves at each restart: the supervisor gives life N the
    clock N times it (``harness.world.store.TRIAL_CLOCK_ENV``); None: 0 in every life."""
    content: Mapping[str, Mapping[str, tuple[str, ...]]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    """What the scenario's table declares makes two calls of a tool the same action:
    ``identity`` and ``volatile`` argument names, by tool (plain data: no runtime)."""


def compared_args(plan: Plan, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a call's arguments that tells its action, as the plan's ``content`` says:
    the identity arguments, or all but the volatile ones; all of them without a rule."""
    rule = plan.content.get(tool)
    if rule is None:
        return dict(args)
    if "identity" in rule:
        return {name: args[name] for name in rule["identity"] if name in args}
    return {name: v for name, v in args.items() if name not in rule.get("volatile", ())}


def _verification(data: Mapping[str, Any] | None) -> Verification | None:
    if data is None:
        return None
    return Verification(
        data["tool"], data.get("args", {}), data["path"], data.get("contains"), data.get("equals")
    )


def load_plan(path: Path | str) -> Plan:
    """Read a compiled plan; the supervisor wrote it, so a bad one is a bug, not user input."""
    data = json.loads(Path(path).read_text("utf-8"))
    if data.get("format") != PLAN_FORMAT:
        raise ValueError(f"{path}: plan format {data.get('format')!r}, expected {PLAN_FORMAT}")
    steps = tuple(
        PlanStep(
            s["index"],
            s["op_id"],
            s["tool"],
            s["args"],
            _verification(s.get("verify")),
            s.get("batch"),
            s.get("duplicate", False),
        )
        for s in data["steps"]
    )
    tools = {name: DeclaredTool.from_json(name, d) for name, d in data.get("tools", {}).items()}
    world = tuple(WorldRecord.from_json(r) for r in data.get("world", ()))
    return Plan(
        data["scenario"],
        data["seed"],
        data["source"],
        steps,
        MappingProxyType(tools),
        world,
        data.get("model", "scripted"),
        data.get("identity", "id"),
        data.get("batch_driver", "async"),
        data.get("duplicate_delivery", False),
        data.get("compact_at"),
        data.get("clock_step"),
        MappingProxyType(
            {
                tool: {field: tuple(names) for field, names in rule.items()}
                for tool, rule in data.get("content", {}).items()
            }
        ),
    )


def plan_to_json(plan: Plan) -> str:
    def verify(v: Verification | None) -> dict[str, Any] | None:
        if v is None:
            return None
        return {
            "tool": v.tool,
            "args": dict(v.args),
            "path": v.path,
            "contains": v.contains,
            "equals": v.equals,
        }

    data: dict[str, Any] = {
        "format": PLAN_FORMAT,
        "scenario": plan.scenario,
        "seed": plan.seed,
        "source": plan.source,
        "model": plan.model,
        "identity": plan.identity,
        "steps": [
            {
                "index": s.index,
                "op_id": s.op_id,
                "tool": s.tool,
                "args": dict(s.args),
                "verify": verify(s.verify),
                **({} if s.batch is None else {"batch": s.batch}),
                **({"duplicate": True} if s.duplicate else {}),
            }
            for s in plan.steps
        ],
    }
    if plan.batch_driver != "async":
        data["batch_driver"] = plan.batch_driver
    if plan.duplicate_delivery:
        data["duplicate_delivery"] = True
    if plan.compact_at is not None:
        data["compact_at"] = plan.compact_at
    if plan.clock_step is not None:
        data["clock_step"] = plan.clock_step
    if plan.tools:
        data["tools"] = {name: tool.to_json() for name, tool in plan.tools.items()}
    if plan.world:
        data["world"] = [record.to_json() for record in plan.world]
    if plan.content:
        data["content"] = {
            tool: {field: list(names) for field, names in rule.items()}
            for tool, rule in plan.content.items()
        }
    return json.dumps(data, indent=1, ensure_ascii=False)
