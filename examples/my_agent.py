"""my_agent.py: an agent program with durable state of its own, run by the harness.

    PYTHONPATH=examples python -m harness chaos --runtime module:my_agent --only phone_task

Its durable state is a file of the steps it finished (``my_agent.done``, one
"op outcome" line each, fsynced before the user is told). It calls the
protocol's failpoints at its own equivalent points, so that the harness can
kill it inside each call. A timeout of a call that must not run twice is an
unknown outcome (the timeout may have come after the effect): it says so
(``info``), checks the world with the step's read-only check and runs the call
again only if the effect is absent. A call that fails is checked the same way
before it is reported failed. docs/own-agent.md says what the harness finds.
"""

import os
import sys
from pathlib import Path

from harness.agent.plan import PlanStep, load_plan
from harness.failpoints import arm_from_environ, failpoint, tell_supervisor
from harness.runtime import CallContext, ToolError, ToolFunction, ToolTable, TransientToolError
from harness.world.store import WorldStore
from harness.world.tools import make_tool_function


def effect_present(step: PlanStep, execute: ToolFunction, incarnation: int) -> bool | None:
    """Whether the step's effect is in the world, by its read-only check (None: no check)."""
    if step.verify is None:
        return None
    check = CallContext(f"{step.op_id}.check", step.verify.tool, 1, incarnation)
    try:
        return step.verify.holds(execute(step.verify.tool, step.verify.args, check))
    except ToolError:
        return None


OUTCOMES = ("ack", "fail", "info")


def read_done(done_file: Path) -> tuple[dict[str, str], int]:
    """The steps the done-file says are finished, and the length of its whole lines. A power
    cut may leave its last line torn (cut short, or followed by garbage): the lines up to
    the first that is not whole are read, the rest was never made durable."""
    data = done_file.read_bytes() if done_file.exists() else b""
    done, length = {}, 0
    for raw in data.split(b"\n")[:-1]:  # the piece after the last newline is not whole
        parts = raw.decode("utf-8", "replace").split()
        if len(parts) != 2 or parts[1] not in OUTCOMES:
            break
        done[parts[0]] = parts[1]
        length += len(raw) + 1
    return done, length


def make_durable(done_file: Path, length: int) -> None:
    """Keep the done-file's whole lines only, and make them durable, name included. A line
    a killed life wrote but never fsynced is read back from the page cache all the same:
    reported done, then lost to a power cut, its step would run again."""
    with done_file.open("r+b") as file:
        file.truncate(length)  # a torn tail would run into the next line appended
        os.fsync(file.fileno())
    folder = os.open(done_file.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def main(argv: list[str]) -> int:
    trial = Path(argv[0])
    tell_supervisor("ready")  # imports done: random-time kills count from here
    arm_from_environ()  # HARNESS_FAILPOINTS, so that kills land inside calls
    table_file = os.environ.get("HARNESS_TOOL_TABLE")  # the table the harness runs with
    table = ToolTable.load(table_file) if table_file else ToolTable.shipped()
    done_file = trial / "my_agent.done"  # this agent's own durable state: "op outcome" lines
    done, length = read_done(done_file)
    folder_synced = done_file.exists()  # its name is durable once its folder is fsynced
    if folder_synced:
        make_durable(done_file, length)  # before any line of it is reported
    plan = load_plan(trial / "plan.json")
    with WorldStore.open(trial / "world.db") as world:
        execute = make_tool_function(world, plan.tools)  # the world's tools only, ledgered
        for step in plan.steps:
            tell_supervisor(f"invoke {step.op_id}")  # every step, every life...
            if step.op_id in done:  # ...and a step done before a restart is reported again
                tell_supervisor(f"{done[step.op_id]} {step.op_id}")
                continue
            failpoint("op.before_intent", step.op_id)  # nothing of the step is done yet
            retry_safe = table.classify(step.tool).retry_safe
            failpoint("op.after_intent", step.op_id)  # about to call the tool
            outcome = "fail"
            for attempt in (1, 2, 3):
                try:
                    execute(step.tool, step.args, CallContext(step.op_id, step.tool, attempt, 1))
                except TransientToolError:
                    if retry_safe:  # read-only or idempotent: running it again is harmless
                        continue
                    # A timeout may come after the effect: the outcome is unknown. Say so,
                    # check the world, and run it again only if its effect is absent.
                    tell_supervisor(f"info {step.op_id}")
                    tell_supervisor(f"hint {step.op_id}")  # the check is read before any rerun
                    if effect_present(step, execute, 1) is False:
                        continue
                    outcome = "ack" if step.verify is not None else "info"
                    break
                except ToolError:  # failed: unless its effect is there (an earlier life's)
                    outcome = "ack" if effect_present(step, execute, 1) else "fail"
                    break
                outcome = "ack"
                break
            failpoint("op.after_effect", step.op_id)  # the effect is done, not yet recorded
            with done_file.open("a") as file:  # durable before the user is told
                file.write(f"{step.op_id} {outcome}\n")
                file.flush()
                os.fsync(file.fileno())
            if not folder_synced:  # an fsync of the file never makes its own name durable
                make_durable(done_file, done_file.stat().st_size)
                folder_synced = True
            failpoint("op.after_finish", step.op_id)  # recorded, the user not yet told
            tell_supervisor(f"{outcome} {step.op_id}")  # ack, fail, or info (unknown)
    failpoint("agent.before_exit")  # done: a random-time kill still pending lands here
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
