"""``python -m harness.adapters.langgraph_agent TRIAL_DIR``: the plan run by a LangGraph graph.

The same job as ``python -m harness.agent`` (read ``plan.json``, say ``ready``, act
on ``world.db`` through the simulated tools, tell the supervisor ``invoke`` and
``ack``/``fail``/``info`` for each step), written as a LangGraph user writes an
agent: a ``StateGraph`` over ``MessagesState`` with a ``model`` node and the prebuilt
``ToolNode`` (``tools_condition`` between them), compiled with the SQLite
checkpointer (``AsyncSqliteSaver``, ``langgraph.sqlite`` in the trial folder) on one
thread (``THREAD_ID``). The durability is LangGraph's: no journal, no tool classes,
no VERIFY.

The full note: docs/reference/modules.md (``harness/adapters/langgraph_agent.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import ToolCall
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, ToolRuntime, tools_condition
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command
from pydantic import InstanceOf

from harness.adapters.starts import begin_life, next_incarnation
from harness.agent.model import CHECK_SUFFIX, MAX_REDOES, REDO_SUFFIX
from harness.agent.plan import Plan, PlanStep, batches, load_plan
from harness.errors import FailpointSpecError
from harness.exits import AGENT_DONE, AGENT_ERROR, AGENT_REFUSED, AGENT_WRITE_FAILED
from harness.failpoints import (
    arm_from_environ,
    failpoint,
    report_hit_counts,
    tell_supervisor,
)
from harness.integrations.guard import VERIFY_TOOL
from harness.integrations.langgraph import LangGraphGuard, current_call
from harness.runtime import HarnessError, JournalWriteError, ToolTable
from harness.runtime.errors import ToolError, TransientToolError
from harness.runtime.executor import CallContext, ToolFunction
from harness.world.catalog import CATALOG, ToolSpec
from harness.world.store import WorldStore
from harness.world.tools import make_tool_function

__all__ = [
    "CHECKPOINTS",
    "DURABILITY_ENV",
    "GUARD_ENV",
    "INCARNATION_FILE",
    "REPORT_SUFFIX",
    "THREAD_ID",
    "ScriptedChatModel",
    "build_graph",
    "hinted_op",
    "main",
    "next_turn",
    "retry_transient",
    "world_tools",
]

Durability = Literal["sync", "async", "exit"]

THREAD_ID = "plan"
CHECKPOINTS = "langgraph.sqlite"
INCARNATION_FILE = "langgraph-incarnation"
DURABILITY_ENV = "HARNESS_LANGGRAPH_DURABILITY"
GUARD_ENV = "HARNESS_LANGGRAPH_GUARD"
DURABILITIES: tuple[Durability, ...] = ("sync", "async", "exit")
REPORT_SUFFIX = ".report"
"""The id of the model's ``report_verification`` call for an op: ``s003.report``."""
MAX_ATTEMPTS = 3
TASK = "Carry out the plan, one step after another."
DONE = "Every step of the plan is done."

_HINT = re.compile(rf'call {re.escape(VERIFY_TOOL)} with op_id "([^"]+)"')
_JSON_TYPES = {"str": "string", "int": "integer", "bool": "boolean", "list": "array"}


# -- the model: an LLM's turns, as a function of the conversation -------------------------


def hinted_op(message: BaseMessage) -> str | None:
    """The op a ``ToolMessage`` asks the model to verify (the guard's VERIFY hint), if any."""
    if not isinstance(message, ToolMessage) or not isinstance(message.content, str):
        return None
    found = _HINT.search(message.content)
    return None if found is None else found.group(1)


def _call(call_id: str, name: str, args: dict[str, Any]) -> ToolCall:
    return ToolCall(name=name, args=args, id=call_id, type="tool_call")


def _report(op_id: str, found: str) -> AIMessage:
    args = {"op_id": op_id, "found": found}
    return AIMessage(content="", tool_calls=[_call(op_id + REPORT_SUFFIX, VERIFY_TOOL, args)])


def _result(message: ToolMessage) -> Any:
    """A tool's result as the model reads it: the JSON its content holds, or ``None``."""
    if message.status == "error" or not isinstance(message.content, str):
        return None
    try:
        return json.loads(message.content)
    except ValueError:
        return None


def _verification(plan: Plan, op_id: str, replies: dict[str, ToolMessage]) -> AIMessage:
    """The model's next call about one hinted op, as ``ScriptedModel.verify`` goes: its
    read-only check, then its report (present, absent, or unknown when nothing tells)."""
    step = _step_of(plan, op_id)
    if CHECK_SUFFIX in op_id or step is None or step.verify is None:
        return _report(op_id, "unknown")
    check_id = op_id + CHECK_SUFFIX
    check = replies.get(check_id)
    if check is None:
        verify = step.verify
        return AIMessage(content="", tool_calls=[_call(check_id, verify.tool, dict(verify.args))])
    result = _result(check)
    if result is None or hinted_op(check) is not None:
        return _report(op_id, "unknown")
    if step.verify.holds(result):
        return _report(op_id, "present")
    if op_id.count(REDO_SUFFIX) >= MAX_REDOES:
        return _report(op_id, "unknown")  # a careful agent gives up, as ScriptedModel does
    return _report(op_id, "absent")


def _step_of(plan: Plan, op_id: str) -> PlanStep | None:
    head = op_id.split(".", 1)[0]
    return next((step for step in plan.steps if step.op_id == head), None)


def next_turn(plan: Plan, messages: Sequence[BaseMessage]) -> AIMessage:
    """The model's next message, from the conversation alone (so the same in every life).

    First every VERIFY hint the conversation holds, in order, until it is reported;
    then the first plan step (a batch: all its calls) not yet called; then the end.
    """
    replies = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    called = {
        call["id"]: call
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.tool_calls
        if call["id"] is not None
    }
    reported = {
        str(call["args"].get("op_id")) for call in called.values() if call["name"] == VERIFY_TOOL
    }
    hints = [op for op in (hinted_op(m) for m in messages) if op is not None]
    for op_id in dict.fromkeys(hints):
        if op_id not in reported:
            return _verification(plan, op_id, replies)
    for issued in batches(plan.steps):
        if any(step.op_id not in called for step in issued):
            calls = [_call(s.op_id, s.tool, dict(s.args)) for s in issued]
            return AIMessage(content="", tool_calls=calls)
    return AIMessage(content=DONE)


class ScriptedChatModel(BaseChatModel):
    """An offline chat model that plays the plan turn by turn (``next_turn``)."""

    plan: InstanceOf[Plan]

    @property
    def _llm_type(self) -> str:
        return "harness-scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=next_turn(self.plan, messages))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # On the loop, not in an executor thread: nothing here awaits.
        return self._generate(messages, stop)


# -- one life: what the graph's nodes and tools share -------------------------------------


@dataclass
class Life:
    """This incarnation: the plan, the world's tools, and what it did so far."""

    plan: Plan
    execute: ToolFunction
    incarnation: int
    guarded: bool = False
    runs: Counter[str] = field(default_factory=Counter)
    """Tool bodies run per op id in this life (the attempt of a bare call)."""
    returned: list[str] = field(default_factory=list)
    """Op ids whose tool body came to its outcome in this life, in that order."""
    finished: set[str] = field(default_factory=set)
    hinted: set[str] = field(default_factory=set)

    @property
    def step_ids(self) -> frozenset[str]:
        return frozenset(step.op_id for step in self.plan.steps)

    def tell(self, what: str, op_id: str) -> None:
        tell_supervisor(f"{what} {op_id}")

    def read(self, messages: Sequence[BaseMessage]) -> None:
        """What the application does with the messages the model is about to read: the
        finish point of each call this life ran, the user told of each step's outcome,
        and every VERIFY hint the model reads told as read."""
        last_ai = max((i for i, m in enumerate(messages) if isinstance(m, AIMessage)), default=-1)
        replies = [m for m in messages[last_ai + 1 :] if isinstance(m, ToolMessage)]
        # In the order the calls came back, as a runtime that journals each finish sees them.
        order = {op_id: n for n, op_id in enumerate(self.returned)}
        for message in sorted(replies, key=lambda m: order.get(m.tool_call_id, -1)):
            self._settle(message)
        for op_id in (hinted_op(m) for m in messages):
            if op_id is not None and op_id not in self.hinted:
                self.hinted.add(op_id)
                self.tell("hint", op_id)  # the supervisor holds I2 to this

    def _settle(self, message: ToolMessage) -> None:
        call_id = message.tool_call_id
        if not self.guarded and self.runs[call_id] and call_id not in self.finished:
            self.finished.add(call_id)
            failpoint("op.after_finish", call_id)
        step = self._step_told(call_id)
        if step is None:
            return
        status = message.artifact.get("status") if isinstance(message.artifact, dict) else None
        if hinted_op(message) is not None or status == "info":
            self.tell("info", step)  # unknown for now: the model goes to verify it
        elif message.status == "error":
            self.tell("fail", step)
        else:
            self.tell("ack", step)

    def _step_told(self, call_id: str) -> str | None:
        """The plan step a reply settles: its own call's, or a report's on it or its redo
        (``s003.report``, ``s003.redo.report``); a check, or a report on one, settles none."""
        if call_id in self.step_ids:
            return call_id
        target = call_id.removesuffix(REPORT_SUFFIX)
        head = target.split(".", 1)[0]
        if target == call_id or CHECK_SUFFIX in target or head not in self.step_ids:
            return None
        return head

    def issued(self, reply: AIMessage) -> None:
        """The model called plan steps: the user is told each has begun."""
        for call in reply.tool_calls:
            if call["id"] in self.step_ids:
                self.tell("invoke", str(call["id"]))

    def context(self, tool: str, runtime: ToolRuntime | None) -> CallContext:
        """The call a tool body serves: under the guard the runtime's (its op id may be a
        redo's or a check's, its attempt the runtime's); bare, the tool-call id and the
        how-many-th run of it in this life."""
        guarded = current_call()
        if guarded is not None:
            return guarded
        if runtime is None or runtime.tool_call_id is None:
            raise ToolError(f"{tool}: run without a tool call, so without an op id")
        op_id = runtime.tool_call_id
        self.runs[op_id] += 1
        return CallContext(op_id, tool, self.runs[op_id], self.incarnation)


def _schema(spec: ToolSpec) -> dict[str, Any]:
    """A tool's arguments as JSON Schema, for the model's ``bind_tools`` (the world checks
    them itself, as it does for every agent)."""
    properties: dict[str, Any] = {
        arg.name: {"type": _JSON_TYPES.get(arg.type, "object")} for arg in spec.args
    }
    properties["fail_attempts"] = {"type": "integer"}
    required = [arg.name for arg in spec.args if not arg.optional]
    return {"type": "object", "properties": properties, "required": required}


def world_tools(life: Life) -> list[BaseTool]:
    """An async tool per tool the plan names (its steps' and their checks'), each acting
    on the world under its call's op id (the failpoints: see the module docstring)."""
    names = dict.fromkeys(
        [s.tool for s in life.plan.steps]
        + [s.verify.tool for s in life.plan.steps if s.verify is not None]
    )
    tools: list[BaseTool] = []
    for name in names:
        declared = life.plan.tools.get(name)
        spec = CATALOG[name] if declared is None else declared.spec
        tools.append(
            StructuredTool(
                name=name,
                description=spec.summary,
                args_schema=_schema(spec),
                coroutine=_tool_body(life, name),
            )
        )
    return tools


def _tool_body(life: Life, name: str) -> Callable[..., Awaitable[Any]]:
    async def run(runtime: ToolRuntime | None = None, **args: Any) -> Any:
        ctx = life.context(name, runtime)
        bare = not life.guarded  # guarded, the runtime hits the call's points itself
        if bare:
            failpoint("op.before_intent", ctx.op_id)
            failpoint("op.after_intent", ctx.op_id)
        try:
            result = life.execute(name, args, ctx)
        except TransientToolError:
            if bare and ctx.attempt >= MAX_ATTEMPTS:  # the last attempt: the call fails
                life.returned.append(ctx.op_id)
                failpoint("op.after_effect", ctx.op_id)
            raise
        except ToolError:
            life.returned.append(ctx.op_id)
            if bare:
                failpoint("op.after_effect", ctx.op_id)
            raise
        life.returned.append(ctx.op_id)
        if bare:
            failpoint("op.after_effect", ctx.op_id)
        return result

    return run


async def retry_transient(
    request: ToolCallRequest,
    execute: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
) -> ToolMessage | Command[Any]:
    """A LangGraph user's per-call error handling (``ToolNode(awrap_tool_call=...)``): a
    transient error is retried, up to ``MAX_ATTEMPTS`` runs, whatever the tool; a tool's
    failure (and the last transient one) is an error message the model reads."""
    call = request.tool_call
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            return await execute(request)
        except TransientToolError as exc:
            if attempt == MAX_ATTEMPTS:
                return _error(call, exc)
        except ToolError as exc:
            return _error(call, exc)
    raise AssertionError("unreachable: the last attempt returns")


def _error(call: ToolCall, exc: ToolError) -> ToolMessage:
    return ToolMessage(
        content=f"error: {type(exc).__name__}: {exc}",
        tool_call_id=str(call["id"]),
        name=call["name"],
        status="error",
    )


def build_graph(
    model: BaseChatModel, tools: Sequence[BaseTool], life: Life, checkpointer: AsyncSqliteSaver
) -> CompiledStateGraph[MessagesState, None, MessagesState, MessagesState]:
    """The agent: model node and ``ToolNode`` in a loop, on ``checkpointer``."""

    async def call_model(state: MessagesState) -> dict[str, list[AnyMessage]]:
        messages = state["messages"]
        life.read(messages)
        reply = await model.ainvoke(messages)
        life.issued(reply)
        return {"messages": [reply]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node(
        "tools", ToolNode(list(tools), handle_tool_errors=False, awrap_tool_call=retry_transient)
    )
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)


# -- the process ----------------------------------------------------------------------------


def _durability() -> Durability:
    value = os.environ.get(DURABILITY_ENV, "sync")
    if value not in DURABILITIES:
        raise ValueError(f"{DURABILITY_ENV}={value!r}: one of {', '.join(DURABILITIES)}")
    return value


def _recursion_limit(plan: Plan) -> int:
    """Supersteps enough for every turn: two a plan turn, four a verification, redoes too."""
    return 2 * (len(batches(plan.steps)) + 1) + 4 * len(plan.steps) * (MAX_REDOES + 2) + 10


class Refused(Exception):
    """The guard's journal or table cannot be used: nothing was run (``AGENT_REFUSED``)."""


async def run_life(trial: Path, plan: Plan, durability: Durability, guarded: bool) -> None:
    """One life of the agent: open what it needs, resume or start the thread, run it."""
    async with AsyncExitStack() as stack:
        journal = trial / "journal" if guarded else None
        world = WorldStore.open(trial / "world.db", journal_path=journal)
        stack.callback(world.close)
        life = Life(
            plan,
            make_tool_function(world, plan.tools),
            next_incarnation(trial, INCARNATION_FILE),
            guarded,
        )
        tools = world_tools(life)
        if guarded:
            guard = await _open_guard(trial, tools)
            stack.push_async_callback(guard.aclose)
            tools = guard.tools
        saver = await stack.enter_async_context(
            AsyncSqliteSaver.from_conn_string(str(trial / CHECKPOINTS))
        )
        graph = build_graph(ScriptedChatModel(plan=plan), tools, life, saver)
        config: RunnableConfig = {
            "configurable": {"thread_id": THREAD_ID},
            "recursion_limit": _recursion_limit(plan),
        }
        # A thread with a checkpoint resumes from it (``ainvoke(None)``): LangGraph applies
        # the writes its last superstep saved and runs what is left, nothing if it ended.
        # (``StateSnapshot.next`` leaves out a task whose writes were saved, so an empty
        # ``next`` does not mean the thread ended.)
        state = await graph.aget_state(config)
        start = MessagesState(messages=[HumanMessage(TASK)]) if not state.values else None
        await graph.ainvoke(start, config, durability=durability)


async def _open_guard(trial: Path, tools: Sequence[BaseTool]) -> LangGraphGuard:
    """The guard on ``TRIAL_DIR/journal``, with the table the supervisor hands this life."""
    try:
        table_path = os.environ.get("HARNESS_TOOL_TABLE")
        table = ToolTable.load(table_path) if table_path else ToolTable.shipped()
        return await LangGraphGuard.open(trial / "journal", tools, table=table)
    except JournalWriteError:
        raise  # the disk filled up as the life began: ``AGENT_WRITE_FAILED``
    except HarnessError as exc:  # a corrupt or locked journal, a bad table
        raise Refused(str(exc)) from exc


def main(argv: list[str]) -> int:
    trial = begin_life(argv, "harness.adapters.langgraph_agent")  # langgraph imported
    if trial is None:
        return AGENT_REFUSED
    try:
        arm_from_environ()
        durability = _durability()
        guarded = os.environ.get(GUARD_ENV) == "1"
        plan = load_plan(trial / "plan.json")
    except (FailpointSpecError, OSError, ValueError, KeyError) as exc:
        print(f"harness.adapters.langgraph_agent: refused: {exc}", file=sys.stderr)
        return AGENT_REFUSED
    try:
        asyncio.run(run_life(trial, plan, durability, guarded))
    except JournalWriteError as exc:  # the guard's journal: the disk filled up
        print(f"harness.adapters.langgraph_agent: stopped: {exc}", file=sys.stderr)
        return AGENT_WRITE_FAILED
    except Refused as exc:
        print(f"harness.adapters.langgraph_agent: refused: {exc}", file=sys.stderr)
        return AGENT_REFUSED
    except Exception as exc:
        print(f"harness.adapters.langgraph_agent: graph failed: {exc!r}", file=sys.stderr)
        return AGENT_ERROR
    failpoint("agent.before_exit")  # done: a random-time kill still pending lands here
    report_hit_counts()
    return AGENT_DONE


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
