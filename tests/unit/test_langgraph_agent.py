"""The LangGraph adapter's parts in this process: its model's turns, and one life of its graph.

The model is a function of the conversation (so a restarted graph gets the same
turns); its graph, run here without a supervisor, acts on a real world file.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from harness.adapters.langgraph_agent import DONE, hinted_op, next_turn, run_life
from harness.agent.plan import Plan, load_plan
from harness.chaos.trial import write_plan_for
from harness.integrations.guard import VERIFY_TOOL, hint_message
from harness.runtime import VerifyHint
from harness.world.store import read_ledger

ROOT = Path(__file__).resolve().parents[2]
MINI = ROOT / "tests" / "data" / "scenarios" / "mini.toml"
MINI_BATCH = ROOT / "tests" / "data" / "scenarios" / "mini_batch.toml"
BILLING = ROOT / "scenarios" / "support_billing.toml"


def _plan(scenario: Path, directory: Path) -> Plan:
    write_plan_for(str(scenario), 3, directory)
    return load_plan(directory / "plan.json")


def _hint(plan: Plan, op_id: str) -> ToolMessage:
    step = next(s for s in plan.steps if s.op_id == op_id)
    text = hint_message(VerifyHint(op_id, step.tool, step.args, f"Operation {op_id} ..."))
    return ToolMessage(content=text, tool_call_id=op_id, status="success")


def _called_through(plan: Plan, last: str) -> list[BaseMessage]:
    """A conversation in which the model called every step up to ``last``, each answered."""
    messages: list[BaseMessage] = [HumanMessage("go")]
    while True:
        turn = next_turn(plan, messages)
        messages.append(turn)
        ids = [str(call["id"]) for call in turn.tool_calls]
        messages += [ToolMessage(content="{}", tool_call_id=i) for i in ids if i != last]
        if last in ids:
            return messages


class TestTurns:
    def test_each_step_in_turn_under_its_op_id_then_the_end(self, tmp_path: Path) -> None:
        """One step per turn, its op id as the tool-call id; a batch is one message."""
        plan = _plan(MINI_BATCH, tmp_path)
        messages: list[BaseMessage] = [HumanMessage("go")]
        turns = []
        while not (turn := next_turn(plan, messages)).content:
            turns.append([(c["id"], c["name"]) for c in turn.tool_calls])
            messages += [turn, *(ToolMessage("{}", tool_call_id=c["id"]) for c in turn.tool_calls)]
        assert turns == [
            [("s001", "app_install")],
            [("s002a", "input_text"), ("s002b", "ui_dump"), ("s002c", "app_install")],
            [("s003", "ui_tap")],
        ]
        assert turn.content == DONE

    def test_the_same_conversation_gets_the_same_turn(self, tmp_path: Path) -> None:
        """Asked again from the conversation before a turn (a graph resumed from that
        checkpoint), the model makes the same calls under the same ids."""
        plan = _plan(MINI, tmp_path)
        messages = _called_through(plan, "s003")
        made = messages[-1]
        assert isinstance(made, AIMessage)
        assert next_turn(plan, messages[:-1]).tool_calls == made.tool_calls

    @pytest.mark.parametrize(
        ("screen", "found"),
        [({"submissions": ["note-1"]}, "present"), ({"submissions": []}, "absent")],
    )
    def test_a_hint_gets_the_check_then_the_report(
        self, tmp_path: Path, screen: dict[str, list[str]], found: str
    ) -> None:
        """A hinted tap: the step's read-only check as s003.check, then what it found."""
        plan = _plan(MINI, tmp_path)
        messages = [*_called_through(plan, "s003"), _hint(plan, "s003")]
        check = next_turn(plan, messages)
        assert [(c["id"], c["name"], c["args"]) for c in check.tool_calls] == [
            ("s003.check", "ui_dump", {})
        ]
        messages += [check, ToolMessage(json.dumps(screen), tool_call_id="s003.check")]
        report = next_turn(plan, messages)
        assert [(c["id"], c["name"], c["args"]) for c in report.tool_calls] == [
            ("s003.report", VERIFY_TOOL, {"op_id": "s003", "found": found})
        ]
        messages += [report, ToolMessage("recorded", tool_call_id="s003.report")]
        assert [c["id"] for c in next_turn(plan, messages).tool_calls] == ["s004"]

    def test_a_step_no_tool_can_check_is_reported_unknown(self, tmp_path: Path) -> None:
        """shell_execute has no verification: no check, the report says unknown."""
        plan = _plan(MINI, tmp_path)
        messages = [*_called_through(plan, "s006"), _hint(plan, "s006")]
        (call,) = next_turn(plan, messages).tool_calls
        assert (call["name"], call["args"]) == (VERIFY_TOOL, {"op_id": "s006", "found": "unknown"})

    def test_the_hint_is_read_from_the_guards_text(self, tmp_path: Path) -> None:
        """The op is read from the words an LLM reads (hint_message), nothing else."""
        plan = _plan(MINI, tmp_path)
        assert hinted_op(_hint(plan, "s003")) == "s003"
        assert hinted_op(ToolMessage('{"op_id": "s003"}', tool_call_id="s003")) is None
        assert hinted_op(AIMessage(content=hint_message(VerifyHint("s1", "t", {}, "x")))) is None


class TestBareLife:
    def test_a_crash_free_life_runs_each_step_once_under_its_id(self, tmp_path: Path) -> None:
        """The graph runs the plan to its end: one ledger row per step, its op id the call's."""
        plan = _plan(MINI_BATCH, tmp_path)
        asyncio.run(run_life(tmp_path, plan, "sync", guarded=False))
        ledger = read_ledger(tmp_path / "world.db")
        assert [e.op_id for e in ledger] == [s.op_id for s in plan.steps]
        assert all(e.attempt == 1 for e in ledger)

    def test_a_transient_failure_is_retried_per_call(self, tmp_path: Path) -> None:
        """read_inbox fails its first attempt at the gate: the ToolNode's wrapper runs it
        again, as attempt 2, and the plan goes on."""
        plan = _plan(BILLING, tmp_path)
        assert plan.steps[0].args.get("fail_attempts") == 1
        asyncio.run(run_life(tmp_path, plan, "sync", guarded=False))
        ledger = read_ledger(tmp_path / "world.db")
        assert [(e.op_id, e.attempt) for e in ledger if e.op_id == "s001"] == [("s001", 2)]
        assert [e.op_id for e in ledger] == [s.op_id for s in plan.steps]

    def test_a_finished_thread_runs_nothing_more(self, tmp_path: Path) -> None:
        """A life after the thread ended resumes it from its checkpoint: nothing is left."""
        plan = _plan(MINI, tmp_path)
        asyncio.run(run_life(tmp_path, plan, "sync", guarded=False))
        before = read_ledger(tmp_path / "world.db")
        asyncio.run(run_life(tmp_path, plan, "sync", guarded=False))
        assert read_ledger(tmp_path / "world.db") == before


class TestImports:
    def test_the_fork_server_preloads_langgraph_and_nothing_foreign(self) -> None:
        """Preloading the agent program (what the fork server does before forking lives)
        imports LangGraph and its checkpointer, so no life pays for it; and neither the
        harness's own upper layers nor the other frameworks come with it."""
        probe = (
            "import sys; from harness.chaos.forkserver import preload; "
            "before = set(sys.modules); preload('harness.adapters.langgraph_agent'); "
            "print(sorted(m for m in set(sys.modules) - before if m in ("
            "'langgraph.graph', 'langgraph.prebuilt', 'langgraph.checkpoint.sqlite.aio', "
            "'langchain_core.language_models') or m.split('.')[0] in ("
            "'dbos', 'pydantic_ai', 'faker', 'hypothesis', 'multiprocess', 'mcp') or "
            "m.startswith(('harness.check', 'harness.report', 'harness.commands'))))"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
        )
        assert done.stdout.strip() == str(
            [
                "langchain_core.language_models",
                "langgraph.checkpoint.sqlite.aio",
                "langgraph.graph",
                "langgraph.prebuilt",
            ]
        )
