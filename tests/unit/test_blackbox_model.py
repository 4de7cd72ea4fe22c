"""The black box's model and tools over real HTTP on 127.0.0.1 (``harness.blackbox``)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.agent.plan import Plan, PlanStep, Verification
from harness.blackbox.handed import BRIDGE
from harness.blackbox.host import BlackBoxServer
from harness.blackbox.model import (
    VERIFY_TOOL,
    Answer,
    Item,
    ModelEndpoint,
    call_id,
    classify,
    decide,
    offered_name,
)
from harness.blackbox.tools import ToolEndpoint
from harness.blackbox.windows import black_box_window, is_black_box_trial
from harness.failpoints import arm, disarm, parse_failpoints
from harness.integrations.guard import hint_message
from harness.runtime import VerifyHint
from harness.runtime.classes import ToolTable, class_from_annotations
from harness.runtime.matrix import verify_hint
from harness.world.store import WorldStore, read_ledger, result_digest

TAP = PlanStep(
    1,
    "s001",
    "ui_tap",
    {"element": "ok_button"},
    Verification("ui_dump", {}, "taps", contains="ok_button"),
)
TYPE = PlanStep(2, "s002", "input_text", {"field": "title", "text": "milk"})
PLAN = Plan("mini", 1, "mini.toml", (TAP, TYPE))


@dataclass
class Served:
    base: str
    told: list[str]
    hits: list[tuple[str, str]]
    record: Path
    tools_record: Path
    world: Path

    def post(self, path: str, body: object) -> Any:
        return json.loads(self.raw(path, body))

    def raw(self, path: str, body: object) -> bytes:
        request = urllib.request.Request(
            self.base + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            data: bytes = response.read()
        return data

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    told: list[str] = []
    hits: list[tuple[str, str]] = []
    record, tools_record = tmp_path / "model.jsonl", tmp_path / "tools.jsonl"
    with WorldStore.open(tmp_path / "world.db") as world:

        def hit(name: str, detail: str) -> None:
            from harness.failpoints import failpoint

            hits.append((name, detail))
            failpoint(name, detail)

        tools = ToolEndpoint(PLAN, world, tools_record, hit, [], ToolTable.shipped())
        model = ModelEndpoint(PLAN, record, told.append, hit, tools.note_issued)
        server = BlackBoxServer(model, tools)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield Served(server.base, told, hits, record, tools_record, tmp_path / "world.db")
        finally:
            server.shutdown()
            server.server_close()


def chat(served: Served, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    reply = served.post("/v1/chat/completions", {"model": "m", "messages": messages, **extra})
    message: dict[str, Any] = reply["choices"][0]["message"]
    return message


def result_of(call: dict[str, Any], text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call["id"], "content": text}


USER = {"role": "user", "content": "go"}


def test_chat_asks_the_plan_calls_in_order_and_tells_what_it_was_shown(served: Served) -> None:
    first = chat(served, [USER])
    (call,) = first["tool_calls"]
    assert call["id"] == call_id("s001", 0, 0)
    assert call["function"]["name"] == "ui_tap"
    assert json.loads(call["function"]["arguments"]) == {"element": "ok_button"}
    assert served.told == ["invoke s001"]
    result = {"tapped": "ok_button"}
    conversation = [USER, first, result_of(call, json.dumps(result))]
    second = chat(served, conversation)
    assert second["tool_calls"][0]["function"]["name"] == "input_text"
    assert served.told[1:] == [f"ack s001 {result_digest(result)}", "invoke s002"]
    last = second["tool_calls"][0]
    done = chat(served, [*conversation, second, result_of(last, '{"ok": true}')])
    assert "tool_calls" not in done and done["content"].startswith("Done: 2 steps")
    shown = [[s["shown"] for s in line["shown"]] for line in served.records()]
    assert shown == [[], ["ok"], ["ok", "ok"]]
    assert served.records()[-1]["final"] == done["content"]


def test_a_call_names_its_tool_as_the_request_offers_it(served: Served) -> None:
    """A framework that offers an MCP server's tools under a prefix (CrewAI's ``mcps=``:
    ``<server>_ui_tap``) is asked for them by that name, as a real model would; the record
    and the tool server keep the plan's name."""
    offered = [
        {"type": "function", "function": {"name": f"mcp_127_0_0_1:8_mcp_{t}", "parameters": {}}}
        for t in ("ui_tap", "input_text", "ui_dump")
    ]
    (call,) = chat(served, [USER], tools=offered)["tool_calls"]
    assert call["function"]["name"] == "mcp_127_0_0_1:8_mcp_ui_tap"
    assert served.records()[-1]["calls"][0]["tool"] == "ui_tap"
    (plain,) = chat(served, [USER], tools=[{"type": "function", "name": "ui_tap"}])["tool_calls"]
    assert plain["function"]["name"] == "ui_tap"
    assert offered_name("ui_tap", ["a_ui_tap", "b_ui_tap"]) == "ui_tap"  # not one: as planned
    assert offered_name("ui_tap", ["xui_tap"]) == "ui_tap"
    assert offered_name("ui_tap", []) == "ui_tap"


def test_the_same_conversation_gets_the_same_answer(served: Served) -> None:
    """It keeps no memory: asked twice, it answers twice alike (and tells once), but for
    the ids, which a real model never gives twice."""
    first, second = chat(served, [USER]), chat(served, [USER])
    ids = [first["tool_calls"][0].pop("id"), second["tool_calls"][0].pop("id")]
    assert first == second
    assert ids == [call_id("s001", 0, 0), call_id("s001", 0, 1)]
    assert served.told == ["invoke s001"]


def test_chat_streamed_as_server_sent_events(served: Served) -> None:
    body = {"model": "m", "messages": [USER], "stream": True}
    events = served.raw("/v1/chat/completions", body).decode().split("\n\n")
    data = [e.removeprefix("data: ") for e in events if e]
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    calls = [c for chunk in chunks for c in chunk["choices"][0]["delta"].get("tool_calls", ())]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [(call_id("s001", 0, 0), "ui_tap")]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_responses_api(served: Served) -> None:
    first = served.post("/v1/responses", {"model": "m", "input": "go"})
    (call,) = first["output"]
    assert (call["type"], call["name"]) == ("function_call", "ui_tap")
    done = {"type": "function_call_output", "call_id": call["call_id"], "output": "{}"}
    second = served.post("/v1/responses", {"model": "m", "input": [call, done]})
    assert second["output"][0]["name"] == "input_text"
    with pytest.raises(urllib.error.HTTPError) as refused:
        served.post("/v1/responses", {"input": [], "previous_response_id": "resp_1"})
    assert refused.value.code == 400


def messages(served: Served, conversation: list[dict[str, Any]], **extra: Any) -> Any:
    """An Anthropic Messages API request, as Anthropic's SDKs send it."""
    return served.post(
        "/v1/messages", {"model": "m", "max_tokens": 1024, **extra} | {"messages": conversation}
    )


def tool_result(use: dict[str, Any], text: str, is_error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": use["id"], "content": text}
    return {"role": "user", "content": [block | ({"is_error": True} if is_error else {})]}


def test_anthropic_messages_api(served: Served) -> None:
    """``tool_use`` blocks asked, ``tool_result`` blocks read (a text, or text blocks); a
    result marked ``is_error`` fails the call unless its text says more (transient)."""
    tools = [{"name": "ui_tap", "input_schema": {"type": "object"}}]
    first = messages(served, [USER], tools=tools, system="be brief")
    assert (first["type"], first["role"], first["stop_reason"]) == (
        "message",
        "assistant",
        "tool_use",
    )
    (use,) = first["content"]
    assert use == {
        "type": "tool_use",
        "id": call_id("s001", 0, 0),
        "name": "ui_tap",
        "input": {"element": "ok_button"},
    }
    turn = {"role": "assistant", "content": first["content"]}
    blocks = [{"type": "text", "text": '{"tapped": "ok_button"}'}]
    second = messages(served, [USER, turn, tool_result(use, blocks)])  # type: ignore[arg-type]
    assert second["content"][0]["name"] == "input_text"
    assert served.told[1] == f"ack s001 {result_digest({'tapped': 'ok_button'})}"
    (typed,) = second["content"]
    conversation = [USER, turn, tool_result(use, "{}"), {"role": "assistant", "content": [typed]}]
    busy = json.dumps({"error": "TransientToolError", "message": "busy"})
    again = messages(served, [*conversation, tool_result(typed, busy, is_error=True)])
    assert again["content"][0]["name"] == "input_text"  # asked again: transient
    failed = messages(served, [*conversation, tool_result(typed, '{"x": 1}', is_error=True)])
    assert failed["stop_reason"] == "end_turn" and failed["content"][0]["type"] == "text"
    assert served.told[-1] == "fail s002"
    assert served.records()[-1]["api"] == "messages"


def test_anthropic_messages_streamed_as_its_events(served: Served) -> None:
    events = served.raw("/v1/messages", {"model": "m", "messages": [USER], "stream": True})
    parsed = [
        (kind.removeprefix("event: "), json.loads(data.removeprefix("data: ")))
        for kind, data in (e.split("\n", 1) for e in events.decode().split("\n\n") if e)
    ]
    assert [k for k, _ in parsed] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(data["type"] == kind for kind, data in parsed)
    block = parsed[1][1]["content_block"]
    assert (block["type"], block["id"], block["input"]) == ("tool_use", call_id("s001", 0, 0), {})
    assert json.loads(parsed[2][1]["delta"]["partial_json"]) == {"element": "ok_button"}
    assert parsed[4][1]["delta"]["stop_reason"] == "tool_use"


def test_an_unknown_outcome_is_verified_then_redone_only_if_absent(served: Served) -> None:
    first = chat(served, [USER])
    call = first["tool_calls"][0]
    lost = result_of(call, "the tool call was interrupted, its outcome unknown")
    conversation = [USER, first, lost]
    check = chat(served, conversation)["tool_calls"][0]
    assert check["id"] == call_id("s001.check", 2, 1)
    assert check["function"]["name"] == "ui_dump"
    assert served.told[1:] == ["info s001", "hint s001"]
    asked = {"role": "assistant", "content": None, "tool_calls": [check]}
    present = {"taps": ["ok_button"]}
    found = chat(served, [*conversation, asked, result_of(check, json.dumps(present))])
    assert found["tool_calls"][0]["function"]["name"] == "input_text"
    assert served.told[3:5] == [
        f"check s001 {result_digest(present)} present",
        f"ack s001 {result_digest(None)}",  # handed no result: the check found the effect
    ]
    absent = chat(served, [*conversation, asked, result_of(check, '{"taps": []}')])
    assert absent["tool_calls"][0]["id"] == call_id("s001.redo", 4, 3)


def test_a_transient_failure_is_asked_again_a_tool_error_fails(served: Served) -> None:
    first = chat(served, [USER])
    call = first["tool_calls"][0]
    transient = json.dumps({"error": "TransientToolError", "message": "try again"})
    again = chat(served, [USER, first, result_of(call, transient)])
    assert again["tool_calls"][0]["function"]["name"] == "ui_tap"
    assert served.told == ["invoke s001"]  # the same call asked again, not a new one
    failed = json.dumps({"error": "ToolError", "message": "no such element"})
    chat(served, [USER, first, result_of(call, failed)])
    assert served.told[-2:] == ["fail s001", "invoke s002"]


def call_tool_result(result: Any, is_error: bool = False) -> str:
    """An MCP CallToolResult as an MCP client dumps it and an agent passes it on whole
    (Google ADK's McpTool): the tool's JSON as text content, structured, and isError."""
    whole = {"content": [{"type": "text", "text": json.dumps(result)}], "isError": is_error}
    return json.dumps(whole | ({"structuredContent": result} if isinstance(result, dict) else {}))


def test_an_mcp_call_tool_result_passed_on_whole_is_read_as_its_content(served: Served) -> None:
    first = chat(served, [USER])
    call = first["tool_calls"][0]
    result = {"tapped": "ok_button"}
    chat(served, [USER, first, result_of(call, call_tool_result(result))])
    assert served.told[1] == f"ack s001 {result_digest(result)}"  # the tool's, not the wrapper's
    transient = {"error": "TransientToolError", "message": "try again"}
    again = chat(served, [USER, first, result_of(call, call_tool_result(transient, True))])
    assert again["tool_calls"][0]["function"]["name"] == "ui_tap"
    failed = {"error": "ToolError", "message": "no such element"}
    chat(served, [USER, first, result_of(call, call_tool_result(failed, True))])
    assert served.told[-1] == "fail s001"
    chat(served, [USER, first, result_of(call, call_tool_result({"odd": 1}, True))])
    shown = [line["shown"][0]["shown"] for line in served.records()[1:]]
    assert shown == ["ok", "transient", "error", "error"]  # isError: failed, whatever it says


def test_an_adk_function_response_is_read_as_the_value_it_wraps(served: Served) -> None:
    """ADK hands a model a dict: a tool's answer that is not one as ``{"result": ...}``
    (a guard's VERIFY hint among them), an error as ``{"error": ...}``."""
    first = chat(served, [USER])
    call = first["tool_calls"][0]
    hint = json.dumps({"result": "Operation call_1 may have run. VERIFY it first."})
    check = chat(served, [USER, first, result_of(call, hint)])["tool_calls"][0]
    assert check["function"]["name"] == "ui_dump"  # unknown: checked, not taken as done
    result = {"tapped": "ok_button"}
    chat(served, [USER, first, result_of(call, json.dumps({"result": result}))])
    assert f"ack s001 {result_digest(result)}" in served.told
    failed = json.dumps({"error": "ui_tap failed: ToolError: no such element"})
    chat(served, [USER, first, result_of(call, failed)])
    shown = [line["shown"][0]["shown"] for line in served.records()[1:]]
    assert shown == ["unknown", "ok", "error"]


def test_a_guard_hint_is_an_unknown_outcome_though_it_quotes_json(served: Served) -> None:
    """The runtime's VERIFY hint, as a guard hands it to a model, quotes the call's
    arguments as JSON and never says VERIFY: the outcome is unknown, not that JSON."""
    first = chat(served, [USER])
    call = first["tool_calls"][0]
    args = json.loads(call["function"]["arguments"])
    text = hint_message(VerifyHint("call_1", "ui_tap", args, verify_hint("call_1", "ui_tap", args)))
    check = chat(served, [USER, first, result_of(call, text)])["tool_calls"][0]
    assert check["function"]["name"] == "ui_dump"
    assert served.told[1:] == ["info s001", "hint s001"]


def rpc(served: Served, method: str, params: dict[str, Any], rid: int = 1) -> Any:
    return served.post("/mcp", {"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def test_mcp_over_http_runs_a_call_on_the_world_as_the_op_the_model_asked(
    served: Served,
) -> None:
    init = rpc(served, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
    assert init["result"]["capabilities"] == {"tools": {"listChanged": False}}
    listed = {t["name"]: t for t in rpc(served, "tools/list", {})["result"]["tools"]}
    assert {"ui_tap", "input_text", "ui_dump"} <= set(listed)
    # Each tool's annotations give back its class in the table (the classes a guard reads).
    shipped = ToolTable.shipped()
    for name, tool in listed.items():
        read = class_from_annotations(tool.get("annotations")).idempotency
        assert read is shipped.classify(name).idempotency, name
    chat(served, [USER])  # the model asks s001: ui_tap ok_button
    answer = rpc(served, "tools/call", {"name": "ui_tap", "arguments": {"element": "ok_button"}})
    assert answer["result"]["isError"] is False
    other = rpc(served, "tools/call", {"name": "input_text", "arguments": dict(TYPE.args)})
    stray = rpc(served, "tools/call", {"name": "ui_tap", "arguments": {"element": "x"}})
    assert stray["result"]["isError"] is False and other["result"]["isError"] is False
    rows = read_ledger(served.world)
    assert [(r.op_id, r.tool) for r in rows] == [
        ("s001", "ui_tap"),  # asked by the model
        ("s002", "input_text"),  # a plan step of that content
        ("unplanned-ui_tap", "ui_tap"),  # no call of the plan
    ]
    assert rows[0].result == result_digest(answer["result"]["structuredContent"])
    assert [h for h, _ in served.hits if h.startswith("tool.")] == [
        "tool.received",
        "tool.before_reply",
    ] * 3
    bad = rpc(served, "tools/call", {"name": "ui_tap", "arguments": {}})
    assert bad["result"]["isError"] is True
    assert json.loads(bad["result"]["content"][0]["text"])["error"] == "ToolError"
    assert len(read_ledger(served.world)) == 3  # the gate refused it: no execution


def test_an_optional_argument_sent_as_null_is_one_not_given(served: Served) -> None:
    """An adapter that fills every field of a tool's schema (crewai-tools'
    MCPServerAdapter sends ``"fail_attempts": null``) makes the call the model asked."""
    chat(served, [USER])  # the model asks s001: ui_tap ok_button
    nulls = {"element": "ok_button", "form": None, "fail_attempts": None}
    answer = rpc(served, "tools/call", {"name": "ui_tap", "arguments": nulls})
    assert answer["result"]["isError"] is False
    line = json.loads(served.tools_record.read_text().splitlines()[-1])
    assert (line["op"], line["args"], line["outcome"]) == ("s001", {"element": "ok_button"}, "ok")
    required = rpc(served, "tools/call", {"name": "ui_tap", "arguments": {"element": None}})
    assert required["result"]["isError"] is True  # a required one stays, and the world says


def test_a_lost_reply_drops_the_response_after_the_effect(served: Served) -> None:
    arm(parse_failpoints("op.reply@1=lost-reply"))
    try:
        with pytest.raises(OSError):  # the connection closes with no answer
            rpc(served, "tools/call", {"name": "ui_tap", "arguments": {"element": "ok_button"}})
    finally:
        disarm()
    assert [r.op_id for r in read_ledger(served.world)] == ["s001"]
    outcomes = [
        json.loads(line)["outcome"] for line in served.tools_record.read_text().splitlines()
    ]
    assert outcomes == ["dropped"]


def test_the_stdio_bridge_speaks_mcp_on_its_stdin_and_stdout(served: Served) -> None:
    messages: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "ui_tap", "arguments": {"element": "ok_button"}},
        },
    ]
    arm(parse_failpoints("op.reply@2=lost-reply"))
    try:
        ran = subprocess.run(
            [sys.executable, str(BRIDGE), served.base + "/mcp"],
            input="".join(json.dumps(m) + "\n" for m in [*messages, {**messages[2], "id": 3}]),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        disarm()
    answers = [json.loads(line) for line in ran.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2, 3]  # nothing for the notification
    assert answers[1]["result"]["isError"] is False
    assert answers[2]["error"]["code"] == -32001  # the reply was dropped: a timeout's error
    assert "outcome unknown" in answers[2]["error"]["message"]
    assert len(read_ledger(served.world)) == 2  # both calls ran


def test_a_black_box_kill_is_placed_by_the_last_thing_its_life_did(tmp_path: Path) -> None:
    model, tools = tmp_path / "model.jsonl", tmp_path / "tools.jsonl"
    lines = [
        (model, {"t_ns": 1, "pid": 10, "calls": [{}], "final": None}),
        (tools, {"t_ns": 2, "pid": 10, "op": "s001"}),
        (model, {"t_ns": 3, "pid": 11, "calls": [{}], "final": None}),
        (model, {"t_ns": 4, "pid": 12, "calls": [], "final": "Done"}),
    ]
    for path, line in lines:
        with path.open("a") as out:
            out.write(json.dumps(line) + "\n")
    assert is_black_box_trial(tmp_path) and not is_black_box_trial(tmp_path / "none")
    assert [black_box_window(tmp_path, pid) for pid in (9, 10, 11, 12)] == [
        "start-up",
        "after a tool call",
        "after a model answer",
        "after the final answer",
    ]


def test_a_restarted_life_asks_again_under_a_new_id(tmp_path: Path) -> None:
    """A life's model numbers its answers after every earlier life's (the record holds them
    all), so the call a restarted agent asks for again never has its lost twin's id."""
    record = tmp_path / "model.jsonl"
    body = json.dumps({"model": "m", "messages": [USER]}).encode()
    ids = []
    for _life in range(2):
        endpoint = ModelEndpoint(PLAN, record, lambda line: None, lambda name, detail: None)
        reply = endpoint.handle("POST", "/v1/chat/completions", body)
        assert reply is not None
        ids.append(
            json.loads(b"".join(reply.chunks))["choices"][0]["message"]["tool_calls"][0]["id"]
        )
    assert ids == [call_id("s001", 0, 0), call_id("s001", 0, 1)]


GUARD_HINT = hint_message(
    VerifyHint(
        "call_9", "ui_tap", {"element": "ok_button"}, verify_hint("call_9", "ui_tap", TAP.args)
    )
)
"""A guard's answer for an op of unknown outcome (it names the op and the tool to report)."""


def ask(items: list[Item], offered: tuple[str, ...] = (VERIFY_TOOL,)) -> Answer:
    return decide(PLAN, items, lambda tool: False, 5, offered)


def test_a_guard_hint_is_an_unknown_outcome_though_it_holds_json() -> None:
    assert '{"element": "ok_button"}' in GUARD_HINT  # the arguments, not a result
    assert classify(GUARD_HINT)[0] == "unknown"
    assert classify(f'{{"x": 1}} {GUARD_HINT}')[0] == "unknown"
    assert classify('{"taps": []}')[0] == "ok"


@pytest.mark.parametrize(
    "hint",
    [GUARD_HINT, json.dumps({"result": GUARD_HINT})],
    ids=["as-text", "inside-json"],  # ADK sends a tool's answer as {"result": ...}
)
@pytest.mark.parametrize(
    ("found", "dump"), [("absent", {"taps": []}), ("present", {"taps": ["ok_button"]})]
)
def test_a_check_is_reported_to_the_guard_that_offers_report_verification(
    found: str, dump: dict[str, Any], hint: str
) -> None:
    """Offered ``report_verification``, the model reports its check to the guard (which
    redoes an absent effect itself) instead of asking for the redo, naming the op the
    hint names (unescaped, where the hint came as a string inside JSON)."""
    tap, check = call_id("s001", 0, 0), call_id("s001.check", 2, 1)
    items = [Item("call", tap), Item("result", tap, hint), Item("call", check)]
    items.append(Item("result", check, json.dumps(dump)))
    (reported,) = ask(items).calls
    assert reported[1:] == (
        f"s001.report-{found}",
        VERIFY_TOOL,
        {"op_id": "call_9", "found": found},
    )
    redone = '{"tapped": "ok_button"}'
    items += [Item("call", reported[0]), Item("result", reported[0], redone)]
    after = ask(items)
    assert [c[1] for c in after.calls] == ["s002"]  # the step is settled, the next one asked
    acks = [line for _, line in after.told if line.startswith("ack s001")]
    digest = result_digest(json.loads(redone) if found == "absent" else None)
    assert acks[-1] == f"ack s001 {digest}"
    # Not offered the tool, the model redoes an absent effect itself, as without a guard.
    if found == "absent":
        assert [c[1] for c in ask(items[:4], offered=()).calls] == ["s001.redo"]


def test_what_the_script_cannot_answer_gets_the_protocols_error_and_is_recorded(
    served: Served,
) -> None:
    unknown = rpc(served, "tools/call", {"name": "no_such_tool", "arguments": {}})
    malformed = rpc(served, "tools/call", {"name": "ui_tap", "arguments": ["ok_button"]})
    assert unknown["error"]["code"] == malformed["error"]["code"] == -32602
    assert "no_such_tool" in unknown["error"]["message"]
    refused = [json.loads(line) for line in served.tools_record.read_text().splitlines()]
    assert [line["outcome"].split(":")[0] for line in refused] == ["refused", "refused"]
    assert read_ledger(served.world) == []  # nothing ran
    with pytest.raises(urllib.error.HTTPError) as bad:
        served.post("/v1/chat/completions", ["not", "an", "object"])
    assert bad.value.code == 400
    assert json.loads(bad.value.read())["error"]["type"] == "invalid_request_error"
    assert "not a JSON object" in served.records()[-1]["refused"]
    with pytest.raises(urllib.error.HTTPError) as bad:
        served.post("/v1/messages", ["not", "an", "object"])
    anthropic = json.loads(bad.value.read())  # Anthropic's own error shape
    assert (anthropic["type"], anthropic["error"]["type"]) == ("error", "invalid_request_error")


def test_an_error_wrapped_alone_is_read_by_what_it_wraps() -> None:
    """Pydantic AI 2.x sends a tool's error as ``{"error": <its text or data>}``."""
    transient = '{"error": "TransientToolError", "message": "ui_dump: transient failure"}'
    assert classify(json.dumps({"error": transient}))[0] == "transient"
    assert classify(json.dumps({"error": json.loads(transient)}))[0] == "transient"
    assert classify(json.dumps({"error": "the tool call was interrupted"}))[0] == "unknown"
    assert classify(json.dumps({"error": '{"error": "ToolError", "message": "no"}'}))[0] == "error"
    assert classify(json.dumps({"error": '{"taps": []}'}))[0] == "error"
    # A wire guard's structured VERIFY result, which Pydantic AI sends in place of its text.
    verify = {"verify": "w2.3", "tool": "ui_tap", "hint": GUARD_HINT}
    assert classify(json.dumps({"error": verify}))[0] == "unknown"
    assert classify(json.dumps({"error": json.dumps(verify)}))[0] == "unknown"
    assert classify(json.dumps({"error": ""}))[0] == "error"
    assert classify('{"error": "x", "message": "y"}')[0] == "error"


def test_text_content_blocks_written_as_json_are_read_as_their_text() -> None:
    """A guard's reply can hold a tool's content list (LangChain's MCP tools return one)."""
    dump = '{"fields": {}, "taps": ["ok_button"], "submissions": []}'
    blocks = [{"type": "text", "text": dump, "id": "lc_1"}]
    assert classify(json.dumps(blocks)) == ("ok", json.loads(dump))
    transient = '{"error": "TransientToolError", "message": "ui_dump: transient failure"}'
    assert classify(json.dumps([{"type": "text", "text": transient}]))[0] == "transient"
    assert classify(json.dumps([{"type": "image", "data": "x"}]))[0] == "ok"  # not text blocks
    assert classify("[]") == ("ok", [])
