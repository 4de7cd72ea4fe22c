"""The catalog of simulated tools: each tool's arguments, as data.

This is the contract between scenarios (validated against it before anything
runs) and the world's simulated tools (which implement exactly these). The
tool *classes* live in the runtime's tool table, not here.

Every argument is a JSON value of the named type; ``optional`` arguments may
be left out. Any tool also accepts ``fail_attempts`` (int, default 0): the
tool raises a transient error on attempts up to that number, which exercises
the executor's in-process retry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["ARG_TYPES", "CATALOG", "ArgSpec", "ToolSpec"]

ARG_TYPES = MappingProxyType({"str": str, "int": int, "bool": bool, "list": list, "object": dict})


@dataclass(frozen=True, slots=True)
class ArgSpec:
    name: str
    type: str
    optional: bool = False


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    args: tuple[ArgSpec, ...]
    summary: str
    multi_step: bool = False
    """Hits ``op.mid_effect`` between its steps, each step committed on its own."""

    @property
    def arg_names(self) -> frozenset[str]:
        return frozenset(a.name for a in self.args) | {"fail_attempts"}


def _tool(name: str, summary: str, *args: str, multi_step: bool = False) -> ToolSpec:
    specs = []
    for arg in args:
        arg_name, arg_type = arg.split(":")
        specs.append(ArgSpec(arg_name.rstrip("?"), arg_type, arg_name.endswith("?")))
    return ToolSpec(name, tuple(specs), summary, multi_step)


_TOOLS = (
    # READ_ONLY
    _tool("read_file", "a file's content, or exists=false", "path:str"),
    _tool("list_files", "names directly under a directory", "path:str"),
    _tool("web_search", "deterministic fake results; no network", "query:str"),
    _tool("ui_dump", "screen, text fields, taps, submitted forms"),
    _tool("logcat", "log lines, optionally of one tag", "tag?:str"),
    _tool("browser_snapshot", "current url, history, clicks, submitted forms"),
    # IDEMPOTENT_WRITE
    _tool("write_file", "overwrite a whole file", "path:str", "content:str"),
    _tool(
        "app_install",
        "download then install; installing twice changes nothing",
        "package:str",
        multi_step=True,
    ),
    _tool("create_directory", "mkdir -p, one component per step", "path:str", multi_step=True),
    _tool("browser_navigate", "go to a url", "url:str"),
    _tool(
        "github_write_file",
        "write a blob, then commit it to a path",
        "repo:str",
        "path:str",
        "content:str",
        multi_step=True,
    ),
    # NON_IDEMPOTENT
    _tool("app_uninstall", "remove an installed app; fails if absent", "package:str"),
    _tool("ui_tap", "tap an element; a tap with a form submits it", "element:str", "form?:str"),
    _tool("input_text", "type text into a field (appends)", "field:str", "text:str"),
    _tool(
        "browser_click",
        "click a selector; a click with a form submits it",
        "selector:str",
        "form?:str",
    ),
    _tool("terminal_send", "send a line to the terminal", "text:str"),
    _tool("alarm", "set a new alarm", "time:str", "label:str"),
    # UNKNOWN
    _tool("shell_execute", "recorded, never run", "command:str"),
    _tool("http_request", "recorded, never sent", "method:str", "url:str", "body?:str"),
    _tool("mcp_call", "recorded, never sent", "server:str", "tool:str", "arguments?:object"),
    _tool("terminal_exec", "recorded, never run", "command:str"),
    _tool("code_runner", "recorded, never run", "language:str", "code:str"),
    # the ask-user family
    _tool("ask_user", "ask a person; a scripted answer", "question:str"),
    _tool("ask_user_confirm", "ask a person to confirm; always yes", "question:str"),
    _tool("ask_user_choice", "ask a person to pick one option", "question:str", "options:list"),
)

CATALOG: Mapping[str, ToolSpec] = MappingProxyType({t.name: t for t in _TOOLS})
"""Every simulated tool by name."""
