"""The model a black box talks to: OpenAI's and Anthropic's APIs, scripted from the plan.

It reads only the conversation each request carries, never its own memory: from the
tool results already in it, it works out which plan calls are done and answers with
the next plan call (a batch's calls together) as ``tool_calls``, or with a final
text once every call is settled. Its tool-call ids name the plan call they stand
for (``call_s003_7_12``: op ``s003``, issued when the conversation held 7 items, in the
trial's 12th answer). No two answers share an id, as with a real model: a call asked
again after a restart comes under a new id.

A result is read as a success, a transient failure, a failure or an unknown outcome
(``classify``), through the wrappers frameworks put around it; an unknown outcome of
an unsafe call is checked with the step's read-only check before any redo, or reported
to a guard that offers ``report_verification``.

The full note: docs/reference/modules.md (``harness/blackbox/model.py``).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.agent.plan import Plan, PlanStep, batches
from harness.failpoints import ModelReplyFault
from harness.world.store import result_digest

__all__ = [
    "MAX_REDOES",
    "MAX_RETRIES",
    "Answer",
    "Item",
    "ModelEndpoint",
    "Reply",
    "call_id",
    "classify",
    "decide",
    "offered_name",
    "op_of_call",
]

MODEL_NAME = "harness-scripted"
CHECK_SUFFIX = ".check"
REDO_SUFFIX = ".redo"
MAX_REDOES = 8
MAX_RETRIES = 3
REPORT_SUFFIX = ".report-"
VERIFY_TOOL = "report_verification"
"""The tool a guard offers for the model's report on an op of unknown outcome."""
UNKNOWN_MARKS = (
    "verify",
    "outcome unknown",
    "interrupt",
    "timed out",
    "no reply",
    "may already have run",
    VERIFY_TOOL,
)
"""Words of a tool result (any case) that say its outcome is unknown (the last two are this
project's VERIFY hint and a guard's request for a report)."""
GUARD_OP = re.compile(VERIFY_TOOL + r'\b.*?\bop_id\W+"([^"\\]+)', re.DOTALL)
"""The op a guard's hint asks the model to report on: ``call report_verification with
op_id "X"``, read as well where the hint is a string inside JSON (``op_id \\"X\\"``: ADK
sends a tool's answer as ``{"result": ...}``), so no escape is taken into the id."""


def call_id(op_id: str, position: int, answer: int) -> str:
    """The id of a tool call the model asks for: the op it stands for, where, and in which of
    the trial's answers. No two answers share an id, as with a real model: a call asked
    again after a restart comes under a new id, never the one its lost twin had."""
    return f"call_{op_id}_{position}_{answer}"


def op_of_call(call: str) -> str | None:
    """The op a tool-call id of this model names (None: not one of its ids)."""
    head, position, answer = [*call.rsplit("_", 2), "", ""][:3]
    if not head.startswith("call_") or not (position.isdigit() and answer.isdigit()):
        return None
    return head.removeprefix("call_") or None


@dataclass(frozen=True, slots=True)
class Item:
    """One item of a conversation that matters here: a call the model asked for, or the
    result the agent showed for a call."""

    kind: str  # "call" or "result"
    call: str
    text: str = ""


@dataclass(slots=True)
class Answer:
    calls: list[tuple[str, str, str, Mapping[str, Any]]] = field(default_factory=list)
    """(call id, op, tool, arguments) of each tool call asked for."""
    final: str | None = None
    told: list[tuple[str, str]] = field(default_factory=list)
    """(key, line) of what it was shown: the key says which result it was, so that a
    result shown again (the conversation grows) is told once."""
    shown: list[dict[str, Any]] = field(default_factory=list)
    """For the record: each of its calls in the conversation and what the agent showed."""


MCP_RESULT_KEYS = frozenset({"content", "structuredContent", "isError", "_meta", "meta"})
"""The keys of an MCP ``CallToolResult`` as an MCP client dumps it (the SDK's spellings)."""


def _wrapped(value: Any) -> tuple[str, bool] | None:
    """What a wrapper an agent put around a tool's answer holds, as text, and whether the
    wrapper says it failed; None when ``value`` is no wrapper (see the module): an MCP
    ``CallToolResult`` dumped whole (a list of typed parts, only its keys), or Google ADK's
    function response ``{"result": ...}`` (``{"error": ...}`` is read by ``_classify``)."""
    if not isinstance(value, dict):
        return None
    if set(value) == {"result"}:
        inner = value["result"]
        return (inner if isinstance(inner, str) else json.dumps(inner)), False
    if "content" not in value or not set(value) <= MCP_RESULT_KEYS:
        return None
    parts = value["content"]
    if not isinstance(parts, list) or not all(isinstance(p, dict) and "type" in p for p in parts):
        return None
    text = "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
    return text, value.get("isError") is True


def classify(text: str) -> tuple[str, Any]:
    """``ok`` (and the result), ``transient``, ``error`` or ``unknown`` (see the module)."""
    kind, value = _classify(text)
    failed = False
    for _ in range(4):  # a wrapper in a wrapper, at most a few deep
        if kind != "ok" or (wrapper := _wrapped(value)) is None:
            break
        inner, wrapper_failed = wrapper
        failed = failed or wrapper_failed
        kind, value = _classify(inner)
    if failed and kind == "ok":
        kind = "error"
    return kind, value


def _classify(text: str) -> tuple[str, Any]:
    stripped = text.strip()
    if not stripped:
        return "unknown", None
    value: Any = None
    lowered = stripped.lower()
    try:
        value = json.loads(stripped)
    except ValueError:
        if any(mark in lowered for mark in UNKNOWN_MARKS):
            return "unknown", None  # before any JSON in it: a hint quotes the call's arguments
        start = stripped.find("{")
        if start >= 0:
            try:
                value, _ = json.JSONDecoder().raw_decode(stripped[start:])
            except ValueError:
                value = None
    if _text_blocks(value):
        # Text content blocks written out as JSON (a guard's reply holding LangChain's or
        # MCP's content list): read as the text they carry, as a model reads them.
        return classify("".join(block["text"] for block in value))
    if isinstance(value, dict) and set(value) == {"error", "message"}:
        return ("transient" if value["error"] == "TransientToolError" else "error"), value
    if isinstance(value, dict) and set(value) == {"error"}:
        # A framework's wrapper of a failed call (Pydantic AI 2.x sends a tool's error so,
        # its text or data inside): what it wraps tells transient, unknown or failed.
        inner = value["error"]
        text = inner if isinstance(inner, str) else json.dumps(inner)
        status, detail = classify(text) if text.strip() else ("error", inner)
        if status == "ok" and any(mark in text.lower() for mark in UNKNOWN_MARKS):
            # Data that says its outcome is unknown (a wire guard's structured VERIFY result,
            # which Pydantic AI prefers to its text): a model reads the hint in it.
            return "unknown", None
        return (status, detail) if status in ("transient", "unknown") else ("error", inner)
    if value is not None and isinstance(value, dict | list):
        return "ok", value
    if any(mark in lowered for mark in UNKNOWN_MARKS):
        return "unknown", None
    return "error", stripped


def _text_blocks(value: Any) -> bool:
    """Whether ``value`` is a list of text content blocks (``{"type": "text", "text": ...}``)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
            for block in value
        )
    )


def _step_op(op_id: str) -> str:
    return op_id.split(".", 1)[0]


def _shipped_retry_safe(tool: str) -> bool:
    from harness.runtime.classes import ToolTable

    return ToolTable.shipped().classify(tool).retry_safe


def decide(
    plan: Plan,
    items: Sequence[Item],
    retry_safe: Callable[[str], bool] = _shipped_retry_safe,
    number: int = 0,
    offered: Collection[str] = (),
) -> Answer:
    """The answer to a conversation: a function of the plan and ``items`` alone.

    ``retry_safe`` says which tools may simply be asked again when their outcome is
    unknown (the tool table's retry-safe classes); any other is verified. ``number`` is
    the answer's place among the trial's answers, which only the new calls' ids carry.
    ``offered``: the tools the request offers. When it offers ``report_verification``
    and a guard's hint named the op to report on, what a check found is reported to the
    guard (which redoes an absent effect itself) instead of redone by the model."""
    steps = {s.op_id: s for s in plan.steps}
    answer = Answer()
    issued: dict[str, str] = {}
    results: dict[str, str] = {}
    for item in items:
        op = op_of_call(item.call)
        if op is None or _step_op(op) not in steps:
            continue
        if item.kind == "call":
            issued[item.call] = op
        elif item.call in issued:
            results.setdefault(item.call, item.text)
    # What each step came to, from its results in conversation order: None (to do),
    # ok, fail, info, or the call to ask next: ("retry"|"check"|"redo", op).
    state: dict[str, tuple[str, str]] = {}
    retries: dict[str, int] = {}
    guard_ops: dict[str, str] = {}  # step: the op a guard's hint asked a report on
    for call, op in issued.items():
        if call not in results:
            answer.shown.append({"call": call, "op": op, "shown": "nothing"})
            continue
        step = steps[_step_op(op)]
        kind, value = classify(results[call])
        answer.shown.append(
            {"call": call, "op": op, "shown": kind}
            | ({"digest": result_digest(value)} if kind == "ok" else {})
        )
        if kind == "unknown" and (named := GUARD_OP.search(results[call])):
            guard_ops[step.op_id] = named.group(1)
        if kind == "unknown" and retry_safe(step.tool) and not op.endswith(CHECK_SUFFIX):
            kind = "transient"  # a retry-safe call is asked again, as the executor retries
        report = guard_ops.get(step.op_id) if VERIFY_TOOL in offered else None
        _settle(step, op, call, kind, value, state, retries, answer, report)
    for batch in batches(plan.steps):
        wanted = [want for s in batch if (want := _wanted(s, state.get(s.op_id))) is not None]
        if wanted:
            position = len(items)
            for op, tool, args in wanted:
                answer.calls.append((call_id(op, position, number), op, tool, args))
            return answer
    told = {s.op_id: state.get(s.op_id, ("?", ""))[0] for s in plan.steps}
    answer.final = f"Done: {len(plan.steps)} steps, " + ", ".join(
        f"{op} {what}" for op, what in told.items()
    )
    return answer


def _settle(
    step: PlanStep,
    op: str,
    call: str,
    kind: str,
    value: Any,
    state: dict[str, tuple[str, str]],
    retries: dict[str, int],
    answer: Answer,
    report: str | None = None,
) -> None:
    """What one result shown to the model makes of its step, and what it tells. ``report``:
    the guard's op to report a check's finding on (None: the model redoes it itself)."""
    name = step.op_id
    if REPORT_SUFFIX in op:  # the guard's answer to a report: a redo's outcome, if absent
        if op.endswith("present"):
            state[name] = ("ok", "")
        elif kind == "ok":
            state[name] = ("ok", "")
            answer.told.append((f"{call} ack", f"ack {name} {result_digest(value)}"))
        elif kind in ("error", "transient"):
            state[name] = ("fail", "")
            answer.told.append((f"{call} fail", f"fail {name}"))
        else:
            state[name] = ("info", "")
            answer.told.append((f"{call} info", f"info {name}"))
        return
    if op.endswith(CHECK_SUFFIX):
        hinted = op.removesuffix(CHECK_SUFFIX)
        if kind != "ok" or step.verify is None:
            state[name] = ("info", "")
            answer.told.append((f"{call} info", f"info {name}"))
            return
        holds = step.verify.holds(value)
        found = "present" if holds else "absent"
        answer.told.append((f"{call} check", f"check {hinted} {result_digest(value)} {found}"))
        if holds:
            answer.told.append((f"{call} ack", f"ack {name} {result_digest(None)}"))
        if report is not None and (holds or hinted.count(REDO_SUFFIX) < MAX_REDOES):
            state[name] = ("report", f"{hinted}{REPORT_SUFFIX}{found} {report}")
        elif holds:
            state[name] = ("ok", "")
        elif hinted.count(REDO_SUFFIX) >= MAX_REDOES:
            state[name] = ("info", "")
            answer.told.append((f"{call} info", f"info {name}"))
        else:
            state[name] = ("redo", hinted + REDO_SUFFIX)
        return
    if kind == "ok":
        state[name] = ("ok", "")
        answer.told.append((f"{call} ack", f"ack {name} {result_digest(value)}"))
    elif kind == "transient" and retries.get(op, 0) < MAX_RETRIES:
        retries[op] = retries.get(op, 0) + 1
        state[name] = ("retry", op)
    elif kind in ("error", "transient"):
        state[name] = ("fail", "")
        answer.told.append((f"{call} fail", f"fail {name}"))
    else:  # unknown: shown so (its hint), then verified when a read-only check can tell
        answer.told.append((f"{call} info", f"info {name}"))
        answer.told.append((f"{call} hint", f"hint {op}"))
        state[name] = ("info", "") if step.verify is None else ("check", op)


def _wanted(step: PlanStep, state: tuple[str, str] | None) -> tuple[str, str, Any] | None:
    """The call a step still wants: (op, tool, arguments), or None when it is settled."""
    if state is None:
        return step.op_id, step.tool, dict(step.args)
    what, op = state
    if what in ("retry", "redo"):
        return op, step.tool, dict(step.args)
    if what == "check" and step.verify is not None:
        return op + CHECK_SUFFIX, step.verify.tool, dict(step.verify.args)
    if what == "report":
        reporting, guard_op = op.split(" ", 1)
        found = reporting.rsplit(REPORT_SUFFIX, 1)[1]
        return reporting, VERIFY_TOOL, {"op_id": guard_op, "found": found}
    return None


# -- the wire: Chat Completions, Responses and Anthropic's Messages ------------------------


def offered_tools(request: Mapping[str, Any]) -> frozenset[str]:
    """The names of the tools a request offers the model (each API names them its way)."""
    names = set()
    for tool in request.get("tools") or ():
        if isinstance(tool, dict):
            function = tool.get("function")
            named = function if isinstance(function, dict) else tool
            if isinstance(named.get("name"), str):
                names.add(named["name"])
    return frozenset(names)


def offered_name(tool: str, offered: Collection[str]) -> str:
    """The name the request offers ``tool`` under, as a real model calls a tool by the name
    it is offered: the name itself, else the one offered name that ends with it after a
    prefix (a framework that names an MCP server's tools ``<server>_<tool>``, as CrewAI's
    ``mcps=`` does); ``tool`` itself when none or several do."""
    if tool in offered or not offered:
        return tool
    prefixed = [n for n in offered if n.endswith(tool) and n[: -len(tool)][-1:] in "_-.:/"]
    return prefixed[0] if len(prefixed) == 1 else tool


def chat_items(messages: Any) -> list[Item]:
    """The calls and results of a Chat Completions ``messages`` list."""
    items: list[Item] = []
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict):
            continue
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                items.append(Item("call", call["id"]))
        if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
            items.append(Item("result", message["tool_call_id"], _text(message.get("content"))))
    return items


def responses_items(given: Any) -> list[Item]:
    """The calls and results of a Responses API ``input``."""
    items: list[Item] = []
    for item in given if isinstance(given, list) else ():
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call" and isinstance(item.get("call_id"), str):
            items.append(Item("call", item["call_id"]))
        elif item.get("type") == "function_call_output" and isinstance(item.get("call_id"), str):
            items.append(Item("result", item["call_id"], _text(item.get("output"))))
    return items


def messages_items(messages: Any) -> list[Item]:
    """The calls and results of an Anthropic Messages API ``messages`` list: ``tool_use``
    blocks of the assistant's turns, ``tool_result`` blocks of the user's; a result marked
    ``is_error`` is read as a failure wrapping its text (``{"error": ...}``), so that what
    the text says of a transient failure or an unknown outcome still counts."""
    items: list[Item] = []
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                items.append(Item("call", block["id"]))
            elif block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                text = _text(block.get("content"))
                if block.get("is_error") is True:
                    text = json.dumps({"error": text})
                items.append(Item("result", block["tool_use_id"], text))
    return items


def _text(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else json.dumps(content)


@dataclass(frozen=True, slots=True)
class Reply:
    """What the server sends: a status, a content type, the body's chunks, and for a fault of
    the wire (``faulty_reply``) extra headers, the length it declares when it sends less
    (a cut: the connection then closes), and how long it hangs after its chunks before it
    closes the connection (``math.inf``: until the life ends)."""

    status: int
    content_type: str
    chunks: tuple[bytes, ...]
    headers: tuple[tuple[str, str], ...] = ()
    declared: int | None = None
    hang_s: float | None = None


def _json_reply(status: int, body: object) -> Reply:
    return Reply(status, "application/json", (json.dumps(body).encode(),))


def _error(status: int, message: str, path: str = "") -> Reply:
    """The API's own error body: Anthropic's for ``/messages``, else OpenAI's."""
    error = {"message": message, "type": "invalid_request_error"}
    if path.endswith("/messages"):
        return _json_reply(status, {"type": "error", "error": error})
    return _json_reply(status, {"error": error})


class ModelEndpoint:
    """The model's side of one life: turns a request into a reply, records it, tells.

    ``tell`` writes a line on the supervisor's channel; ``hit`` marks a failpoint
    (``model.received``, ``model.before_reply``); ``issued`` is called with each call it
    asks for (the tool server knows calls by what the model asked). What it was shown
    is told once per life (``_told``): a record of what it said, not a memory it
    decides from.
    """

    def __init__(
        self,
        plan: Plan,
        record: Path,
        tell: Callable[[str], object],
        hit: Callable[[str, str], None],
        issued: Callable[[str, str, Mapping[str, Any]], None] = lambda op, tool, args: None,
        retry_safe: Callable[[str], bool] = _shipped_retry_safe,
    ) -> None:
        self.plan = plan
        self.record = record
        self.tell = tell
        self.hit = hit
        self.issued = issued
        self.retry_safe = retry_safe
        self._told: set[str] = set()
        # Answers are numbered across the trial's lives (the record holds every life's).
        self._served = len(record.read_bytes().splitlines()) if record.exists() else 0

    def handle(self, method: str, path: str, body: bytes) -> Reply | None:
        path = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and path.endswith("/models"):
            listed = {"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "harness"}
            return _json_reply(200, {"object": "list", "data": [listed]})
        if method != "POST":
            return self._refuse(path, 405, f"{method} {path}: not served")
        try:
            request = json.loads(body or b"{}")
        except ValueError as exc:
            return self._refuse(path, 400, f"the request is not JSON: {exc}")
        if not isinstance(request, dict):
            return self._refuse(path, 400, "the request is not a JSON object")
        if path.endswith("/chat/completions"):
            api, items = "chat", chat_items(request.get("messages"))
        elif path.endswith("/responses"):
            if request.get("previous_response_id"):
                return self._refuse(
                    path,
                    400,
                    "previous_response_id: this model keeps no state between requests; "
                    "send the whole conversation as input",
                )
            api, items = "responses", responses_items(request.get("input"))
        elif path.endswith("/messages"):
            api, items = "messages", messages_items(request.get("messages"))
        else:
            return self._refuse(
                path, 404, f"{path}: not served (chat/completions, responses, messages, models)"
            )
        stream = bool(request.get("stream")) and api in ("chat", "messages")
        offered = offered_tools(request)
        answer = decide(self.plan, items, self.retry_safe, self._served, offered)
        self._served += 1
        self._write_record(api, stream, answer)
        new = [(key, line) for key, line in answer.told if key not in self._told]
        for key, line in new:
            self._told.add(key)
            self.tell(line)
        first = next((line.split(" ")[1] for _, line in new if not line.startswith("check")), "")
        self.hit("model.received", first)
        for _, op, tool, args in answer.calls:
            if tool == VERIFY_TOOL and args.get("found") == "absent":
                # The guard redoes it: the call it makes is the step's redo.
                step = next(s for s in self.plan.steps if s.op_id == _step_op(op))
                redo = op.rsplit(REPORT_SUFFIX, 1)[0] + REDO_SUFFIX
                self.issued(redo, step.tool, step.args)
            self.issued(op, tool, args)
            key = f"invoke {op} {len(items)}"
            if "." not in op and key not in self._told and not self._retry(items, op):
                self._told.add(key)
                self.tell(f"invoke {op}")
        fault: ModelReplyFault | None = None
        try:
            self.hit("model.before_reply", answer.calls[0][1] if answer.calls else "")
        except ModelReplyFault as raised:
            fault = raised
            self._write_fault(path, raised)
        model = str(request.get("model") or MODEL_NAME)
        # On the wire each call names its tool as the request offers it.
        answer.calls = [(c, op, offered_name(t, offered), a) for c, op, t, a in answer.calls]
        if fault is not None:
            return faulty_reply(fault.action, fault.arg, api, stream, answer, model, self._served)
        return _reply(api, stream, answer, model, self._served)

    @staticmethod
    def _retry(items: Sequence[Item], op: str) -> bool:
        """Whether ``op`` was asked for before in this conversation (asked again after a
        transient failure: the same call, not a new one)."""
        return any(i.kind == "call" and op_of_call(i.call) == op for i in items)

    def _refuse(self, path: str, status: int, message: str) -> Reply:
        """The API's own error for a request the script cannot answer, and a line of evidence."""
        line = {"t_ns": time.time_ns(), "pid": os.getpid(), "path": path, "refused": message}
        with open(self.record, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")
        return _error(status, message, path)

    def _write_fault(self, path: str, fault: ModelReplyFault) -> None:
        """A line of evidence: the answer just recorded went out with this fault."""
        line = {"t_ns": time.time_ns(), "pid": os.getpid(), "path": path, "fault": fault.action}
        with open(self.record, "a", encoding="utf-8") as out:
            out.write(json.dumps(line | {"at": fault.at}) + "\n")

    def _write_record(self, api: str, stream: bool, answer: Answer) -> None:
        line = {
            "t_ns": time.time_ns(),
            "pid": os.getpid(),  # the life's (its host's): where a kill landed says it
            "api": api,
            "stream": stream,
            "shown": answer.shown,
            "calls": [{"id": c, "op": op, "tool": t, "args": a} for c, op, t, a in answer.calls],
            "final": answer.final,
        }
        with open(self.record, "a", encoding="utf-8") as out:
            out.write(json.dumps(line, default=repr) + "\n")


def _reply(api: str, stream: bool, answer: Answer, model: str, n: int) -> Reply:
    """The answer as the API sends it: a JSON body, or server-sent events when streamed."""
    if api == "responses":
        return _json_reply(200, _responses_body(answer, model, n))
    if api == "messages":
        if stream:
            return Reply(200, "text/event-stream", _messages_events(answer, model, n))
        return _json_reply(200, _messages_body(answer, model, n))
    if stream:
        return Reply(200, "text/event-stream", _chat_chunks(answer, model, n))
    return _json_reply(200, _chat_body(answer, model, n))


RETRY_AFTER_MS = 1000
"""How long a ``rate-limit`` without milliseconds asks the agent to wait (``retry-after``)."""

_PROVIDER_ERRORS = {
    # action: (status, OpenAI's error type, Anthropic's status, its type, the message)
    "rate-limit": (429, "requests", 429, "rate_limit_error", "Rate limit reached; try again"),
    "server-error": (500, "server_error", 500, "api_error", "The server had an error"),
    "overloaded": (503, "server_error", 529, "overloaded_error", "Overloaded"),
}
"""The errors a provider answers with, as OpenAI's and Anthropic's APIs spell them."""


def faulty_reply(
    action: str, arg: int | None, api: str, stream: bool, answer: Answer, model: str, n: int
) -> Reply | None:
    """The answer as a fault of the wire (``MODEL_WIRE_FAULTS``) delivers it; None: lost whole
    (the connection closes before any byte)."""
    if action == "lost-answer":
        return None
    if action in _PROVIDER_ERRORS:
        status, kind, anthropic_status, anthropic_kind, message = _PROVIDER_ERRORS[action]
        if api == "messages":
            status = anthropic_status
            body: object = {"type": "error", "error": {"type": anthropic_kind, "message": message}}
        else:
            body = {"error": {"message": message, "type": kind, "code": None}}
        headers: tuple[tuple[str, str], ...] = ()
        if action == "rate-limit":
            wait_ms = RETRY_AFTER_MS if arg is None else arg
            headers = (
                ("retry-after", str(math.ceil(wait_ms / 1000))),
                ("retry-after-ms", str(wait_ms)),
            )
        return Reply(status, "application/json", (json.dumps(body).encode(),), headers)
    whole = _reply(api, stream, answer, model, n)
    if action == "stream-hang":
        hang = math.inf if arg is None else arg / 1000
        length = sum(len(chunk) for chunk in whole.chunks)
        return Reply(whole.status, whole.content_type, (), declared=length, hang_s=hang)
    if action != "stream-cut":
        raise ValueError(f"{action}: not a fault of the model's answer")
    if stream and api == "chat":
        return Reply(200, "text/event-stream", _chat_chunks(answer, model, n, cut=True))
    if stream and api == "messages":
        return Reply(200, "text/event-stream", _messages_events(answer, model, n, cut=True))
    data = b"".join(whole.chunks)
    return Reply(
        whole.status, whole.content_type, (data[: _cut_at(data, api, answer)],), declared=len(data)
    )


def _cut_at(data: bytes, api: str, answer: Answer) -> int:
    """Where to cut a JSON body: in the middle of its first call's arguments (of the text
    when it has no call)."""
    if answer.calls:
        args = dict(answer.calls[0][3])
        needle = json.dumps(args) if api == "messages" else json.dumps(_arguments(args))
        at = data.find(needle.encode())
        if at >= 0:
            return at + max(len(needle) // 2, 1)
    return max(len(data) // 2, 1)


def _arguments(args: Mapping[str, Any]) -> str:
    """A call's arguments as the OpenAI APIs send them: a string of JSON."""
    return json.dumps(dict(args), ensure_ascii=False)


def _halves(text: str) -> tuple[str, str]:
    middle = max(len(text) // 2, 1)
    return text[:middle], text[middle:]


def _tool_call(call: str, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    arguments = _arguments(args)
    return {"id": call, "type": "function", "function": {"name": tool, "arguments": arguments}}


def _chat_body(answer: Answer, model: str, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.final}
    if answer.calls:
        message["tool_calls"] = [_tool_call(c, t, a) for c, _, t, a in answer.calls]
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if answer.calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _chat_chunks(answer: Answer, model: str, n: int, *, cut: bool = False) -> tuple[bytes, ...]:
    """The answer as Chat Completions chunks. ``cut``: the stream breaks off in the middle of
    its first call's arguments (the half sent as a delta of their own, as providers split
    them), or of its text when it has no call: no finish reason, no ``[DONE]``."""
    base: dict[str, Any] = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk"}
    base |= {"created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(data)}\n\n".encode()

    chunks = [chunk({"role": "assistant", "content": "" if answer.final is not None else None})]
    if cut and answer.calls:
        call, _, tool, args = answer.calls[0]
        opened = _tool_call(call, tool, args)
        opened["function"]["arguments"] = _halves(opened["function"]["arguments"])[0]
        return (*chunks, chunk({"tool_calls": [{"index": 0, **opened}]}))
    if cut:
        return (*chunks, chunk({"content": _halves(answer.final or "")[0]}))
    if answer.final is not None:
        chunks.append(chunk({"content": answer.final}))
    for index, (call, _, tool, args) in enumerate(answer.calls):
        chunks.append(chunk({"tool_calls": [{"index": index, **_tool_call(call, tool, args)}]}))
    chunks.append(chunk({}, "tool_calls" if answer.calls else "stop"))
    chunks.append(b"data: [DONE]\n\n")
    return tuple(chunks)


def _responses_body(answer: Answer, model: str, n: int) -> dict[str, Any]:
    output: list[dict[str, Any]] = [
        {
            "type": "function_call",
            "id": f"fc_{call}",
            "call_id": call,
            "name": tool,
            "arguments": json.dumps(dict(args), ensure_ascii=False),
            "status": "completed",
        }
        for call, _, tool, args in answer.calls
    ]
    if answer.final is not None:
        text = {"type": "output_text", "text": answer.final, "annotations": []}
        output.append(
            {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        )
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": output,
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
    }


def _messages_body(answer: Answer, model: str, n: int) -> dict[str, Any]:
    """An Anthropic Messages API response: the final text, then each call as ``tool_use``."""
    content: list[dict[str, Any]] = []
    if answer.final is not None:
        content.append({"type": "text", "text": answer.final})
    content += [
        {"type": "tool_use", "id": call, "name": tool, "input": dict(args)}
        for call, _, tool, args in answer.calls
    ]
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if answer.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def _messages_events(answer: Answer, model: str, n: int, *, cut: bool = False) -> tuple[bytes, ...]:
    """The same response streamed as Anthropic's server-sent events: ``message_start``, each
    block's start, one delta and stop, ``message_delta`` with the stop reason, ``message_stop``.
    ``cut``: the stream breaks off after the first half of the first call's ``partial_json``
    (of the text when it has no call)."""

    def event(kind: str, data: dict[str, Any]) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

    body = _messages_body(answer, model, n)
    start = {**body, "content": [], "stop_reason": None}
    events = [event("message_start", {"message": start})]
    for index, block in enumerate(body["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(event("content_block_start", {"index": index, "content_block": opened}))
        if cut and (block["type"] == "tool_use" or not answer.calls):
            field = "partial_json" if block["type"] == "tool_use" else "text"
            delta[field] = _halves(delta[field])[0]
            events.append(event("content_block_delta", {"index": index, "delta": delta}))
            return tuple(events)
        events.append(event("content_block_delta", {"index": index, "delta": delta}))
        events.append(event("content_block_stop", {"index": index}))
    stopped = {"stop_reason": body["stop_reason"], "stop_sequence": None}
    events.append(event("message_delta", {"delta": stopped, "usage": {"output_tokens": 0}}))
    events.append(event("message_stop", {}))
    return tuple(events)
