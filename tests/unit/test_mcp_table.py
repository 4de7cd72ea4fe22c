"""MCP annotations to classes, and tables written back in the file format: pure, no process.

The mapping is held against the table of issue 14 written out by hand; the
writer is held against the reader (``ToolTable.parse`` of ``to_toml`` is the
same table, for any tool names, comments and headers). The server side
(``ToolTable.from_mcp`` against real processes) is in
``tests/integration/test_mcp_table.py``.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import tomllib
from collections.abc import Mapping

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.runtime import McpNotInstalledError, McpServerError, ToolTable, ToolTableError
from harness.runtime.classes import (
    MCP_ANNOTATION_CLASSES,
    IdempotencyClass,
    ToolClass,
    class_from_annotations,
)
from harness.runtime.mcp_table import DEFAULT_TIMEOUT_S, list_mcp_tools
from tests.conftest import IW, NI, RO, UNK

# Every row of the mapping, and the annotations each row's comment must name.
MAPPING_CASES: list[tuple[str, Mapping[str, object] | None, IdempotencyClass, str]] = [
    ("no annotations at all", None, UNK, "no annotations at all"),
    ("readOnlyHint", {"readOnlyHint": True}, RO, "readOnlyHint: true"),
    (
        "readOnlyHint and idempotentHint",
        {"readOnlyHint": True, "idempotentHint": True},
        RO,
        "readOnlyHint: true",
    ),
    (
        "readOnlyHint with destructiveHint (meaningless when read-only)",
        {"readOnlyHint": True, "destructiveHint": True},
        RO,
        "readOnlyHint: true",
    ),
    ("idempotentHint", {"idempotentHint": True}, IW, "idempotentHint: true"),
    (
        "idempotentHint, readOnlyHint false",
        {"readOnlyHint": False, "idempotentHint": True, "destructiveHint": True},
        IW,
        "idempotentHint: true",
    ),
    (
        "both hints false",
        {"readOnlyHint": False, "idempotentHint": False},
        NI,
        "readOnlyHint: false, idempotentHint: false",
    ),
    ("destructiveHint alone", {"destructiveHint": True}, NI, "destructiveHint: true"),
    ("openWorldHint alone", {"openWorldHint": True}, NI, "openWorldHint: true"),
    (
        "destructiveHint and openWorldHint",
        {"destructiveHint": False, "openWorldHint": True},
        NI,
        "destructiveHint: false, openWorldHint: true",
    ),
    ("an empty object", {}, NI, "no hints"),
    ("only a title", {"title": "Charge the card"}, NI, "no hints"),
    ("readOnlyHint not a boolean", {"readOnlyHint": "true"}, NI, 'readOnlyHint: "true"'),
    ("idempotentHint 1", {"idempotentHint": 1}, NI, "idempotentHint: 1"),
    ("hints null", {"readOnlyHint": None, "idempotentHint": None}, NI, "readOnlyHint: null"),
]


class TestTheMapping:
    def test_the_table_is_the_issues_mapping(self) -> None:
        """MCP_ANNOTATION_CLASSES is, cell for cell, readOnlyHint -> read_only, idempotentHint
        on a tool not read-only -> idempotent_write, other annotations -> non_idempotent,
        none -> unknown."""
        assert dict(MCP_ANNOTATION_CLASSES) == {
            # (annotations present, readOnlyHint true, idempotentHint true)
            (False, False, False): UNK,
            (True, True, False): RO,
            (True, True, True): RO,
            (True, False, True): IW,
            (True, False, False): NI,
        }

    @pytest.mark.parametrize(
        ("annotations", "expected", "decided_by"),
        [case[1:] for case in MAPPING_CASES],
        ids=[case[0] for case in MAPPING_CASES],
    )
    def test_each_shape_of_annotations_gets_its_class(
        self, annotations: Mapping[str, object] | None, expected: IdempotencyClass, decided_by: str
    ) -> None:
        """Only a hint that is literally true counts; the reason names the deciding hints."""
        verdict = class_from_annotations(annotations)
        assert verdict.idempotency is expected
        assert decided_by in verdict.reason

    def test_the_reason_of_a_non_idempotent_tool_says_which_hints_were_missing(self) -> None:
        """A tool annotated without either hint is told apart from one never annotated."""
        verdict = class_from_annotations({"destructiveHint": True})
        assert verdict.reason == (
            "neither readOnlyHint nor idempotentHint true (destructiveHint: true)"
        )
        assert class_from_annotations(None).reason == "no annotations at all"


class TestFromAnnotations:
    def test_builds_a_table_in_the_servers_order(self) -> None:
        """Each (name, annotations) becomes an entry of its class, none ask_user, in order."""
        table = ToolTable.from_annotations(
            [
                ("send", {"openWorldHint": True}),
                ("read", {"readOnlyHint": True}),
                ("put", {"idempotentHint": True}),
                ("mystery", None),
            ],
            source="mcp: server",
        )
        assert list(table.entries) == ["send", "read", "put", "mystery"]
        assert dict(table.entries) == {
            "send": ToolClass(NI),
            "read": ToolClass(RO),
            "put": ToolClass(IW),
            "mystery": ToolClass(UNK),
        }
        assert table.source == "mcp: server"
        assert table.classify("not_listed") == ToolClass(UNK)

    def test_read_only_outranks_idempotent(self) -> None:
        """readOnlyHint true makes a tool read_only whatever idempotentHint says; idempotentHint
        true makes idempotent_write only a tool whose readOnlyHint is not true."""
        table = ToolTable.from_annotations(
            [
                ("both", {"readOnlyHint": True, "idempotentHint": True}),
                (
                    "both_but_destructive",
                    {"readOnlyHint": True, "idempotentHint": True, "destructiveHint": True},
                ),
                ("read_only_not_idempotent", {"readOnlyHint": True, "idempotentHint": False}),
                ("idempotent_not_read_only", {"readOnlyHint": False, "idempotentHint": True}),
            ]
        )
        assert {tool: c.idempotency for tool, c in table.entries.items()} == {
            "both": RO,
            "both_but_destructive": RO,
            "read_only_not_idempotent": RO,
            "idempotent_not_read_only": IW,
        }

    def test_pages_joined_keep_their_order_and_a_repeat_across_pages_is_refused(self) -> None:
        """The lister hands the pages of tools/list joined in order: the table keeps that
        order, and a tool a later page lists again is refused, not silently reclassed."""
        page_1 = [("a", {"readOnlyHint": True}), ("b", None)]
        page_2 = [("c", {"idempotentHint": True})]
        page_3 = [("d", {"openWorldHint": True})]
        table = ToolTable.from_annotations([*page_1, *page_2, *page_3])
        assert list(table.entries) == ["a", "b", "c", "d"]
        assert [c.idempotency for c in table.entries.values()] == [RO, UNK, IW, NI]
        with pytest.raises(ToolTableError, match="listed twice"):
            ToolTable.from_annotations([*page_1, ("b", {"readOnlyHint": True})])

    def test_no_tools_is_an_empty_table(self) -> None:
        """A server with no tools gives an empty table, in which everything is unknown."""
        table = ToolTable.from_annotations([])
        assert len(table) == 0
        assert table.classify("anything") == ToolClass(UNK)

    @pytest.mark.parametrize(
        ("tools", "entry", "problem"),
        [
            ([("a", None), ("a", {"readOnlyHint": True})], "a", "listed twice"),
            ([("", None)], "''", "non-empty strings"),
            ([("bad\ud800", None)], "'bad\\ud800'", "not valid Unicode"),
        ],
        ids=["duplicate", "empty", "lone surrogate"],
    )
    def test_refuses_what_the_file_could_not_hold(
        self, tools: list[tuple[str, Mapping[str, object] | None]], entry: str, problem: str
    ) -> None:
        """A name twice, an empty name or one that is not Unicode text is refused whole."""
        with pytest.raises(ToolTableError) as caught:
            ToolTable.from_annotations(tools, source="mcp: x")
        assert caught.value.entry == entry
        assert problem in caught.value.problem


NAMES = st.text(min_size=1, max_size=12)
CLASSES = st.builds(ToolClass, st.sampled_from(list(IdempotencyClass)), st.booleans())


class TestToToml:
    def test_the_default_table_reads_back_equal(self) -> None:
        """The shipped table, written and parsed, is the same table, ask_user family included."""
        default = ToolTable.shipped()
        again = ToolTable.parse(default.to_toml(), source="<written>")
        assert dict(again.entries) == dict(default.entries)

    def test_header_and_notes_are_comments(self) -> None:
        """Header lines open the file as comments; a tool's note is a comment on its line."""
        table = ToolTable.from_annotations([("read", {"readOnlyHint": True}), ("odd", None)])
        text = table.to_toml(header=["from a server", ""], notes={"read": "readOnlyHint: true"})
        lines = text.splitlines()
        assert lines[:4] == ["# from a server", "#", "", "format = 1"]
        assert '    "read",  # readOnlyHint: true' in lines
        assert '    "odd",' in lines  # no note, no comment
        assert "[ask_user]" not in text  # no ask_user tool, no section
        assert tomllib.loads(text) == {
            "format": 1,
            "classes": {
                "read_only": ["read"],
                "idempotent_write": [],
                "non_idempotent": [],
                "unknown": ["odd"],
            },
        }

    def test_names_and_comments_with_quotes_and_newlines(self) -> None:
        """Quotes, backslashes, control characters and newlines in names, notes and headers
        are escaped: the file parses, and the names come back as they were."""
        names = ['say "hi"', "back\\slash", "new\nline", "tab\there", "del\x7f", "über✓"]
        table = ToolTable.from_annotations([(name, None) for name in names])
        text = table.to_toml(
            header=["line one\nline two"], notes={name: f"note\r\n{name}" for name in names}
        )
        assert dict(ToolTable.parse(text, source="<written>").entries) == dict(table.entries)
        assert text.startswith("# line one\\u000aline two\n")

    @given(st.dictionaries(NAMES, CLASSES, max_size=8), st.dictionaries(NAMES, st.text()))
    def test_any_table_reads_back_equal(
        self, entries: dict[str, ToolClass], notes: dict[str, str]
    ) -> None:
        """For any names, classes, ask_user flags and notes, parse(to_toml(table)) == table."""
        table = ToolTable(entries)
        text = table.to_toml(header=list(notes.values())[:3], notes=notes)
        assert dict(ToolTable.parse(text, source="<written>").entries) == entries


class TestWithoutAServer:
    def test_from_mcp_and_the_lister_share_the_default_timeout(self) -> None:
        """ToolTable.from_mcp's default timeout is the lister's DEFAULT_TIMEOUT_S."""
        default = inspect.signature(ToolTable.from_mcp).parameters["timeout"].default
        assert default == DEFAULT_TIMEOUT_S

    def test_an_empty_command_is_refused(self) -> None:
        """No command: McpServerError before anything is started."""
        with pytest.raises(McpServerError, match="no command given"):
            ToolTable.from_mcp([])

    def test_without_the_sdk_the_error_says_what_to_install(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With ``mcp`` not importable, from_mcp names the extra to install and starts nothing."""
        monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp -> ModuleNotFoundError
        before = psutil.Process().children(recursive=True)
        with pytest.raises(McpNotInstalledError) as caught:
            list_mcp_tools([sys.executable, "-c", "raise SystemExit(9)"])
        assert "pip install 'agent-crash-harness[mcp]'" in str(caught.value)
        assert "missing: mcp" in str(caught.value)
        assert isinstance(caught.value, ImportError)
        assert psutil.Process().children(recursive=True) == before

    def test_importing_the_runtime_imports_no_third_party_package(self) -> None:
        """harness.runtime and its MCP module import neither the SDK nor anything under it."""
        code = (
            "import sys, harness.runtime, harness.runtime.mcp_table\n"
            "loaded = {m.partition('.')[0] for m in sys.modules}\n"
            "third = loaded & {'mcp', 'mcp_types', 'anyio', 'pydantic', 'httpx2', 'starlette'}\n"
            "assert not third, sorted(third)\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)

    def test_the_error_names_the_command(self) -> None:
        """McpServerError reads ``MCP server `cmd args`: problem``, quoting as a shell would."""
        error = McpServerError(["python", "my server.py"], "cannot start it")
        assert str(error) == "MCP server `python 'my server.py'`: cannot start it"
        assert error.command == ("python", "my server.py")
