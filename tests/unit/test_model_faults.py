"""Faults of the model's answer (``model.before_reply@N=<action>``): their spec, their shape
on the wire (real HTTP on 127.0.0.1), and where campaigns draw them."""

from __future__ import annotations

import http.client
import json
import random
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from harness.agent.plan import Plan, PlanStep
from harness.blackbox.host import BlackBoxServer
from harness.blackbox.model import ModelEndpoint
from harness.blackbox.tools import ToolEndpoint
from harness.chaos.schedule import (
    MODEL_ANSWER_FAULTS,
    CrashSchedule,
    Life,
    black_box_schedules,
    random_schedule,
)
from harness.errors import FailpointSpecError
from harness.failpoint_spec import MODEL_WIRE_FAULTS
from harness.failpoints import arm, disarm, failpoint, parse_failpoints
from harness.runtime.classes import ToolTable
from harness.world.store import WorldStore

TAP = PlanStep(1, "s001", "ui_tap", {"element": "ok_button", "note": "a long enough note"})
PLAN = Plan("mini", 1, "mini.toml", (TAP,))
USER = {"role": "user", "content": "go"}


@pytest.fixture
def base(tmp_path: Path) -> Iterator[str]:
    """The model and tools of one life, on a free port, as a black box's host serves them."""
    with WorldStore.open(tmp_path / "world.db") as world:
        tools = ToolEndpoint(
            PLAN, world, tmp_path / "tools.jsonl", failpoint, [], ToolTable.shipped()
        )
        told: list[str] = []
        model = ModelEndpoint(PLAN, tmp_path / "model.jsonl", told.append, failpoint)
        server = BlackBoxServer(model, tools)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield server.base
        finally:
            server.shutdown()
            server.server_close()


def ask(base: str, path: str, body: dict[str, Any], fault: str) -> http.client.HTTPResponse:
    """One request with ``fault`` armed at the first answer: the response, headers read."""
    arm(parse_failpoints(f"model.before_reply@1={fault}"))
    try:
        request = urllib.request.Request(
            base + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        response: http.client.HTTPResponse = urllib.request.urlopen(request, timeout=30)
        return response
    finally:
        disarm()


class TestSpec:
    def test_each_action_is_a_fault_kind_of_the_catalogue(self) -> None:
        from harness.chaos.faults import FAULT_KINDS

        assert set(MODEL_WIRE_FAULTS) == set(MODEL_ANSWER_FAULTS)
        assert set(MODEL_WIRE_FAULTS.values()) <= set(FAULT_KINDS)

    @pytest.mark.parametrize(
        ("spec", "said"),
        [
            ("op.reply@1=server-error", "armed at model.before_reply only"),
            ("model.received@2=lost-answer", "armed at model.before_reply only"),
            ("model.before_reply@2=stream-cut(5)", "stream-cut takes no argument"),
        ],
    )
    def test_a_fault_of_the_answer_elsewhere_is_refused(self, spec: str, said: str) -> None:
        with pytest.raises(FailpointSpecError, match=said):
            parse_failpoints(spec)

    def test_they_apply_to_black_boxes_only(self) -> None:
        """The harness's own agent has no model on the wire: its campaigns list them as not
        applicable (and draw none); a ``cmd:`` runtime's do."""
        from harness.adapters import get_adapter
        from harness.chaos.schedule import not_applicable

        for kind in MODEL_WIRE_FAULTS.values():
            assert "asks no model over HTTP" in str(not_applicable(kind, get_adapter("real")))
            assert not_applicable(kind, get_adapter("cmd:python agent.py")) is None

    def test_a_schedule_names_its_kind(self) -> None:
        life = Life("model.before_reply@3=rate-limit(200)")
        assert CrashSchedule((life,)).fault_kinds == {"model-rate-limit"}


class TestOnTheWire:
    def test_a_rate_limit_is_a_429_that_says_when_to_come_back(self, base: str) -> None:
        with pytest.raises(urllib.error.HTTPError) as raised:
            ask(base, "/v1/chat/completions", {"messages": [USER]}, "rate-limit(1500)")
        assert raised.value.code == 429
        assert raised.value.headers["retry-after"] == "2"
        assert raised.value.headers["retry-after-ms"] == "1500"
        assert json.loads(raised.value.read())["error"]["type"] == "requests"

    def test_an_overload_is_anthropic_s_529_on_messages_and_a_503_on_chat(self, base: str) -> None:
        with pytest.raises(urllib.error.HTTPError) as raised:
            ask(base, "/v1/messages", {"messages": [USER], "max_tokens": 9}, "overloaded")
        assert raised.value.code == 529
        body = json.loads(raised.value.read())
        assert body == {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
        }
        with pytest.raises(urllib.error.HTTPError) as raised:
            ask(base, "/v1/chat/completions", {"messages": [USER]}, "overloaded")
        assert raised.value.code == 503

    def test_a_server_error_is_a_500(self, base: str) -> None:
        with pytest.raises(urllib.error.HTTPError) as raised:
            ask(base, "/v1/responses", {"input": [USER]}, "server-error")
        assert raised.value.code == 500

    def test_a_cut_json_answer_ends_inside_the_call_s_arguments(self, base: str) -> None:
        response = ask(base, "/v1/chat/completions", {"messages": [USER]}, "stream-cut")
        with pytest.raises(http.client.IncompleteRead) as raised:
            response.read()
        partial = raised.value.partial.decode()
        assert partial.endswith(partial[partial.index('"arguments"') :])
        assert '"arguments": "{\\"element\\"' in partial and '"finish_reason"' not in partial

    def test_a_cut_chat_stream_leaves_half_the_arguments_and_no_end(self, base: str) -> None:
        response = ask(
            base, "/v1/chat/completions", {"messages": [USER], "stream": True}, "stream-cut"
        )
        events = [line for line in response.read().decode().split("\n\n") if line]
        assert "[DONE]" not in events[-1]
        (call,) = json.loads(events[-1].removeprefix("data: "))["choices"][0]["delta"]["tool_calls"]
        arguments = call["function"]["arguments"]
        assert json.dumps(dict(TAP.args)).startswith(arguments) and arguments
        with pytest.raises(ValueError):
            json.loads(arguments)

    def test_a_cut_messages_stream_stops_inside_the_partial_json(self, base: str) -> None:
        body = {"messages": [USER], "max_tokens": 9, "stream": True}
        response = ask(base, "/v1/messages", body, "stream-cut")
        events = [line for line in response.read().decode().split("\n\n") if line]
        kind, data = events[-1].split("\n")
        assert kind == "event: content_block_delta"
        partial = json.loads(data.removeprefix("data: "))["delta"]["partial_json"]
        assert json.dumps(dict(TAP.args)).startswith(partial)
        assert not any("message_stop" in event for event in events)

    def test_a_hung_answer_sends_its_headers_then_nothing_then_closes(self, base: str) -> None:
        response = ask(base, "/v1/chat/completions", {"messages": [USER]}, "stream-hang(200)")
        assert response.status == 200
        with pytest.raises(http.client.IncompleteRead) as raised:
            response.read()
        assert raised.value.partial == b""

    def test_a_lost_answer_closes_the_connection_before_any_byte(self, base: str) -> None:
        with pytest.raises(http.client.RemoteDisconnected):
            ask(base, "/v1/chat/completions", {"messages": [USER]}, "lost-answer")


class TestDrawn:
    HITS: ClassVar[dict[str, int]] = {"model.before_reply": 5, "model.received": 5, "op.reply": 4}

    @staticmethod
    def op_at(name: str, hit: int) -> str | None:
        return f"s00{hit}" if name == "model.before_reply" and hit < 5 else None

    def test_a_black_box_meets_each_once_at_a_middle_answer(self) -> None:
        listed = dict(black_box_schedules(self.HITS, self.op_at))
        drawn = {
            label: s for label, s in listed.items() if label.startswith("model.before_reply@3+")
        }
        assert sorted(drawn) == sorted(f"model.before_reply@3+{a}" for a in MODEL_ANSWER_FAULTS)
        assert drawn["model.before_reply@3+stream-hang"] == CrashSchedule(
            (Life("model.before_reply@3=stream-hang(2000)"),)
        )
        assert len(listed) == len(dict(black_box_schedules(self.HITS))) + len(drawn)

    def test_random_trials_draw_them_only_for_a_black_box(self) -> None:
        def kinds(answers: tuple[int, ...]) -> set[str]:
            rng = random.Random(11)
            schedules = [
                random_schedule(rng, 50.0, journal=False, hits=self.HITS, answers=answers)
                for _ in range(120)
            ]
            return {kind for s in schedules for kind in s.fault_kinds}

        assert set(MODEL_WIRE_FAULTS.values()) <= kinds((1, 2, 3, 4))
        assert not kinds(()) & set(MODEL_WIRE_FAULTS.values())
