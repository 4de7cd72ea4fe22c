"""The checkers' tool-table reader agrees with the runtime's ``ToolTable``.

The checkers class ops with their own reader (``harness.check.tables``) so as
not to share the runtime's bugs; this test, which may import both, holds the
two to the same answers: on every table the project ships or hands a life
(the shipped table, a scenario's own, and the variants of each), and on
random tables written in the file format, for listed and unlisted tools.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.chaos.tables import write_table_variants
from harness.check.tables import SHIPPED_TABLE, UNLISTED, parse_table, read_table
from harness.runtime.classes import IdempotencyClass, ToolClass, ToolTable
from harness.runtime.errors import ToolTableError

ROOT = Path(__file__).resolve().parents[2]
SCENARIO_TABLES = sorted((ROOT / "scenarios").glob("*/tools.toml"))
PROBES = ("no_such_tool", "", "ask_user ", "LOGCAT")


def _agree(path: Path) -> None:
    theirs = ToolTable.load(path)
    mine = read_table(path)
    assert set(mine.entries) == set(theirs.entries), path
    for tool in (*theirs.entries, *PROBES):
        cls = theirs.classify(tool)
        assert mine.class_of(tool) == (cls.idempotency.value, cls.ask_user), (path, tool)


def test_the_shipped_tables_are_read_alike(tmp_path: Path) -> None:
    """The shipped table, every scenario's own, and the variants of each a life is handed."""
    assert SCENARIO_TABLES, "no scenario ships a table of its own"
    assert read_table(None).entries == read_table(SHIPPED_TABLE).entries
    assert len(ToolTable.shipped()) == len(read_table(None).entries) > 0
    tables = [SHIPPED_TABLE, *SCENARIO_TABLES]
    tables += write_table_variants(tmp_path / "shipped").values()
    for n, own in enumerate(SCENARIO_TABLES):
        tables += write_table_variants(tmp_path / str(n), own).values()
    for path in tables:
        _agree(path)


_NAMES = st.text(min_size=1, max_size=12)
_CLASSES = st.tuples(st.sampled_from(list(IdempotencyClass)), st.booleans())


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_NAMES, _CLASSES, max_size=12), st.lists(_NAMES, max_size=5))
def test_random_tables_are_read_alike(
    entries: dict[str, tuple[IdempotencyClass, bool]], probes: list[str]
) -> None:
    """A random table in the file format (``to_toml``): every tool, listed or not, alike."""
    table = ToolTable({t: ToolClass(c, ask) for t, (c, ask) in entries.items()})
    text = table.to_toml()
    theirs, mine = ToolTable.parse(text, source="t"), parse_table(text, "t")
    for tool in (*entries, *probes):
        cls = theirs.classify(tool)
        assert mine.class_of(tool) == (cls.idempotency.value, cls.ask_user)
    assert mine.class_of("\x00never listed") == UNLISTED


@pytest.mark.parametrize(
    "text",
    [
        "[classes]\nsafe = ['x']",
        "[classes]\nread_only = 'x'",
        "[classes]\nread_only = ['x']\nnon_idempotent = ['x']",
        "[classes]\nread_only = ['']",
        "[classes]\nread_only = [1]",
        "format = 2",
        "[other]\n",
        "classes = 3",
        "[classes\n",
    ],
)
def test_both_refuse_a_malformed_table(text: str) -> None:
    """What the runtime refuses, the checkers refuse: no verdict from half a table."""
    with pytest.raises(ToolTableError):
        ToolTable.parse(text, source="t")
    with pytest.raises(ValueError, match=r"^t: "):
        parse_table(text, "t")
