"""``python -m harness init --agent "CMD" [--mcp "SERVER CMD" | --mcp-url URL]``: a scenario.

Writes a scenario skeleton for the agent ``CMD`` (its command line, kept in the
scenario's ``[agent]`` table, run as ``--runtime cmd:"CMD"`` runs it) and prints the
next commands: a crash-free ``trial`` of it, a first ``chaos`` campaign of minutes, the
whole one. Nothing of the agent is run.

The tools: with ``--mcp`` (a shell-quoted command that starts the agent's own MCP
server over stdio, in a scratch folder, as ``table --from-mcp`` does) or
``--mcp-url`` (a server already running, streamable HTTP), one declared tool per
tool the server lists, in its order: its arguments from the input schema, its
class guessed from its annotations (``MCP_ANNOTATION_CLASSES``; the comment names
the annotation that decided it) and written to a tool table beside the scenario,
and its behaviour a placeholder marked TODO that the loader accepts and that does
what the class says: a ``read`` of an empty collection for a read-only tool, a
``put`` (keyed by its first required string argument) for an idempotent write,
else ``opaque`` (the call is only recorded). A tool a scenario cannot declare
(its name is not identifier-like, or an argument's) is written commented out, with
the reason. Without a server: one example tool, with how to declare the agent's own
by hand. The plan: one step per tool, its arguments placeholders that fit the schema.

Files: ``scenarios/<agent-name>.toml`` (or ``--out FILE``) and its tool table
``<folder>/<name>/tools.toml``, refused if either exists (unless ``--force``); both are
loaded in a scratch folder first, then each written whole (a failure removes them).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import shlex
import shutil
import sys
import tempfile
import textwrap
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.blackbox.names import agent_name, identifier
from harness.commands.options import prog_name
from harness.commands.table import list_in_scratch, write_whole
from harness.runtime.classes import (
    IdempotencyClass,
    ToolClass,
    ToolTable,
    class_from_annotations,
)
from harness.runtime.errors import HarnessError, McpServerError, ToolTableError
from harness.runtime.mcp_table import (
    DEFAULT_TIMEOUT_S,
    McpListing,
    McpToolDetail,
    list_mcp_tools_at,
)
from harness.toml_text import toml_string, toml_value

__all__ = ["add_parser", "agent_name", "declared_args", "identifier", "placeholder", "run"]

DEFAULT_FOLDER = "scenarios"
FIRST_RANDOM = 10
"""The random-time trials of the first campaign init prints: a black box of one tool runs
about 0.2 trials a second, so that its 200 by default take some 20 minutes, these one."""
SHIPPED = Path(__file__).parents[2] / "scenarios" / "phone_task.toml"
"""The shipped scenario init offers an agent that names no MCP server of its own (in a
source tree; an installed package has none, and then offers nothing)."""
_JSON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "int",
    "boolean": "bool",
    "array": "list",
    "object": "object",
}
_FORMATS = {
    "email": "someone@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "date": "2030-01-01",
    "date-time": "2030-01-01T00:00:00Z",
    "time": "00:00:00",
    "uuid": "00000000-0000-4000-8000-000000000000",
}
_BEHAVIOURS_OF = {
    IdempotencyClass.READ_ONLY: "read (of a collection or channel a writing tool fills)",
    IdempotencyClass.IDEMPOTENT_WRITE: "put (sets fields of the record under a key)",
    IdempotencyClass.NON_IDEMPOTENT: "create, increment or send (a second call adds again)",
    IdempotencyClass.UNKNOWN: "read, put, create, increment, delete or send",
}


def add_parser(sub: Any) -> argparse.ArgumentParser:
    init: argparse.ArgumentParser = sub.add_parser(
        "init",
        help="write a scenario skeleton for an agent's tools, then print the commands that test it",
        description="Write a scenario skeleton for the agent CMD: one declared tool per tool "
        "of its MCP server (--mcp or --mcp-url; else one example to copy), their classes "
        "from the tools' annotations in a tool table beside it, and a plan of one step per "
        "tool; then print the trial and chaos commands that test it. Runs nothing of the "
        "agent.",
    )
    init.add_argument(
        "--agent",
        required=True,
        metavar="CMD",
        help='the agent\'s command line, as it goes in --runtime cmd:"CMD"',
    )
    server = init.add_mutually_exclusive_group()
    server.add_argument(
        "--mcp",
        metavar="SERVER_CMD",
        help="the command line (shell-quoted) of the MCP server whose tools the agent uses, "
        "started over stdio in a scratch folder to list its tools",
    )
    server.add_argument(
        "--mcp-url",
        metavar="URL",
        help="the URL of that MCP server, already running (streamable HTTP)",
    )
    init.add_argument(
        "--out",
        metavar="FILE",
        help=f"the scenario file to write (default: {DEFAULT_FOLDER}/<agent-name>.toml); its "
        "tool table goes in <folder>/<name>/tools.toml",
    )
    init.add_argument(
        "--force", action="store_true", help="replace the scenario and its tool table if they exist"
    )
    init.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds the server has to start and list its tools (default {DEFAULT_TIMEOUT_S:g})",
    )
    return init


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


# --- a tool's arguments, from its input schema ---------------------------------------------


@dataclass(frozen=True, slots=True)
class Arg:
    """One argument as a scenario declares it, its schema and a note on what was lost."""

    name: str
    type: str
    required: bool
    schema: Mapping[str, Any]
    note: str = ""
    root: Mapping[str, Any] | None = None
    """The tool's whole schema, where a ``$ref`` is found (None: ``schema``)."""


def _resolve(prop: Any, root: Mapping[str, Any]) -> Mapping[str, Any]:
    """A property's schema with a local ``$ref`` (``#/$defs/X``) followed, once."""
    if not isinstance(prop, Mapping):
        return {}
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        found: Any = root
        for part in ref[2:].split("/"):
            found = found.get(part) if isinstance(found, Mapping) else None
        if isinstance(found, Mapping):
            return {**found, **{k: v for k, v in prop.items() if k != "$ref"}}
    return prop


def _json_type(prop: Mapping[str, Any], root: Mapping[str, Any]) -> str | None:
    """The JSON type a property takes (``null`` aside), or None when the schema names none."""
    kind = prop.get("type")
    kinds = [kind] if isinstance(kind, str) else list(kind) if isinstance(kind, list) else []
    kinds = [k for k in kinds if k != "null"]
    if kinds:
        return str(kinds[0])
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in prop.get(key) or ():
            found = _json_type(_resolve(branch, root), root)
            if found is not None:
                return found
    for value in (prop.get("const"), *(prop.get("enum") or ())):
        if value is not None:
            return _type_of(value)
    return None


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


def declared_args(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> list[Arg]:
    """A tool's arguments as a scenario declares them (types ``str int bool list object``),
    from its JSON input schema, in the schema's order (``root``: the schema its ``$ref``
    entries point into, when ``schema`` is inside another)."""
    root = schema if root is None else root
    properties = schema.get("properties")
    required = schema.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    found = []
    for name, raw in (properties or {}).items() if isinstance(properties, Mapping) else ():
        prop = _resolve(raw, root)
        kind = _json_type(prop, root)
        note = ""
        if kind is None:
            note = "its schema gives no type: declared str, TODO"
        elif kind not in _JSON_TYPES:
            note = f"its type {kind!r} has no scenario type: declared str, TODO"
        elif kind == "number":
            note = "a number: the world's arguments are int, a fraction is refused, TODO"
        declared = _JSON_TYPES.get(kind or "", "str")
        found.append(Arg(str(name), declared, name in required_names, prop, note, root))
    return found


def placeholder(arg: Arg, depth: int = 0) -> Any:
    """A value of ``arg``'s declared type that fits its schema where it can: its ``const``,
    first ``enum`` value, ``default`` or first example, else one made up (a ``format``'s
    example, a number within its bounds, a string of its lengths)."""
    prop = arg.schema
    wanted = {"str": str, "int": int, "bool": bool, "list": list, "object": dict}[arg.type]
    candidates = [prop.get("const"), *(prop.get("enum") or ())[:1], prop.get("default")]
    examples = prop.get("examples")
    candidates += list(examples[:1]) if isinstance(examples, list) else []
    for value in candidates:
        if isinstance(value, wanted) and (wanted is bool or not isinstance(value, bool)):
            return value
    if arg.type == "int":
        low = _bound(prop, "minimum", "exclusiveMinimum", +1)
        high = _bound(prop, "maximum", "exclusiveMaximum", -1)
        value = 1 if low is None else max(1, low)
        return value if high is None else min(value, high)
    if arg.type == "bool":
        return False
    if arg.type == "list":
        root = prop if arg.root is None else arg.root
        items = _resolve(prop.get("items"), root)
        count = _int(prop.get("minItems"), 0)
        if not count or depth > 3:
            return []
        kind = _JSON_TYPES.get(_json_type(items, root) or "", "str")
        item = Arg("item", kind, True, items, root=root)
        return [placeholder(item, depth + 1)] * count
    if arg.type == "object":
        if depth > 3:
            return {}
        inner = declared_args(prop, arg.root)
        return {a.name: placeholder(a, depth + 1) for a in inner if a.required}
    text = _FORMATS.get(str(prop.get("format")), "TODO")
    text = text.ljust(min(_int(prop.get("minLength"), 0), 1000), "x")
    high = prop.get("maxLength")
    return text[: max(high, 0)] if isinstance(high, int) else text


def _int(value: Any, otherwise: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else otherwise


def _bound(prop: Mapping[str, Any], inclusive: str, exclusive: str, step: int) -> int | None:
    """The least (``step`` +1) or greatest (-1) integer the schema's bounds allow, or None."""
    bounds = []
    for key, strict in ((inclusive, False), (exclusive, True)):
        value = prop.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            if step > 0:
                bounds.append(math.floor(value) + 1 if strict else math.ceil(value))
            else:
                bounds.append(math.ceil(value) - 1 if strict else math.floor(value))
    if not bounds:
        return None
    return max(bounds) if step > 0 else min(bounds)


# --- the files ---------------------------------------------------------------------------


def _comment(text: str) -> str:
    return " ".join(text.split())


def _wrapped(text: str) -> list[str]:
    """``text`` as comment lines of at most 92 characters."""
    return [f"# {line}" for line in textwrap.wrap(_comment(text), 90, break_on_hyphens=False)]


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the scenario is written for: what the server listed, and what it makes of it."""

    name: str
    summary: str
    args: list[Arg]
    tool_class: IdempotencyClass
    reason: str
    """The annotation that decided the class (``class_from_annotations``)."""


def _tools_of(listing: McpListing) -> list[Tool]:
    details = {d.name: d for d in listing.details}
    tools = []
    for listed in listing.tools:
        detail = details.get(listed.name, McpToolDetail(listed.name, "", {}))
        decided = class_from_annotations(listed.annotations)
        paragraph = detail.description.strip().split("\n\n", 1)[0]
        summary = _comment(paragraph)
        summary = summary if len(summary) <= 200 else summary[:197] + "..."
        tools.append(
            Tool(
                listed.name,
                summary,
                declared_args(detail.input_schema),
                decided.idempotency,
                decided.reason,
            )
        )
    return tools


def _placeholders(tool: Tool) -> list[dict[str, Any]]:
    """The placeholder behaviours to try for ``tool``, best first: one that does what its
    class says (a read changes nothing, a put of the same value again changes nothing), so
    that the skeleton's world agrees with its table until the TODO is filled in; then
    ``opaque``, which any tool can be."""
    tried: list[dict[str, Any]] = []
    if tool.tool_class is IdempotencyClass.READ_ONLY:
        tried.append({"behaviour": "read", "collection": tool.name})
    key = next((a.name for a in tool.args if a.required and a.type == "str"), None)
    if tool.tool_class is IdempotencyClass.IDEMPOTENT_WRITE and key and len(tool.args) > 1:
        tried.append({"behaviour": "put", "collection": tool.name, "key": key})
    return [*tried, {"behaviour": "opaque"}]


def _declaration(tool: Tool) -> tuple[dict[str, Any], str | None]:
    """The ``[tools.NAME]`` table of ``tool``, and why the loader would refuse it (or None)."""
    from harness.chaos.declarations import ToolDeclaration, check_tool_name

    args = {a.name: a.type + ("" if a.required else "?") for a in tool.args}
    named = check_tool_name(tool.name)
    why: str | None = None
    for behaviour in _placeholders(tool):
        table = behaviour | {"summary": tool.summary, "args": args}
        if named is not None:
            return table, named
        try:
            ToolDeclaration.model_validate(table)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            context = error.get("ctx") or {}
            field = context.get("field") or ".".join(str(p) for p in error["loc"])
            why = f"{field}: {context.get('problem', error['msg'])}"
            continue
        return table, None
    return table, why


def render_scenario(
    name: str,
    agent: str,
    source: str,
    tools: list[Tool],
    table_file: str,
    *,
    example: bool,
    agent_folder: str = ".",
) -> str:
    """The scenario skeleton's text."""
    from harness.world.catalog import CATALOG

    lines = [
        *_wrapped(
            f"A scenario skeleton for the agent `{_comment(agent)}`, written by harness init "
            f"{'with' if example else 'from'} {_comment(source)}."
        ),
        "#",
        "# The harness serves these tools to the agent itself (HARNESS_MCP_URL, or",
        "# HARNESS_MCP_COMMAND over stdio), acting on its own world, not on your server:",
        "# each [tools.NAME] says what a call does to that world. Every behaviour is a",
        '# TODO placeholder that does what its class says ("read" of an empty collection;',
        '# "put" of the other arguments under the first string one; else "opaque": the call',
        "# is only recorded), so the file runs as written; replace each with what the tool",
        "# really does: read, put, create, increment, delete or send (docs/guides/own-tools.md).",
        f"# The classes (what running a tool twice does) are in {table_file}: confirm each.",
        "# A writing tool needs a [tools.NAME.verify] (a read that reveals its effect) for the",
        "# model to settle a call whose outcome is unknown: without one it is left unknown.",
        "# The steps are the plan the harness's scripted model asks the agent to carry out:",
        "# give them the arguments of a real task.",
        "",
        f"name = {toml_string(name)}",
        'description = "TODO: the task the agent carries out, in one line"',
        f"tool_table = {toml_string(table_file)}",
        "",
        "# The agent this scenario is for: trial and chaos run it when given no --runtime.",
        "# Its relative paths are found from folder (relative to this file).",
        "[agent]",
        f"command = {toml_string(agent)}",
        f"folder = {toml_string(agent_folder)}",
    ]
    steps: list[tuple[Tool, Mapping[str, Any]]] = []
    if example:
        lines += [
            "",
            "# No MCP server was named (--mcp or --mcp-url lists the agent's own). Declare",
            "# each tool the agent calls, as this example does:",
            "#   [tools.NAME]   the name its model calls it by (letters, digits and _)",
            '#   args = { ARG = "TYPE" }   str, int, bool, list or object; "str?": optional',
            "#   behaviour      what a call does to the world, and the fields it needs",
            f"# and class it in {table_file}.",
        ]
    for tool in tools:
        table, refused = _declaration(tool)
        spec = CATALOG.get(tool.name)
        lines += ["", *_wrapped(f"--- {tool.name}: {tool.summary or '(no description)'}")]
        decided = "an example" if example else f"from its annotations: {_comment(tool.reason)}"
        lines += _wrapped(f"Class {tool.tool_class.value} ({decided}). Confirm it in {table_file}.")
        if spec is not None:
            lines += [
                "# A tool of this name is built into the harness's world, which serves it",
                f"# with its own arguments ({', '.join(a.name for a in spec.args) or 'none'}).",
            ]
            required = [Arg(a.name, a.type, True, {}) for a in spec.args if not a.optional]
            steps.append((tool, {a.name: placeholder(a) for a in required}))
            continue
        body = [f"{key} = {toml_value(value)}" for key, value in table.items()]
        body[0] += "  # TODO: its true behaviour"
        lines += _wrapped(
            f"TODO: its behaviour is a placeholder; its class suggests "
            f"{_BEHAVIOURS_OF[tool.tool_class]}."
        )
        if refused is not None:
            lines += [
                f"# Not declared (a scenario cannot hold it: {_comment(refused)}),",
                "# so no step calls it:",
                f"# [tools.{toml_string(tool.name)}]",
                *(f"# {line}" for line in body),
            ]
            continue
        lines += [f"# {a.name}: {a.note}" for a in tool.args if a.note]
        lines += [f"[tools.{tool.name}]", *body]
        steps.append((tool, {a.name: placeholder(a) for a in tool.args if a.required}))
    if not steps:
        raise HarnessError(
            f"init: {source}: none of its {len(tools)} tools can be declared in a scenario"
        )
    for tool, args in steps:
        lines += ["", "[[steps]]", f"tool = {toml_string(tool.name)}"]
        if args:
            lines.append(f"args = {toml_value(args)}  # TODO: a real task's arguments")
    return "\n".join(lines) + "\n"


def render_table(tools: list[Tool], source: str, *, example: bool) -> str:
    """The tool table's text: each tool's class, the annotation that decided it."""
    header = [
        line[2:]
        for line in _wrapped(
            f"The classes of the tools {'in' if example else 'of'} {_comment(source)}, "
            "written by harness init"
            + (
                ": an example."
                if example
                else " from their MCP annotations. A server's hints are untrusted: check "
                "each class against what the tool really does."
            )
        )
    ]
    table = ToolTable({t.name: ToolClass(t.tool_class) for t in tools}, source=source)
    notes = {
        t.name: "TODO: an example; class the agent's tools"
        if example
        else f"{t.reason}: confirm it"
        for t in tools
    }
    return table.to_toml(header=header, notes=notes)


# --- the command ---------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    try:
        agent = shlex.split(args.agent)
    except ValueError as exc:
        raise HarnessError(f"--agent {args.agent!r}: not a command line: {exc}") from None
    if not agent:
        raise HarnessError("--agent: give the agent's command line")
    agent, chosen = choose_interpreter(agent, Path.cwd())
    if shutil.which(agent[0]) is None and not Path(agent[0]).is_file():
        raise HarnessError(f"--agent {args.agent!r}: no program {agent[0]!r} (not on PATH)")
    agent_line = args.agent if agent == shlex.split(args.agent) else shlex.join(agent)
    server: list[str] | None = None
    server_chosen: str | None = None
    if args.mcp is not None:
        try:
            server = shlex.split(args.mcp)
        except ValueError as exc:
            raise HarnessError(f"--mcp {args.mcp!r}: not a command line: {exc}") from None
        if not server:
            raise HarnessError("--mcp: give the MCP server's command line")
        server, server_chosen = choose_interpreter(server, Path.cwd(), "--mcp")
    if args.mcp_url is not None and not re.match(r"https?://", args.mcp_url):
        raise HarnessError(f"--mcp-url {args.mcp_url!r}: not an http:// or https:// URL")
    default = args.out is None
    out = Path(args.out if not default else f"{DEFAULT_FOLDER}/{agent_name(agent)}.toml")
    name = identifier(out.stem)
    if out.suffix != ".toml":
        raise HarnessError(f"--out {out}: a scenario file's name ends in .toml")
    table_file = f"{out.stem}/tools.toml"
    table_path = out.parent / table_file
    _check_out(out, table_path, force=args.force, default=default)

    if server is not None:
        logging.getLogger("mcp").addHandler(logging.NullHandler())
        listing = list_in_scratch(server, args.timeout)
        source = f"the MCP server `{shlex.join(server)}`"
    elif args.mcp_url is not None:
        logging.getLogger("mcp").addHandler(logging.NullHandler())
        listing = list_mcp_tools_at(args.mcp_url, timeout=args.timeout)
        source = f"the MCP server at {args.mcp_url}"
    else:
        listing = None
        source = "no MCP server named (one example tool)"
    if listing is not None:
        source += f" ({listing.server_name} {listing.server_version})"
        if not listing.tools:
            raise HarnessError(f"init: {source}: lists no tools")
        try:
            ToolTable.from_annotations(listing.tools, source=listing.source)
        except ToolTableError as exc:
            raise McpServerError(
                listing.command, f"listed tools no table can hold: {exc.entry}: {exc.problem}"
            ) from None
        tools = _tools_of(listing)
    else:
        example = Arg("text", "str", True, {})
        tools = [
            Tool(
                "example_tool",
                "an example: replace it with the agent's own tools",
                [example],
                IdempotencyClass.NON_IDEMPOTENT,
                "an example",
            )
        ]
    example_only = listing is None

    def scenario_with(agent_folder: str) -> str:
        return render_scenario(
            name,
            agent_line,
            source,
            tools,
            table_file,
            example=example_only,
            agent_folder=agent_folder,
        )

    # The agent's folder is where init runs, written relative to the scenario's own folder;
    # the scratch copy that is checked names it whole (its relative form means nothing there).
    scenario_text = scenario_with(os.path.relpath(Path.cwd(), out.parent.resolve()))
    table_text = render_table(tools, source, example=example_only)
    _check_loads(out.name, table_file, scenario_with(str(Path.cwd())), table_text)
    _write_both(out, scenario_text, table_path, table_text, force=args.force)

    counts = {c: sum(t.tool_class is c for t in tools) for c in IdempotencyClass}
    by_class = ", ".join(f"{n} {c.value}" for c, n in counts.items() if n)
    print(
        f"harness: wrote {out} ({len(tools)} tool{'s' if len(tools) != 1 else ''} "
        f"{'with' if example_only else 'from'} {source}: {by_class}) and its classes "
        f"in {table_path}; fill in its TODOs, then run a crash-free trial, a first campaign "
        f"of minutes ({FIRST_RANDOM} random-time kills), then the whole one:",
        file=sys.stderr,
    )
    if chosen is not None:
        print(f"harness: the agent runs under {chosen}", file=sys.stderr)
    if server_chosen is not None:
        print(f"harness: the MCP server ran under {server_chosen}", file=sys.stderr)
    if _others_name_no_agent(out):
        campaign = " (chaos with no --scenario, as make chaos runs it)" if default else ""
        print(
            f"harness: {out.parent}/ holds scenarios that name no [agent]: a campaign of the "
            f"folder{campaign} runs those and leaves this one out; the commands below run it",
            file=sys.stderr,
        )
    print(f"{prog_name()} trial {shlex.quote(str(out))} --seed 1")
    print(f"{prog_name()} chaos --scenario {shlex.quote(str(out))} --random {FIRST_RANDOM}")
    print(f"{prog_name()} chaos --scenario {shlex.quote(str(out))}")
    shipped = SHIPPED.resolve()
    if example_only and shipped.is_file():
        # Its tools unknown, the skeleton's one placeholder proves little; an agent that takes
        # whatever tools the harness serves it is judged on a shipped scenario at once.
        print(
            "harness: an agent that uses the tools the harness serves it (HARNESS_MCP_URL), "
            f"not a server of its own, is judged at once on a shipped scenario ({shipped.stem}):",
            file=sys.stderr,
        )
        runtime = shlex.quote(f"cmd:{agent_line}")
        scenario = shlex.quote(_shown(shipped, Path.cwd()))
        print(
            f"{prog_name()} chaos --runtime {runtime} --scenario {scenario} --random {FIRST_RANDOM}"
        )
    return 0


_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
"""A bare interpreter name (``python``, ``python3``, ``python3.12``): whichever is first on
PATH, which is seldom the one that has the agent's packages."""
VENV_NAMES = (".venv", "venv")


def choose_interpreter(
    command: list[str], cwd: Path, option: str = "--agent"
) -> tuple[list[str], str | None]:
    """The agent's command with the interpreter that has its packages, and a sentence on
    which was chosen (None: the command names its interpreter, which is kept).

    For a bare ``python`` (``python3``...) before a script or ``-m module``: a venv beside
    the script (``.venv/`` or ``venv/`` in its folder or one above it, up to ``cwd``),
    else ``uv run`` for a uv project there (a ``uv.lock``, with ``uv`` on PATH), else the
    command as given, saying which ``python`` that is (``option``: where to give another)."""
    if not _PYTHON.fullmatch(command[0]) or len(command) < 2:
        return command, None
    script = next((w for w in command[1:] if not w.startswith("-")), None)
    start = (
        Path(os.path.normpath(cwd / script)).parent if script and "-m" not in command[1:2] else cwd
    )
    folders = [start, *start.parents]
    root = cwd.resolve()
    for folder in folders:
        for venv in VENV_NAMES:
            python = folder / venv / "bin" / "python"
            if python.is_file() and os.access(python, os.X_OK):
                shown = _shown(python, cwd)
                why = f"a venv beside it; {option} with another interpreter to change it"
                return [shown, *command[1:]], f"{shown} ({why})"
        if (folder / "uv.lock").is_file() and shutil.which("uv") is not None:
            project = _shown(folder, cwd)
            return (
                ["uv", "run", "--project", project, *command],
                f"uv run --project {project} (a uv project beside it; {option} with another "
                "interpreter to change it)",
            )
        if folder.resolve() == root or folder.resolve() == folder.resolve().parent:
            break
    found = shutil.which(command[0])
    where = f" ({found})" if found else ""
    return command, (
        f"{command[0]}{where}, as given: no venv (.venv/ or venv/) nor uv project beside it; "
        f"if its packages are elsewhere, give {option} that interpreter"
    )


def _shown(path: Path, cwd: Path) -> str:
    """``path`` relative to ``cwd`` when under it, else whole."""
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def _others_name_no_agent(out: Path) -> bool:
    """Whether a scenario beside ``out`` names no ``[agent]``: a campaign of their folder
    given no ``--runtime`` then leaves ``out`` out (``campaign_scenarios``)."""
    for other in sorted(out.parent.glob("*.toml")):
        if other.name == out.name:
            continue
        try:
            if "agent" not in tomllib.loads(other.read_text("utf-8")):
                return True
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue  # not a scenario a campaign could take either
    return False


def _check_out(out: Path, table_path: Path, *, force: bool, default: bool) -> None:
    """Refuse, before any server starts, files that could not be written or would be lost."""
    if out.is_dir():
        raise HarnessError(f"--out {out}: is a folder")
    folder = out.parent
    if not folder.is_dir():
        if not default or folder.exists():
            raise HarnessError(f"--out {out}: no folder {folder}")
        folder = folder.parent  # the default folder is made: its parent must take it
    for path in (out, table_path):
        if path.exists() and not force:
            raise HarnessError(f"--out {out}: {path} exists (--force replaces it)")
    if table_path.parent.exists() and not table_path.parent.is_dir():
        raise HarnessError(f"--out {out}: {table_path.parent} is not a folder")
    if table_path.is_dir():
        raise HarnessError(f"--out {out}: {table_path} is a folder")
    try:  # os.access answers yes to root, and nothing short of trying sees a read-only mount
        os.rmdir(tempfile.mkdtemp(prefix=".harness-probe-", dir=folder))
    except OSError as exc:
        raise HarnessError(f"--out {out}: cannot write in {folder}: {exc.strerror}") from None


def _check_loads(scenario_name: str, table_file: str, scenario: str, table: str) -> None:
    """The skeleton loads and compiles, tried in a scratch folder (a bug of this module if
    not: the texts are made from values the loader was asked about)."""
    from harness.chaos.scenario import compile_plan, load_scenario

    with tempfile.TemporaryDirectory(prefix="harness-init-") as scratch:
        path = Path(scratch) / scenario_name
        (path.parent / table_file).parent.mkdir(parents=True)
        (path.parent / table_file).write_text(table, "utf-8")
        path.write_text(scenario, "utf-8")
        compile_plan(load_scenario(path), seed=1, source=str(path))


def _write_both(out: Path, scenario: str, table_path: Path, table: str, *, force: bool) -> None:
    """Write the tool table, then the scenario, each whole; a failure removes what this
    call made (a folder too)."""
    made: list[Path] = []
    done: list[Path] = []
    try:
        for folder in (out.parent, table_path.parent):
            if not folder.is_dir():
                folder.mkdir()
                made.append(folder)
        write_whole(table_path, table, force=force)
        done.append(table_path)
        write_whole(out, scenario, force=force)
    except BaseException:
        if not force:  # what --force replaced is gone either way
            for path in done:
                path.unlink(missing_ok=True)
        for folder in reversed(made):
            shutil.rmtree(folder, ignore_errors=True)
        raise
