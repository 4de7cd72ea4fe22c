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

Options come from the environment, set by the supervisor:
``HARNESS_RUNTIME`` (a name from ``harness.agent.broken.RUNTIMES``, default
``real``), ``HARNESS_IDENTITY`` (``id`` or ``content``: ``harness.runtime.Identity``),
``HARNESS_TOOL_TABLE`` (a tool table file replacing the default),
``HARNESS_FAILPOINTS`` and ``HARNESS_FAILPOINT_CHANNEL`` (see
``harness.failpoints``), and ``HARNESS_FAILPOINT_COUNTS``, a file to
which a finished run writes how often each armed point was hit. On the channel
the agent first says ``ready`` once its imports are done. ``HARNESS_CONTAINMENT=1``
installs, before anything else, the audit hook of ``harness.agent.audit``, which
stops the process at its first attempt to reach outside the trial directory.

The tools are a seam: ``main(argv, tools=...)`` takes what opens the trial's
``ToolFunction`` (by default ``world_tools``: the simulated tools in this
process), so that an adapter can run this same agent with its tools elsewhere
(``harness.adapters.mcp_agent``: over MCP, in a server child process).

Exit status (``harness.exits``): ``AGENT_DONE`` the plan is done; ``AGENT_REFUSED`` refused
before any tool ran (corrupt or locked journal, bad failpoint spec, unknown runtime, model or
identity); ``AGENT_WRITE_FAILED`` an append could not be made durable (disk full): the op was
not run; ``AGENT_CONTAINED`` stopped by containment.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from harness.agent.audit import CONTAINMENT_ENV, install_containment
from harness.agent.broken import RUNTIMES
from harness.agent.compaction import compact_at_start
from harness.agent.model import MODELS
from harness.agent.plan import load_plan
from harness.exits import AGENT_DONE, AGENT_REFUSED, AGENT_WRITE_FAILED
from harness.failpoints import (
    EXIT_HOLD_POINT,
    arm_from_environ,
    failpoint,
    report_hit_counts,
    tell_supervisor,
)
from harness.runtime import (
    Compaction,
    HarnessError,
    JournalWriteError,
    ToolFunction,
    ToolTable,
)
from harness.world.store import WorldStore
from harness.world.tools import make_tool_function

IDENTITY_ENV = "HARNESS_IDENTITY"

ToolsOpener = Callable[[Path], AbstractContextManager[ToolFunction]]
"""Given the trial directory, a context that gives the agent's tools and closes them."""


@contextmanager
def world_tools(trial: Path) -> Iterator[ToolFunction]:
    """The simulated tools and the plan's declared ones, run in this process on the
    trial's world."""
    declared = load_plan(trial / "plan.json").tools
    with WorldStore.open(trial / "world.db", journal_path=trial / "journal") as world:
        yield make_tool_function(world, declared)


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
    failpoint(EXIT_HOLD_POINT)  # the work is done: a pending random-time kill lands here
    report_hit_counts()
    return AGENT_DONE


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
