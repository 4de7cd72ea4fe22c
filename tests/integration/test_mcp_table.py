"""Tool tables from real MCP server processes: the example server, and servers broken on purpose.

``python -m harness table --from-mcp`` runs as a real subprocess against
``examples/mcp_server.py`` (the SDK's server on an SQLite database) and
against ``tests/data/mcp_servers/fake_server.py`` (a plain-Python server that
pages its tools, or breaks in one way each). What it writes is read back by
``ToolTable.load``/``parse``; a broken server must cost one line naming the
command, exit 2 and no file. Every server is started with the test's own
folder on its command line, and after each test no process naming that folder
may be alive, nor any new child of the test process.
"""

from __future__ import annotations

import os
import shlex
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from harness.runtime import McpServerError, ToolTable
from harness.runtime.classes import IdempotencyClass, ToolClass
from harness.runtime.mcp_table import list_mcp_tools
from tests.conftest import IW, NI, RO, UNK

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mcp_server.py"
FAKE = ROOT / "tests" / "data" / "mcp_servers" / "fake_server.py"

EXAMPLE_CLASSES: dict[str, IdempotencyClass] = {
    "lookup_customer": RO,
    "update_crm": IW,
    "create_ticket": NI,
    "charge_card": NI,
    "send_email": NI,
    "run_report": UNK,
}
"""The example server's tools, in its order, and the class their annotations give."""

FAKE_PAGES: dict[str, IdempotencyClass] = {
    # page 1
    "read_thing": RO,
    "put_thing": IW,
    "bare_thing": UNK,
    # page 2
    "destroy_thing": NI,
    "open_thing": NI,
    "empty_thing": NI,
    # page 3
    "titled_thing": NI,
    "ro_and_idem": RO,
    "write_not_idem": NI,
}
"""The fake server's three pages of tools, in order, and their classes."""

# Each broken mode of the fake server, and what the one line of the refusal says.
BROKEN: list[tuple[str, str]] = [
    ("loop", "tools/list page 2 gave the cursor 'next-2' again: its pages go in a circle"),
    ("duplicate", "listed tools no table can hold: read_thing: listed twice"),
    ("error", "answered tools/list with error -32603: tools are broken"),
    (
        "crash",
        "closed its stdout (exited?) before it answered initialize "
        "(the last line of its stderr: fake_server: cannot open its configuration)",
    ),
    (
        "crash-after-init",
        "closed its stdout (exited?) before it answered tools/list "
        "(the last line of its stderr: fake_server: lost its tools)",
    ),
    (
        "garbage",
        "printed a line on stdout that is not JSON-RPC during initialize: "
        "'fake_server starting up...'",
    ),
]


def fake(mode: str, marker: Path) -> list[str]:
    """The fake server's command in ``mode``, with ``marker`` on its command line."""
    return [sys.executable, str(FAKE), mode, str(marker)]


def example(db: Path) -> list[str]:
    return [sys.executable, str(EXAMPLE), "--db", str(db)]


def harness_table(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m harness table ARGS`` as a real subprocess (from ``cwd``)."""
    return subprocess.run(
        [sys.executable, "-m", "harness", "table", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def servers_naming(marker: Path, *, besides: int | None = None) -> list[psutil.Process]:
    """Live processes but ``besides`` with ``marker`` (a test's folder) in an argument of
    their command line."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if proc.pid == besides or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if any(str(marker) in arg for arg in cmdline):
            found.append(proc)
    return found


def children() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """The test's folder; afterwards no server naming it is alive, and the test process has
    no child it did not have before."""
    before = children()
    yield tmp_path
    assert not servers_naming(tmp_path), "a server outlived the test"
    assert children() <= before, "the test process has a new child"


def entries(table: ToolTable) -> dict[str, IdempotencyClass]:
    assert not any(c.ask_user for c in table.entries.values())
    return {tool: c.idempotency for tool, c in table.entries.items()}


class TestTheExampleServer:
    def test_writes_its_classes_to_a_file(self, folder: Path) -> None:
        """--out gets a tools.toml that ToolTable.load reads to the annotations' classes,
        and stderr says how many of each were written."""
        out = folder / "tools.toml"
        run = harness_table(
            "--from-mcp", "--out", str(out), "--", *example(folder / "world.db"), cwd=folder
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout == ""
        table = ToolTable.load(out)
        assert entries(table) == EXAMPLE_CLASSES
        assert table.classify("not_a_tool_of_it") == ToolClass(UNK)
        assert run.stderr.splitlines()[-1] == (
            "harness: 6 tools from support-billing 1.0: 1 read_only, 1 idempotent_write, "
            f"3 non_idempotent, 1 unknown; table written to {out}"
        )
        text = out.read_text("utf-8")
        assert '    "run_report",  # no annotations at all' in text.splitlines()
        assert shlex.join(example(folder / "world.db")) in text  # the header names the server
        assert sorted(p.name for p in folder.iterdir()) == ["tools.toml", "world.db"]

    def test_prints_to_stdout_and_leaves_nothing_behind(self, folder: Path) -> None:
        """Without --out the table goes to stdout; the server runs in a scratch folder, so
        the database it makes on a relative path (MCP_WORLD_DB) is not left in this one."""
        run = harness_table(
            "--from-mcp",
            "--",
            sys.executable,
            str(EXAMPLE),
            cwd=folder,
            env={"MCP_WORLD_DB": "world.db"},
        )
        assert run.returncode == 0, run.stderr
        assert entries(ToolTable.parse(run.stdout, source="<stdout>")) == EXAMPLE_CLASSES
        assert list(folder.iterdir()) == []

    def test_from_mcp_gives_the_table_the_command_writes(self, folder: Path) -> None:
        """ToolTable.from_mcp in this process reads the table the command writes, in the
        server's order."""
        out = folder / "tools.toml"
        run = harness_table("--from-mcp", "--out", str(out), "--", *example(folder / "a.db"))
        assert run.returncode == 0, run.stderr
        table = ToolTable.from_mcp(example(folder / "b.db"))
        assert dict(table.entries) == dict(ToolTable.load(out).entries)
        assert list(table.entries) == list(EXAMPLE_CLASSES)
        assert table.source == f"mcp: {shlex.join(example(folder / 'b.db'))}"

    def test_its_tools_do_what_their_annotations_say(self, folder: Path) -> None:
        """Called twice each: the read-only tool changes no row, update_crm leaves what
        one call leaves, charge_card and create_ticket add a row per call."""
        db = folder / "world.db"
        calls: list[tuple[str, dict[str, Any]]] = [
            ("lookup_customer", {"customer_id": "c1"}),
            ("update_crm", {"customer_id": "c1", "field": "plan", "value": "team"}),
            ("charge_card", {"customer_id": "c2", "amount_cents": 500, "description": "x"}),
            ("create_ticket", {"customer_id": "c2", "subject": "s", "body": "b"}),
        ]
        dumps: list[dict[str, list[tuple[Any, ...]]]] = []  # the database after each step

        async def call_twice() -> list[bool]:
            params = StdioServerParameters(command=sys.executable, args=example(db)[1:])
            errors: list[bool] = []
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                dumps.append(_dump(db))
                for tool, arguments in calls:
                    for _ in range(2):
                        result = await session.call_tool(tool, arguments)
                        errors.append(result.is_error)
                        dumps.append(_dump(db))
            return errors

        assert anyio.run(call_twice) == [False] * 8
        start, after = dumps[0], dumps[1:]  # once started; after each call
        assert after[0] == after[1] == start  # lookup_customer, twice
        assert after[2] == after[3] != after[1]  # update_crm: the second call changes nothing
        assert after[3]["customers"][0] == ("c1", "Ada Lovelace", "ada@example.org", "team", "")
        assert [len(d["charges"]) for d in after[4:6]] == [1, 2]  # charge_card charges twice
        assert [len(d["tickets"]) for d in after[6:8]] == [1, 2]
        assert [p.name for p in folder.iterdir()] == ["world.db"]


def _dump(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the example's database."""
    tables = ("customers", "tickets", "charges", "outbox", "reports")
    with closing(sqlite3.connect(db)) as connection:
        return {t: connection.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}


class TestTheFakeServer:
    def test_every_page_is_read(self, folder: Path) -> None:
        """Tools from all three pages of tools/list are written, each classed; the lister
        gives them in page order."""
        out = folder / "tools.toml"
        run = harness_table("--from-mcp", "--out", str(out), "--", *fake("paged", folder))
        assert run.returncode == 0, run.stderr
        assert entries(ToolTable.load(out)) == FAKE_PAGES
        assert "9 tools from fake 0.1" in run.stderr
        listing = list_mcp_tools(fake("paged", folder))
        assert [tool.name for tool in listing.tools] == list(FAKE_PAGES)
        assert listing.tools[2].annotations is None  # bare_thing: none, not an empty object
        assert listing.tools[5].annotations == {}  # empty_thing

    @pytest.mark.parametrize(("mode", "problem"), BROKEN, ids=[mode for mode, _ in BROKEN])
    def test_a_broken_server_is_one_line_and_no_file(
        self, folder: Path, mode: str, problem: str
    ) -> None:
        """The command exits 2 with one line naming the server's command and the problem,
        and writes nothing: no table, no partial file."""
        out_dir = folder / "out"
        out_dir.mkdir()
        command = fake(mode, folder)
        run = harness_table("--from-mcp", "--out", str(out_dir / "tools.toml"), "--", *command)
        assert run.returncode == 2
        assert run.stdout == ""
        assert run.stderr == f"harness: MCP server `{shlex.join(command)}`: {problem}\n"
        assert list(out_dir.iterdir()) == []

    def test_a_command_that_does_not_start(self, folder: Path) -> None:
        """A command that is not there: exit 2, one line naming it and the OS's reason."""
        missing = folder / "no-such-server"
        run = harness_table("--from-mcp", "--", str(missing), "--db", "x.db", cwd=folder)
        assert run.returncode == 2
        assert run.stderr == (
            f"harness: MCP server `{missing} --db x.db`: "
            "cannot start it: No such file or directory\n"
        )
        assert list(folder.iterdir()) == []

    @pytest.mark.parametrize("mode", [mode for mode, _ in BROKEN if mode != "duplicate"])
    def test_the_lister_leaves_no_child_behind(self, folder: Path, mode: str) -> None:
        """list_mcp_tools in this process raises McpServerError naming the command, and the
        server is no longer among this process's children."""
        before = children()
        with pytest.raises(McpServerError) as caught:
            list_mcp_tools(fake(mode, folder), timeout=30)
        assert caught.value.command == tuple(fake(mode, folder))
        assert children() == before
        assert not servers_naming(folder)

    def test_a_server_that_never_answers_is_killed(self, folder: Path) -> None:
        """A server that ignores its stdin's end and SIGTERM is past its timeout killed."""
        before = children()
        with pytest.raises(McpServerError, match=r"no answer to initialize within 0\.5 s"):
            list_mcp_tools(fake("hang", folder), timeout=0.5)
        assert children() == before
        assert not servers_naming(folder)

    def test_an_interrupted_command_leaves_no_server(self, folder: Path) -> None:
        """Ctrl-C while the server hangs: the command exits 130 and the server is gone."""
        harness = subprocess.Popen(
            [sys.executable, "-m", "harness", "table", "--from-mcp", "--", *fake("hang", folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            server = _await_server(folder, harness)
            harness.send_signal(signal.SIGINT)
            _, stderr = harness.communicate(timeout=60)
        finally:
            if harness.poll() is None:
                harness.kill()
                harness.wait()
        assert harness.returncode == 130
        assert stderr.splitlines()[-1] == "harness: interrupted"
        assert not server.is_running() or server.status() == psutil.STATUS_ZOMBIE


def _await_server(marker: Path, harness: subprocess.Popen[str]) -> psutil.Process:
    """The server naming ``marker``, once ``harness`` has started it."""
    while True:
        found = servers_naming(marker, besides=harness.pid)
        if found:
            return found[0]
        try:
            harness.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            continue
        raise AssertionError(f"the harness exited ({harness.returncode}) before the server started")


class TestOut:
    def test_an_existing_file_is_kept_and_no_server_started(self, folder: Path) -> None:
        """--out naming a file that exists: refused before the command is run, file intact."""
        out = folder / "tools.toml"
        out.write_text("mine\n")
        would_start = [sys.executable, "-c", "open('started', 'w')"]
        run = harness_table("--from-mcp", "--out", str(out), "--", *would_start, cwd=folder)
        assert run.returncode == 2
        assert run.stderr == f"harness: --out {out}: exists (--force replaces it)\n"
        assert out.read_text() == "mine\n"
        assert not (folder / "started").exists()

    def test_force_replaces_it(self, folder: Path) -> None:
        """With --force the existing file becomes the server's table."""
        out = folder / "tools.toml"
        out.write_text("mine\n")
        run = harness_table(
            "--from-mcp", "--force", "--out", str(out), "--", *fake("paged", folder)
        )
        assert run.returncode == 0, run.stderr
        assert entries(ToolTable.load(out)) == FAKE_PAGES
        assert sorted(p.name for p in folder.iterdir()) == ["tools.toml"]
