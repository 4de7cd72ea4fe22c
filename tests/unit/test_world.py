"""The world: its store, ledger, readers, and every simulated tool of the catalog."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import types
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import harness.world
from harness.failpoints import FAILPOINTS_ENV
from harness.runtime.classes import IdempotencyClass, ToolTable
from harness.runtime.errors import FailpointTriggered, ToolError, TransientToolError
from harness.runtime.executor import CallContext, ToolFunction
from harness.world import (
    CATALOG,
    EFFECT_TABLES,
    SIMULATED_TOOLS,
    WorldStore,
    effect_rows,
    make_tool_function,
    read_ledger,
    step_of,
    world_digest,
)
from harness.world.store import fold_wal, result_digest

SAMPLE_ARGS: Mapping[str, dict[str, Any]] = {
    "read_file": {"path": "/sdcard/notes.txt"},
    "list_files": {"path": "/sdcard"},
    "web_search": {"query": "weather in Lisbon"},
    "ui_dump": {},
    "logcat": {"tag": "PackageManager"},
    "browser_snapshot": {},
    "write_file": {"path": "/sdcard/notes.txt", "content": "milk"},
    "app_install": {"package": "com.example.notes"},
    "create_directory": {"path": "/sdcard/lists/today"},
    "browser_navigate": {"url": "https://shop.example/"},
    "github_write_file": {"repo": "acme/site", "path": "README.md", "content": "hello"},
    "app_uninstall": {"package": "com.example.notes"},
    "ui_tap": {"element": "save", "form": "note"},
    "input_text": {"field": "title", "text": "Buy milk"},
    "browser_click": {"selector": "#buy", "form": "order"},
    "terminal_send": {"text": "ls -l"},
    "alarm": {"time": "07:00", "label": "wake up"},
    "shell_execute": {"command": "echo hi"},
    "http_request": {"method": "GET", "url": "https://api.example/items"},
    "mcp_call": {"server": "files", "tool": "read", "arguments": {"path": "/x"}},
    "terminal_exec": {"command": "uptime"},
    "code_runner": {"language": "python", "code": "print(1)"},
    "ask_user": {"question": "Which list?"},
    "ask_user_confirm": {"question": "Proceed?"},
    "ask_user_choice": {"question": "Colour?", "options": ["red", "green", "blue"]},
}

# What a tool needs in the world before it can succeed.
SETUP: Mapping[str, tuple[str, dict[str, Any]]] = {
    "app_uninstall": ("app_install", {"package": "com.example.notes"}),
}

TABLE = ToolTable.shipped()

HELLO_SHA = "b6fc4c620b67d95f953a5c1c1230aaab5db5a1b0"
"""``printf hello | git hash-object --stdin``"""


def tools_of(idempotency: IdempotencyClass) -> list[str]:
    return [
        name
        for name in CATALOG
        if TABLE.classify(name).idempotency is idempotency and not TABLE.classify(name).ask_user
    ]


def state(db_path: Path) -> Counter[tuple[str, tuple[str, ...]]]:
    """The world as a multiset of (table, content), whichever ops wrote it."""
    return Counter((row.table, row.values) for row in effect_rows(db_path))


class Calls:
    """Runs tools against one world, one op id each unless told otherwise."""

    def __init__(self, world: WorldStore) -> None:
        self.world = world
        self.execute: ToolFunction = make_tool_function(world)
        self.count = 0

    def __call__(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        op_id: str | None = None,
        attempt: int = 1,
        ctx_type: type[CallContext] = CallContext,
    ) -> Any:
        if op_id is None:
            self.count += 1
            op_id = f"s{self.count:03d}"
        ctx = ctx_type(op_id, tool, attempt, 1)
        return self.execute(tool, SAMPLE_ARGS[tool] if args is None else args, ctx)

    def setup_for(self, tool: str) -> None:
        if tool in SETUP:
            setup_tool, setup_args = SETUP[tool]
            self(setup_tool, setup_args, op_id="s000")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "world.db"


@pytest.fixture
def world(db_path: Path, journal_path: Path) -> Iterator[WorldStore]:
    with WorldStore.open(db_path, journal_path=journal_path) as store:
        yield store


@pytest.fixture
def call(world: WorldStore) -> Calls:
    return Calls(world)


def recording_context(log: list[str]) -> type[CallContext]:
    """A context type whose mid_effect records the op id instead of hitting the failpoint."""

    class Recording(CallContext):
        def mid_effect(self) -> None:
            log.append(self.op_id)

    return Recording


class TestPublicFace:
    def test_all_is_what_is_exported(self) -> None:
        """``harness.world.__all__`` names exactly its public, non-module attributes: the
        names it loads on first use, each of which resolves."""
        exported = set(harness.world.__all__)
        assert exported == set(harness.world._HOMES)
        assert len(harness.world.__all__) == len(exported)
        for name in exported:
            assert not isinstance(getattr(harness.world, name), types.ModuleType), name
        public = {
            name
            for name, value in vars(harness.world).items()
            if not name.startswith("_")
            and not isinstance(value, types.ModuleType)
            and name not in ("TYPE_CHECKING", "importlib")
        }
        assert public == exported  # every name was loaded above, and nothing else is public

    def test_every_catalog_tool_is_implemented(self) -> None:
        """The simulated tools are exactly the catalog's tools."""
        assert set(SIMULATED_TOOLS) == set(CATALOG)
        assert set(SAMPLE_ARGS) == set(CATALOG)

    def test_every_catalog_tool_is_classified(self) -> None:
        """Every catalog tool is listed in the default tool table, none UNKNOWN by omission."""
        assert all(name in TABLE for name in CATALOG)
        assert set(tools_of(IdempotencyClass.UNKNOWN)) == {
            "shell_execute",
            "http_request",
            "mcp_call",
            "terminal_exec",
            "code_runner",
        }


class TestStore:
    def test_open_creates_a_wal_database(self, world: WorldStore, db_path: Path) -> None:
        """Opening creates the file in WAL mode with the ledger and every effect table."""
        db = sqlite3.connect(db_path)
        try:
            (mode,) = db.execute("PRAGMA journal_mode").fetchone()
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        finally:
            db.close()
        assert mode == "wal"
        assert {"ledger"} | {t.name for t in EFFECT_TABLES} <= tables

    def test_folding_the_wal_keeps_every_row_in_one_file(self, db_path: Path) -> None:
        """A finished world folded (``fold_wal``): the same ledger, rows and digest, and no
        -wal or -shm file beside it; it opens again as a WAL world."""
        with WorldStore.open(db_path) as store:
            calls = Calls(store)
            calls("write_file", SAMPLE_ARGS["write_file"])
            calls("ui_tap", SAMPLE_ARGS["ui_tap"])
        before = (read_ledger(db_path), effect_rows(db_path), world_digest(db_path))
        fold_wal(db_path)
        assert sorted(p.name for p in db_path.parent.iterdir()) == ["world.db"]
        assert (read_ledger(db_path), effect_rows(db_path), world_digest(db_path)) == before
        with WorldStore.open(db_path) as store:
            Calls(store)("ui_tap", SAMPLE_ARGS["ui_tap"], op_id="again")
        assert len(read_ledger(db_path)) == len(before[0]) + 1

    def test_reopening_keeps_the_world(self, db_path: Path) -> None:
        """Opening an existing world again is harmless and keeps its rows."""
        with WorldStore.open(db_path) as store:
            Calls(store)("write_file")
        with WorldStore.open(db_path) as store:
            assert Calls(store)("read_file", op_id="s009")["content"] == "milk"
        assert len(read_ledger(db_path)) == 2

    def test_a_failed_step_rolls_back(self, world: WorldStore, db_path: Path) -> None:
        """An exception inside a transaction leaves neither the effect nor its ledger row."""
        ctx = CallContext("s001", "write_file", 1, 1)
        with pytest.raises(RuntimeError), world.execution(ctx) as db:
            db.execute("INSERT INTO files (path, content, op_id) VALUES ('/a', 'x', 's001')")
            raise RuntimeError("boom")
        assert read_ledger(db_path) == []
        assert effect_rows(db_path) == []

    def test_readers_refuse_a_missing_database(self, tmp_path: Path) -> None:
        """Reading a world that does not exist raises and does not create it."""
        missing = tmp_path / "nowhere.db"
        with pytest.raises(FileNotFoundError):
            read_ledger(missing)
        assert not missing.exists()

    def test_step_of_an_op_id(self) -> None:
        """A step is an op id's first dot-separated component."""
        assert [step_of(o) for o in ("s003", "s003.check", "s003.redo")] == ["s003"] * 3


class TestLedger:
    @pytest.mark.parametrize("tool", sorted(CATALOG))
    def test_every_tool_runs_and_is_ledgered_once(
        self, tool: str, call: Calls, db_path: Path
    ) -> None:
        """Each catalog tool runs, returns a JSON dict, and leaves exactly one ledger row."""
        call.setup_for(tool)
        result = call(tool, op_id="s001.redo", attempt=2)
        assert isinstance(result, dict)
        json.dumps(result)
        mine = [e for e in read_ledger(db_path) if e.op_id == "s001.redo"]
        assert len(mine) == 1
        entry = mine[0]
        assert (entry.tool, entry.attempt, entry.incarnation, entry.step) == (tool, 2, 1, "s001")
        assert entry.pid == os.getpid()
        assert entry.time_ns > 0

    def test_journal_pos_is_the_journal_size(
        self, call: Calls, db_path: Path, journal_path: Path
    ) -> None:
        """journal_pos is the journal file's size when the effect committed."""
        journal_path.write_bytes(b"x" * 123)
        call("write_file")
        journal_path.write_bytes(b"x" * 456)
        call("read_file")
        assert [e.journal_pos for e in read_ledger(db_path)] == [123, 456]

    def test_journal_pos_is_null_without_a_journal(self, db_path: Path, journal_path: Path) -> None:
        """Without a journal path, or before the journal exists, journal_pos is None."""
        with WorldStore.open(db_path) as store:
            Calls(store)("write_file")
        with WorldStore.open(db_path, journal_path=journal_path) as store:
            Calls(store)("read_file", op_id="s002")
        assert [e.journal_pos for e in read_ledger(db_path)] == [None, None]

    def test_fail_attempts_raise_before_any_ledger_row(self, call: Calls, db_path: Path) -> None:
        """Attempts up to fail_attempts raise TransientToolError, leaving no effect or ledger."""
        args = {**SAMPLE_ARGS["input_text"], "fail_attempts": 2}
        for attempt in (1, 2):
            with pytest.raises(TransientToolError):
                call("input_text", args, op_id="s001", attempt=attempt)
        assert read_ledger(db_path) == []
        assert effect_rows(db_path) == []
        assert call("input_text", args, op_id="s001", attempt=3)["text"] == "Buy milk"
        assert [e.attempt for e in read_ledger(db_path)] == [3]


class TestArguments:
    @pytest.mark.parametrize(
        ("tool", "args"),
        [
            ("no_such_tool", {}),
            ("write_file", {"path": "/a"}),
            ("write_file", {"path": "/a", "content": 3}),
            ("write_file", {"path": "/a", "content": "x", "mode": "w"}),
            ("write_file", {"path": "", "content": "x"}),
            ("alarm", {"time": "07:00", "label": "x", "fail_attempts": True}),
            ("ask_user_choice", {"question": "Pick", "options": []}),
        ],
    )
    def test_bad_calls_fail_without_reaching_the_world(
        self, tool: str, args: dict[str, Any], world: WorldStore, db_path: Path
    ) -> None:
        """An unknown tool or arguments outside the catalog raise ToolError and leave no row."""
        with pytest.raises(ToolError) as raised:
            make_tool_function(world)(tool, args, CallContext("s001", tool, 1, 1))
        assert not isinstance(raised.value, TransientToolError)
        assert read_ledger(db_path) == []
        assert effect_rows(db_path) == []

    def test_optional_arguments_may_be_left_out(self, call: Calls) -> None:
        """An optional argument left out is fine: a tap without a form submits nothing."""
        assert call("ui_tap", {"element": "back"})["submitted"] is None
        assert call("ui_dump")["submissions"] == []


class TestReadOnly:
    @pytest.mark.parametrize("tool", tools_of(IdempotencyClass.READ_ONLY))
    def test_reads_change_no_state(self, tool: str, call: Calls, db_path: Path) -> None:
        """A read-only tool leaves every effect table as it was."""
        for writer in ("write_file", "create_directory", "input_text", "alarm"):
            call(writer)
        before = effect_rows(db_path)
        call(tool)
        assert effect_rows(db_path) == before

    def test_read_file(self, call: Calls) -> None:
        """read_file returns a file's content, or exists=false."""
        assert call("read_file") == {"path": "/sdcard/notes.txt", "exists": False, "content": None}
        call("write_file")
        assert call("read_file", {"path": "/sdcard//notes.txt"})["content"] == "milk"

    def test_list_files(self, call: Calls) -> None:
        """list_files names files and directories directly under a path, sorted."""
        call("create_directory", {"path": "/sdcard/b/deep"})
        call("write_file", {"path": "/sdcard/a.txt", "content": ""})
        call("write_file", {"path": "/sdcard/c/d.txt", "content": ""})
        call("write_file", {"path": "/sdcardx/e.txt", "content": ""})
        assert call("list_files", {"path": "/sdcard/"})["entries"] == ["a.txt", "b", "c"]
        assert call("list_files", {"path": "/"})["entries"] == ["sdcard", "sdcardx"]
        assert call("list_files", {"path": "/none"})["entries"] == []

    def test_web_search_is_deterministic(self, call: Calls) -> None:
        """The same query gives the same three results; another query other results."""
        first, again = call("web_search"), call("web_search")
        other = call("web_search", {"query": "something else"})
        assert first == again
        assert len(first["results"]) == 3
        assert first["results"] != other["results"]

    def test_ui_dump(self, call: Calls) -> None:
        """ui_dump shows fields, taps in order, and forms submitted through the UI only."""
        call("input_text", {"field": "title", "text": "Buy"})
        call("ui_tap", {"element": "title"})
        call("ui_tap", {"element": "save", "form": "note"})
        call("browser_click", {"selector": "#go", "form": "order"})
        assert call("ui_dump") == {
            "fields": {"title": "Buy"},
            "taps": ["title", "save"],
            "submissions": ["note"],
        }

    def test_logcat_filters_by_tag(self, call: Calls) -> None:
        """logcat gives the lines of one tag, or every line without a tag."""
        call("app_install")
        call("terminal_send", {"text": "ls"})
        assert call("logcat", {})["lines"] == ["installed com.example.notes", "$ ls"]
        assert call("logcat", {"tag": "Terminal"})["lines"] == ["$ ls"]

    def test_browser_snapshot(self, call: Calls) -> None:
        """browser_snapshot shows the url, history, clicks and browser-submitted forms."""
        assert call("browser_snapshot")["url"] is None
        call("browser_navigate", {"url": "https://a.example/"})
        call("browser_click", {"selector": "#buy", "form": "order"})
        call("ui_tap", {"element": "save", "form": "note"})
        assert call("browser_snapshot") == {
            "url": "https://a.example/",
            "history": ["https://a.example/"],
            "clicks": ["#buy"],
            "submitted": ["order"],
        }


class TestIdempotentWrites:
    @pytest.mark.parametrize("tool", tools_of(IdempotencyClass.IDEMPOTENT_WRITE))
    def test_running_twice_leaves_the_same_world(
        self, tool: str, call: Calls, db_path: Path
    ) -> None:
        """An idempotent tool retried under its op id leaves exactly the world of one run."""
        call(tool, op_id="s001")
        once = effect_rows(db_path)
        call(tool, op_id="s001", attempt=2)
        assert effect_rows(db_path) == once
        assert once, f"{tool} left no effect"

    def test_write_file_overwrites(self, call: Calls) -> None:
        """write_file replaces the whole content."""
        call("write_file", {"path": "/a", "content": "long text"})
        assert call("write_file", {"path": "/a", "content": "é"}) == {"path": "/a", "bytes": 2}
        assert call("read_file", {"path": "/a"})["content"] == "é"

    def test_write_file_refuses_a_directory(self, call: Calls, db_path: Path) -> None:
        """Writing over a directory fails, ledgered, and changes nothing."""
        call("create_directory", {"path": "/a"})
        before = effect_rows(db_path)
        with pytest.raises(ToolError):
            call("write_file", {"path": "/a", "content": "x"}, op_id="s009")
        assert effect_rows(db_path) == before
        assert [e.op_id for e in read_ledger(db_path)] == ["s001", "s009"]

    def test_create_directory_is_mkdir_p(self, call: Calls) -> None:
        """create_directory creates every missing component and reports which."""
        assert call("create_directory", {"path": "/a/b"})["created"] == ["/a", "/a/b"]
        assert call("create_directory", {"path": "/a/b/c"})["created"] == ["/a/b/c"]
        assert call("create_directory", {"path": "/a/b/c"})["created"] == []
        assert call("create_directory", {"path": "/"})["created"] == []

    def test_create_directory_refuses_a_file_in_the_way(self, call: Calls, db_path: Path) -> None:
        """A file where a component should be fails the call before any directory is made."""
        call("write_file", {"path": "/a", "content": "x"})
        with pytest.raises(ToolError):
            call("create_directory", {"path": "/a/b"})
        assert [r.table for r in effect_rows(db_path)] == ["files"]

    def test_app_install_twice(self, call: Calls) -> None:
        """A second install reports already_installed and logs nothing new."""
        assert call("app_install")["already_installed"] is False
        assert call("app_install")["already_installed"] is True
        assert call("logcat")["lines"] == ["installed com.example.notes"]

    def test_browser_navigate_to_the_current_url(self, call: Calls) -> None:
        """Navigating to the current url adds no history; another url does."""
        for url in ("https://a.example/", "https://a.example/", "https://b.example/"):
            call("browser_navigate", {"url": url})
        assert call("browser_snapshot")["history"] == ["https://a.example/", "https://b.example/"]

    def test_github_write_file(self, call: Calls, db_path: Path) -> None:
        """github_write_file stores a git blob id and points the path at the content."""
        result = call("github_write_file")
        assert result["sha"] == HELLO_SHA
        assert ("repo_files", ("acme/site", "README.md", "hello")) in state(db_path)


class TestNonIdempotent:
    @pytest.mark.parametrize(
        "tool",
        [t for t in tools_of(IdempotencyClass.NON_IDEMPOTENT) if t != "app_uninstall"]
        + tools_of(IdempotencyClass.UNKNOWN),
    )
    def test_each_run_adds_an_effect(self, tool: str, call: Calls, db_path: Path) -> None:
        """A non-idempotent or unknown tool run again adds to the world."""
        call(tool, op_id="s001")
        once = state(db_path)
        call(tool, op_id="s001", attempt=2)
        assert state(db_path) != once
        assert len(read_ledger(db_path)) == 2

    def test_app_uninstall(self, call: Calls) -> None:
        """Uninstalling removes the app and logs it; each install-uninstall pair logs again."""
        for _ in range(2):
            call("app_install")
            assert call("app_uninstall") == {"package": "com.example.notes", "uninstalled": True}
        lines = call("logcat", {"tag": "PackageManager"})["lines"]
        assert lines == ["installed com.example.notes", "uninstalled com.example.notes"] * 2

    def test_app_uninstall_of_an_absent_app(self, call: Calls, db_path: Path) -> None:
        """Uninstalling an absent app fails with ToolError, ledgered, with no effect."""
        with pytest.raises(ToolError, match="not installed"):
            call("app_uninstall")
        assert [e.tool for e in read_ledger(db_path)] == ["app_uninstall"]
        assert effect_rows(db_path) == []

    def test_typing_twice_doubles_the_text(self, call: Calls) -> None:
        """input_text appends: the second run shows in the field."""
        call("input_text", op_id="s001")
        assert call("input_text", op_id="s001", attempt=2)["text"] == "Buy milkBuy milk"
        assert call("ui_dump")["fields"] == {"title": "Buy milkBuy milk"}

    def test_log_lines(self, call: Calls) -> None:
        """terminal_send and alarm log under their tags."""
        call("terminal_send")
        call("alarm")
        assert call("logcat", {"tag": "Terminal"})["lines"] == ["$ ls -l"]
        assert call("logcat", {"tag": "AlarmManager"})["lines"] == ["alarm 07:00 wake up"]


class TestUnknownAndAskUser:
    def test_calls_are_recorded_as_canonical_json(self, call: Calls, db_path: Path) -> None:
        """An unknown tool records its arguments, without fail_attempts, and a fake result."""
        args = {"server": "s", "tool": "t", "arguments": {"b": 1, "a": 2}, "fail_attempts": 1}
        result = call("mcp_call", args, attempt=2)
        assert result["isError"] is False
        [row] = effect_rows(db_path)
        assert row.values == ("mcp", '{"arguments":{"a":2,"b":1},"server":"s","tool":"t"}')

    @pytest.mark.parametrize("tool", tools_of(IdempotencyClass.UNKNOWN))
    def test_fake_results_are_deterministic(self, tool: str, call: Calls) -> None:
        """The same unknown call gives the same fake result."""
        assert call(tool) == call(tool)

    def test_ask_user_family(self, call: Calls) -> None:
        """Answers are scripted from the question: deterministic, confirm yes, choice an option."""
        assert call("ask_user") == call("ask_user")
        assert call("ask_user")["answer"] != call("ask_user", {"question": "Other?"})["answer"]
        assert call("ask_user_confirm") == {"confirmed": True}
        assert call("ask_user_choice")["choice"] in SAMPLE_ARGS["ask_user_choice"]["options"]

    def test_a_question_is_recorded_once_per_op(self, call: Calls, db_path: Path) -> None:
        """Asking again under the same op id records nothing new; another op records again."""
        call("ask_user", op_id="s001")
        call("ask_user", op_id="s001", attempt=2)
        call("ask_user", op_id="s002")
        assert state(db_path) == Counter({("questions", ("ask_user", "Which list?")): 2})
        assert len(read_ledger(db_path)) == 3


class TestMultiStep:
    @pytest.mark.parametrize("tool", sorted(CATALOG))
    def test_mid_effect_exactly_in_multi_step_tools(self, tool: str, call: Calls) -> None:
        """Only the catalog's multi-step tools call mid_effect between their steps."""
        hits: list[str] = []
        call.setup_for(tool)
        call(tool, op_id="s001", ctx_type=recording_context(hits))
        assert bool(hits) == CATALOG[tool].multi_step

    def test_create_directory_hits_mid_effect_between_components(self, call: Calls) -> None:
        """mkdir -p of n components hits mid_effect n - 1 times, even where they exist."""
        hits: list[str] = []
        ctx_type = recording_context(hits)
        call("create_directory", {"path": "/a/b/c"}, ctx_type=ctx_type)
        call("create_directory", {"path": "/a/b/c"}, ctx_type=ctx_type)
        call("create_directory", {"path": "/a"}, ctx_type=ctx_type)
        assert hits == ["s001", "s001", "s002", "s002"]

    def test_step_one_is_committed_at_mid_effect(self, call: Calls, db_path: Path) -> None:
        """When mid_effect is reached, the first step and the ledger row are already durable."""
        seen: list[list[str]] = []

        class Peeking(CallContext):
            def mid_effect(self) -> None:
                seen.append(sorted(r.table for r in effect_rows(db_path)))

        call("app_install", ctx_type=Peeking)
        assert seen == [["downloads"]]

    @pytest.mark.parametrize(
        ("tool", "after_step_one"),
        [
            ("app_install", {("downloads", ("com.example.notes",))}),
            ("create_directory", {("directories", ("/sdcard",))}),
            ("github_write_file", {("repo_blobs", ("acme/site", HELLO_SHA, "hello"))}),
        ],
    )
    def test_a_failure_at_mid_effect_leaves_step_one(
        self,
        tool: str,
        after_step_one: set[tuple[str, tuple[str, ...]]],
        call: Calls,
        db_path: Path,
        armed: Callable[[str], None],
    ) -> None:
        """An exception at mid_effect keeps step one and its ledger row; a retry completes it."""
        armed("op.mid_effect@1=raise")
        with pytest.raises(FailpointTriggered):
            call(tool, op_id="s001")
        assert set(state(db_path)) == after_step_one
        assert len(read_ledger(db_path)) == 1
        call(tool, op_id="s001", attempt=2)
        retried = effect_rows(db_path)

        with WorldStore.open(db_path.with_name("clean.db")) as clean:
            Calls(clean)(tool, op_id="s001")
        assert retried == effect_rows(db_path.with_name("clean.db"))


class TestContainment:
    def test_nothing_outside_the_world_is_touched(
        self, call: Calls, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Dangerous-looking calls only add rows to the world: no file, process or socket."""

        def forbidden(*args: object, **kwargs: object) -> Any:
            raise AssertionError("a simulated tool reached the real system")

        monkeypatch.setattr(socket, "socket", forbidden)
        monkeypatch.setattr(socket, "create_connection", forbidden)
        monkeypatch.setattr(subprocess, "Popen", forbidden)
        monkeypatch.setattr(os, "system", forbidden)
        canary = tmp_path / "canary.txt"
        canary.write_text("alive")
        passwd = Path("/etc/passwd")
        before = passwd.read_bytes() if passwd.exists() else None

        call("shell_execute", {"command": f"rm -rf / {canary}"})
        call("terminal_exec", {"command": f"rm {canary}"})
        call("write_file", {"path": "/etc/passwd", "content": "root::0:0::/:/bin/sh"})
        call("write_file", {"path": str(canary), "content": "overwritten"})
        call("http_request", {"method": "POST", "url": "http://1.1.1.1/", "body": "x"})
        call("mcp_call", {"server": "http://127.0.0.1:1", "tool": "delete_all"})
        call("code_runner", {"language": "python", "code": "import os; os.remove('x')"})

        assert canary.read_text() == "alive"
        assert (passwd.read_bytes() if passwd.exists() else None) == before
        assert all(p == canary or p.name.startswith("world.db") for p in tmp_path.iterdir())
        assert len(read_ledger(db_path)) == 7


class TestComparison:
    CALLS = (
        ("write_file", {"path": "/a", "content": "1"}),
        ("input_text", {"field": "f", "text": "x"}),
        ("ui_tap", {"element": "ok", "form": "f"}),
        ("app_install", {"package": "p"}),
        ("shell_execute", {"command": "true"}),
        ("read_file", {"path": "/a"}),
    )

    def build(self, path: Path, op_ids: list[str]) -> Path:
        with WorldStore.open(path) as store:
            call = Calls(store)
            for (tool, args), op_id in zip(self.CALLS, op_ids, strict=True):
                call(tool, args, op_id=op_id)
        return path

    def test_same_calls_other_op_ids_compare_equal(self, tmp_path: Path) -> None:
        """Two worlds built by the same calls under different op ids have equal rows and digests."""
        one = self.build(tmp_path / "one.db", [f"s{i:03d}" for i in range(6)])
        two = self.build(tmp_path / "two.db", [f"s{i:03d}.redo" for i in range(10, 16)])
        assert [(r.table, r.values) for r in effect_rows(one)] == [
            (r.table, r.values) for r in effect_rows(two)
        ]
        assert effect_rows(one) != effect_rows(two)
        assert world_digest(one, set()) == world_digest(two, set())

    def test_other_calls_compare_different(self, tmp_path: Path) -> None:
        """One more effect changes the digest."""
        one = self.build(tmp_path / "one.db", [f"s{i:03d}" for i in range(6)])
        before = world_digest(one, set())
        with WorldStore.open(one) as store:
            Calls(store)("ui_tap", {"element": "ok"}, op_id="s099")
        assert world_digest(one, set()) != before

    def test_exclude_steps(self, tmp_path: Path) -> None:
        """Rows written by an excluded step, under any of its op ids, are left out."""
        one = self.build(tmp_path / "one.db", [f"s{i:03d}" for i in range(6)])
        two = self.build(tmp_path / "two.db", [f"s{i:03d}" for i in range(6)])
        with WorldStore.open(two) as store:
            Calls(store)("ui_tap", {"element": "extra"}, op_id="s007.redo")
        assert world_digest(one, set()) != world_digest(two, set())
        assert world_digest(one, {"s007"}) == world_digest(two, {"s007"})
        assert world_digest(one, {"s001"}) != world_digest(one, set())

    def test_rows_are_ordered_by_table_then_content(self, tmp_path: Path) -> None:
        """effect_rows follows EFFECT_TABLES' order, and content order within a table."""
        one = self.build(tmp_path / "one.db", [f"s{i:03d}" for i in range(6)])
        rows = effect_rows(one)
        order = [t.name for t in EFFECT_TABLES]
        keys = [(order.index(r.table), r.values) for r in rows]
        assert keys == sorted(keys)
        assert all("s0" not in v for r in rows for v in r.values)


KILLED_CHILD = """
import sys
from pathlib import Path
from harness.runtime.executor import CallContext
from harness.failpoints import arm_from_environ
from harness.world import WorldStore, make_tool_function

arm_from_environ()
with WorldStore.open(Path(sys.argv[1])) as world:
    ctx = CallContext("s001", "app_install", 1, 1)
    make_tool_function(world)("app_install", {"package": "p"}, ctx)
"""


def child_env(**extra: str) -> dict[str, str]:
    """This environment without armed failpoints or a supervisor channel, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_FAILPOINT")}
    return env | extra


class TestKill:
    def test_sigkill_between_steps_leaves_a_consistent_world(self, db_path: Path) -> None:
        """A SIGKILL at mid_effect leaves step one committed, readable, and completable."""
        child = subprocess.run(
            [sys.executable, "-c", KILLED_CHILD, str(db_path)],
            env=child_env(**{FAILPOINTS_ENV: "op.mid_effect@1=kill"}),
            capture_output=True,
            timeout=60,
        )
        assert child.returncode == -9, child.stderr.decode()
        assert [(e.op_id, e.tool) for e in read_ledger(db_path)] == [("s001", "app_install")]
        assert [r.table for r in effect_rows(db_path)] == ["downloads"]
        with WorldStore.open(db_path) as world:
            result = Calls(world)("app_install", {"package": "p"}, op_id="s001", attempt=2)
        assert result["already_installed"] is False
        assert [r.table for r in effect_rows(db_path)] == ["downloads", "installed_apps", "log"]


class TestWhatAnExecutionCameTo:
    """The ledger row of each execution says what it returned, written with its last step."""

    @pytest.mark.parametrize("tool", sorted(CATALOG))
    def test_ok_and_the_digest_of_the_result(self, tool: str, call: Calls, db_path: Path) -> None:
        call.setup_for(tool)
        returned = call(tool)
        row = read_ledger(db_path)[-1]
        assert (row.op_id, row.outcome, row.result) == ("s001", "ok", result_digest(returned))

    def test_a_failure_the_world_decides_is_an_error(self, call: Calls, db_path: Path) -> None:
        with pytest.raises(ToolError) as refused:
            call("app_uninstall", {"package": "com.example.absent"})
        (row,) = read_ledger(db_path)
        assert (row.outcome, row.result) == ("error", result_digest(str(refused.value)))

    def test_an_execution_cut_between_its_steps_came_to_nothing(
        self, call: Calls, db_path: Path
    ) -> None:
        class Killed(CallContext):
            def mid_effect(self) -> None:
                raise FailpointTriggered("killed between the steps")

        with pytest.raises(FailpointTriggered):
            call("app_install", {"package": "p"}, ctx_type=Killed)
        (row,) = read_ledger(db_path)
        assert (row.outcome, row.result) == (None, None)

    def test_a_retry_answers_its_own_row(self, call: Calls, db_path: Path) -> None:
        call("ui_tap", op_id="s001")
        call("ui_tap", op_id="s001", attempt=2)
        first, second = read_ledger(db_path)
        assert first.outcome == second.outcome == "ok" and first.result == second.result
