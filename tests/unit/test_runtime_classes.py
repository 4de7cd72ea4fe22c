"""Idempotency classes and the tool table, held against the tools the design names."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.runtime import IdempotencyClass, ToolClass, ToolTable, ToolTableError
from tests.conftest import IW, NI, RO, UNK

# The shipped classification (docs/concepts/recovery.md), written out by hand.
DESIGN_TOOLS: dict[IdempotencyClass, tuple[str, ...]] = {
    RO: ("read_file", "list_files", "web_search", "ui_dump", "logcat", "browser_snapshot"),
    IW: ("write_file", "app_install", "create_directory", "browser_navigate", "github_write_file"),
    NI: ("app_uninstall", "ui_tap", "input_text", "browser_click", "terminal_send", "alarm"),
    UNK: ("shell_execute", "http_request", "mcp_call", "terminal_exec", "code_runner"),
}
ASK_USER_FAMILY = ("ask_user", "ask_user_confirm", "ask_user_choice")
DESIGN_CASES = [(tool, cls) for cls, tools in DESIGN_TOOLS.items() for tool in tools]


class TestDefaultTable:
    @pytest.mark.parametrize(("tool", "cls"), DESIGN_CASES, ids=[t for t, _ in DESIGN_CASES])
    def test_design_tool_has_design_class(self, tool: str, cls: IdempotencyClass) -> None:
        """Each tool the design names is listed, in its class, and is not ask_user."""
        table = ToolTable.shipped()
        assert tool in table
        assert table.classify(tool) == ToolClass(cls, ask_user=False)

    @pytest.mark.parametrize("tool", ASK_USER_FAMILY)
    def test_ask_user_family_is_ask_user(self, tool: str) -> None:
        """The ask_user family is listed with ask_user=True, hence retry-safe."""
        table = ToolTable.shipped()
        assert tool in table
        tool_class = table.classify(tool)
        assert tool_class.ask_user is True
        assert tool_class.retry_safe is True

    def test_default_lists_only_design_tools_and_ask_user_family(self) -> None:
        """The shipped table holds the design's 22 tools plus the ask_user family, nothing else."""
        table = ToolTable.shipped()
        expected = {t for tools in DESIGN_TOOLS.values() for t in tools} | set(ASK_USER_FAMILY)
        assert set(table.entries) == expected
        assert len(table) == len(expected)

    @pytest.mark.parametrize("tool", ["teleport", "", "READ_FILE", "read_file "])
    def test_unlisted_tool_is_unknown(self, tool: str) -> None:
        """A tool missing from the table is UNKNOWN, not ask_user, and not retry-safe."""
        table = ToolTable.shipped()
        assert tool not in table
        assert table.classify(tool) == ToolClass(UNK, ask_user=False)
        assert table.classify(tool).retry_safe is False

    def test_table_is_immutable(self) -> None:
        """A built table's entries cannot be changed."""
        table = ToolTable.shipped()
        with pytest.raises(TypeError):
            table.entries["ui_tap"] = ToolClass(RO)  # type: ignore[index]
        assert table.classify("ui_tap") == ToolClass(NI)


class TestRetrySafe:
    @pytest.mark.parametrize(
        ("cls", "ask_user", "expected"),
        [
            (RO, False, True),
            (IW, False, True),
            (NI, False, False),
            (UNK, False, False),
            (RO, True, True),
            (IW, True, True),
            (NI, True, True),
            (UNK, True, True),
        ],
    )
    def test_retry_safe_is_read_only_or_idempotent_or_ask_user(
        self, cls: IdempotencyClass, ask_user: bool, expected: bool
    ) -> None:
        """retry_safe = read_only or idempotent, and an ask_user tool is always retry-safe."""
        assert ToolClass(cls, ask_user).retry_safe is expected

    @pytest.mark.parametrize(
        ("cls", "expected"), [(RO, True), (IW, True), (NI, False), (UNK, False)]
    )
    def test_class_retry_safe(self, cls: IdempotencyClass, expected: bool) -> None:
        """The class alone is retry-safe exactly for read-only and idempotent writes."""
        assert cls.retry_safe is expected

    @pytest.mark.parametrize(
        "tool_class", [ToolClass(c, a) for c in IdempotencyClass for a in (False, True)]
    )
    def test_json_round_trip(self, tool_class: ToolClass) -> None:
        """A class snapshot survives its JSON form unchanged."""
        assert ToolClass.from_json(tool_class.to_json()) == tool_class


class TestUserTables:
    def test_load_user_table(self, tmp_path: Path) -> None:
        """A user's table file is loaded in the shipped format, unlisted tools still UNKNOWN."""
        path = tmp_path / "tools.toml"
        path.write_text(
            'format = 1\n[classes]\nread_only = ["peek"]\nnon_idempotent = ["poke"]\n'
            '[ask_user]\nunknown = ["ask_oracle"]\n',
            encoding="utf-8",
        )
        table = ToolTable.load(path)
        assert table.classify("peek") == ToolClass(RO)
        assert table.classify("poke") == ToolClass(NI)
        assert table.classify("ask_oracle") == ToolClass(UNK, ask_user=True)
        assert table.classify("read_file") == ToolClass(UNK)
        assert len(table) == 3
        assert table.source == str(path)

    def test_empty_table_is_valid(self, tmp_path: Path) -> None:
        """An empty file is a table where every tool is UNKNOWN."""
        path = tmp_path / "tools.toml"
        path.write_text("", encoding="utf-8")
        table = ToolTable.load(path)
        assert len(table) == 0
        assert table.classify("read_file") == ToolClass(UNK)

    def test_with_overrides_replaces_and_adds(self) -> None:
        """with_overrides replaces and adds entries, accepting a class or a ToolClass."""
        base = ToolTable.shipped()
        table = base.with_overrides(
            {"ui_tap": RO, "my_tool": ToolClass(IW), "ask_user": ToolClass(NI, ask_user=False)}
        )
        assert table.classify("ui_tap") == ToolClass(RO)
        assert table.classify("my_tool") == ToolClass(IW)
        assert table.classify("ask_user") == ToolClass(NI, ask_user=False)
        assert table.classify("write_file") == ToolClass(IW)
        assert len(table) == len(base) + 1

    def test_with_overrides_leaves_original_unchanged(self) -> None:
        """with_overrides builds a new table; the original keeps its entries."""
        base = ToolTable.shipped()
        base.with_overrides({"ui_tap": RO})
        assert base.classify("ui_tap") == ToolClass(NI)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    return path


class TestMalformedTables:
    @pytest.mark.parametrize(
        ("text", "entry", "problem"),
        [
            ('[classes]\nsometimes = ["x"]\n', "classes.sometimes", "unknown class 'sometimes'"),
            ('[ask_user]\nharmless = ["x"]\n', "ask_user.harmless", "unknown class 'harmless'"),
            ('[classes]\nread_only = ["a", "b", "a"]\n', "classes.read_only.a", "duplicate tool"),
            (
                '[classes]\nread_only = ["a"]\nunknown = ["b", "a"]\n',
                "classes.unknown.a",
                "duplicate tool",
            ),
            (
                '[classes]\nread_only = ["ask_user"]\n[ask_user]\nread_only = ["ask_user"]\n',
                "ask_user.read_only.ask_user",
                "duplicate tool",
            ),
            ('[classes]\nread_only = "read_file"\n', "classes.read_only", "must be a list"),
            ('[classes]\nread_only = ["a", 7]\n', "classes.read_only", "got 7"),
            ('[classes]\nread_only = [""]\n', "classes.read_only", "non-empty strings"),
            ("classes = 3\n", "classes", "must be a table"),
            ("ask_user = []\n", "ask_user", "must be a table"),
            ('[tools]\nread_only = ["x"]\n', "tools", "unknown section"),
            ("format = 2\n", "format", "unsupported format 2"),
            ('[classes]\nread_only = ["a"\n', "<file>", "not valid TOML"),
        ],
        ids=[
            "unknown-class",
            "unknown-ask-user-class",
            "duplicate-in-list",
            "duplicate-across-lists",
            "duplicate-across-sections",
            "string-not-list",
            "number-as-tool",
            "empty-tool-name",
            "section-not-table",
            "ask-user-not-table",
            "unknown-section",
            "unknown-format",
            "bad-toml",
        ],
    )
    def test_malformed_table_is_refused(
        self, tmp_path: Path, text: str, entry: str, problem: str
    ) -> None:
        """A malformed table raises ToolTableError naming the file, the entry and the problem."""
        path = _write(tmp_path, text)
        with pytest.raises(ToolTableError) as info:
            ToolTable.load(path)
        err = info.value
        assert err.path == str(path)
        assert err.entry == entry
        assert problem in err.problem
        assert str(path) in str(err)
        assert repr(entry) in str(err)
        assert problem in str(err)

    def test_missing_file_is_refused(self, tmp_path: Path) -> None:
        """A file that does not exist is refused with ToolTableError naming it."""
        path = tmp_path / "absent.toml"
        with pytest.raises(ToolTableError, match="cannot read") as info:
            ToolTable.load(path)
        assert info.value.path == str(path)
        assert info.value.entry == "<file>"

    def test_directory_is_refused(self, tmp_path: Path) -> None:
        """A path that is a directory is refused as unreadable."""
        with pytest.raises(ToolTableError, match="cannot read") as info:
            ToolTable.load(tmp_path)
        assert info.value.path == str(tmp_path)

    def test_non_utf8_file_is_refused(self, tmp_path: Path) -> None:
        """A file that is not UTF-8 text is refused, not half-read."""
        path = tmp_path / "latin1.toml"
        path.write_bytes(b'[classes]\nread_only = ["caf\xe9"]\n')
        with pytest.raises(ToolTableError, match="not UTF-8") as info:
            ToolTable.load(path)
        assert info.value.path == str(path)

    def test_tool_table_error_is_a_harness_error(self, tmp_path: Path) -> None:
        """ToolTableError sits under the one HarnessError root."""
        from harness.runtime import HarnessError

        with pytest.raises(HarnessError):
            ToolTable.load(_write(tmp_path, "classes = 3\n"))
