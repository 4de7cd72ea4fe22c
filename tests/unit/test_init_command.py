"""``python -m harness init``, in this process: the agent's name, the arguments and their
placeholders read from a tool's input schema, and the files written from a listing (the
MCP listing is made up here; tests/integration/test_init.py lists real servers)."""

from __future__ import annotations

import argparse
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness import cli
from harness.chaos.scenario import compile_plan, load_scenario
from harness.commands import table as table_command
from harness.commands.init import Arg, agent_name, declared_args, placeholder
from harness.runtime.classes import IdempotencyClass, ToolTable
from harness.runtime.errors import HarnessError
from harness.runtime.mcp_table import McpListing, McpTool, McpToolDetail

AGENT = "python examples/agents/plain_python/agent.py"
ROOT = Path(__file__).resolve().parents[2]


def parse(*argv: str) -> argparse.Namespace:
    return cli._parser().parse_args(["init", *argv])


def run_init(*argv: str) -> int:
    args = parse(*argv)
    return int(args.run(args))


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (AGENT, "plain_python"),
        ("python my_agent.py --verbose", "my_agent"),
        ("uv run python -m acme.support.agent", "support"),
        ("node dist/index.js", "dist"),
        ("./bin/Ticket-Bot", "ticket_bot"),
        ("python 3rd.py", "agent_3rd"),
    ],
)
def test_the_agent_is_named_by_its_script(command: str, name: str) -> None:
    """A generic script name (agent.py, index.js) gives way to its folder's."""
    assert agent_name(command.split()) == name


SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "Address": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 6},
                "zip": {"$ref": "#/$defs/Zip"},
            },
            "required": ["city", "zip"],
        },
        "Zip": {"type": "integer", "minimum": 1000},
    },
    "properties": {
        "address": {"$ref": "#/$defs/Address"},
        "to": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        "amount": {"type": ["number", "null"], "exclusiveMinimum": 3.5, "maximum": 10},
        "count": {"type": "integer", "exclusiveMinimum": 3},
        "mode": {"enum": ["fast", "slow"]},
        "code": {"type": "string", "maxLength": 2},
        "flag": {"anyOf": [{"type": "boolean"}, {"type": "null"}], "default": None},
        "anything": {},
    },
    "required": ["address", "to", "tags", "amount", "count", "mode", "code"],
}


def test_arguments_and_placeholders_follow_the_schema() -> None:
    """Each argument gets a scenario type (a number is an int, an untyped one a str, both
    noted), optional when not required, and a placeholder its schema accepts."""
    args = {a.name: a for a in declared_args(SCHEMA)}
    assert {n: (a.type, a.required) for n, a in args.items()} == {
        "address": ("object", True),
        "to": ("str", True),
        "tags": ("list", True),
        "amount": ("int", True),
        "count": ("int", True),
        "mode": ("str", True),
        "code": ("str", True),
        "flag": ("bool", False),
        "anything": ("str", False),
    }
    assert "a number" in args["amount"].note
    assert "no type" in args["anything"].note
    assert {n: placeholder(a) for n, a in args.items()} == {
        "address": {"city": "TODOxx", "zip": 1000},
        "to": "someone@example.com",
        "tags": ["TODO", "TODO"],
        "amount": 4,
        "count": 4,
        "mode": "fast",
        "code": "TO",
        "flag": False,
        "anything": "TODO",
    }
    assert placeholder(Arg("n", "int", True, {"maximum": -5})) == -5


def listing(*tools: tuple[str, dict[str, Any] | None, dict[str, Any]]) -> McpListing:
    return McpListing(
        ("srv",),
        "demo",
        "2.0",
        "2025-06-18",
        tuple(McpTool(name, hints) for name, hints, _ in tools),
        tuple(McpToolDetail(name, f"{name} does things.\n\nMore.", s) for name, _, s in tools),
    )


def text_schema(*names: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {n: {"type": "string"} for n in names},
        "required": list(names),
    }


ODD = listing(
    ("lookup", {"readOnlyHint": True}, text_schema("id")),
    ("get-weather", {"readOnlyHint": True}, text_schema("city")),
    ("read_file", {"readOnlyHint": True}, text_schema("path")),
    ("set_mode", {"idempotentHint": True}, SCHEMA),
    ("flaky", {"destructiveHint": True}, text_schema("fail_attempts")),
    ("mystery", None, {"type": "object"}),
)
"""A server with a tool of each kind init meets: a read, a name a scenario cannot declare,
a built-in's name, a schema of every shape, a reserved argument, no annotations."""


def test_a_listing_becomes_a_scenario_that_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One declared tool per tool it can declare, in order, the others commented out with the
    reason; the classes from the annotations in the tool table beside it; one step per tool
    it can call; and the next commands on stdout."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(table_command, "list_mcp_tools", lambda *a, **k: ODD)
    assert run_init("--agent", AGENT, "--mcp", "srv") == 0
    out = Path("scenarios/plain_python.toml")
    scenario = load_scenario(out)
    assert scenario.name == "plain_python"
    assert list(scenario.declared_tools) == ["lookup", "set_mode", "mystery"]
    assert scenario.declared_tools["lookup"].behaviour == "read"
    assert scenario.declared_tools["set_mode"].behaviour == "put"  # keyed by "to"
    assert scenario.declared_tools["set_mode"].key == "to"
    assert scenario.declared_tools["mystery"].behaviour == "opaque"
    assert [c.spec.tool for c in scenario.calls] == ["lookup", "read_file", "set_mode", "mystery"]
    plan = compile_plan(scenario, seed=1, source=str(out))
    assert plan.steps[1].args == {"path": "TODO"}  # the built-in's own arguments
    text = out.read_text("utf-8")
    assert '# [tools."get-weather"]' in text and "'get-weather' is not identifier-like" in text
    assert '# [tools."flaky"]' in text and "is reserved for simulated transient failures" in text
    assert "A tool of this name is built into the harness's world" in text
    assert "Class idempotent_write (from its annotations: idempotentHint: true" in text
    table = ToolTable.load(Path("scenarios/plain_python/tools.toml"))
    assert scenario.table_path == Path("scenarios/plain_python/tools.toml")
    assert {t: c.idempotency for t, c in table.entries.items()} == {
        "lookup": IdempotencyClass.READ_ONLY,
        "get-weather": IdempotencyClass.READ_ONLY,
        "read_file": IdempotencyClass.READ_ONLY,
        "set_mode": IdempotencyClass.IDEMPOTENT_WRITE,
        "flaky": IdempotencyClass.NON_IDEMPOTENT,
        "mystery": IdempotencyClass.UNKNOWN,
    }
    captured = capsys.readouterr()
    harness = cli.prog_name()  # python -m harness, or harness as the console script
    assert captured.out.splitlines() == [
        f"{harness} trial {out} --seed 1",
        f"{harness} chaos --scenario {out} --random 10",
        f"{harness} chaos --scenario {out}",
    ]
    assert scenario.agent is not None
    assert (scenario.agent.command, scenario.agent.folder) == (AGENT, "..")  # init's folder
    assert captured.err.startswith(f"harness: wrote {out} (6 tools from the MCP server `srv`")


def test_without_a_server_one_example_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --mcp: one example tool with how to declare the agent's own, and it runs as is;
    the agent's command line, quotes and all, is the scenario's [agent], run as written."""
    monkeypatch.chdir(tmp_path)
    agent = 'python agent.py --say "hi"'
    assert run_init("--agent", agent, "--out", "mine.toml") == 0
    scenario = load_scenario("mine.toml")
    assert scenario.name == "mine"
    assert list(scenario.declared_tools) == ["example_tool"]
    assert "Declare\n# each tool the agent calls" in Path("mine.toml").read_text("utf-8")
    assert tomllib.loads(Path("mine/tools.toml").read_text("utf-8"))["classes"][
        "non_idempotent"
    ] == ["example_tool"]
    assert capsys.readouterr().out.splitlines()[0] == f"{cli.prog_name()} trial mine.toml --seed 1"
    assert scenario.agent_runtime == "cmd:python agent.py --say hi"


def test_without_a_server_a_shipped_scenario_is_offered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --mcp: after the skeleton's commands, one more runs the agent, as the scenario
    names it, on the shipped phone_task scenario (named whole: no scenarios/ here has it),
    for an agent that uses the tools the harness serves; with a server, no such line."""
    monkeypatch.chdir(tmp_path)
    assert run_init("--agent", "python agent.py", "--out", "mine.toml") == 0
    captured = capsys.readouterr()
    *_, offered = captured.out.splitlines()
    words = shlex.split(offered)
    assert words[words.index("--runtime") + 1] == load_scenario("mine.toml").agent_runtime
    shipped = Path(words[words.index("--scenario") + 1])
    assert shipped == ROOT / "scenarios" / "phone_task.toml" and shipped.is_file()
    assert words[-2:] == ["--random", "10"]
    assert "judged at once on a shipped scenario (phone_task)" in captured.err
    monkeypatch.setattr(table_command, "list_mcp_tools", lambda *a, **k: ODD)
    assert run_init("--agent", "python agent.py", "--mcp", "srv", "--out", "srv.toml") == 0
    assert "phone_task" not in capsys.readouterr().out


def test_existing_files_are_refused_before_the_server_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An existing scenario or tool table: refused, nothing listed or changed; --force
    replaces both."""
    monkeypatch.chdir(tmp_path)
    listed: list[object] = []

    def list_tools(*args: object, **kwargs: object) -> McpListing:
        listed.append(args)
        return ODD

    monkeypatch.setattr(table_command, "list_mcp_tools", list_tools)
    Path("mine").mkdir()
    Path("mine/tools.toml").write_text("mine\n")
    with pytest.raises(HarnessError, match=r"^--out mine.toml: mine/tools.toml exists \(--force"):
        run_init("--agent", AGENT, "--mcp", "srv", "--out", "mine.toml")
    assert listed == [] and not Path("mine.toml").exists()
    assert Path("mine/tools.toml").read_text() == "mine\n"
    assert run_init("--agent", AGENT, "--mcp", "srv", "--out", "mine.toml", "--force") == 0
    assert load_scenario("mine.toml").name == "mine"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--agent", ""], "--agent: give the agent's command line"),
        (["--agent", "'open"], '--agent "\'open": not a command line: No closing quotation'),
        (["--agent", "no-such-agent-program x"], "no program 'no-such-agent-program'"),
        (["--agent", AGENT, "--mcp", " "], "--mcp: give the MCP server's command line"),
        (["--agent", AGENT, "--mcp-url", "127.0.0.1:9"], "not an http:// or https:// URL"),
        (["--agent", AGENT, "--out", "x.txt"], "a scenario file's name ends in .toml"),
        (["--agent", AGENT, "--out", "no/x.toml"], "--out no/x.toml: no folder no"),
    ],
)
def test_bad_input_is_one_error(
    argv: list[str], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HarnessError) as caught:
        run_init(*argv)
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_server_with_no_tool_a_scenario_can_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    only_odd = listing(("get-weather", {"readOnlyHint": True}, text_schema("city")))
    monkeypatch.setattr(table_command, "list_mcp_tools", lambda *a, **k: only_odd)
    with pytest.raises(HarnessError, match="none of its 1 tools can be declared"):
        run_init("--agent", AGENT, "--mcp", "srv")
    assert list(tmp_path.iterdir()) == []
