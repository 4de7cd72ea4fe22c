"""``python -m harness.adapters.dbos_agent TRIAL_DIR``: the plan run as one DBOS Transact workflow.

The same job as ``python -m harness.agent`` (read ``plan.json``, say ``ready``,
act on ``world.db`` through the simulated tools, tell the supervisor ``invoke``
and ``ack``/``fail`` for each step), but the durability is DBOS's, not ours: no
journal, no tool classes, no VERIFY. The plan is one workflow with the fixed id
``plan``; each plan step is one DBOS step that runs the tool. DBOS keeps its
system database in the trial directory (``dbos.sqlite``, SQLite, no server).

What DBOS records, and where the failpoints stand (DBOS 3.4, ``dbos._core.invoke_step``):

- nothing before a step runs: it only looks up ``operation_outputs`` for
  (workflow id, step id) and replays a recorded output or error;
- one row in ``operation_outputs`` after the step function returned or raised
  (the step's checkpoint); the workflow's inputs and PENDING status at its start.

The full note: docs/reference/modules.md (``harness/adapters/dbos_agent.py``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

# dbos is not among the project's pins: in the project's venv mypy sees neither it nor the
# types of its decorators, hence these ignores (unused where dbos is installed).
from dbos import DBOS, DBOSConfig, SetWorkflowID  # type: ignore[import-not-found, unused-ignore]
from dbos import error as dbos_error  # type: ignore[import-not-found, unused-ignore]

from harness.adapters.starts import begin_life, next_incarnation
from harness.agent.plan import Plan, load_plan
from harness.errors import FailpointSpecError
from harness.exits import AGENT_DONE, AGENT_ERROR, AGENT_REFUSED
from harness.failpoints import (
    arm_from_environ,
    failpoint,
    report_hit_counts,
    tell_supervisor,
)
from harness.runtime.errors import ToolError, TransientToolError
from harness.runtime.executor import CallContext, ToolFunction
from harness.world.store import WorldStore
from harness.world.tools import make_tool_function

__all__ = ["INCARNATION_FILE", "SYSTEM_DB", "WORKFLOW_ID", "main"]

WORKFLOW_ID = "plan"
SYSTEM_DB = "dbos.sqlite"
INCARNATION_FILE = "dbos-incarnation"
APP_NAME = "harness-dbos-agent"
# Fixed, so that a restart recovers the workflow even if this file changed in between
# (DBOS recovers only PENDING workflows of the running application version).
APP_VERSION = "harness-dbos-agent-1"
MAX_ATTEMPTS = 3
POLL_S = 0.02  # how often a later life looks whether the recovered run has ended


class _Life:
    """What the workflow and its steps need from this incarnation (set by ``main``)."""

    trial: Path
    plan: Plan
    incarnation: int = 0
    ran: ClassVar[set[str]] = set()  # ops whose step body ran in this life
    local = threading.local()

    @classmethod
    def execute(cls, tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        """The simulated tools, over a world connection of the calling thread.

        A recovered workflow runs on a DBOS executor thread, and an sqlite3
        connection serves only the thread that opened it (and only it may close
        it: those of executor threads are closed by the process's exit).
        """
        execute: ToolFunction | None = getattr(cls.local, "execute", None)
        if execute is None:
            world = WorldStore.open(cls.trial / "world.db", journal_path=None)
            execute = cls.local.execute = make_tool_function(world, cls.plan.tools)
        return execute(tool, args, ctx)


def _tell(what: str, op_id: str = "") -> None:
    tell_supervisor(f"{what} {op_id}".rstrip())


def _transient(error: BaseException) -> bool:
    return isinstance(error, TransientToolError)


@DBOS.step(  # type: ignore[untyped-decorator, unused-ignore]
    name="harness.tool_call",
    retries_allowed=True,
    max_attempts=MAX_ATTEMPTS,
    interval_seconds=0.01,
    backoff_rate=1.0,
    should_retry=_transient,
)
def tool_call(op_id: str, tool: str, args: Mapping[str, Any]) -> Any:
    """One plan step: run the simulated tool; DBOS checkpoints what this returns or raises."""
    status = DBOS.step_status
    retry = None if status is None else status.current_attempt
    attempt = 1 if retry is None else retry + 1
    _Life.ran.add(op_id)
    failpoint("op.before_intent", op_id)
    failpoint("op.after_intent", op_id)
    ctx = CallContext(op_id, tool, attempt, _Life.incarnation)
    try:
        result = _Life.execute(tool, args, ctx)
    except TransientToolError:
        if attempt < MAX_ATTEMPTS:
            raise  # DBOS retries it in-process; like our executor, no after_effect hit
        failpoint("op.after_effect", op_id)
        raise
    except ToolError:
        failpoint("op.after_effect", op_id)
        raise
    failpoint("op.after_effect", op_id)
    return result


@DBOS.workflow(name="harness.plan")  # type: ignore[untyped-decorator, unused-ignore]
def run_plan() -> dict[str, str]:
    """Every plan step in order, each a DBOS step; what came of each: ack or fail."""
    outcomes: dict[str, str] = {}
    for step in _Life.plan.steps:
        _tell("invoke", step.op_id)
        try:
            tool_call(step.op_id, step.tool, dict(step.args))
        except (ToolError, dbos_error.DBOSMaxStepRetriesExceeded):
            outcome = "fail"
        else:
            outcome = "ack"
        if step.op_id in _Life.ran:
            failpoint("op.after_finish", step.op_id)
        outcomes[step.op_id] = outcome
        _tell(outcome, step.op_id)
    return outcomes


def dbos_config(trial: Path) -> DBOSConfig:
    return {
        "name": APP_NAME,
        "system_database_url": f"sqlite:///{(trial / SYSTEM_DB).resolve()}",
        "application_version": APP_VERSION,
        "executor_id": "local",
        "log_level": "WARNING",
        # DBOS.destroy() joins the listener thread, which sleeps this long between polls.
        "notification_listener_polling_interval_sec": 0.05,
    }


def main(argv: list[str]) -> int:
    trial = begin_life(argv, "harness.adapters.dbos_agent")  # imports (dbos included) done
    if trial is None:
        return AGENT_REFUSED
    try:
        arm_from_environ()
        _Life.plan = load_plan(trial / "plan.json")
    except (FailpointSpecError, OSError, ValueError, KeyError) as exc:
        print(f"harness.adapters.dbos_agent: refused: {exc}", file=sys.stderr)
        return AGENT_REFUSED
    _Life.trial = trial
    _Life.incarnation = next_incarnation(trial, INCARNATION_FILE)
    # Creates the world's schema now; steps open their own connections (see _Life.execute).
    WorldStore.open(trial / "world.db", journal_path=None).close()
    DBOS(config=dbos_config(trial))
    try:
        DBOS.launch()  # re-enqueues our PENDING workflow, if a life died inside it
        with SetWorkflowID(WORKFLOW_ID):
            # First life: runs it on a DBOS thread. Later: the id exists, so this
            # only hands back a handle on the run that recovery started.
            handle = DBOS.start_workflow(run_plan)
        handle.get_result(polling_interval_sec=POLL_S)
    except Exception as exc:
        print(f"harness.adapters.dbos_agent: workflow failed: {exc!r}", file=sys.stderr)
        return AGENT_ERROR
    finally:
        DBOS.destroy()
    failpoint("agent.before_exit")  # done: a random-time kill still pending lands here
    report_hit_counts()
    return AGENT_DONE


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
