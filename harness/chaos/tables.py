"""Tool-table variants a trial's later lives may run with (invariant 5).

``reclassified`` moves every seed tool to another class: non-idempotent and
idempotent writes swap, read-only tools become unknown and unknown tools
read-only. A runtime that decides from the intent's snapshot is unaffected
for ops already journaled; one that reads today's table decides differently.

``unlisted`` leaves every writing tool out (reads and the ask-user family
stay): the seed's rule makes a tool the table does not list UNKNOWN, so its
calls are snapshotted UNKNOWN and recovery must VERIFY them.
"""

from __future__ import annotations

from pathlib import Path

from harness.runtime.classes import IdempotencyClass, ToolTable

__all__ = ["write_table_variants"]

_RECLASSIFY = {
    IdempotencyClass.NON_IDEMPOTENT: IdempotencyClass.IDEMPOTENT_WRITE,
    IdempotencyClass.IDEMPOTENT_WRITE: IdempotencyClass.NON_IDEMPOTENT,
    IdempotencyClass.READ_ONLY: IdempotencyClass.UNKNOWN,
    IdempotencyClass.UNKNOWN: IdempotencyClass.READ_ONLY,
}


def _reclassified_toml() -> str:
    by_class: dict[str, list[str]] = {c.value: [] for c in IdempotencyClass}
    ask_user: dict[str, list[str]] = {c.value: [] for c in IdempotencyClass}
    for tool, cls in sorted(ToolTable.default().entries.items()):
        target = ask_user if cls.ask_user else by_class
        target[_RECLASSIFY[cls.idempotency].value].append(tool)
    return _toml("every class moved", by_class, ask_user)


def _unlisted_toml() -> str:
    """The default table without its writing tools: only reads and questions stay listed."""
    by_class: dict[str, list[str]] = {c.value: [] for c in IdempotencyClass}
    ask_user: dict[str, list[str]] = {c.value: [] for c in IdempotencyClass}
    for tool, cls in sorted(ToolTable.default().entries.items()):
        if cls.ask_user:
            ask_user[cls.idempotency.value].append(tool)
        elif cls.idempotency is IdempotencyClass.READ_ONLY:
            by_class[cls.idempotency.value].append(tool)
    return _toml(
        "every writing tool left out: a tool the table does not list is UNKNOWN", by_class, ask_user
    )


def _toml(title: str, by_class: dict[str, list[str]], ask_user: dict[str, list[str]]) -> str:
    lines = [f"# Generated: {title} (see harness/chaos/tables.py).", "format = 1", "", "[classes]"]
    lines += [f"{name} = {tools!r}".replace("'", '"') for name, tools in by_class.items()]
    lines += ["", "[ask_user]"]
    lines += [f"{name} = {tools!r}".replace("'", '"') for name, tools in ask_user.items() if tools]
    return "\n".join(lines) + "\n"


_VARIANTS = {"reclassified": _reclassified_toml, "unlisted": _unlisted_toml}


def write_table_variants(directory: Path) -> dict[str, Path]:
    """Write every variant into ``directory``; returns name -> file."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, render in _VARIANTS.items():
        path = directory / f"{name}.toml"
        path.write_text(render(), "utf-8")
        ToolTable.load(path)  # refuse to hand an agent a table it would refuse
        paths[name] = path
    return paths
