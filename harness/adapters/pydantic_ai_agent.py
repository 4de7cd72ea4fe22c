"""``python -m harness.adapters.pydantic_ai_agent TRIAL_DIR``: the plan run by a Pydantic AI agent.

The same job as ``python -m harness.agent`` (read ``plan.json``, say ``ready``,
act on ``world.db`` through the simulated tools, tell the supervisor ``invoke``
and ``ack``/``fail``/``info`` for each step), done the way a Pydantic AI user
writes an agent: an ``Agent`` whose model is a scripted ``FunctionModel``
(``PlanModel``, no network) and whose tools are a ``FunctionToolset`` with one
tool per simulated tool the plan uses, made durable with Pydantic AI's own DBOS
integration (``pydantic_ai.durable_exec.dbos.DBOSDurability``, the capability
that 2.78 has in place of the deprecated ``DBOSAgent``): ``agent.run`` inside a
DBOS workflow of fixed id ``plan``, DBOS's SQLite system database in the trial
folder (``dbos.sqlite``). The model emits, turn by turn, the plan's calls
under the plan's op ids as ``tool_call_id``; a plan batch is several calls in
one response, which Pydantic AI runs at once (DBOS's default
``parallel_ordered_events``).

The full note: docs/reference/modules.md (``harness/adapters/pydantic_ai_agent.py``).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NoReturn

from dbos import DBOS, DBOSConfig, SetWorkflowID
from dbos import error as dbos_error
from pydantic_ai import Agent, ModelRetry, RunContext, ToolFailed
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool, WrapperToolset

from harness.adapters.starts import begin_life, next_incarnation
from harness.agent.model import CHECK_SUFFIX, MAX_REDOES
from harness.agent.plan import Plan, PlanStep, batches, load_plan, plan_id
from harness.exits import AGENT_DONE, AGENT_ERROR, AGENT_REFUSED, AGENT_WRITE_FAILED
from harness.failpoints import (
    arm_from_environ,
    failpoint,
    report_hit_counts,
    tell_supervisor,
)
from harness.integrations.guard import VERIFY_TOOL
from harness.integrations.pydantic_ai import GuardedToolset, current_call, hinted_op
from harness.runtime import (
    HarnessError,
    JournalWriteError,
    ToolError,
    ToolTable,
    TransientToolError,
)
from harness.runtime.executor import CallContext, ToolFunction
from harness.world.catalog import CATALOG, ToolSpec
from harness.world.store import WorldStore
from harness.world.tools import make_tool_function

__all__ = [
    "INCARNATION_FILE",
    "SYSTEM_DB",
    "VARIANT_ENV",
    "WORKFLOW_ID",
    "PlanModel",
    "StepToolset",
    "main",
    "world_toolset",
]

VARIANT_ENV = "HARNESS_PYDANTIC_AI"
"""``bare`` (the default) or ``guarded``."""
VARIANTS = ("bare", "guarded")
WORKFLOW_ID = "plan"
SYSTEM_DB = "dbos.sqlite"
INCARNATION_FILE = "pydantic-ai-incarnation"
AGENT_NAME = "harness_plan"
APP_NAME = "harness-pydantic-ai-agent"
# Fixed, so that a restart recovers the workflow even if this file changed in between.
APP_VERSION = "harness-pydantic-ai-agent-1"
PROMPT = "Carry out the plan."
DONE = "done"
REPORT_SUFFIX = ".report"
MAX_ATTEMPTS = 3
POLL_S = 0.02

# What a run imports on its way (the libraries import them lazily), imported with this
# module: the fork server preloads an adapter by importing it, so that every incarnation
# it forks starts with them (about 0.2 s a life). Nothing here starts a thread.
RUN_TIME_IMPORTS = (
    "anyio._backends._asyncio",
    "dbos._sys_db_sqlite",
    "genai_prices.data",
    "sqlalchemy.dialects.sqlite.pysqlite",
    "sqlalchemy.dialects.sqlite.aiosqlite",
)
for _name in RUN_TIME_IMPORTS:
    with contextlib.suppress(ImportError):  # a library's layout may change: a cost, not a fault
        importlib.import_module(_name)

_JSON_TYPES = {"str": "string", "int": "integer", "bool": "boolean", "list": "array"}
_ATTEMPT: ContextVar[int] = ContextVar("harness_step_attempt", default=1)


class _Life:
    """What the workflow, its steps and its tools need from this incarnation (set by ``main``)."""

    trial: Path
    plan: Plan
    agent: Agent[None, str]
    guarded: GuardedToolset[None] | None = None
    journal: Path | None = None
    incarnation: int = 0
    ran: ClassVar[set[str]] = set()  # calls whose step body ran in this life
    local = threading.local()

    @classmethod
    def execute(cls, tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        """The simulated tools, over a world connection of the calling thread (a recovered
        workflow runs on a DBOS thread; an sqlite3 connection serves the one that opened it)."""
        execute: ToolFunction | None = getattr(cls.local, "execute", None)
        if execute is None:
            world = WorldStore.open(cls.trial / "world.db", journal_path=cls.journal)
            execute = cls.local.execute = make_tool_function(world, cls.plan.tools)
        return execute(tool, args, ctx)


def _tell(what: str, op_id: str = "") -> None:
    tell_supervisor(f"{what} {op_id}".rstrip())


# -- the tools ----------------------------------------------------------------------------


def _schema(spec: ToolSpec) -> dict[str, Any]:
    """A tool's arguments as the JSON schema the model is shown."""
    properties: dict[str, Any] = {
        a.name: {"type": _JSON_TYPES.get(a.type, a.type)} for a in spec.args
    }
    properties["fail_attempts"] = {"type": "integer"}
    required = [a.name for a in spec.args if not a.optional]
    return {"type": "object", "properties": properties, "required": required}


def _world_tool(spec: ToolSpec) -> Tool[None]:
    tool = spec.name

    async def call(ctx: RunContext[None], **args: Any) -> Any:
        guarded = current_call()  # the guard's call, when there is one: its op id and attempt
        call_ctx = guarded or CallContext(
            ctx.tool_call_id or tool, tool, _ATTEMPT.get(), _Life.incarnation
        )
        try:
            return _Life.execute(tool, args, call_ctx)
        except TransientToolError:
            raise  # retried by whoever runs the call (the DBOS step, or the guard), or not
        except ToolError as exc:
            raise ToolFailed(str(exc)) from exc  # the model is told it failed

    return Tool.from_schema(call, tool, spec.summary, _schema(spec), takes_ctx=True)


def world_toolset(plan: Plan) -> FunctionToolset[None]:
    """One tool per simulated tool the plan calls or checks with, acting on the world."""
    names = {s.tool for s in plan.steps} | {s.verify.tool for s in plan.steps if s.verify}
    specs = [plan.tools[n].spec if n in plan.tools else CATALOG[n] for n in sorted(names)]
    return FunctionToolset([_world_tool(spec) for spec in specs])


def _transient(error: BaseException) -> bool:
    return isinstance(error, TransientToolError)


@DBOS.step(
    name="harness.pydantic_ai.tool_call",
    retries_allowed=True,
    max_attempts=MAX_ATTEMPTS,
    interval_seconds=0.01,
    backoff_rate=1.0,
    should_retry=_transient,
)
async def tool_call_step(
    toolset: AbstractToolset[None],
    name: str,
    args: dict[str, Any],
    ctx: RunContext[None],
    tool: ToolsetTool[None],
) -> Any:
    """One tool call: run it through ``toolset``; DBOS checkpoints what this returns or raises."""
    status = DBOS.step_status
    retry = None if status is None else status.current_attempt
    attempt = 1 if retry is None else retry + 1
    op_id = ctx.tool_call_id or name
    probes = _Life.guarded is None  # guarded, the runtime hits them at its own points
    _Life.ran.add(op_id)
    if probes:
        failpoint("op.before_intent", op_id)
        failpoint("op.after_intent", op_id)
    token = _ATTEMPT.set(attempt)
    try:
        result = await toolset.call_tool(name, args, ctx, tool)
    except TransientToolError:
        if attempt < MAX_ATTEMPTS:
            raise  # DBOS retries it in-process; like our executor, no after_effect hit
        if probes:
            failpoint("op.after_effect", op_id)
        raise
    except (ToolFailed, ModelRetry):
        if probes:
            failpoint("op.after_effect", op_id)
        raise
    finally:
        _ATTEMPT.reset(token)
    if probes:
        failpoint("op.after_effect", op_id)
    return result


@dataclass
class StepToolset(WrapperToolset[None]):
    """Every call of ``wrapped`` as one DBOS step (``tool_call_step``)."""

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[None], tool: ToolsetTool[None]
    ) -> Any:
        op_id = ctx.tool_call_id or name
        try:
            result = await tool_call_step(self.wrapped, name, tool_args, ctx, tool)
        except dbos_error.DBOSMaxStepRetriesExceeded as exc:
            self._finished(op_id)
            raise ToolFailed(f"{name}: failed {MAX_ATTEMPTS} times: {exc}") from exc
        except (ToolFailed, ModelRetry):
            self._finished(op_id)
            raise
        self._finished(op_id)
        return result

    @staticmethod
    def _finished(op_id: str) -> None:
        if _Life.guarded is None and op_id in _Life.ran:
            failpoint("op.after_finish", op_id)


@dataclass
class _StopOnJournalErrors(WrapperToolset[None]):
    """Ends the life at a journal fault the guard meets, as ``harness.agent`` exits: DBOS
    must not record the run's error (it would never resume it)."""

    async def get_tools(self, ctx: RunContext[None]) -> dict[str, ToolsetTool[None]]:
        try:
            return await self.wrapped.get_tools(ctx)  # the guard opens its journal here
        except JournalWriteError as exc:
            _stop(AGENT_WRITE_FAILED, f"stopped: {exc}")
        except (HarnessError, ValueError) as exc:
            _stop(AGENT_REFUSED, f"refused: {exc}")

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[None], tool: ToolsetTool[None]
    ) -> Any:
        try:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        except JournalWriteError as exc:
            _stop(AGENT_WRITE_FAILED, f"stopped: {exc}")


def _stop(code: int, message: str) -> NoReturn:
    sys.stderr.write(f"harness.adapters.pydantic_ai_agent: {message}\n")
    sys.stderr.flush()
    os._exit(code)


# -- the model ----------------------------------------------------------------------------

Answer = ToolReturnPart | RetryPromptPart


@dataclass
class _Read:
    """What the model has in front of it: every call it made and every answer it got."""

    calls: dict[str, ToolCallPart] = field(default_factory=dict)
    answers: dict[str, Answer] = field(default_factory=dict)
    latest: list[Answer] = field(default_factory=list)
    """The answers of the last request: those this turn reads for the first time."""
    hinted: list[str] = field(default_factory=list)
    """Ops a hint asked to verify, in the order they were read."""

    @classmethod
    def of(cls, messages: Sequence[ModelMessage]) -> _Read:
        read = cls()
        for message in messages:
            if isinstance(message, ModelResponse):
                calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
                read.calls.update({p.tool_call_id: p for p in calls})
                continue
            answers = [p for p in message.parts if isinstance(p, ToolReturnPart | RetryPromptPart)]
            for part in answers:
                if part.tool_call_id is None:
                    continue
                read.answers[part.tool_call_id] = part
                op = hinted_op(_text(part))
                if op is not None and op not in read.hinted:
                    read.hinted.append(op)
            read.latest = answers
        return read

    def pending(self) -> list[str]:
        """Hinted ops whose report has not been answered yet."""
        return [op for op in self.hinted if op + REPORT_SUFFIX not in self.answers]


def _result(check: Answer | None) -> Any:
    """A check's result, or None when it has none to judge by (failed, or a hint itself)."""
    if check is None or _failed(check) or hinted_op(_text(check)) is not None:
        return None
    try:
        return json.loads(_text(check)) if isinstance(check.content, str) else check.content
    except ValueError:
        return None


def _text(part: Answer) -> str:
    return part.content if isinstance(part.content, str) else json.dumps(part.content)


def _failed(part: Answer) -> bool:
    return isinstance(part, RetryPromptPart) or part.outcome != "success"


def _root(op_id: str) -> str:
    """The plan call an op stands for: ``s003.redo.check`` -> ``s003``."""
    return plan_id(op_id).split(".", 1)[0]


class PlanModel:
    """The scripted model of a Pydantic AI agent (a ``FunctionModel`` function).

    Each turn is a function of the messages alone, so a life that DBOS replays
    asks the same: first the verification of every hint it read (one op at a
    time: its check, then its report), then the plan's next batch, then ``done``.
    """

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.steps: Mapping[str, PlanStep] = {s.op_id: s for s in plan.steps}

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        read = _Read.of(messages)
        self.tell_read(read)
        calls = self.next_calls(read, {t.name for t in info.function_tools})
        for call in calls:
            if call.tool_call_id in self.steps:
                _tell("invoke", call.tool_call_id)
        return ModelResponse(parts=list(calls) or [TextPart(DONE)])

    def tell_read(self, read: _Read) -> None:
        """Tell the supervisor what this turn reads: each plan call's outcome, each hint,
        and a verified step's outcome once its last report is answered."""
        busy = {_root(op) for op in read.pending()}
        settled: list[str] = []
        for part in read.latest:
            op_id = part.tool_call_id
            if op_id in self.steps and hinted_op(_text(part)) is not None:
                _tell("info", op_id)  # its outcome is unknown until the report is answered
            elif op_id in self.steps:
                _tell("fail" if _failed(part) else "ack", op_id)
            elif op_id.endswith(REPORT_SUFFIX) and _root(op_id) not in {*busy, *settled}:
                settled.append(_root(op_id))
        for root in settled:
            _tell(self.verified_outcome(root, read), root)
        # The model acts on every hint of a step not settled yet (a redo's, and its
        # op's): each is in front of it, so it says it read them, in every life.
        for op in read.hinted:
            if _root(op) in busy:
                _tell("hint", op)

    @staticmethod
    def verified_outcome(root: str, read: _Read) -> str:
        """A verified step's outcome, from the answer to the last report of its chain (the
        op, its redo, ...; a check's own report says nothing of the step): the finding,
        or the redo's outcome."""
        chain = [op for op in read.hinted if _root(op) == root and CHECK_SUFFIX not in op]
        answers = [
            read.answers[op + REPORT_SUFFIX] for op in chain if op + REPORT_SUFFIX in read.answers
        ]
        if not answers:
            return "info"
        last = answers[-1]
        text = _text(last)
        if _failed(last):
            return "fail" if isinstance(last, ToolReturnPart) else "info"
        if text.endswith("is unknown; it is not run again") or "could not be verified" in text:
            return "info"
        return "ack"

    def next_calls(self, read: _Read, tools: set[str]) -> list[ToolCallPart]:
        pending = read.pending() if VERIFY_TOOL in tools else []
        if pending:
            return [self.verification(pending[0], read)]
        for issued in batches(self.plan.steps):
            if issued[0].op_id not in read.calls:
                return [ToolCallPart(s.tool, dict(s.args), tool_call_id=s.op_id) for s in issued]
        return []

    def verification(self, op_id: str, read: _Read) -> ToolCallPart:
        """The next call of a hinted op's verification: its check, or its report."""
        step = self.steps.get(_root(op_id))
        check_id = op_id + CHECK_SUFFIX
        found = "unknown"
        if step is not None and step.verify is not None and not op_id.endswith(CHECK_SUFFIX):
            check = read.answers.get(check_id)
            if check_id not in read.calls:
                verify = step.verify
                return ToolCallPart(verify.tool, dict(verify.args), tool_call_id=check_id)
            result = _result(check)
            if result is not None and step.verify.holds(result):
                found = "present"
            elif result is not None and op_id.count(".redo") < MAX_REDOES:
                found = "absent"
        args = {"op_id": op_id, "found": found}
        return ToolCallPart(VERIFY_TOOL, args, tool_call_id=op_id + REPORT_SUFFIX)


# -- the program --------------------------------------------------------------------------


@DBOS.workflow(name="harness.pydantic_ai.plan")
async def run_plan() -> str:
    """The agent's run, durable: DBOS resumes it after a crash."""
    try:
        result = await _Life.agent.run(PROMPT)
    finally:
        if _Life.guarded is not None:
            await _Life.guarded.aclose()
    return result.output


def build_agent(plan: Plan, guarded: GuardedToolset[None] | None) -> Agent[None, str]:
    """The user's agent: the scripted model, the world's tools (each call a DBOS step, the
    guard inside the step when there is one), durable on DBOS."""
    tools: AbstractToolset[None] = world_toolset(plan)
    if guarded is not None:
        tools = _StopOnJournalErrors(guarded)
    return Agent(
        FunctionModel(PlanModel(plan)),
        name=AGENT_NAME,
        toolsets=[StepToolset(tools)],
        capabilities=[DBOSDurability()],
    )


def dbos_config(trial: Path) -> DBOSConfig:
    return {
        "name": APP_NAME,
        "system_database_url": f"sqlite:///{(trial / SYSTEM_DB).resolve()}",
        "application_version": APP_VERSION,
        "executor_id": "local",
        "log_level": "ERROR",
        # DBOS.destroy() joins the listener thread, which sleeps this long between polls.
        "notification_listener_polling_interval_sec": 0.05,
    }


def main(argv: list[str]) -> int:
    program = "harness.adapters.pydantic_ai_agent"
    trial = begin_life(argv, program)  # imports (pydantic_ai and dbos included) are done
    if trial is None:
        return AGENT_REFUSED
    variant = os.environ.get(VARIANT_ENV, "bare")
    try:
        if variant not in VARIANTS:
            raise ValueError(f"{VARIANT_ENV}={variant!r}: expected one of {', '.join(VARIANTS)}")
        arm_from_environ()
        plan = load_plan(trial / "plan.json")
        table_path = os.environ.get("HARNESS_TOOL_TABLE")
        table = ToolTable.load(table_path) if table_path else ToolTable.shipped()
    except (HarnessError, OSError, ValueError, KeyError) as exc:
        print(f"{program}: refused: {exc}", file=sys.stderr)
        return AGENT_REFUSED
    _Life.trial, _Life.plan = trial, plan
    if variant == "guarded":
        _Life.journal = trial / "journal"
        # Known by id, whatever the scenario's identity: the ids do not change from life
        # to life (see the module docstring).
        _Life.guarded = GuardedToolset(world_toolset(plan), _Life.journal, table=table)
    else:
        _Life.incarnation = next_incarnation(trial, INCARNATION_FILE)
    # Creates the world's schema now; tools open their own connections (see _Life.execute).
    WorldStore.open(trial / "world.db", journal_path=_Life.journal).close()
    _Life.agent = build_agent(plan, _Life.guarded)
    DBOS(config=dbos_config(trial))
    try:
        DBOS.launch()  # re-enqueues our PENDING workflow, if a life died inside it
        with SetWorkflowID(WORKFLOW_ID):
            # First life: runs it on DBOS's event loop thread. Later: the id exists, so
            # this only hands back a handle on the run that recovery started there.
            handle = DBOS.start_workflow(run_plan)
        # DBOS types the result of an async workflow started so as its coroutine: it is
        # the run's output, awaited on DBOS's loop.
        output: object = handle.get_result(polling_interval_sec=POLL_S)
    except Exception as exc:
        print(f"{program}: workflow failed: {exc!r}", file=sys.stderr)
        return AGENT_ERROR
    finally:
        DBOS.destroy()
    if output != DONE:
        print(f"{program}: the run ended with {output!r}, not {DONE!r}", file=sys.stderr)
        return AGENT_ERROR
    failpoint("agent.before_exit")  # done: a random-time kill still pending lands here
    report_hit_counts()
    return AGENT_DONE


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
