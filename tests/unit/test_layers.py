"""The package's layers, read from its sources: no import circle, no arrow against the flow.

The layers (docs/reference/layout.md): data flows scenario -> campaign -> trial -> supervisor
-> agent process -> trial folder -> checkers -> report, and the command line ties them
together. This walks every module of ``harness`` with ``ast`` (never importing
it), takes every import statement it holds (at module level, inside a
function or a class, under ``if TYPE_CHECKING:``: each one counts), builds the
graph of imports among the package's own modules, and fails on:

- an import circle (the cycle is named, module by module);
- ``harness.runtime.*`` importing anything of the project outside
  ``harness.runtime`` (the runtime is usable on its own);
- a module under ``harness/report/`` importing ``harness.chaos.campaign`` (the
  writers are given results, they never run a campaign) or ``argparse`` (the
  commands own the parsers);
- ``harness.integrations.*`` (the guards a user adds to their framework) importing
  anything of the project outside ``harness.runtime`` and ``harness.integrations``;
- the agent process (``harness.agent.__main__`` and everything it imports,
  transitively, within the package, its parent packages included) reaching a
  module outside ``harness.runtime``, ``harness.world``, ``harness.agent``,
  ``harness.failpoints`` and ``harness.errors``. The failpoints are test machinery
  of the harness, kept out of the runtime, but the agent process is where they
  fire: its runtime's crash points, the world's ``op.reply`` and its own
  ``agent.before_exit``. They bring in ``harness.errors`` for their
  ``FailpointSpecError``, which imports only the runtime's errors, and
  ``harness.failpoint_spec``, their grammar (stdlib only). The agent's exit statuses
  are named in ``harness.exits`` (stdlib only).

What this does not see: ``importlib.import_module`` with a computed name (the
launchers import agent programs that way, by design), or ``import harness``
followed by attribute access.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import harness

HARNESS = Path(harness.__file__).resolve().parent
PACKAGE = "harness"

RUNTIME = "harness.runtime"
INTEGRATIONS = "harness.integrations"
REPORT = "harness.report"
REPORT_MUST_NOT_IMPORT = ("harness.chaos.campaign", "argparse")
AGENT_PROCESS = "harness.agent.__main__"
AGENT_PROCESS_MAY_IMPORT = (
    "harness.runtime",
    "harness.world",
    "harness.agent",
    "harness.failpoints",
    "harness.errors",
    "harness.failpoint_spec",
    "harness.exits",
)


@dataclass(frozen=True, slots=True)
class Module:
    """One module of the package: its dotted name, whether it is a package's ``__init__``,
    and its source."""

    name: str
    is_package: bool
    source: str


@dataclass(frozen=True, slots=True)
class Import:
    """One imported name, made absolute: a module, or ``module.name`` for ``from module
    import name`` (which may name a submodule or an attribute)."""

    target: str
    line: int
    candidates: tuple[str, ...]
    """Most specific first: ``a.b.c`` then ``a.b`` then ``a`` (the graph takes the first
    that is a module of the package)."""


def modules_of(root: Path, package: str = PACKAGE) -> dict[str, Module]:
    """Every ``.py`` file under ``root`` (the folder of ``package``), by dotted name."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join([package, *parts])
        found[name] = Module(name, is_package, path.read_text("utf-8"))
    return found


def _prefixes(dotted: str) -> tuple[str, ...]:
    parts = dotted.split(".")
    return tuple(".".join(parts[:n]) for n in range(len(parts), 0, -1))


def imports_of(module: Module) -> Iterator[Import]:
    """Every import statement anywhere in ``module``, each imported name made absolute."""
    own_package = module.name if module.is_package else module.name.rpartition(".")[0]
    for node in ast.walk(ast.parse(module.source, filename=module.name)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, node.lineno, _prefixes(alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = own_package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = ".".join(p for p in (base, node.module) if p)
            else:
                source = node.module or ""
            for alias in node.names:
                target = source if alias.name == "*" else f"{source}.{alias.name}"
                yield Import(target, node.lineno, _prefixes(target))


def import_graph(modules: Mapping[str, Module]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (itself excluded)."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, module in modules.items():
        for imported in imports_of(module):
            target = next((c for c in imported.candidates if c in modules), None)
            if target is not None and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component that has one, as ``[a, b, ..., a]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm; the package is small
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_circle_in(component, graph) for component in sorted(components)]


def _circle_in(component: list[str], graph: Mapping[str, set[str]]) -> list[str]:
    """A shortest circle through the component's first module (breadth-first)."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    raise AssertionError(f"no circle through {start} in {component}")  # pragma: no cover


def _within(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


def reachable(graph: Mapping[str, set[str]], start: str) -> dict[str, list[str]]:
    """Every module importing ``start`` runs, with the chain of imports that brings it in.

    Importing a module first runs its parent packages' ``__init__``: those count too.
    """
    chains = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph.get(node, set()) | {p for p in _parents(node) if p in graph}):
            if nxt not in chains:
                chains[nxt] = [*chains[node], nxt]
                queue.append(nxt)
    return chains


def layer_violations(modules: Mapping[str, Module]) -> list[str]:
    """Every forbidden arrow, one line each, naming the module, the line and the import."""
    graph = import_graph(modules)
    found = []
    for name, module in sorted(modules.items()):
        for imported in imports_of(module):
            target = next((c for c in imported.candidates if c in modules), None)
            if _within(name, [RUNTIME]) and target is not None and not _within(target, [RUNTIME]):
                found.append(
                    f"{name}:{imported.line} imports {target}: the runtime imports nothing "
                    "of the project outside harness.runtime"
                )
            guards = [INTEGRATIONS, RUNTIME]
            if _within(name, [INTEGRATIONS]) and target is not None and not _within(target, guards):
                found.append(
                    f"{name}:{imported.line} imports {target}: a guard imports only the "
                    "runtime (and its framework)"
                )
            if _within(name, [REPORT]):
                for forbidden in REPORT_MUST_NOT_IMPORT:
                    if any(c == forbidden for c in imported.candidates):
                        found.append(
                            f"{name}:{imported.line} imports {forbidden}: the report writes "
                            "what it is given (no campaign runs, no argument parsers)"
                        )
    if AGENT_PROCESS in graph:
        # The top package's __init__ runs too; what it imports is walked like the rest.
        allowed = (*AGENT_PROCESS_MAY_IMPORT,)
        for reached, chain in sorted(reachable(graph, AGENT_PROCESS).items()):
            if reached != PACKAGE and not _within(reached, allowed):
                found.append(
                    f"the agent process imports {reached} ({' -> '.join(chain)}): it may "
                    f"import only {', '.join(AGENT_PROCESS_MAY_IMPORT)}"
                )
    return list(dict.fromkeys(found))  # one line per statement, however many names it takes


def _describe(circles: list[list[str]]) -> str:
    return "\n".join(" -> ".join(circle) for circle in circles)


class TestThePackagesLayers:
    def test_no_import_circle(self) -> None:
        """No module of harness imports, directly or not, one that imports it back."""
        circles = cycles(import_graph(modules_of(HARNESS)))
        assert not circles, "import circles among harness's modules:\n" + _describe(circles)

    def test_no_arrow_against_the_layers(self) -> None:
        """Runtime imports nothing of the project; report runs no campaign and parses no
        arguments; the agent process imports only runtime, world, agent, the failpoints and
        the errors."""
        violations = layer_violations(modules_of(HARNESS))
        assert not violations, "imports against the layers:\n" + "\n".join(violations)

    def test_the_walk_covers_the_package(self) -> None:
        """The walk reads every layer, the agent process's entry point and the commands."""
        modules = modules_of(HARNESS)
        assert {
            "harness",
            AGENT_PROCESS,
            "harness.runtime.journal",
            "harness.report.console",
            "harness.cli",
            "harness.commands.chaos",
        } <= set(modules)
        graph = import_graph(modules)
        assert "harness.runtime.journal" in reachable(graph, AGENT_PROCESS)
        assert "harness.world.store" in reachable(graph, AGENT_PROCESS)
        assert "harness.failpoints" in reachable(graph, AGENT_PROCESS)


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, Module]:
    root = tmp_path / "harness"
    for relative, source in {"__init__.py": "", **files}.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, "utf-8")
    return modules_of(root)


class TestTheWalkerCanFail:
    def test_it_names_a_circle_through_nested_and_relative_imports(self, tmp_path: Path) -> None:
        """A circle made of a module-level import, one inside a function, one under
        TYPE_CHECKING and a relative one is found and named."""
        modules = _package(
            tmp_path,
            {
                "chaos/__init__.py": "",
                "chaos/a.py": "from harness.chaos.b import thing\n",
                "chaos/b.py": "def f():\n    from . import c\n",
                "chaos/c.py": (
                    "from typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n    import harness.chaos.a\n"
                ),
                "chaos/d.py": "from harness.chaos import a\n",  # into the circle, not on it
                "report/__init__.py": "",
                "report/x.py": "from harness.report.y import Row\n",
                "report/y.py": "class Row:\n    def m(self):\n        from .x import w\n",
            },
        )
        graph = import_graph(modules)
        assert graph["harness.chaos.b"] == {"harness.chaos.c"}
        assert graph["harness.chaos.d"] == {"harness.chaos.a"}
        assert cycles(graph) == [
            ["harness.chaos.a", "harness.chaos.b", "harness.chaos.c", "harness.chaos.a"],
            ["harness.report.x", "harness.report.y", "harness.report.x"],
        ]
        assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []

    def test_it_reports_each_forbidden_arrow(self, tmp_path: Path) -> None:
        """The runtime importing the world, a report importing the campaign and argparse, and
        the agent process reaching the checkers through the world are each reported."""
        modules = _package(
            tmp_path,
            {
                "runtime/__init__.py": "from harness.runtime.journal import x\n",
                "runtime/journal.py": "import json\ndef f():\n    import harness.world.store\n",
                "runtime/errors.py": "from harness import runtime\n",  # inside the runtime
                "world/__init__.py": "",
                "world/store.py": "from ..check import invariants\n",
                "check/__init__.py": "",
                "check/invariants.py": "",
                "chaos/__init__.py": "",
                "chaos/campaign.py": "",
                "report/__init__.py": "",
                "report/files.py": "from harness.chaos import campaign\n",
                "report/console.py": "import argparse\nfrom harness.chaos.campaign import run\n",
                "agent/__init__.py": "",
                "agent/__main__.py": "from harness.runtime import x\nfrom harness.agent import y\n",
            },
        )
        assert cycles(import_graph(modules)) == []
        assert layer_violations(modules) == [
            "harness.report.console:1 imports argparse: the report writes what it is given "
            "(no campaign runs, no argument parsers)",
            "harness.report.console:2 imports harness.chaos.campaign: the report writes what "
            "it is given (no campaign runs, no argument parsers)",
            "harness.report.files:1 imports harness.chaos.campaign: the report writes what it "
            "is given (no campaign runs, no argument parsers)",
            "harness.runtime.journal:3 imports harness.world.store: the runtime imports "
            "nothing of the project outside harness.runtime",
            "the agent process imports harness.check (harness.agent.__main__ -> "
            "harness.runtime -> harness.runtime.journal -> harness.world.store -> "
            "harness.check.invariants -> harness.check): it may import only harness.runtime, "
            "harness.world, harness.agent, harness.failpoints, harness.errors, "
            "harness.failpoint_spec, harness.exits",
            "the agent process imports harness.check.invariants (harness.agent.__main__ -> "
            "harness.runtime -> harness.runtime.journal -> harness.world.store -> "
            "harness.check.invariants): it may import only harness.runtime, harness.world, "
            "harness.agent, harness.failpoints, harness.errors, harness.failpoint_spec, "
            "harness.exits",
        ]

    def test_an_allowed_agent_process_passes(self, tmp_path: Path) -> None:
        """The agent importing runtime, world and its own modules (a broken runtime
        included) is no violation."""
        modules = _package(
            tmp_path,
            {
                "runtime/__init__.py": "",
                "world/__init__.py": "from harness.runtime import errors\n",
                "agent/__init__.py": "",
                "agent/broken.py": "from harness.runtime import Runtime\n",
                "agent/__main__.py": (
                    "from harness.agent.broken import RUNTIMES\nimport harness.world\n"
                ),
                "runtime/errors.py": "",
            },
        )
        assert layer_violations(modules) == []
