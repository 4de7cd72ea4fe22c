"""``python -m harness.agent TRIAL_DIR``: one incarnation of the simulated agent.

Reads ``plan.json`` from the trial directory, opens the runtime on
``journal`` (compacting it first when the plan's ``compact_at`` says so:
``harness.agent.compaction``; then recovering from it) and the world on ``world.db``, and runs
the plan with the scripted model the plan names (``Plan.model``: the
plan's ids in every life, or a new id for every call after each restart), on
a runtime that knows calls by the identity the plan names (``Plan.identity``)
unless ``HARNESS_IDENTITY`` (set by an adapter such as ``real-content``) says
otherwise. Imports stay light (stdlib and the project's
runtime, world, agent and failpoints only): its start-up time is the harness's speed.

The full note: docs/reference/modules.md (``harness/agent/__main__.py``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from harness.agent.audit import CONTAINMENT_ENV, install_containment
from harness.agent.broken import RUNTIMES
from harness.agent.compaction import compact_at_start
from harness.agent.model import MODELS
from harness.agent.plan import Plan, load_plan
from harness.exits import AGENT_DONE, AGENT_REFUSED, AGENT_WRITE_FAILED
from harness.failpoints import (
    EXIT_HOLD_POINT,
    ModelFault,
    arm_from_environ,
    failpoint,
    invoked,
    pause_left_at_exit,
    report_hit_counts,
    tell_supervisor,
)
from harness.runtime import (
    CallContext,
    Compaction,
    HarnessError,
    JournalWriteError,
    Reconciled,
    Reconciler,
    ToolFunction,
    ToolTable,
)
from harness.world.store import WorldStore, key_seen, trial_clock
from harness.world.tools import make_tool_function

IDENTITY_ENV = "HARNESS_IDENTITY"

ToolsOpener = Callable[[Path], AbstractContextManager[ToolFunction]]
"""Given the trial directory, a context that gives the agent's tools and closes them."""


@contextmanager
def world_tools(trial: Path) -> Iterator[ToolFunction]:
    """The simulated tools and the plan's declared ones, run in this process on the
    trial's world."""
    declared = load_plan(trial / "plan.json").tools
    with WorldStore.open(
        trial / "world.db", journal_path=trial / "journal", invoked=invoked
    ) as world:
        yield make_tool_function(world, declared)


def world_reconcilers(trial: Path, plan: Plan) -> dict[str, Reconciler]:
    """A reconciler for each declared tool whose effect can be looked up by key (its provider
    deduplicates by it, or records it): it asks the provider (the world, read-only)
    whether it holds a call under the op's key."""
    world = trial / "world.db"

    def reconcile(args: Mapping[str, Any], ctx: CallContext) -> Reconciled:
        lag_ms = 0
        try:
            failpoint("reconcile.lookup", ctx.op_id)
        except ModelFault as fault:  # lag(ms): a lookup that lags the provider's writes
            lag_ms = fault.arg or 0
            tell_supervisor(f"fault {fault.kind} {fault.at}")
        found = key_seen(world, ctx.tool, ctx.idempotency_key, lag_ns=lag_ms * 1_000_000)
        return Reconciled.PRESENT if found else Reconciled.ABSENT

    return {name: reconcile for name, tool in plan.tools.items() if tool.by_key}


def main(
    argv: list[str], *, tools: ToolsOpener = world_tools, program: str = "harness.agent"
) -> int:
    if len(argv) != 1:
        print(f"usage: python -m {program} TRIAL_DIR", file=sys.stderr)
        return AGENT_REFUSED
    trial = Path(argv[0])
    if os.environ.get(CONTAINMENT_ENV) == "1":
        install_containment(trial)
    tell_supervisor("ready")  # imports are done: random-time kills count from here
    name = os.environ.get("HARNESS_RUNTIME", "real")
    try:
        runtime_class = RUNTIMES[name]
    except KeyError:
        print(
            f"harness.agent: unknown runtime {name!r} (known: {', '.join(RUNTIMES)})",
            file=sys.stderr,
        )
        return AGENT_REFUSED
    try:
        table_path = os.environ.get("HARNESS_TOOL_TABLE")
        table = ToolTable.load(table_path) if table_path else ToolTable.shipped()
        plan = load_plan(trial / "plan.json")
        model_class = MODELS.get(plan.model)
        if model_class is None:
            known = ", ".join(MODELS)
            raise ValueError(f"plan.json: unknown model {plan.model!r} (known: {known})")
        identity = os.environ.get(IDENTITY_ENV) or plan.identity
        arm_from_environ()  # a bad spec is refused here, before the journal is opened
        runtime = runtime_class.open(
            trial / "journal",
            table=table,
            identity=identity,
            compaction=Compaction.never(),  # a scenario's compact_at decides, below
            clock=trial_clock,  # keyed tools' windows: on the trial's clock, as the world's
            reconcilers=world_reconcilers(trial, plan),
        )
    except JournalWriteError as exc:  # the disk filled up as the life began
        print(f"harness.agent: stopped: {exc}", file=sys.stderr)
        return AGENT_WRITE_FAILED
    except (HarnessError, ValueError) as exc:
        print(f"harness.agent: refused: {exc}", file=sys.stderr)
        return AGENT_REFUSED
    try:
        compact_at_start(runtime, trial / "journal", plan.compact_at)
        with tools(trial) as execute:
            model_class(runtime, plan, execute).run()
    except JournalWriteError as exc:
        print(f"harness.agent: stopped: {exc}", file=sys.stderr)
        return AGENT_WRITE_FAILED
    finally:
        runtime.close()
    pause_left_at_exit()  # the work is done: a pending random-time pause lands here,
    failpoint(EXIT_HOLD_POINT)  # and a pending random-time kill
    report_hit_counts()
    return AGENT_DONE


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
