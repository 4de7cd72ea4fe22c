"""The invariant checkers read the journal themselves: they import none of the runtime's reader.

A checker that judged a journal with the runtime's reader, fold or matrix
would share their bugs (see ``harness/check/journal.py``). So no file of
``harness/check`` may import ``harness.runtime.journal``, ``.recovery``,
``.matrix`` or ``.records`` (in any form, at any nesting level: inside a
function or under ``if TYPE_CHECKING:`` too), nor take from the
``harness.runtime`` package a name that stands for one of them: the four
submodules themselves, every name ``harness/runtime/__init__.py`` re-exports
from them, and every name in their ``__all__`` (in case one is re-exported
later). This walk lets the rest of ``harness.runtime`` through (its errors, its
tool classes); the second walk, below, does not.

The names are computed by parsing the package's sources with ``ast``, never
by importing it. What this does not see: ``importlib.import_module`` with a
computed name, or ``import harness.runtime`` followed by attribute access.

Nor what another module loads for them, so a second walk imports each module
of ``harness/check`` alone in a fresh interpreter and requires that no module
of ``harness.runtime`` at all is loaded, directly or through any other module
(importing any of it runs ``harness/runtime/__init__.py``, which loads the
reader, the fold and the matrix). The checkers read tool tables with their
own reader too (``harness.check.tables``).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import harness

HARNESS = Path(harness.__file__).resolve().parent
CHECK = HARNESS / "check"
RUNTIME = HARNESS / "runtime"
PACKAGE = "harness.runtime"
SUBMODULES = ("journal", "recovery", "matrix", "records")
FORBIDDEN_MODULES = frozenset(f"{PACKAGE}.{name}" for name in SUBMODULES)


@dataclass(frozen=True)
class Violation:
    """One forbidden import: where it is, what it says and what it takes."""

    path: str
    line: int
    statement: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.statement}  ({self.why})"


def absolute_module(node: ast.ImportFrom, package: str) -> str:
    """The absolute module of ``from <module> import ...`` written in ``package``."""
    if node.level == 0:
        return node.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def is_forbidden_module(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in FORBIDDEN_MODULES)


def _all_names(tree: ast.Module) -> set[str]:
    """The string literals of a module's ``__all__ = [...]``."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            names |= {
                element.value
                for element in ast.walk(node.value)
                if isinstance(element, ast.Constant) and isinstance(element.value, str)
            }
    return names


def forbidden_package_names(runtime: Path = RUNTIME) -> frozenset[str]:
    """What ``from harness.runtime import <name>`` must not take, read from the sources.

    The four submodules, the names ``__init__.py`` imports from them, and the
    names of their ``__all__`` that ``__init__.py`` does not bind from another module.
    """
    init = ast.parse((runtime / "__init__.py").read_text("utf-8"))
    from_forbidden: set[str] = set()
    from_others: set[str] = set()
    for node in ast.walk(init):
        if isinstance(node, ast.ImportFrom):
            bound = {alias.asname or alias.name for alias in node.names}
            if is_forbidden_module(absolute_module(node, PACKAGE)):
                from_forbidden |= bound
            else:
                from_others |= bound
    exported: set[str] = set()
    for name in SUBMODULES:
        exported |= _all_names(ast.parse((runtime / f"{name}.py").read_text("utf-8")))
    return frozenset({*SUBMODULES, *from_forbidden, *(exported - from_others)})


def forbidden_imports(
    source: str, path: str, package: str, names: frozenset[str]
) -> Iterator[Violation]:
    """Every import in ``source`` (a module of ``package``) of the runtime's reader or fold."""
    for node in ast.walk(ast.parse(source, filename=path)):
        statement = ast.unparse(node)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if is_forbidden_module(alias.name):
                    yield Violation(path, node.lineno, statement, f"imports {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = absolute_module(node, package)
            if is_forbidden_module(module):
                yield Violation(path, node.lineno, statement, f"imports from {module}")
            elif module == PACKAGE:
                for alias in node.names:
                    if alias.name == "*":
                        yield Violation(path, node.lineno, statement, f"imports all of {PACKAGE}")
                    elif alias.name in names:
                        why = f"takes {alias.name} from {PACKAGE}"
                        yield Violation(path, node.lineno, statement, why)


def check_files() -> list[Path]:
    return sorted(CHECK.glob("*.py"))


def check_modules() -> list[str]:
    return [
        "harness.check" if path.stem == "__init__" else f"harness.check.{path.stem}"
        for path in check_files()
    ]


def runtime_modules_loaded_by(module: str) -> list[str]:
    """The modules of ``harness.runtime`` a fresh interpreter holds after importing ``module``
    alone (from this checkout, whatever is installed)."""
    probe = (
        f"import sys, json; sys.path.insert(0, {str(HARNESS.parent)!r}); import {module}; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[:2] == "
        f"{PACKAGE.split('.')!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


class TestCheckersAreIndependentOfTheRuntimesReader:
    def test_no_checker_imports_the_runtimes_journal_recovery_matrix_or_records(self) -> None:
        """No file of harness/check imports the runtime's journal, recovery, matrix or records."""
        names = forbidden_package_names()
        violations = [
            violation
            for path in check_files()
            for violation in forbidden_imports(
                path.read_text("utf-8"),
                str(path.relative_to(HARNESS.parent)),
                "harness.check",
                names,
            )
        ]
        assert not violations, "the checkers import the runtime's reader, fold or matrix:\n" + (
            "\n".join(str(violation) for violation in violations)
        )

    def test_the_walk_covers_the_checkers(self) -> None:
        """The walk reads harness/check's modules, its own journal reader among them."""
        names = {path.name for path in check_files()}
        assert {"__init__.py", "journal.py"} <= names

    def test_forbidden_names_are_read_from_the_runtime_package(self) -> None:
        """The names taken from harness.runtime are computed from its sources, errors excluded."""
        names = forbidden_package_names()
        assert {"fold", "scan_journal", "decide", "Decision", "OpState"} <= names
        assert {"DecisionRecord", "record_from_json", "JournalScan", *SUBMODULES} <= names
        assert not {"JournalCorruptError", "ToolClass", "ToolTable", "Runtime"} & names

    def test_the_walker_catches_every_form_of_a_forbidden_import(self) -> None:
        """Each form of a forbidden import, nested or not, is reported with its line."""
        source = "\n".join(
            [
                "import harness.runtime.journal",  # 1
                "import json, harness.runtime.records as records",  # 2
                "from harness.runtime.matrix import decide",  # 3
                "from harness.runtime.recovery import *",  # 4
                "from harness.runtime import JournalCorruptError, fold",  # 5
                "from harness.runtime import journal",  # 6
                "from ..runtime import DecisionRecord",  # 7
                "from ..runtime.records import IntentRecord",  # 8
                "from harness.runtime import *",  # 9
                "from typing import TYPE_CHECKING",  # 10
                "if TYPE_CHECKING:",  # 11
                "    from harness.runtime import OpState",  # 12
                "def judge():",  # 13
                "    class Inner:",  # 14
                "        def method(self):",  # 15
                "            import harness.runtime.journal.sub",  # 16
                "            from harness.runtime import scan_journal as scan",  # 17
            ]
        )
        found = list(
            forbidden_imports(
                source, "harness/check/x.py", "harness.check", forbidden_package_names()
            )
        )
        assert [v.line for v in found] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17], found
        by_line = {v.line: v for v in found}
        assert str(by_line[5]) == (
            "harness/check/x.py:5: from harness.runtime import JournalCorruptError, fold"
            "  (takes fold from harness.runtime)"
        )
        assert by_line[7].why == "takes DecisionRecord from harness.runtime"
        assert by_line[8].why == "imports from harness.runtime.records"
        assert by_line[17].statement == "from harness.runtime import scan_journal as scan"

    def test_the_walker_allows_the_rest_of_the_runtime(self) -> None:
        """Imports of the runtime's errors and classes, and of the checker's own journal, pass."""
        source = "\n".join(
            [
                "import json",
                "import harness.runtime.errors",
                "from harness.runtime.errors import JournalCorruptError",
                "from harness.runtime.classes import ToolTable",
                "from harness.runtime import JournalCorruptError, ToolClass",
                "from harness.check.journal import read_journal",
                "from . import journal",
                "from .journal import fold_ops",
                "from ..runtime import errors",
                "from harness import runtime",
            ]
        )
        names = forbidden_package_names()
        assert list(forbidden_imports(source, "harness/check/x.py", "harness.check", names)) == []


class TestCheckersLoadNoRuntimeAtAll:
    def test_no_checker_module_loads_the_runtime_even_through_another(self) -> None:
        """Each module of harness/check, imported alone, leaves harness.runtime unloaded."""
        loaded = {module: runtime_modules_loaded_by(module) for module in check_modules()}
        assert {"harness.check.invariants", "harness.check.tables"} <= set(loaded)
        offenders = {module: found for module, found in loaded.items() if found}
        assert not offenders, "harness/check loads the runtime:\n" + "\n".join(
            f"{module}: {', '.join(found)}" for module, found in offenders.items()
        )

    def test_the_probe_sees_a_runtime_loaded_through_another_module(self) -> None:
        """The probe is not blind: the world's tools load the runtime, and it says so."""
        found = runtime_modules_loaded_by("harness.world.tools")
        assert {"harness.runtime", "harness.runtime.journal", "harness.runtime.matrix"} <= set(
            found
        )
        assert runtime_modules_loaded_by("harness.world.store") == []
