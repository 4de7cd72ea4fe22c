"""Idempotency classes and the tool table: which tools may be run again.

The seed sorts tools into four classes by what running one twice does, plus the
ask-user family (asking a person again is harmless). The table is data, shipped
as ``tools.toml`` beside this module; users load their own or override entries.
A tool missing from the table is ``UNKNOWN``: the conservative side.

Contract: a ``ToolTable`` is immutable once built, and building one from a
malformed file raises ``ToolTableError`` naming the file, the entry and the
problem, so a half-loaded table never exists.
"""

from __future__ import annotations

import enum
import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harness.runtime.errors import ToolTableError

__all__ = ["IdempotencyClass", "ToolClass", "ToolTable"]


class IdempotencyClass(enum.Enum):
    """What running a tool twice does (the seed's four classes)."""

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

    @property
    def retry_safe(self) -> bool:
        """True when a transient failure may be retried in-process."""
        return self.ask_user or self.idempotency.retry_safe

    def to_json(self) -> dict[str, Any]:
        return {"class": self.idempotency.value, "ask_user": self.ask_user}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolClass:
        if not isinstance(data["ask_user"], bool):
            raise ValueError(f"ask_user must be a boolean, got {data['ask_user']!r}")
        return cls(IdempotencyClass(data["class"]), data["ask_user"])


UNLISTED = ToolClass(IdempotencyClass.UNKNOWN)


@functools.cache
def _default_table() -> ToolTable:
    # Immutable, so one parse serves the process (and every child forked from it).
    # Read beside this file, not through importlib.resources: that import alone
    # costs the agent ~10 ms at every start.
    text = Path(__file__).with_name("tools.toml").read_text("utf-8")
    return ToolTable.parse(text, source="harness/runtime/tools.toml")


class ToolTable:
    """An immutable map from tool name to ``ToolClass``; unlisted tools are UNKNOWN."""

    __slots__ = ("_entries", "source")

    def __init__(self, entries: Mapping[str, ToolClass], *, source: str = "<memory>") -> None:
        self._entries: Mapping[str, ToolClass] = MappingProxyType(dict(entries))
        self.source = source

    def classify(self, tool: str) -> ToolClass:
        """The tool's class, or UNKNOWN when the table does not list it."""
        return self._entries.get(tool, UNLISTED)

    def __contains__(self, tool: object) -> bool:
        return tool in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> Mapping[str, ToolClass]:
        return self._entries

    def with_overrides(self, overrides: Mapping[str, ToolClass | IdempotencyClass]) -> ToolTable:
        """A new table with some entries added or replaced."""
        merged = dict(self._entries)
        for tool, value in overrides.items():
            merged[tool] = value if isinstance(value, ToolClass) else ToolClass(value)
        return ToolTable(merged, source=f"{self.source} + overrides")

    @classmethod
    def default(cls) -> ToolTable:
        """The seed's table, shipped as ``harness/runtime/tools.toml`` (read once per process)."""
        return _default_table()

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
        unknown_keys = set(data) - {"format", "classes", "ask_user"}
        if unknown_keys:
            raise ToolTableError(source, sorted(unknown_keys)[0], "unknown section")
        if data.get("format", 1) != 1:
            raise ToolTableError(source, "format", f"unsupported format {data['format']!r}")
        return cls(entries, source=source)
