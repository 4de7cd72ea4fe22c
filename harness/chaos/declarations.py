"""Tool declarations at the boundary: a scenario's own tools, validated before anything runs.

A scenario declares tools inline (``[tools.NAME]``) or in a tools file it
names (``tools_file = "support/declarations.toml"``, a file of ``[tools.NAME]``
tables only). Each declaration gives the tool's arguments and its **true
behaviour**, one of ``harness.world.declared.BEHAVIOURS``, which the world
implements; the runtime's class still comes from its tool table::

    [tools.charge_card]
    behaviour = "increment"        # read put create increment delete send opaque
    summary = "charge the card on file"
    args = { customer = "str", amount = "int", memo = "str?" }   # "?": optional
    collection = "balances"        # where the records live
    key = "customer"               # the argument naming the record
    by = "amount"                  # increment: an int argument, or a number
    multi_step = true              # hits op.mid_effect between prepare and apply
    [tools.charge_card.verify]     # how a read reveals the effect: the default check
    tool = "get_balance"           # of every step that calls it without its own
    args = { customer = "{customer}" }
    path = "value"
    equals = 1900

Keys: ``dedupe = "key"`` with a ``window`` drops repeats; ``lookup = "key"`` records it only.
The full note: docs/reference/modules.md (``harness/chaos/declarations.py``).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from harness.errors import ScenarioError
from harness.runtime.classes import parse_window
from harness.world.catalog import ARG_TYPES, CATALOG, ArgSpec
from harness.world.declared import BEHAVIOURS, DeclaredTool

__all__ = [
    "FIELDS",
    "MAX_TOOLS_FILE_BYTES",
    "Declared",
    "ToolDeclaration",
    "ToolsFile",
    "check_tool_name",
    "declared_tools",
    "read_text_file",
    "read_tools_file",
]

MAX_TOOLS_FILE_BYTES = 1 << 20
"""A tools file larger than this is refused before it is parsed."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

FIELDS: Mapping[str, tuple[frozenset[str], frozenset[str]]] = MappingProxyType(
    {
        # behaviour: (fields it needs, fields it also takes)
        "read": (frozenset(), frozenset({"collection", "channel", "key"})),
        "put": (frozenset({"collection", "key"}), frozenset({"value", "multi_step", "verify"})),
        "create": (frozenset({"collection"}), frozenset({"value", "multi_step", "verify"})),
        "increment": (
            frozenset({"collection", "key"}),
            frozenset({"by", "multi_step", "verify"}),
        ),
        "delete": (
            frozenset({"collection", "key", "missing"}),
            frozenset({"multi_step", "verify"}),
        ),
        "send": (frozenset({"channel"}), frozenset({"value", "multi_step", "verify"})),
        "opaque": (frozenset(), frozenset({"multi_step"})),
    }
)
_KEYED = frozenset({"dedupe", "window", "lookup"})
FIELDS = MappingProxyType(
    {b: (needs, takes | _KEYED if b != "read" else takes) for b, (needs, takes) in FIELDS.items()}
)
"""The fields each behaviour needs and takes, besides ``behaviour``, ``summary`` and ``args``.

A ``read`` needs exactly one of ``collection`` and ``channel``; ``opaque`` takes
no ``verify`` (no read reveals a call that is only recorded), ``read`` no
``multi_step`` and no ``verify`` (a read has no effect to split or check)."""

if set(FIELDS) != set(BEHAVIOURS):  # pragma: no cover - the table must cover the vocabulary
    raise AssertionError("FIELDS must list every behaviour of harness.world.declared")

_MEANING: Mapping[str, str] = MappingProxyType(
    {
        "collection": "the collection its records live in",
        "channel": "the outbox channel it sends to or reads",
        "key": "the argument that names the record",
        "value": "the arguments whose object it stores or sends",
        "by": "the int argument (or the number) it adds",
        "missing": 'what a second call does: "fail" or "ignore"',
        "multi_step": "whether it prepares, hits op.mid_effect, then applies",
        "verify": "how a read reveals its effect",
        "dedupe": 'what its provider drops a repeat by: "key" (the idempotency key)',
        "window": 'how long its provider keeps a key: "24h", "30m", or seconds',
        "lookup": 'what its provider finds an effect by: "key" (the idempotency key it carried)',
    }
)


def _problem(field: str | None, message: str) -> PydanticCustomError:
    return PydanticCustomError("scenario", "{problem}", {"problem": message, "field": field or ""})


class ToolDeclaration(BaseModel):
    """One ``[tools.NAME]`` table, as written: checked against ``FIELDS`` and its own args."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    behaviour: Literal["read", "put", "create", "increment", "delete", "send", "opaque"]
    summary: str = ""
    args: dict[str, str] = Field(default_factory=dict)
    collection: str | None = None
    channel: str | None = None
    key: str | None = None
    value: list[str] | None = None
    by: str | int | None = None
    missing: Literal["fail", "ignore"] | None = None
    multi_step: bool = False
    verify: dict[str, Any] | None = None
    """Checked by ``harness.chaos.scenario`` once every declaration is known."""
    dedupe: Literal["key"] | None = None
    window: str | int | None = None
    lookup: Literal["key"] | None = None

    def given(self) -> set[str]:
        """The optional fields the declaration sets (``multi_step`` counts when true)."""
        given = {f for f in _MEANING if f != "multi_step" and getattr(self, f) is not None}
        return given | ({"multi_step"} if self.multi_step else set())

    @model_validator(mode="after")
    def _check(self) -> Self:
        needs, takes = FIELDS[self.behaviour]
        given = self.given()
        for name in sorted(given - needs - takes):
            allowed = ", ".join(sorted(needs | takes)) or "none"
            raise _problem(
                name, f"a {self.behaviour} tool takes no {name!r} (its fields: {allowed})"
            )
        for name in sorted(needs - given):
            raise _problem(name, f"a {self.behaviour} tool needs {name!r}: {_MEANING[name]}")
        if self.behaviour == "read" and (self.collection is None) == (self.channel is None):
            raise _problem(
                None, "a read tool names exactly one of 'collection' and 'channel' to read"
            )
        if self.channel is not None and self.key is not None:
            raise _problem("key", "a read of a channel reads every message; it takes no key")
        for name in ("collection", "channel"):
            where = getattr(self, name)
            if where is not None and not where.strip():
                raise _problem(name, f"must name a {name}, not be empty")
        if (self.dedupe is None) != (self.window is None):
            raise _problem("window", "'dedupe' and 'window' go together: a key is kept a while")
        if self.window is not None:
            try:
                parse_window(self.window)
            except ValueError as exc:
                raise _problem("window", str(exc)) from None
        types = self._arg_types()
        self._check_key(types)
        self._check_by(types)
        for name in self.value or ():
            if name not in types:
                raise _problem("value", f"{name!r} is not an argument{_args_of(types)}")
            if name == self.key:
                raise _problem("value", f"{name!r} is the key; the value is the other arguments")
        if self.behaviour == "put" and not self.value_args():
            raise _problem(
                "value", "a put sets fields of a record: it needs an argument besides the key"
            )
        return self

    def _arg_types(self) -> dict[str, tuple[str, bool]]:
        types = {}
        for name, written in self.args.items():
            if name == "fail_attempts":
                raise _problem(f"args.{name}", "is reserved for simulated transient failures")
            if not _NAME.match(name):
                raise _problem(f"args.{name}", f"{name!r} is not identifier-like")
            kind = written.removesuffix("?")
            if kind not in ARG_TYPES:
                known = ", ".join(ARG_TYPES)
                raise _problem(
                    f"args.{name}", f"unknown type {written!r}; types: {known} (add ? if optional)"
                )
            types[name] = (kind, written.endswith("?"))
        return types

    def _check_key(self, types: Mapping[str, tuple[str, bool]]) -> None:
        if self.key is None:
            return
        if self.key not in types:
            raise _problem("key", f"{self.key!r} is not an argument{_args_of(types)}")
        if types[self.key] != ("str", False):
            raise _problem("key", f"the key argument {self.key!r} must be a required str")

    def _check_by(self, types: Mapping[str, tuple[str, bool]]) -> None:
        if self.by is None or isinstance(self.by, int):
            return
        if self.by not in types:
            raise _problem("by", f"{self.by!r} is not an argument{_args_of(types)}")
        if types[self.by] != ("int", False):
            raise _problem("by", f"the amount argument {self.by!r} must be a required int")

    def value_args(self) -> tuple[str, ...]:
        """The arguments whose object is stored or sent: ``value``, or all but key and by."""
        if self.value is not None:
            return tuple(self.value)
        if self.behaviour not in ("put", "create", "send"):
            return ()
        return tuple(name for name in self.args if name not in (self.key, self.by))

    def compile(self, name: str) -> DeclaredTool:
        """The world's ``DeclaredTool`` for this declaration (the plan carries it)."""
        args = tuple(
            ArgSpec(arg, written.removesuffix("?"), written.endswith("?"))
            for arg, written in self.args.items()
        )
        by = self.by if self.by is not None or self.behaviour != "increment" else 1
        return DeclaredTool(
            name,
            self.behaviour,
            args,
            self.summary,
            self.collection,
            self.channel,
            self.key,
            self.value_args(),
            by,
            self.missing,
            self.multi_step,
            self.dedupe,
            None if self.window is None else parse_window(self.window),
            self.lookup,
        )


def _args_of(types: Mapping[str, Any]) -> str:
    return f"; its arguments: {', '.join(types)}" if types else "; it declares no arguments"


class ToolsFile(BaseModel):
    """A tools file: ``[tools.NAME]`` tables and nothing else."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: dict[str, ToolDeclaration]


@dataclass(frozen=True, slots=True)
class Declared:
    """A declared tool, compiled, with where it was declared and its check as written."""

    tool: DeclaredTool
    source: str
    verify: Mapping[str, Any] | None


def check_tool_name(name: str) -> str | None:
    """Why ``name`` cannot name a declared tool, or None."""
    if not _NAME.match(name):
        return f"{name!r} is not identifier-like (letters, digits and _, not starting with a digit)"
    if name in CATALOG:
        return f"{name} is a built-in tool; a declared tool needs a name of its own"
    return None


def read_text_file(path: Path | str, limit: int, *, cannot: str = "cannot read") -> str:
    """The UTF-8 text of a scenario's file of at most ``limit`` bytes, or a
    ``ScenarioError`` naming it (``cannot`` begins the message when it is unreadable)."""
    try:
        with Path(path).open("rb") as file:
            raw = file.read(limit + 1)
    except OSError as exc:
        raise ScenarioError(path, None, None, f"{cannot}: {exc.strerror}") from None
    if len(raw) > limit:
        raise ScenarioError(path, None, None, f"larger than {limit} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(path, None, None, f"not UTF-8 text: {exc}") from None


def read_tools_file(path: Path) -> str:
    """The text of a tools file, or a ``ScenarioError`` naming it."""
    return read_text_file(path, MAX_TOOLS_FILE_BYTES, cannot="cannot read tools file")


def declared_tools(
    inline: Any, tools_file: Path | None, *, source: str, to_error: Any
) -> dict[str, Declared]:
    """Every declaration of a scenario (inline, then its tools file), compiled.

    ``to_error(source, ValidationError) -> ScenarioError`` maps pydantic's
    errors to file, tool and field (the scenario module's mapper).
    """
    found: dict[str, Declared] = {}
    tables: list[tuple[str, Any]] = []
    if inline is not None:
        tables.append((source, {"tools": inline}))
    if tools_file is not None:
        text = read_tools_file(tools_file)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ScenarioError(tools_file, None, None, f"not valid TOML: {exc}") from None
        for key in sorted(set(data) - {"tools"}):
            problem = "unknown key; a tools file holds [tools.NAME] tables only"
            raise ScenarioError(tools_file, None, key, problem)
        tables.append((str(tools_file), data))
    for where, data in tables:
        try:
            parsed = ToolsFile.model_validate(data)
        except ValidationError as exc:
            raise to_error(where, exc) from None
        for name, declaration in parsed.tools.items():
            why = check_tool_name(name)
            if why is not None:
                raise ScenarioError(where, None, None, why, tool=name)
            if name in found:
                # Named in the scenario, the file that says which tools it has.
                problem = f"declared twice: in {found[name].source} and in {where}"
                raise ScenarioError(source, None, None, problem, tool=name)
            found[name] = Declared(declaration.compile(name), where, declaration.verify)
    return found
