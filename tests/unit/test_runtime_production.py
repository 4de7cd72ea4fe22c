"""The runtime as a library in production: no harness variable obeyed, every outcome journaled.

The runtime reads no variable of its environment (the harness arms its
failpoints itself, ``harness.failpoints``); arguments and results must be JSON (and what
is not is refused or journaled as what it is); a tool that raises something
other than ``ToolError`` leaves a journaled unknown outcome, never a silent
RUNNING op; a VERIFY is closed with a ``Resolution``, which later calls
answer from; ``CallContext.idempotency_key`` is stable across attempts,
restarts and redoes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.failpoints import FAILPOINTS_ENV, arm_from_environ
from harness.runtime import (
    CallContext,
    Decision,
    FailpointTriggered,
    Resolution,
    Runtime,
    ToolError,
    TransientToolError,
)
from harness.runtime.executor import NOT_JSON
from harness.runtime.records import FinishRecord
from tests.conftest import FakeTool, journal_records, open_runtime

ARGS = {"to": "a@b.c"}


def _finishes(path: Path) -> list[FinishRecord]:
    return [r for r in journal_records(path) if isinstance(r, FinishRecord)]


class TestFailpointsArmOnlyWhenAsked:
    def test_open_ignores_the_harness_variable(
        self, journal_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A production process with HARNESS_FAILPOINTS set is not made to raise by it."""
        monkeypatch.setenv(FAILPOINTS_ENV, "op.after_intent=raise")
        with Runtime.open(journal_path) as runtime:
            outcome = runtime.call("op-1", "read_file", ARGS, FakeTool())
        assert outcome.ok

    def test_the_harness_arms_them_itself(
        self, journal_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Armed by the harness (as its agent does before opening), the variable's failpoints
        fire at the runtime's crash points."""
        monkeypatch.setenv(FAILPOINTS_ENV, "op.after_intent=raise")
        arm_from_environ()
        with Runtime.open(journal_path) as runtime, pytest.raises(FailpointTriggered):
            runtime.call("op-1", "read_file", ARGS, FakeTool())


class TestJsonOnly:
    def test_arguments_that_are_not_json_are_refused_before_anything(
        self, journal_path: Path
    ) -> None:
        """Arguments json cannot encode: ValueError, nothing journaled, the tool never ran."""
        tool = FakeTool()
        with open_runtime(journal_path) as runtime, pytest.raises(ValueError, match="not JSON"):
            runtime.call("op-1", "send_email", {"when": object()}, tool)
        assert tool.count("op-1") == 0
        assert not [r for r in journal_records(journal_path) if getattr(r, "op_id", None)]

    def test_a_result_that_is_not_json_is_journaled_as_what_it_is(self, journal_path: Path) -> None:
        """A tool returning a set succeeds; its result is journaled as its type and repr."""

        def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            return {1, 2}

        with open_runtime(journal_path) as runtime:
            outcome = runtime.call("op-1", "read_file", ARGS, tool)
        expected = {NOT_JSON: "set", "repr": "{1, 2}"}
        assert (outcome.status, outcome.result) == ("ok", expected)
        [finish] = _finishes(journal_path)
        assert (finish.succeeded, finish.result) == (True, expected)
        with open_runtime(journal_path) as runtime:
            assert runtime.call("op-1", "read_file", ARGS, tool).result == expected


class TestOtherExceptions:
    def test_a_bug_in_the_tool_is_journaled_and_raised(self, journal_path: Path) -> None:
        """A KeyError from the dispatcher: raised on, journaled unknown, then answered info+hint."""
        tool = FakeTool({"op-1": [KeyError("no such tool")]})
        with open_runtime(journal_path) as runtime:
            with pytest.raises(KeyError):
                runtime.call("op-1", "send_email", ARGS, tool)
            again = runtime.call("op-1", "send_email", ARGS, tool)
        assert tool.count("op-1") == 1
        [finish] = _finishes(journal_path)
        assert finish.unknown and finish.error == "KeyError: 'no such tool'"
        assert again.status == "info" and again.hint is not None and "op-1" in again.hint

    @pytest.mark.parametrize(
        ("tool_name", "decision"), [("read_file", Decision.RETRY), ("ui_tap", Decision.VERIFY)]
    )
    def test_after_a_restart_recovery_decides_it_by_its_class(
        self, journal_path: Path, tool_name: str, decision: Decision
    ) -> None:
        """The op of unknown outcome is RUNNING at the next start: RETRY if safe, else VERIFY."""
        tool = FakeTool({"op-1": [RuntimeError("bug")]})
        with open_runtime(journal_path) as runtime, pytest.raises(RuntimeError):
            runtime.call("op-1", tool_name, ARGS, tool)
        with open_runtime(journal_path) as runtime:
            [planned] = runtime.plan()
        assert planned.decision is decision

    def test_tool_errors_keep_their_meaning(self, journal_path: Path) -> None:
        """ToolError still fails the op, a transient one of a safe class is still retried."""
        tool = FakeTool({"op-1": [ToolError("denied")], "op-2": [TransientToolError("later")]})
        with open_runtime(journal_path) as runtime:
            assert runtime.call("op-1", "ui_tap", ARGS, tool).status == "fail"
            assert runtime.call("op-2", "read_file", ARGS, tool).ok
        assert not any(f.unknown for f in _finishes(journal_path))


def _crash_after_intent(journal_path: Path, op_id: str, tool_name: str) -> None:
    with open_runtime(journal_path) as runtime, pytest.raises(RuntimeError):
        runtime.call(op_id, tool_name, ARGS, FakeTool({op_id: [RuntimeError("crash")]}))


class TestResolutions:
    def test_effect_present_answers_ok_ever_after(self, journal_path: Path) -> None:
        """After EFFECT_PRESENT the op answers ok with its resolution, in this life and later."""
        _crash_after_intent(journal_path, "op-1", "ui_tap")
        tool = FakeTool()
        with open_runtime(journal_path) as runtime:
            runtime.recover(tool)
            runtime.resolve("op-1", Resolution.EFFECT_PRESENT, note="the tap is in the log")
            now = runtime.call("op-1", "ui_tap", ARGS, tool)
        with open_runtime(journal_path) as runtime:
            later = runtime.call("op-1", "ui_tap", ARGS, tool)
        for outcome in (now, later):
            assert (outcome.status, outcome.resolution, outcome.executed) == (
                "ok",
                Resolution.EFFECT_PRESENT,
                False,
            )
        assert tool.count("op-1") == 0

    def test_redone_answers_with_the_redo(self, journal_path: Path) -> None:
        """After REDONE the op answers with its redo's outcome, after a restart too."""
        _crash_after_intent(journal_path, "op-1", "ui_tap")
        tool = FakeTool({"op-1.redo": [ToolError("the form is gone")]})
        with open_runtime(journal_path) as runtime:
            runtime.recover(tool)
            runtime.call("op-1.redo", "ui_tap", ARGS, tool, redo_of="op-1")
            runtime.resolve("op-1", Resolution.REDONE, redo_op="op-1.redo")
        with open_runtime(journal_path) as runtime:
            outcome = runtime.call("op-1", "ui_tap", ARGS, tool)
        assert (outcome.status, outcome.error, outcome.resolution) == (
            "fail",
            "ToolError: the form is gone",
            Resolution.REDONE,
        )

    def test_unverifiable_answers_info_without_a_hint(self, journal_path: Path) -> None:
        """After UNVERIFIABLE the op answers info, its resolution said, no hint any more."""
        _crash_after_intent(journal_path, "op-1", "shell_execute")
        with open_runtime(journal_path) as runtime:
            runtime.recover(FakeTool())
            runtime.resolve("op-1", Resolution.UNVERIFIABLE)
            outcome = runtime.call("op-1", "shell_execute", ARGS, FakeTool())
        assert (outcome.status, outcome.hint, outcome.resolution) == (
            "info",
            None,
            Resolution.UNVERIFIABLE,
        )

    @pytest.mark.parametrize(
        ("resolution", "redo_op"),
        [(Resolution.REDONE, None), (Resolution.EFFECT_PRESENT, "op-1.redo")],
    )
    def test_a_redo_op_goes_with_redone_only(
        self, journal_path: Path, resolution: Resolution, redo_op: str | None
    ) -> None:
        """REDONE without a redo op, or a redo op with anything else, is refused."""
        _crash_after_intent(journal_path, "op-1", "ui_tap")
        with open_runtime(journal_path) as runtime, pytest.raises(ValueError, match="REDONE"):
            runtime.resolve("op-1", resolution, redo_op=redo_op)

    def test_a_resolution_is_one_of_three(self, journal_path: Path) -> None:
        """A free string that is not a resolution's value is refused."""
        _crash_after_intent(journal_path, "op-1", "ui_tap")
        with open_runtime(journal_path) as runtime, pytest.raises(ValueError):
            runtime.resolve("op-1", "looks fine to me")  # type: ignore[arg-type]


class TestIdempotencyKey:
    def test_stable_across_attempts_restarts_and_redoes(self, journal_path: Path) -> None:
        """Every attempt, every life and the redo of an op hand the tool the same key."""
        keys: list[tuple[str, int, str]] = []

        def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            keys.append((ctx.op_id, ctx.attempt, ctx.idempotency_key))
            if ctx.op_id == "op-1" and ctx.attempt == 1:
                raise TransientToolError("timeout")
            if ctx.op_id == "op-2" and ctx.attempt == 1:
                raise RuntimeError("crash")
            return {}

        with open_runtime(journal_path) as runtime:
            runtime.call("op-1", "read_file", ARGS, tool)
            with pytest.raises(RuntimeError):
                runtime.call("op-2", "read_file", ARGS, tool)
        with open_runtime(journal_path) as runtime:
            runtime.recover(tool)  # op-2 is retried: attempt 2, in a new life
            runtime.call("op-3", "ui_tap", ARGS, tool)
        with open_runtime(journal_path) as runtime:
            runtime.call("op-3.redo", "ui_tap", ARGS, tool, redo_of="op-3")
            runtime.call("op-3.redo.redo", "ui_tap", ARGS, tool, redo_of="op-3.redo")
        by_op: dict[str, set[str]] = {}
        for op_id, _, key in keys:
            by_op.setdefault(op_id.split(".", 1)[0], set()).add(key)
        assert [op for op, _, _ in keys] == [
            "op-1",
            "op-1",
            "op-2",
            "op-2",
            "op-3",
            "op-3.redo",
            "op-3.redo.redo",
        ]
        assert all(len(found) == 1 for found in by_op.values()), by_op
        assert len({next(iter(found)) for found in by_op.values()}) == 3
