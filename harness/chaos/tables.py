"""Tool-table variants a trial's later lives may run with (invariant 5).

``reclassified`` moves every shipped tool to another class: non-idempotent and
idempotent writes swap, read-only tools become unknown and unknown tools
read-only. A runtime that decides from the intent's snapshot is unaffected
for ops already journaled; one that reads today's table decides differently.

``unlisted`` leaves every writing tool out (reads and the ask-user family
stay): the runtime's rule makes a tool the table does not list UNKNOWN, so its
calls are snapshotted UNKNOWN and recovery must VERIFY them.

Both keep the base table's content rules (``[content.TOOL]``): what makes two calls
the same action does not change with a tool's class.

Both are made from a base table: the shipped one, or the one a scenario names
(``tool_table``) for its own tools. A scenario's own table is handed, as
``BASE``, to every life of its trials (its golden run's too) that runs with
no variant; the supervisor records each life's table, and the checkers class
ops by it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from harness.runtime.classes import IdempotencyClass, ToolTable

__all__ = ["BASE", "scenario_tables", "write_table_variants"]

BASE = "base"
"""The name, among a trial's tables, of the scenario's own table (absent: the shipped one)."""

_RECLASSIFY = {
    IdempotencyClass.NON_IDEMPOTENT: IdempotencyClass.IDEMPOTENT_WRITE,
    IdempotencyClass.IDEMPOTENT_WRITE: IdempotencyClass.NON_IDEMPOTENT,
    IdempotencyClass.READ_ONLY: IdempotencyClass.UNKNOWN,
    IdempotencyClass.UNKNOWN: IdempotencyClass.READ_ONLY,
}


def _reclassified_toml(base: ToolTable) -> str:
    by_class: dict[str, list[str]] = {c.value: [] for c in IdempotencyClass}
    ask_user: dict[str, list[str]] = {c.value: [] for c in IdempotencyClass}
    for tool, cls in sorted(base.entries.items()):
        target = ask_user if cls.ask_user else by_class
        target[_RECLASSIFY[cls.idempotency].value].append(tool)
    return _toml("every class moved", by_class, ask_user)


def _unlisted_toml(base: ToolTable) -> str:
    """The base table without its writing tools: only reads and questions stay listed."""
    by_class: dict[str, list[str]] = {c.value: [] for c in IdempotencyClass}
    ask_user: dict[str, list[str]] = {c.value: [] for c in IdempotencyClass}
    for tool, cls in sorted(base.entries.items()):
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


def _content_toml(base: ToolTable) -> str:
    """The base table's content rules, in its file format (empty without any)."""
    if not base.content:
        return ""
    rules = ToolTable({}, content=base.content).to_toml()
    return rules[rules.index("\n[content.") :]


_VARIANTS: dict[str, Callable[[ToolTable], str]] = {
    "reclassified": _reclassified_toml,
    "unlisted": _unlisted_toml,
}


def write_table_variants(directory: Path, base: Path | None = None) -> dict[str, Path]:
    """Write every variant of ``base`` (None: the shipped table) into ``directory``;
    returns name -> file, with a copy of ``base`` itself as ``BASE`` when given."""
    directory.mkdir(parents=True, exist_ok=True)
    table = ToolTable.shipped() if base is None else ToolTable.load(base)
    paths = {}
    if base is not None:
        paths[BASE] = directory / f"{BASE}.toml"
        shutil.copyfile(base, paths[BASE])
    for name, render in _VARIANTS.items():
        path = directory / f"{name}.toml"
        path.write_text(render(table) + _content_toml(table), "utf-8")
        ToolTable.load(path)  # refuse to hand an agent a table it would refuse
        paths[name] = path
    return paths


def scenario_tables(root: Path, scenario: str) -> dict[str, Path]:
    """The tables a trial of ``scenario`` hands its lives, written under ``root``.

    The shipped table's variants go to ``root`` itself; a scenario with a
    table of its own gets it and its variants in ``root/<scenario file stem>``.
    """
    from harness.chaos.scenario import load_scenario  # pydantic: the harness's side only

    own = load_scenario(scenario).table_path
    if own is None:
        return write_table_variants(root)
    return write_table_variants(root / Path(scenario).stem, own)
