"""An agent program's name, from its command line: what ``init`` names its scenario and
what a black box's trial ids start with, in place of the whole command.

``agent_name`` takes the script's (or module's) name, or its folder's when that name is
generic (``agent.py``, ``main.py``), made identifier-like by ``identifier``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

__all__ = ["agent_name", "identifier"]

_GENERIC = frozenset({"agent", "main", "__main__", "app", "run", "cli", "index", "server"})


def agent_name(command: Sequence[str]) -> str:
    """An identifier-like name for the agent ``command``: its script's (or module's) name,
    or its folder's when that name is generic (``agent.py``, ``main.py``)."""
    words = list(command)
    if "-m" in words[:-1]:
        parts = words[words.index("-m") + 1].split(".")
        chosen = next((p for p in reversed(parts) if p not in _GENERIC), parts[-1])
    else:
        paths = [w for w in words[1:] if not w.startswith("-") and ("/" in w or "." in w)]
        path = Path(paths[-1] if paths else words[0])
        chosen = path.stem
        if chosen in _GENERIC and path.parent.name not in ("", ".", ".."):
            chosen = path.parent.name
    return identifier(chosen)


def identifier(text: str) -> str:
    """``text`` made identifier-like, as a scenario's name must be: lower case, each run of
    other characters one ``_``, ``agent_`` before a leading digit."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_").lower() or "agent"
    return name if not name[0].isdigit() else f"agent_{name}"
