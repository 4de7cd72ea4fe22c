"""TOML text for the files the harness writes (scenarios), read back by ``tomllib``.

The standard library reads TOML and does not write it: a value is written here as an
inline value (``toml_value``), a string as a basic string (``toml_string``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["toml_string", "toml_value"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string."""
    # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(value: Any, plain: Callable[[Any], Any] | None = None) -> str:
    """``value`` (a bool, number, string, mapping, list or tuple of them) as an inline TOML
    value; ``plain`` first turns a value of the caller's own type into one of those."""
    if plain is not None:
        value = plain(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = (
            f"{key if _BARE_KEY.match(key) else toml_string(key)} = {toml_value(item, plain)}"
            for key, item in value.items()
        )
        return "{ " + ", ".join(items) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item, plain) for item in value) + "]"
    raise TypeError(f"{value!r} has no TOML form")
