"""How the runtime knows that a call is one it has journaled: by its id, or by its content.

By default the runtime knows an op by its id: a call whose id the journal holds is answered
from the journal, any other is new. A model that re-runs inference after a
restart (an LLM re-issuing its tool calls) gives the same call a new id each
time, and under identity by id every such call looks new: a durable success
runs again, a call left running is replayed instead of verified.

Identity by content (``Identity.CONTENT``) answers such a call from the op
it stands for: a call whose id the journal does not know is matched to the
earliest journaled op with the same tool and the same argument digest that
no call of this life has claimed yet (``match_by_content``). A life claims an
op when one of its calls is answered by it, by id or by content, or when one
of its calls is journaled as a new op. A model re-issues its calls in the
same order in every life, so the k-th call of a given content in a life is
matched to the k-th op of that content in the journal: two identical calls
in a row are told apart by their position, never merged into one.

A tool's table entry may narrow what is compared (``ContentRule``): its business key
(``identity``) or the arguments that may drift (``volatile``), so that a payment
re-issued with a fresh request id is matched. Without one, the whole arguments are.

The full note: docs/reference/modules.md (``harness/runtime/identity.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ContentKey", "ContentRule", "Identity", "match_by_content"]


class Identity(enum.Enum):
    """How a call is recognised as one the journal already holds."""

    ID = "id"
    """By its op id alone (the default): a new id is a new call."""
    CONTENT = "content"
    """By its id, or else by its tool, argument digest and position among the calls of
    the same content (a model that re-issues its calls under new ids)."""


@dataclass(frozen=True, slots=True)
class ContentKey:
    """What identity by content compares: the tool and the digest of its arguments."""

    tool: str
    args_digest: str


@dataclass(frozen=True, slots=True)
class ContentRule:
    """What identity by content compares of one tool's calls, as its table declares it.

    ``identity``: the arguments that make a call the same action (its business key);
    only those are compared. ``volatile``: arguments that may differ between a call and
    its re-issue (a request id, a timestamp); every other argument is compared. With
    both, ``identity`` decides and ``volatile`` only documents (the two never overlap:
    ``harness.runtime.classes.ToolTable`` refuses a table where they do).
    """

    identity: tuple[str, ...] | None = None
    volatile: tuple[str, ...] = ()

    def compared(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The part of a call's arguments that identity compares. A missing identity
        argument is left out, so a call without it is not the call with it."""
        if self.identity is not None:
            return {name: args[name] for name in self.identity if name in args}
        return {name: value for name, value in args.items() if name not in self.volatile}

    def names(self) -> tuple[str, ...]:
        """Every argument the rule names, identity first."""
        return (*(self.identity or ()), *self.volatile)

    def to_json(self) -> dict[str, list[str]]:
        data: dict[str, list[str]] = {}
        if self.identity is not None:
            data["identity"] = list(self.identity)
        if self.volatile:
            data["volatile"] = list(self.volatile)
        return data


def match_by_content(
    journaled: Iterable[tuple[str, ContentKey]],
    wanted: ContentKey,
    claimed: Collection[str],
) -> str | None:
    """The earliest journaled op of ``wanted``'s content that no call has claimed, or None.

    ``journaled`` is every op that may answer a call, in the order of its first
    intent, as ``(op id, content)`` (redoes and fresh calls left out);
    ``claimed`` the ops this life's calls have already taken. Pure: the
    caller claims the op it gets.
    """
    for op_id, key in journaled:
        if key == wanted and op_id not in claimed:
            return op_id
    return None
