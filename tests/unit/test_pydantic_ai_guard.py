"""The Pydantic AI guard in-process: a real ``Agent`` with a scripted ``FunctionModel``,
its toolset wrapped by ``GuardedToolset``, one ``asyncio.run`` per process life."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.exceptions import ModelRetry, ToolFailed, UserError
from pydantic_ai.messages import ModelMessage, RetryPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from harness.integrations.guard import VERIFY_TOOL, VERIFY_TOOL_DOC
from harness.integrations.pydantic_ai import GuardedToolset, current_call, hinted_op
from harness.runtime import ToolClass, ToolTable
from harness.runtime.journal import JournalWriter
from harness.runtime.records import (
    FinishRecord,
    IncarnationRecord,
    IntentRecord,
    RecoveredRecord,
    digest,
)
from tests.conftest import IW, NI, RO, journal_records

TABLE = ToolTable({"tap": ToolClass(NI), "put": ToolClass(IW), "read": ToolClass(RO)})
TAP = {"element": "pay"}

Turn = Sequence[tuple[str, str, dict[str, Any]]]
"""One model response: (tool_call_id, tool, args) for each call, or none for the end."""


@dataclass
class World:
    """The tools' ground truth: every real execution, with the guard's call context."""

    ran: list[tuple[str, str, int]] = field(default_factory=list)
    fail: dict[str, BaseException] = field(default_factory=dict)

    def toolset(self) -> FunctionToolset[None]:
        def tap(element: str) -> dict[str, str]:
            """Tap a UI element (not idempotent)."""
            return self._run("tap", element)

        def read(element: str) -> dict[str, str]:
            """Read a UI element."""
            return self._run("read", element)

        return FunctionToolset([tap, read])

    def _run(self, tool: str, element: str) -> dict[str, str]:
        call = current_call()
        assert call is not None, "a guarded tool runs inside a guarded call"
        self.ran.append((call.op_id, tool, call.attempt))
        failure = self.fail.get(call.op_id)
        if failure is not None:
            raise failure
        return {"tool": tool, "element": element, "key": call.idempotency_key}

    def count(self, op_id: str) -> int:
        return sum(1 for op, _, _ in self.ran if op == op_id)


@dataclass
class Script:
    """A scripted model: the turns it plays, in order, and what it read before each."""

    turns: list[Turn]
    read: list[list[Any]] = field(default_factory=list)
    tools: list[list[str]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        self.read.append([p for p in last.parts if isinstance(p, ToolReturnPart | RetryPromptPart)])
        self.tools.append([t.name for t in info.function_tools])
        played = sum(isinstance(m, ModelResponse) for m in messages)
        if played < len(self.turns):
            turn = self.turns[played]
            return ModelResponse(parts=[ToolCallPart(t, a, tool_call_id=i) for i, t, a in turn])
        return ModelResponse(parts=[TextPart("done")])


def life(journal: Path, world: World, turns: list[Turn], **options: Any) -> Script:
    """One process life: a guarded agent runs the script to its end; the journal is closed."""
    script = Script(turns)

    async def run() -> None:
        guarded = GuardedToolset(world.toolset(), journal, table=TABLE, **options)
        try:
            result = await Agent(FunctionModel(script), toolsets=[guarded]).run("go")
        finally:
            await guarded.aclose()
        assert result.output == "done"

    asyncio.run(run())
    return script


def left_running(journal: Path, op_id: str, tool: str, args: dict[str, Any]) -> None:
    """A journal whose life died with ``op_id`` in flight (its intent durable, no finish)."""
    intent = IntentRecord(op_id, tool, TABLE.classify(tool), args, digest(args), 1, 1)
    with JournalWriter(journal) as writer:
        writer.append_many([IncarnationRecord(1, 1), RecoveredRecord(1, 0), intent])


def texts(parts: list[Any]) -> list[str]:
    return [str(p.content) for p in parts]


class TestGuardedCalls:
    def test_a_call_runs_once_and_a_later_life_reads_it_from_the_journal(
        self, journal_path: Path
    ) -> None:
        """The same tool_call_id in the next life runs nothing; the model reads the same text."""
        world = World()
        first = life(journal_path, world, [[("call-1", "tap", TAP)]])
        again = life(journal_path, world, [[("call-1", "tap", TAP)]])
        assert world.ran == [("call-1", "tap", 1)]
        assert texts(first.read[1]) == texts(again.read[1])
        assert json.loads(texts(first.read[1])[0])["tool"] == "tap"

    def test_the_model_is_offered_report_verification(self, journal_path: Path) -> None:
        """The guard adds its tool beside the user's, described as VERIFY_TOOL_DOC."""
        world = World()
        script = life(journal_path, world, [])
        assert script.tools[0] == ["tap", "read", VERIFY_TOOL]

        async def listed() -> str | None:
            guarded = GuardedToolset(world.toolset(), journal_path, table=TABLE)
            defs: dict[str, Any] = {}

            def peek(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
                defs.update({t.name: t for t in info.function_tools})
                return ModelResponse(parts=[TextPart("done")])

            await Agent(FunctionModel(peek), toolsets=[guarded]).run("go")
            await guarded.aclose()
            schema = defs[VERIFY_TOOL].parameters_json_schema
            assert set(schema["properties"]) == {"op_id", "found"}
            return str(defs[VERIFY_TOOL].description)

        assert asyncio.run(listed()) == VERIFY_TOOL_DOC

    def test_a_toolset_with_its_own_report_verification_is_refused(
        self, journal_path: Path
    ) -> None:
        """Two tools of one name would hide one from the model: a UserError."""

        def report_verification(op_id: str) -> str:
            return op_id

        async def run() -> None:
            guarded = GuardedToolset(FunctionToolset([report_verification]), journal_path)
            try:
                await Agent(FunctionModel(Script([])), toolsets=[guarded]).run("go")
            finally:
                await guarded.aclose()

        with pytest.raises(UserError, match="a tool of its own named 'report_verification'"):
            asyncio.run(run())

    def test_a_tool_failure_is_a_failed_return_and_stays_failed(self, journal_path: Path) -> None:
        """ToolFailed is journaled FAILED; the model reads a failed return, now and in the
        next life, and the tool is not run again."""
        world = World(fail={"call-1": ToolFailed("no such button")})
        turns: list[Turn] = [[("call-1", "tap", TAP)]]
        first = life(journal_path, world, turns)
        again = life(journal_path, world, turns)
        for script in (first, again):
            (part,) = script.read[1]
            assert isinstance(part, ToolReturnPart) and part.outcome == "failed"
            assert part.content == "error: ToolError: no such button"
        assert world.count("call-1") == 1

    def test_a_model_retry_reaches_the_model_as_a_retry(self, journal_path: Path) -> None:
        """A tool's own ModelRetry comes back as one (the model may fix its call), journaled
        failed; the model's fixed call is a new op."""
        world = World(fail={"call-1": ModelRetry("element must be visible")})
        script = life(journal_path, world, [[("call-1", "tap", TAP)], [("call-2", "tap", TAP)]])
        (retry,) = script.read[1]
        assert "element must be visible" in str(retry.content)
        assert not (isinstance(retry, ToolReturnPart) and retry.outcome == "failed")
        assert [op for op, _, _ in world.ran] == ["call-1", "call-2"]
        finishes = [r for r in journal_records(journal_path) if isinstance(r, FinishRecord)]
        assert [(f.op_id, f.succeeded) for f in finishes] == [("call-1", False), ("call-2", True)]

    def test_a_tool_sees_its_call_s_op_id_and_key(self, journal_path: Path) -> None:
        """current_call() inside the tool is the guarded call: the framework's id, attempt 1,
        the idempotency key of that id."""
        world = World()
        script = life(journal_path, world, [[("call-7", "read", TAP)]])
        (part,) = script.read[1]
        from harness.runtime.steps import idempotency_key

        with JournalWriter(journal_path) as writer:
            journal_id = writer.journal_id
        assert json.loads(str(part.content))["key"] == idempotency_key(journal_id, "call-7")
        assert current_call() is None


class TestRestarts:
    def test_a_safe_call_in_flight_is_retried_before_the_model_runs(
        self, journal_path: Path
    ) -> None:
        """A read left running is retried under its id at the first listing of tools; the
        replayed call is then answered from the journal."""
        left_running(journal_path, "s003", "read", TAP)
        world = World()

        def first_turn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            seen.append(list(world.ran))
            return script(messages, info)

        seen: list[list[tuple[str, str, int]]] = []
        script = Script([[("s003", "read", TAP)]])

        async def run() -> None:
            guarded = GuardedToolset(world.toolset(), journal_path, table=TABLE)
            await Agent(FunctionModel(first_turn), toolsets=[guarded]).run("go")
            await guarded.aclose()

        asyncio.run(run())
        assert seen[0] == [("s003", "read", 2)]  # retried before the model's first request
        assert world.ran == [("s003", "read", 2)]

    def test_an_unsafe_call_in_flight_answers_with_its_hint(self, journal_path: Path) -> None:
        """Asked again after the restart, a tap left running is not run: its return is the
        VERIFY hint, naming the op to report on."""
        left_running(journal_path, "s003", "tap", TAP)
        world = World()
        script = life(journal_path, world, [[("s003", "tap", TAP)]])
        (part,) = script.read[1]
        assert isinstance(part, ToolReturnPart) and part.outcome == "success"
        assert "may already have run" in str(part.content)
        assert hinted_op(str(part.content)) == "s003"
        assert world.ran == []

    @pytest.mark.parametrize(("found", "redone"), [("present", 0), ("absent", 1), ("unknown", 0)])
    def test_the_model_s_report_settles_it(
        self, journal_path: Path, found: str, redone: int
    ) -> None:
        """After its check the model reports: absent redoes the tap once as s003.redo, the
        others run nothing; a later life replaying every call runs nothing more."""
        left_running(journal_path, "s003", "tap", TAP)
        world = World()
        turns: list[Turn] = [
            [("s003", "tap", TAP)],
            [("s003.check", "read", TAP)],
            [("s003.report", VERIFY_TOOL, {"op_id": "s003", "found": found})],
        ]
        first = life(journal_path, world, turns)
        assert [op for op, _, _ in world.ran] == ["s003.check"] + ["s003.redo"] * redone
        (reply,) = first.read[3]
        if found == "absent":
            assert json.loads(str(reply.content))["tool"] == "tap"
        else:
            assert str(reply.content) == f"recorded: s003 is {found}; it is not run again"
        replayed = life(journal_path, world, turns)
        assert texts(replayed.read[3]) == texts(first.read[3])
        assert [op for op, _, _ in world.ran] == ["s003.check"] + ["s003.redo"] * redone

    def test_a_report_on_an_op_nobody_asked_about_is_a_retry(self, journal_path: Path) -> None:
        """A report naming an op the journal does not hold asks the model to try again."""
        world = World()
        script = life(
            journal_path, world, [[("r1", VERIFY_TOOL, {"op_id": "nope", "found": "present"})]]
        )
        (retry,) = script.read[1]
        assert "no operation 'nope' is known" in str(retry.content)


class TestCopies:
    def test_copies_share_one_journal(self, journal_path: Path) -> None:
        """Pydantic AI copies toolsets (visit_and_replace): the copies use one guard, and
        closing the original closes it."""
        world = World()
        guarded = GuardedToolset(world.toolset(), journal_path, table=TABLE)
        copy = guarded.visit_and_replace(lambda toolset: toolset)
        assert isinstance(copy, GuardedToolset) and copy is not guarded

        async def run() -> None:
            await Agent(FunctionModel(Script([[("c1", "read", TAP)]])), toolsets=[copy]).run("go")
            assert guarded.shared.guard is not None
            await guarded.aclose()
            assert copy.shared.guard is None

        asyncio.run(run())
        assert world.ran == [("c1", "read", 1)]
