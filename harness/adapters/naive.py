"""``python -m harness.adapters.naive TRIAL_DIR``: the smallest adapter, and a baseline.

An agent with no recovery at all: every start runs the whole plan again from
the first step. It shows the adapter contract of ``harness.adapters`` in a
few lines, and what the harness says of a runtime that keeps no durable state
(every kill replays everything before it).
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.agent.plan import load_plan
from harness.failpoints import arm_from_environ, failpoint, tell_supervisor
from harness.runtime import CallContext, ToolError
from harness.world.store import WorldStore
from harness.world.tools import make_tool_function


def main(argv: list[str]) -> int:
    trial = Path(argv[0])
    tell_supervisor("ready")
    arm_from_environ()
    plan = load_plan(trial / "plan.json")
    with WorldStore.open(trial / "world.db") as world:
        execute = make_tool_function(world, plan.tools)
        for step in plan.steps:
            tell_supervisor(f"invoke {step.op_id}")
            failpoint("op.before_intent", step.op_id)
            failpoint("op.after_intent", step.op_id)
            try:
                execute(step.tool, step.args, CallContext(step.op_id, step.tool, 1, 1))
                outcome = "ack"
            except ToolError:
                outcome = "fail"
            failpoint("op.after_effect", step.op_id)
            failpoint("op.after_finish", step.op_id)
            tell_supervisor(f"{outcome} {step.op_id}")
    failpoint("agent.before_exit")  # done: a random-time kill still pending lands here
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
