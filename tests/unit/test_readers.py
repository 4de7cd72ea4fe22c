"""The code reads on its own: short module docstrings, no pointers to documents it lacks."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent
LONGEST_DOCSTRING = 25
# The two names of the design note the project grew from, which is not in the repository,
# spelled in pieces so that this file does not hold them itself.
NOTE, DOC = "the " + "seed", "DESIGN"
OUTSIDE = re.compile(NOTE + "|" + DOC + r"(\.md)? ?§", re.IGNORECASE)


def _sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def test_every_module_docstring_is_short() -> None:
    """A module says what it is for in 25 lines or fewer; its long note is in the docs."""
    long = {}
    for path in _sources("harness"):
        text = ast.get_docstring(ast.parse(path.read_text("utf-8")), clean=False)
        if text is not None and text.count("\n") + 1 > LONGEST_DOCSTRING:
            long[str(path.relative_to(ROOT))] = text.count("\n") + 1
    assert not long, f"module docstrings over {LONGEST_DOCSTRING} lines: {long}"


def test_no_pointer_to_a_document_outside_the_repository() -> None:
    """No pointer to the design note the project grew from, by either of its names, in code
    or tests (this file included)."""
    hits = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _sources("harness", "tests")
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not hits, hits


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    """Both rules catch a breach: a 26-line docstring and a pointer to the note's sections."""
    long = "\n".join(["x"] * (LONGEST_DOCSTRING + 1))
    tree = ast.parse(f'"""{long}"""\n')
    text = ast.get_docstring(tree, clean=False)
    assert text is not None and text.count("\n") + 1 > LONGEST_DOCSTRING
    assert OUTSIDE.search(f"as {DOC}.md §2 says") and OUTSIDE.search(f"see {NOTE} §3")
    assert OUTSIDE.search(f"{DOC} §7")
    assert not OUTSIDE.search("--seed 7, the random seed of the scenario")
