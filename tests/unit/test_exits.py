"""Exit statuses: one module names them all, and the command line's and an agent's never
mean two things with one value.

``harness.exits`` holds both sets; ``docs/reference/exit-codes.md`` is their table. No module of
``harness`` defines a status of its own, nor exits with a number written in place.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import harness
from harness import exits

HARNESS = Path(harness.__file__).resolve().parent
DOC = HARNESS.parent / "docs" / "reference" / "exit-codes.md"
_EXITS = {("sys", "exit"), ("os", "_exit"), (None, "exit"), (None, "quit"), (None, "SystemExit")}
_STATUS_NAME = re.compile(r"^(EXIT|AGENT)_[A-Z_]+$")


def literal_exits(source: str) -> list[int]:
    """The lines of ``source`` that exit with a number written in the call (``sys.exit(2)``,
    ``os._exit(128 + n)``, ``raise SystemExit(3)``, ``exit(70 if a else b)``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called: tuple[str | None, str]
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            called = (func.value.id, func.attr)
        elif isinstance(func, ast.Name):
            called = (None, func.id)
        else:
            continue
        numbers = [n for arg in node.args for n in _numbers_in(arg)]
        if called in _EXITS and numbers:
            found.append(node.lineno)
    return found


def _numbers_in(expr: ast.AST) -> list[int]:
    """The numbers an exit's argument is made of: not those inside a call or an index
    (``main(sys.argv[1:])`` computes a status, it does not write one)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int):
        return [expr.value]
    if isinstance(expr, ast.Call | ast.Subscript):
        return []
    return [n for child in ast.iter_child_nodes(expr) for n in _numbers_in(child)]


def status_definitions(source: str) -> list[str]:
    """The module-level ``EXIT_*``/``AGENT_*`` names bound to a number written in place."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            found += [
                n for n in names if _STATUS_NAME.match(n) and isinstance(node.value.value, int)
            ]
    return found


def _sources() -> list[Path]:
    return sorted(p for p in HARNESS.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_two_sets_share_only_success() -> None:
    cli, agent = exits.CLI_STATUSES, exits.AGENT_STATUSES
    assert len(set(cli.values())) == len(cli), cli
    assert len(set(agent.values())) == len(agent), agent
    assert set(cli.values()) & set(agent.values()) == {exits.EXIT_OK} == {exits.AGENT_DONE}
    # Nor is an agent's status one Python or a signal gives by itself.
    assert exits.PYTHON_UNCAUGHT not in agent.values()
    assert all(0 <= status < exits.EXIT_INTERRUPTED for status in agent.values())


def test_every_status_is_named_in_harness_exits() -> None:
    """``harness.exits`` lists every name it defines in one of its two sets."""
    defined = status_definitions(Path(exits.__file__).read_text("utf-8"))
    listed = {*exits.CLI_STATUSES, *exits.AGENT_STATUSES, "EXIT_INTERRUPTED"}
    assert set(defined) <= listed, set(defined) - listed


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ("import sys\nsys.exit(2)\n", [2]),
        ("import os\nos._exit(128 + n)\n", [2]),
        ("raise SystemExit(3)\n", [1]),
        ("exit(70 if a else b)\n", [1]),
        ("import sys\nsys.exit(main(sys.argv[1:]))\nraise SystemExit(EXIT_OK)\n", []),
    ],
)
def test_the_walk_finds_a_number_written_in_an_exit(source: str, lines: list[int]) -> None:
    assert literal_exits(source) == lines


def test_no_module_exits_with_a_number_written_in_place() -> None:
    found = [
        f"{path.relative_to(HARNESS.parent)}:{line}"
        for path in _sources()
        for line in literal_exits(path.read_text("utf-8"))
    ]
    assert not found, "exit with a name of harness.exits:\n" + "\n".join(found)


def test_no_module_but_harness_exits_defines_a_status() -> None:
    assert status_definitions("EXIT_REFUSED = 2\nAGENT_X = EXIT_OK\nOTHER = 3\n") == [
        "EXIT_REFUSED"
    ]
    found = [
        f"{path.relative_to(HARNESS.parent)}: {name}"
        for path in _sources()
        if path != Path(exits.__file__).resolve()
        for name in status_definitions(path.read_text("utf-8"))
    ]
    assert not found, "statuses defined outside harness.exits:\n" + "\n".join(found)


def test_the_table_in_docs_lists_every_status() -> None:
    rows = {
        (m["name"], int(m["status"]))
        for m in re.finditer(
            r"^\| (?P<status>\d+) \| `(?P<name>\w+)` \|", DOC.read_text("utf-8"), re.M
        )
    }
    assert rows == {*exits.CLI_STATUSES.items(), *exits.AGENT_STATUSES.items()}
