"""The checkers' own reader of a tool table, written from its file format alone.

A checker that classed ops with the runtime's ``ToolTable`` would share its
bugs (a tool read into the wrong class would be judged by the same wrong
class). So this reads the file the supervisor handed a life itself, and
imports nothing of ``harness.runtime``:

    format = 1                         (optional; no other format is known)
    [classes]                          class = [tool names]
    read_only = ["logcat", ...]        (read_only, idempotent_write,
    [ask_user]                          non_idempotent, unknown)
    non_idempotent = ["ask_user"]      the ask-user family, same classes
    [keyed]                            tool = window (seconds, or "24h"): its
    charge = "24h"                      provider drops a repeat of a key
    [content.pay]                      what makes two calls the same action: no
    identity = ["to", "amount"]         class depends on it (I12 reads it from the plan)

A tool the table does not list is ``unknown`` and not ask_user: the
conservative side. A table the runtime would refuse (an unknown class or
section, a tool listed twice, a name that is not a non-empty string) is
refused here too, with ``ValueError``: a checker never judges by half a table.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

__all__ = ["CLASSES", "SHIPPED_TABLE", "UNLISTED", "CheckTable", "parse_table", "read_table"]

CLASSES = ("read_only", "idempotent_write", "non_idempotent", "unknown")
UNLISTED = ("unknown", False)
"""``(class, ask_user)`` of a tool the table does not list."""
SHIPPED_TABLE = Path(__file__).resolve().parent.parent / "runtime" / "tools.toml"
"""The table a life gets when the supervisor hands it none (read as a file, not imported)."""


class CheckTable:
    """Tool name -> ``(class, ask_user)``, as a table file says."""

    __slots__ = ("_entries", "keyed", "source")

    def __init__(
        self,
        entries: Mapping[str, tuple[str, bool]],
        source: str,
        keyed: Mapping[str, float] | None = None,
    ) -> None:
        self._entries: Mapping[str, tuple[str, bool]] = MappingProxyType(dict(entries))
        self.source = source
        self.keyed: Mapping[str, float] = MappingProxyType(dict(keyed or {}))
        """Keyed tools and their windows in seconds."""

    def class_of(self, tool: str) -> tuple[str, bool]:
        """``(class, ask_user)`` of ``tool``; ``UNLISTED`` when the table does not list it."""
        return self._entries.get(tool, UNLISTED)

    @property
    def entries(self) -> Mapping[str, tuple[str, bool]]:
        return self._entries


def parse_table(text: str, source: str) -> CheckTable:
    """A table from the text of its file; ``ValueError`` naming ``source`` if malformed."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{source}: not valid TOML: {exc}") from exc
    extra = sorted(set(data) - {"format", "classes", "ask_user", "keyed", "content"})
    if extra:
        raise ValueError(f"{source}: unknown section {extra[0]!r}")
    if not isinstance(data.get("content", {}), dict):
        raise ValueError(f"{source}: content must hold one table per tool")
    if data.get("format", 1) != 1:
        raise ValueError(f"{source}: unsupported format {data['format']!r}")
    entries: dict[str, tuple[str, bool]] = {}
    for section, ask_user in (("classes", False), ("ask_user", True)):
        body = data.get(section, {})
        if not isinstance(body, dict):
            raise ValueError(f"{source}: {section} must be a table of class = [tools]")
        for name, tools in body.items():
            if name not in CLASSES or not isinstance(tools, list):
                raise ValueError(f"{source}: {section}.{name} is no class with a list of tools")
            for tool in tools:
                if not isinstance(tool, str) or not tool or tool in entries:
                    raise ValueError(f"{source}: {section}.{name}: bad or repeated tool {tool!r}")
                entries[tool] = (name, ask_user)
    keyed: dict[str, float] = {}
    body = data.get("keyed", {})
    if not isinstance(body, dict):
        raise ValueError(f"{source}: keyed must be a table of tool = window")
    for tool, window in body.items():
        if tool not in entries:
            raise ValueError(f"{source}: keyed.{tool} is listed in no class")
        keyed[tool] = _window(source, tool, window)
    return CheckTable(entries, source, keyed)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _window(source: str, tool: str, window: object) -> float:
    """Seconds of a window as the file gives it (a number, or ``"24h"``...)."""
    seconds: float | None = None
    if isinstance(window, int | float) and not isinstance(window, bool):
        seconds = float(window)
    elif isinstance(window, str) and window[-1:] in _UNITS:
        try:
            seconds = float(window[:-1]) * _UNITS[window[-1]]
        except ValueError:
            seconds = None
    if seconds is None or not 0 < seconds < float("inf"):
        raise ValueError(f"{source}: keyed.{tool}: not a window: {window!r}")
    return seconds


def read_table(path: Path | str | None) -> CheckTable:
    """The table file at ``path``; the shipped table for None."""
    path = SHIPPED_TABLE if path is None else Path(path)
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the tool table: {exc}") from exc
    return parse_table(text, str(path))
