"""Idempotency classes and the tool table: which tools may be run again.

The runtime sorts tools into four classes by what running one twice does, plus the
ask-user family (asking a person again is harmless). The table is data, shipped
as ``tools.toml`` beside this module; users load their own or override entries.
A tool missing from the table is ``UNKNOWN``: the conservative side.

A table may also mark a tool *keyed* (its ``[keyed]`` section: ``charge = "24h"``):
its provider drops a second request carrying the same idempotency key within that
retention window, so recovery may send an op left running again with the same key
while the window holds (``harness.runtime.matrix.decide_keyed``).

``[content.TOOL]`` says what makes two calls the same action (``identity``, ``volatile``
argument names: ``harness.runtime.identity``), as an MCP tool's ``_meta`` may.

A table can also be read from an MCP server's tool annotations
(``ToolTable.from_mcp``; the mapping is ``MCP_ANNOTATION_CLASSES``, applied
by the pure ``ToolTable.from_annotations``), and written back in the file
format (``ToolTable.to_toml``, which ``ToolTable.parse`` reads back equal).

Contract: a ``ToolTable`` is immutable once built, and building one from a
malformed file raises ``ToolTableError`` naming the file, the entry and the
problem, so a half-loaded table never exists.
"""

from __future__ import annotations

import enum
import functools
import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from harness.runtime.errors import ToolTableError
from harness.runtime.identity import ContentRule

if TYPE_CHECKING:
    from harness.runtime.mcp_table import McpListing

__all__ = [
    "MCP_ANNOTATION_CLASSES",
    "MCP_CONTENT_META",
    "MCP_HINTS",
    "AnnotatedClass",
    "IdempotencyClass",
    "ToolClass",
    "ToolTable",
    "class_from_annotations",
    "content_rule",
    "content_rule_from_mcp",
    "parse_window",
]


class IdempotencyClass(enum.Enum):
    """What running a tool twice does (four classes)."""

    READ_ONLY = "read_only"
    """A replay has no side effect."""
    IDEMPOTENT_WRITE = "idempotent_write"
    """A replay leaves the same result (a whole-file overwrite)."""
    NON_IDEMPOTENT = "non_idempotent"
    """A replay repeats the side effect (a second tap submits twice)."""
    UNKNOWN = "unknown"
    """The runtime cannot judge (an arbitrary shell command)."""

    @property
    def retry_safe(self) -> bool:
        """``read_only or idempotent``: may be run again without asking."""
        return self in _RETRY_SAFE


_RETRY_SAFE = frozenset({IdempotencyClass.READ_ONLY, IdempotencyClass.IDEMPOTENT_WRITE})


@dataclass(frozen=True, slots=True)
class ToolClass:
    """A tool's classification, as snapshotted into each intent record."""

    idempotency: IdempotencyClass
    ask_user: bool = False
    key_window: float | None = None
    """Keyed: the provider drops a repeat of the same idempotency key for this many seconds
    (None: the tool honours no key)."""

    @property
    def retry_safe(self) -> bool:
        """True when a transient failure may be retried in-process."""
        return self.ask_user or self.idempotency.retry_safe

    @property
    def keyed(self) -> bool:
        """Whether the tool's provider deduplicates by the idempotency key."""
        return self.key_window is not None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"class": self.idempotency.value, "ask_user": self.ask_user}
        if self.key_window is not None:  # written only when keyed: older snapshots read equal
            data["key_window"] = self.key_window
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolClass:
        if not isinstance(data["ask_user"], bool):
            raise ValueError(f"ask_user must be a boolean, got {data['ask_user']!r}")
        window = data.get("key_window")
        if window is not None and (
            isinstance(window, bool) or not isinstance(window, int | float) or window <= 0
        ):
            raise ValueError(f"key_window must be a positive number, got {window!r}")
        return cls(
            IdempotencyClass(data["class"]),
            data["ask_user"],
            None if window is None else float(window),
        )


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_window(value: object) -> float:
    """A retention window in seconds: a positive number, or text such as ``"90s"``,
    ``"30m"``, ``"24h"``, ``"7d"``; ``ValueError`` for anything else."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and value[-1:] in _UNITS:
        try:
            seconds = float(value[:-1]) * _UNITS[value[-1]]
        except ValueError:
            raise ValueError(f"not a window: {value!r}") from None
    else:
        raise ValueError(f'not a window: {value!r} (seconds, or text like "24h")')
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"a window must be positive and finite, got {value!r}")
    return seconds


UNLISTED = ToolClass(IdempotencyClass.UNKNOWN)

MCP_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
"""The behaviour hints of an MCP tool's annotations, in the specification's order."""

MCP_ANNOTATION_CLASSES: Mapping[tuple[bool, bool, bool], IdempotencyClass] = MappingProxyType(
    {
        # (annotations present, readOnlyHint is true, idempotentHint is true): class
        (False, False, False): IdempotencyClass.UNKNOWN,
        (True, True, False): IdempotencyClass.READ_ONLY,
        (True, True, True): IdempotencyClass.READ_ONLY,
        (True, False, True): IdempotencyClass.IDEMPOTENT_WRITE,
        (True, False, False): IdempotencyClass.NON_IDEMPOTENT,
    }
)
"""An MCP tool's class from its annotations. Hints from a server are untrusted, so only a
hint that is literally ``true`` counts, and whatever it does not say is the conservative
side: annotations that set neither hint (``destructiveHint`` or ``openWorldHint`` alone, an
empty object, only a title) mean what the specification's defaults mean (not read-only,
not idempotent): non-idempotent; no annotations at all say nothing: unknown."""


@dataclass(frozen=True, slots=True)
class AnnotatedClass:
    """A tool's class read from its MCP annotations, and the annotation that decided it."""

    idempotency: IdempotencyClass
    reason: str


def class_from_annotations(annotations: Mapping[str, object] | None) -> AnnotatedClass:
    """The class ``MCP_ANNOTATION_CLASSES`` gives an MCP tool's annotations (wire names:
    ``readOnlyHint``, ``idempotentHint``...), or None when the server sent none."""
    hints: Mapping[str, object] = annotations or {}
    read_only = hints.get("readOnlyHint") is True
    idempotent = hints.get("idempotentHint") is True
    idempotency = MCP_ANNOTATION_CLASSES[(annotations is not None, read_only, idempotent)]
    if annotations is None:
        reason = "no annotations at all"
    elif read_only:
        reason = "readOnlyHint: true"
    elif idempotent:
        reason = "idempotentHint: true, readOnlyHint not true"
    else:
        given = ", ".join(
            f"{hint}: {json.dumps(annotations[hint], default=repr)}"
            for hint in MCP_HINTS
            if hint in annotations
        )
        reason = f"neither readOnlyHint nor idempotentHint true ({given or 'no hints'})"
    return AnnotatedClass(idempotency, reason)


MCP_CONTENT_META = "agent-crash-harness/identity"
"""The key of an MCP tool's ``_meta`` under which a server declares what makes two calls the
same action: ``{"identity": ["to", "amount"], "volatile": ["request_id"]}`` (either list,
or both). ``_meta`` is the protocol's place for such extensions: clients pass it on and no
framework shows it to a model."""


def content_rule(
    source: Path | str, where: str, body: object, arguments: Iterable[str] | None = None
) -> ContentRule:
    """A ``ContentRule`` from its declaration ``body`` (``identity`` and ``volatile``, lists
    of argument names), or ``ToolTableError`` naming ``source``, ``where`` and the problem:
    not a table, an unknown field, not a list of names, a name twice, a name in both
    lists, or (with the tool's ``arguments``) a name the tool does not take."""
    if not isinstance(body, Mapping):
        raise ToolTableError(source, where, "must be a table of identity = [...], volatile = [...]")
    extra = sorted(set(body) - {"identity", "volatile"})
    if extra:
        raise ToolTableError(
            source, f"{where}.{extra[0]}", "unknown field (known: identity, volatile)"
        )
    lists: dict[str, tuple[str, ...]] = {}
    for field in ("identity", "volatile"):
        if field not in body:
            continue
        names = body[field]
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ToolTableError(source, f"{where}.{field}", "must be a list of argument names")
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ToolTableError(source, f"{where}.{field}", f"names {twice[0]!r} twice")
        lists[field] = tuple(names)
    if not lists:
        raise ToolTableError(source, where, "declares neither identity nor volatile")
    both = sorted(set(lists.get("identity", ())) & set(lists.get("volatile", ())))
    if both:
        raise ToolTableError(
            source, where, f"{both[0]!r} is in both identity and volatile: it is one or the other"
        )
    if "identity" in lists and not lists["identity"]:
        raise ToolTableError(
            source, f"{where}.identity", "is empty: every call of the tool would be the same"
        )
    rule = ContentRule(lists.get("identity"), lists.get("volatile", ()))
    if arguments is not None:
        _check_names(source, where, rule, arguments)
    return rule


def _check_names(
    source: Path | str, where: str, rule: ContentRule, arguments: Iterable[str]
) -> None:
    known = list(arguments)
    for field, names in (("identity", rule.identity or ()), ("volatile", rule.volatile)):
        for name in names:
            if name not in known:
                takes = ", ".join(known) or "no arguments"
                raise ToolTableError(
                    source,
                    f"{where}.{field}",
                    f"unknown argument {name!r} (the tool takes: {takes})",
                )


def content_rule_from_mcp(
    tool: str, meta: Mapping[str, object] | None, input_schema: Mapping[str, object], *, source: str
) -> ContentRule | None:
    """The rule an MCP tool declares in ``_meta[MCP_CONTENT_META]`` (None when it declares
    none), checked against the argument names of its input schema: a bad declaration is a
    ``ToolTableError`` naming the server, the tool and the problem, never ignored."""
    body = (meta or {}).get(MCP_CONTENT_META)
    if body is None:
        return None
    properties = input_schema.get("properties")
    arguments = list(properties) if isinstance(properties, Mapping) else []
    return content_rule(source, f"{tool} _meta[{MCP_CONTENT_META!r}]", body, arguments)


@functools.cache
def _shipped_table() -> ToolTable:
    # Immutable, so one parse serves the process (and every child forked from it).
    # Read beside this file, not through importlib.resources: that import alone
    # costs the agent ~10 ms at every start.
    text = Path(__file__).with_name("tools.toml").read_text("utf-8")
    return ToolTable.parse(text, source="harness/runtime/tools.toml")


class ToolTable:
    """An immutable map from tool name to ``ToolClass``; unlisted tools are UNKNOWN."""

    __slots__ = ("_content", "_entries", "source")

    def __init__(
        self,
        entries: Mapping[str, ToolClass | IdempotencyClass],
        *,
        source: str = "<memory>",
        content: Mapping[str, ContentRule] | None = None,
    ) -> None:
        checked: dict[str, ToolClass] = {}
        for tool, value in entries.items():
            if not isinstance(tool, str):
                raise ToolTableError(source, repr(tool), "a tool's name must be a string")
            if isinstance(value, ToolClass):
                checked[tool] = value
            elif isinstance(value, IdempotencyClass):
                checked[tool] = ToolClass(value)
            else:
                raise ToolTableError(
                    source,
                    tool,
                    f"{value!r} is not a ToolClass or an IdempotencyClass "
                    f"(for a name, IdempotencyClass({value!r}))",
                )
        self._entries: Mapping[str, ToolClass] = MappingProxyType(checked)
        self._content: Mapping[str, ContentRule] = MappingProxyType(dict(content or {}))
        self.source = source

    def classify(self, tool: str) -> ToolClass:
        """The tool's class, or UNKNOWN when the table does not list it."""
        return self._entries.get(tool, UNLISTED)

    def content_rule(self, tool: str) -> ContentRule | None:
        """What identity by content compares of the tool's calls, when the table says
        (``[content.TOOL]``); None: the whole arguments."""
        return self._content.get(tool)

    @property
    def content(self) -> Mapping[str, ContentRule]:
        return self._content

    def with_content(self, rules: Mapping[str, ContentRule]) -> ToolTable:
        """A new table with some tools' content rules added or replaced."""
        merged = {**self._content, **rules}
        return ToolTable(self._entries, source=self.source, content=merged)

    def check_arguments(self, arguments: Mapping[str, Iterable[str]]) -> None:
        """Refuse (``ToolTableError``) a content rule that names an argument its tool does
        not take; ``arguments`` maps each tool whose arguments are known to their names."""
        for tool, rule in self._content.items():
            if tool in arguments:
                _check_names(self.source, f"content.{tool}", rule, arguments[tool])

    def __contains__(self, tool: object) -> bool:
        return tool in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> Mapping[str, ToolClass]:
        return self._entries

    def with_overrides(self, overrides: Mapping[str, ToolClass | IdempotencyClass]) -> ToolTable:
        """A new table with some entries added or replaced."""
        merged: dict[str, ToolClass | IdempotencyClass] = {**self._entries, **overrides}
        return ToolTable(merged, source=f"{self.source} + overrides", content=self._content)

    @classmethod
    def from_annotations(
        cls,
        tools: Iterable[tuple[str, Mapping[str, object] | None]],
        *,
        source: str = "<memory>",
        content: Mapping[str, ContentRule] | None = None,
    ) -> ToolTable:
        """A table from MCP tools' ``(name, annotations)``, each classed by
        ``class_from_annotations`` (none is ask_user). Pure: no process, no SDK.

        Refused whole (``ToolTableError``) when a name is empty, is not text the file
        format can hold, or comes twice.
        """
        entries: dict[str, ToolClass] = {}
        for name, hints in tools:
            if not isinstance(name, str) or not name:
                raise ToolTableError(source, repr(name), "tool names must be non-empty strings")
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                raise ToolTableError(source, repr(name), "not valid Unicode text") from None
            if name in entries:
                raise ToolTableError(source, name, "listed twice")
            entries[name] = ToolClass(class_from_annotations(hints).idempotency)
        return cls(entries, source=source, content=content)

    @classmethod
    def from_mcp(
        cls,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = 30.0,  # mcp_table.DEFAULT_TIMEOUT_S, not imported until called
    ) -> ToolTable:
        """The table an MCP server's tool annotations give (``MCP_ANNOTATION_CLASSES``).

        Starts ``command`` as a child process over stdio with the MCP SDK's client
        (``pip install 'agent-crash-harness[mcp]'``), lists every page of its tools and
        stops it: the process is gone when this returns or raises. ``env`` goes over the
        SDK's default environment for a server; ``timeout`` bounds start and listing.
        Raises ``McpServerError`` (the server would not start, answer or list) or
        ``McpNotInstalledError``. See ``harness.runtime.mcp_table``.
        """
        from harness.runtime.mcp_table import list_mcp_tools

        listing = list_mcp_tools(command, env=env, timeout=timeout)
        return cls.from_listing(listing)

    @classmethod
    def from_listing(cls, listing: McpListing) -> ToolTable:
        """The table of an MCP server's listing: classes from its annotations, content rules
        from its tools' ``_meta`` (``MCP_CONTENT_META``), checked against their schemas."""
        rules: dict[str, ContentRule] = {}
        for detail in listing.details:
            rule = content_rule_from_mcp(
                detail.name, detail.meta, detail.input_schema, source=listing.source
            )
            if rule is not None:
                rules[detail.name] = rule
        return cls.from_annotations(listing.tools, source=listing.source, content=rules)

    def to_toml(self, *, header: Sequence[str] = (), notes: Mapping[str, str] | None = None) -> str:
        """The table in the file format ``parse`` and ``load`` read (they read it back equal).

        ``header`` lines become comments at the top; ``notes`` gives a tool a comment
        on its line. Tools keep the table's order within their class.
        """
        notes = notes or {}
        lines = [f"# {_comment(line)}".rstrip() for line in header]
        lines += ["", "format = 1"] if lines else ["format = 1"]
        for section, ask_user in (("classes", False), ("ask_user", True)):
            listed = {tool: c for tool, c in self._entries.items() if c.ask_user is ask_user}
            if ask_user and not listed:
                continue
            lines += ["", f"[{section}]"]
            for idempotency in IdempotencyClass:
                tools = [tool for tool, c in listed.items() if c.idempotency is idempotency]
                if not tools:
                    lines.append(f"{idempotency.value} = []")
                    continue
                lines.append(f"{idempotency.value} = [")
                for tool in tools:
                    note = f"  # {_comment(notes[tool])}" if tool in notes else ""
                    lines.append(f"    {_toml_string(tool)},{note}")
                lines.append("]")
        keyed = {tool: c.key_window for tool, c in self._entries.items() if c.key_window}
        if keyed:
            lines += ["", "[keyed]"]
            lines += [
                f"{_toml_string(tool)} = {_seconds(window)}" for tool, window in keyed.items()
            ]
        for tool, rule in self._content.items():
            lines += ["", f"[content.{_toml_string(tool)}]"]
            lines += [
                f"{field} = [{', '.join(map(_toml_string, names))}]"
                for field, names in rule.to_json().items()
            ]
        return "\n".join(lines) + "\n"

    @classmethod
    def shipped(cls) -> ToolTable:
        """The table shipped as ``harness/runtime/tools.toml`` (read once per process): the
        classes of the harness's simulated tools and of the examples. A runtime opened
        without a table uses none: every tool is UNKNOWN until a table says otherwise."""
        return _shipped_table()

    @classmethod
    def load(cls, path: Path | str) -> ToolTable:
        """Read a table file in the shipped format; refuse it whole if malformed."""
        try:
            text = Path(path).read_text("utf-8")
        except OSError as exc:
            raise ToolTableError(path, "<file>", f"cannot read: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ToolTableError(path, "<file>", f"not UTF-8 text: {exc}") from exc
        return cls.parse(text, source=str(path))

    @classmethod
    def parse(cls, text: str, *, source: str) -> ToolTable:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ToolTableError(source, "<file>", f"not valid TOML: {exc}") from exc
        entries: dict[str, ToolClass] = {}
        for section, ask_user in (("classes", False), ("ask_user", True)):
            body = data.get(section, {})
            if not isinstance(body, dict):
                raise ToolTableError(source, section, "must be a table of class = [tools]")
            for class_name, tools in body.items():
                where = f"{section}.{class_name}"
                try:
                    idempotency = IdempotencyClass(class_name)
                except ValueError:
                    known = ", ".join(c.value for c in IdempotencyClass)
                    raise ToolTableError(
                        source, where, f"unknown class {class_name!r} (known: {known})"
                    ) from None
                if not isinstance(tools, list):
                    raise ToolTableError(source, where, "must be a list of tool names")
                for tool in tools:
                    if not isinstance(tool, str) or not tool:
                        raise ToolTableError(
                            source, where, f"tool names must be non-empty strings, got {tool!r}"
                        )
                    if tool in entries:
                        raise ToolTableError(source, f"{where}.{tool}", "duplicate tool")
                    entries[tool] = ToolClass(idempotency, ask_user)
        keyed = data.get("keyed", {})
        if not isinstance(keyed, dict):
            raise ToolTableError(source, "keyed", "must be a table of tool = window")
        for tool, window in keyed.items():
            where = f"keyed.{tool}"
            if tool not in entries:
                raise ToolTableError(source, where, "a keyed tool must also be listed in a class")
            try:
                seconds = parse_window(window)
            except ValueError as exc:
                raise ToolTableError(source, where, str(exc)) from None
            entries[tool] = ToolClass(entries[tool].idempotency, entries[tool].ask_user, seconds)
        declared = data.get("content", {})
        if not isinstance(declared, dict):
            raise ToolTableError(source, "content", "must hold one table per tool: [content.TOOL]")
        content = {
            tool: content_rule(source, f"content.{tool}", body) for tool, body in declared.items()
        }
        unknown_keys = set(data) - {"format", "classes", "ask_user", "keyed", "content"}
        if unknown_keys:
            raise ToolTableError(source, sorted(unknown_keys)[0], "unknown section")
        if data.get("format", 1) != 1:
            raise ToolTableError(source, "format", f"unsupported format {data['format']!r}")
        return cls(entries, source=source, content=content)


def _seconds(window: float) -> str:
    return str(int(window)) if window == int(window) else repr(window)


def _toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(_escape_control(c) for c in escaped) + '"'


def _comment(text: str) -> str:
    """Text a TOML comment can hold: control characters (a newline too) written escaped."""
    return "".join(_escape_control(c) for c in text)


def _escape_control(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code < 0x20 or code == 0x7F else char
