"""The mcp adapter's wire: a call's context and a tool's error, there and back again."""

from __future__ import annotations

import pytest

from harness.adapters.mcp_wire import (
    CALL_META_KEY,
    ERROR_CLASSES,
    ToolServerError,
    call_meta,
    context_of,
    error_payload,
    raise_error,
)
from harness.runtime import CallContext, ToolError, TransientToolError
from harness.runtime.errors import FailpointTriggered, HarnessError


class TestCallContext:
    @pytest.mark.parametrize(
        "ctx",
        [CallContext("s003", "ui_tap", 2, 5), CallContext("s003.redo", "ui_tap", 1, 6, "s003")],
    )
    def test_a_context_crosses_the_wire_whole(self, ctx: CallContext) -> None:
        """Op id, attempt, incarnation and the op of the idempotency key come back as sent."""
        back = context_of(ctx.tool, call_meta(ctx))
        assert back == ctx
        assert back.idempotency_key == ctx.idempotency_key

    @pytest.mark.parametrize("meta", [None, {}, {CALL_META_KEY: {"op_id": "s001"}}])
    def test_a_request_without_its_context_is_a_tool_error(self, meta: object) -> None:
        """A call that does not say which op it is fails at the gate, before any effect."""
        with pytest.raises(ToolError, match=CALL_META_KEY):
            context_of("ui_tap", meta)  # type: ignore[arg-type]


class TestErrors:
    @pytest.mark.parametrize(
        "error", [ToolError("bad"), TransientToolError("timed out"), FailpointTriggered("fired")]
    )
    def test_an_error_is_raised_again_as_its_own_class(self, error: HarnessError) -> None:
        """The agent raises the class the server caught, with its message: the runtime's
        retry and unknown-outcome rules see the same error as with tools in-process."""
        with pytest.raises(type(error)) as raised:
            raise_error("ui_tap", error_payload(error))
        assert type(raised.value) is type(error)
        assert str(raised.value) == str(error)

    @pytest.mark.parametrize("payload", [None, {}, {"error": "KeyError", "message": "x"}])
    def test_an_unnamed_error_is_the_servers_failure(self, payload: object) -> None:
        """An error result that names no tool error is not a tool's answer: outcome unknown."""
        with pytest.raises(ToolServerError):
            raise_error("ui_tap", payload)
        assert not issubclass(ToolServerError, ToolError)

    def test_the_classes_that_cross(self) -> None:
        """Exactly the errors a simulated tool call can end in cross the wire."""
        assert set(ERROR_CLASSES) == {"ToolError", "TransientToolError", "FailpointTriggered"}
