"""The grammar of a failpoint spec (``name[@N]=action[(arg)]``, see ``harness.failpoints``)
and its one parser.

Stdlib only, and loading nothing of the runtime: the checkers (``harness.check``) read a
trial's schedule with it as the agent's ``harness.failpoints`` arms it. A malformed spec
raises ``ValueError`` here; ``harness.failpoints.parse_failpoints``, which also knows
every failpoint's name, raises ``FailpointSpecError`` (a ``ValueError`` too).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

__all__ = [
    "ACTIONS",
    "AGENT_HOOKS",
    "MODEL_FAULTS",
    "MODEL_REPLY_POINT",
    "MODEL_WIRE_FAULTS",
    "FailpointSpec",
    "parse_spec",
]

ACTIONS = (
    "kill",
    "exit",
    "raise",
    "sleep",
    "enospc",
    "enospc-mid",
    "lost-reply",
    "count",
    "cancel",
    "lost-request",
    "reuse-id",
    "async-tool",
    "recover",
    "lag",
    "sync-call",
    "pause",
    "rate-limit",
    "server-error",
    "overloaded",
    "stream-cut",
    "stream-hang",
    "lost-answer",
)

MODEL_FAULTS = ("reuse-id", "async-tool", "lag")
"""The actions that make the harness's agent program act as one with that fault would
(``harness.failpoints.ModelFault``): misuse the runtime at ``model.issue``, or give a
reconciler a lookup that lags the provider's effects at ``reconcile.lookup``."""

MODEL_REPLY_POINT = "model.before_reply"
"""The one point the faults of the model's wire act at: its answer is decided, not sent."""

MODEL_WIRE_FAULTS = {
    "rate-limit": "model-rate-limit",
    "server-error": "model-server-error",
    "overloaded": "model-overloaded",
    "stream-cut": "model-stream-cut",
    "stream-hang": "model-stream-hang",
    "lost-answer": "model-lost-answer",
}
"""The actions that make the scripted model a black box talks to fail as a provider does
(at ``MODEL_REPLY_POINT``), and the fault kind each is: a 429 with ``retry-after``
(``rate-limit(ms)``), a 500, an overload (529, Anthropic's; 503, OpenAI's), the answer cut
in the middle of its first tool call's JSON arguments, an answer whose headers come and
nothing after (``stream-hang(ms)``: then closed; without ms, until the life ends), and an
answer lost whole (the request taken, the connection closed before any byte)."""

AGENT_HOOKS = {"recover": "recover-in-flight", "sync-call": "both-apis"}
"""The actions that call back into the agent program while a call is in flight, and the
fault each reports once it acted: ``recover`` calls its ``recover()``, ``sync-call`` calls
the op again through the synchronous API while an ``AsyncRuntime`` drives it."""

_TIMED = ("rate-limit", "stream-hang")
"""The faults of the model's answer that take milliseconds: how long to wait, or to hang."""

_ENTRY = re.compile(
    r"^(?P<name>[a-z_]+(?:\.[a-z_]+)+)(?:@(?P<hit>[0-9]+))?=(?P<action>[a-z][a-z-]*)"
    r"(?:\((?P<arg>[0-9]+)\))?$"
)


@dataclass(frozen=True, slots=True)
class FailpointSpec:
    """One armed point: act on hit ``hit`` (every hit when None)."""

    name: str
    action: str
    hit: int | None = None
    arg: int | None = None

    def __str__(self) -> str:
        at = "" if self.hit is None else f"@{self.hit}"
        arg = "" if self.arg is None else f"({self.arg})"
        return f"{self.name}{at}={self.action}{arg}"

    @property
    def at(self) -> str:
        """How the agent names the hit it acts on, on its channel: ``op.reply 3`` (the op
        id follows), or the name alone for every hit."""
        return self.name if self.hit is None else f"{self.name} {self.hit}"


def parse_spec(
    text: str, *, source: str, known: Collection[str] | None = None
) -> tuple[FailpointSpec, ...]:
    """Parse a spec; ``ValueError`` names the source, the entry and the problem.

    ``known``: the failpoints an entry may name (None: any name of the grammar's shape).
    """
    specs: list[FailpointSpec] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        match = _ENTRY.match(entry)
        if match is None:
            raise ValueError(
                f"{source}: entry {entry!r} is not name[@N]=action[(arg)], "
                f"e.g. op.after_effect@3=kill"
            )
        name, action = match["name"], match["action"]
        if known is not None and name not in known:
            raise ValueError(
                f"{source}: entry {entry!r}: unknown failpoint {name!r} (known: {', '.join(known)})"
            )
        if action not in ACTIONS:
            raise ValueError(
                f"{source}: entry {entry!r}: unknown action {action!r} "
                f"(known: {', '.join(ACTIONS)})"
            )
        hit = int(match["hit"]) if match["hit"] is not None else None
        if hit == 0:
            raise ValueError(f"{source}: entry {entry!r}: hits count from 1")
        arg = int(match["arg"]) if match["arg"] is not None else None
        if action == "sleep" and arg is None:
            raise ValueError(f"{source}: entry {entry!r}: sleep needs milliseconds, sleep(250)")
        if action == "pause" and arg is None:
            raise ValueError(
                f"{source}: entry {entry!r}: pause needs the milliseconds it is held stopped, "
                "pause(500)"
            )
        if action in MODEL_WIRE_FAULTS and name != MODEL_REPLY_POINT:
            raise ValueError(
                f"{source}: entry {entry!r}: {action} is a fault of the model's answer, "
                f"armed at {MODEL_REPLY_POINT} only"
            )
        if arg is not None and action in MODEL_WIRE_FAULTS and action not in _TIMED:
            raise ValueError(f"{source}: entry {entry!r}: {action} takes no argument")
        specs.append(FailpointSpec(name, action, hit, arg))
    return tuple(specs)
