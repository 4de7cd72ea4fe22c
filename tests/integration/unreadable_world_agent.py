"""An agent program for the verdicts tests: it leaves a world no checker can read.

Run as ``--runtime module:tests.integration.unreadable_world_agent``. It keeps
the adapter contract (``ready``, the op failpoints, ``invoke``/``ack``, the
exit hold) but writes bytes that are not a database where the world belongs,
so the checkers that read the ledger raise, and their verdicts must be
``unknown``, never a pass.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.agent.plan import load_plan
from harness.failpoints import arm_from_environ, failpoint, tell_supervisor


def main(argv: list[str]) -> int:
    trial = Path(argv[0])
    tell_supervisor("ready")
    arm_from_environ()
    (trial / "world.db").write_bytes(b"this is not an SQLite database\n" * 64)
    for step in load_plan(trial / "plan.json").steps:
        tell_supervisor(f"invoke {step.op_id}")
        for point in ("op.before_intent", "op.after_intent", "op.after_effect", "op.after_finish"):
            failpoint(point, step.op_id)
        tell_supervisor(f"ack {step.op_id}")
    failpoint("agent.before_exit")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
