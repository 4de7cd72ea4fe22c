"""The ``table`` command's own parts, without a server: the file it renders, its refusals.

``render`` is held against the reader (the text parses back to the table, and
its comments say what decided each class); the refusals are held to "nothing
started, nothing written" by giving a command that would leave a file if it
ran. Real servers are in ``tests/integration/test_mcp_table.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import psutil
import pytest

from harness.commands import table as table_command
from harness.runtime import HarnessError, ToolTable
from harness.runtime.classes import IdempotencyClass, ToolClass
from harness.runtime.mcp_table import DEFAULT_TIMEOUT_S, McpListing, McpTool
from tests.conftest import IW, NI, RO, UNK

LISTING = McpListing(
    command=("python", "my server.py", "--db", "w.db"),
    server_name="toy",
    server_version="2.0",
    protocol_version="2025-11-25",
    tools=(
        McpTool("lookup", {"readOnlyHint": True, "idempotentHint": True}),
        McpTool("set_plan", {"idempotentHint": True, "destructiveHint": True}),
        McpTool("charge", {"openWorldHint": True}),
        McpTool("mystery", None),
    ),
)
CLASSES: dict[str, IdempotencyClass] = {"lookup": RO, "set_plan": IW, "charge": NI, "mystery": UNK}


def parse(*argv: str) -> argparse.Namespace:
    """The command's own parser, as ``python -m harness`` assembles it."""
    parser = argparse.ArgumentParser(prog="python -m harness")
    table_command.add_parser(parser.add_subparsers(dest="command_name"))
    return parser.parse_args(["table", *argv])


class TestRender:
    def test_reads_back_to_the_listings_classes(self) -> None:
        """The rendered file parses to the listing's tools, each of its annotations' class."""
        table = ToolTable.from_annotations(LISTING.tools, source=LISTING.source)
        parsed = ToolTable.parse(table_command.render(LISTING, table), source="<rendered>")
        assert dict(parsed.entries) == {tool: ToolClass(c) for tool, c in CLASSES.items()}

    def test_names_the_server_the_mapping_and_each_deciding_annotation(self) -> None:
        """The header gives the command as a shell would quote it, the server and the four
        rows of the mapping; each tool's line says what decided its class."""
        table = ToolTable.from_annotations(LISTING.tools, source=LISTING.source)
        lines = table_command.render(LISTING, table).splitlines()
        assert "#   python -m harness table --from-mcp -- python 'my server.py' --db w.db" in lines
        assert "# Server: toy 2.0 (MCP protocol 2025-11-25), 4 tools." in lines
        mapping = [line.split("->")[1].strip() for line in lines if "->" in line]
        assert mapping == ["read_only", "idempotent_write", "non_idempotent", "unknown"]
        assert '    "lookup",  # readOnlyHint: true' in lines
        assert '    "set_plan",  # idempotentHint: true, readOnlyHint not true' in lines
        assert '    "mystery",  # no annotations at all' in lines
        assert any(line.startswith('    "charge",  # neither') for line in lines)


class TestOptions:
    def test_defaults(self) -> None:
        """The command after -- is kept whole, its own options included; stdout by default."""
        args = parse("--from-mcp", "--", "server", "--out", "x", "--", "y")
        assert args.command == ["server", "--out", "x", "--", "y"]
        assert (args.out, args.force, args.timeout) == (None, False, DEFAULT_TIMEOUT_S)

    @pytest.mark.parametrize("timeout", ["0", "-1", "soon"])
    def test_a_timeout_that_is_not_a_positive_number_is_refused(
        self, timeout: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--timeout 0, negative or not a number: a usage error (exit 2)."""
        with pytest.raises(SystemExit) as caught:
            parse("--from-mcp", "--timeout", timeout, "--", "server")
        assert caught.value.code == 2
        assert "--timeout" in capsys.readouterr().err


class TestRefusedBeforeAnythingStarts:
    @pytest.mark.parametrize(
        ("options", "problem"),
        [
            ([], "say where the table comes from: --from-mcp"),
            (["--from-mcp", "--force"], "--force replaces the --out file; there is no --out"),
            (["--from-mcp", "--out", "{tmp}"], "is a folder"),
            (["--from-mcp", "--out", "{tmp}/missing/tools.toml"], "no folder {tmp}/missing"),
            (["--from-mcp", "--out", "{tmp}/tools.toml"], "exists (--force replaces it)"),
        ],
        ids=["no source", "force without out", "out a folder", "out in no folder", "out exists"],
    )
    def test_refused_with_the_reason(
        self, tmp_path: Path, options: list[str], problem: str
    ) -> None:
        """Each is a HarnessError (exit 2) naming the problem; the server is never started
        and the existing file is left as it was."""
        (tmp_path / "tools.toml").write_text("mine\n")
        started = tmp_path / "started"
        server = [sys.executable, "-c", f"open({str(started)!r}, 'w')"]
        args = parse(*(o.format(tmp=tmp_path) for o in options), "--", *server)
        before = psutil.Process().children(recursive=True)
        with pytest.raises(HarnessError) as caught:
            table_command.run(args)
        assert problem.format(tmp=tmp_path) in str(caught.value)
        assert psutil.Process().children(recursive=True) == before
        assert not started.exists()
        assert (tmp_path / "tools.toml").read_text() == "mine\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["tools.toml"]

    def test_no_command_after_the_separator(self) -> None:
        """--from-mcp with nothing after --: refused, naming what is missing."""
        with pytest.raises(HarnessError, match="give the MCP server's command after --"):
            table_command.run(parse("--from-mcp", "--"))
