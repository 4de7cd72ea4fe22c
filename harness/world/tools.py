"""The simulated tools: one per tool of ``catalog.CATALOG``, acting only on the world.

``make_tool_function(world, plan.tools)`` gives the agent its ``ToolFunction``:
``execute(tool, args, ctx) -> dict``, over the catalog's tools and the
scenario's declared ones (``harness.world.declared``). Every call passes a
gate first, which touches nothing and leaves no ledger row:

1. an unknown tool name, or arguments that do not match the catalog (a missing
   or unexpected name, a value of the wrong JSON type), raises ``ToolError``;
2. ``fail_attempts >= ctx.attempt`` raises ``TransientToolError``, which the
   executor may retry in-process.

Past the gate the request hits the failpoint ``op.request`` on its way to the
world, where a lost request (``lost-request``) turns it into a timeout with
nothing done. Then the tool really executes: it is ledgered in the transaction
of its first step, and what it returned in that of its last (see ``store``).
Once its effect is committed it hits the failpoint ``op.reply`` on the way
back, where a lost reply (``lost-reply``) turns a done call into a timeout.
Contract: the only thing a simulated tool ever changes is the world database,
and its result is a JSON-serialisable dict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from harness.failpoints import failpoint
from harness.runtime.errors import ToolError, TransientToolError
from harness.runtime.executor import CallContext, ToolFunction
from harness.world import call_tools, read_tools, write_tools
from harness.world.catalog import ARG_TYPES, CATALOG, ToolSpec
from harness.world.declared import DeclaredTool, run_declared
from harness.world.store import WorldStore

__all__ = ["SIMULATED_TOOLS", "SimulatedTool", "check_arguments", "make_tool_function"]

SimulatedTool = Callable[[WorldStore, Mapping[str, Any], CallContext], dict[str, Any]]
"""``tool(world, args, ctx) -> result``, called with arguments already checked."""

SIMULATED_TOOLS: Mapping[str, SimulatedTool] = MappingProxyType(
    {
        # READ_ONLY
        "read_file": read_tools.read_file,
        "list_files": read_tools.list_files,
        "web_search": read_tools.web_search,
        "ui_dump": read_tools.ui_dump,
        "logcat": read_tools.logcat,
        "browser_snapshot": read_tools.browser_snapshot,
        # IDEMPOTENT_WRITE
        "write_file": write_tools.write_file,
        "app_install": write_tools.app_install,
        "create_directory": write_tools.create_directory,
        "browser_navigate": write_tools.browser_navigate,
        "github_write_file": write_tools.github_write_file,
        # NON_IDEMPOTENT
        "app_uninstall": write_tools.app_uninstall,
        "ui_tap": write_tools.ui_tap,
        "input_text": write_tools.input_text,
        "browser_click": write_tools.browser_click,
        "terminal_send": write_tools.terminal_send,
        "alarm": write_tools.alarm,
        # UNKNOWN
        "shell_execute": call_tools.shell_execute,
        "http_request": call_tools.http_request,
        "mcp_call": call_tools.mcp_call,
        "terminal_exec": call_tools.terminal_exec,
        "code_runner": call_tools.code_runner,
        # the ask-user family
        "ask_user": call_tools.ask_user,
        "ask_user_confirm": call_tools.ask_user_confirm,
        "ask_user_choice": call_tools.ask_user_choice,
    }
)
"""The implementation of every catalog tool, by name."""

# Arguments that name something in the world: an empty name names nothing.
_NON_EMPTY = frozenset({"path", "package", "repo", "url"})


def check_arguments(spec: ToolSpec, args: Mapping[str, Any]) -> None:
    """Raise ``ToolError`` unless ``args`` match the catalog entry ``spec``."""
    specs = spec.args
    unexpected = sorted(set(args) - {arg.name for arg in specs} - {"fail_attempts"})
    if unexpected:
        raise ToolError(f"{spec.name}: unexpected argument(s) {', '.join(unexpected)}")
    for arg in specs:
        if arg.name not in args:
            if arg.optional:
                continue
            raise ToolError(f"{spec.name}: missing argument {arg.name!r} ({arg.type})")
        _check_type(spec.name, arg.name, arg.type, args[arg.name])
        if arg.name in _NON_EMPTY and args[arg.name] == "":
            raise ToolError(f"{spec.name}: argument {arg.name!r} must not be empty")
    if "fail_attempts" in args:
        _check_type(spec.name, "fail_attempts", "int", args["fail_attempts"])


def _check_type(tool: str, name: str, type_name: str, value: Any) -> None:
    # bool is an int to Python, never to JSON: fail_attempts=true is a mistake.
    wrong_bool = isinstance(value, bool) and type_name != "bool"
    if wrong_bool or not isinstance(value, ARG_TYPES[type_name]):
        raise ToolError(
            f"{tool}: argument {name!r} must be {type_name}, not {type(value).__name__}"
        )


def make_tool_function(
    world: WorldStore, tools: Mapping[str, DeclaredTool] = MappingProxyType({})
) -> ToolFunction:
    """The agent's ``execute(tool, args, ctx)`` over ``world``: the catalog's tools and
    the scenario's declared ``tools`` (``plan.tools``), which may not reuse a catalog name."""
    reused = sorted(set(tools) & set(CATALOG))
    if reused:
        raise ValueError(f"declared tools reuse built-in names: {', '.join(reused)}")
    known = ", ".join([*CATALOG, *tools])

    def execute(tool: str, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
        declared = tools.get(tool)
        spec = CATALOG.get(tool) if declared is None else declared.spec
        implementation = SIMULATED_TOOLS.get(tool)
        if spec is None or (implementation is None and declared is None):
            raise ToolError(f"unknown tool {tool!r}; the world has {known}")
        check_arguments(spec, args)
        if args.get("fail_attempts", 0) >= ctx.attempt:
            raise TransientToolError(
                f"{tool}: simulated transient failure on attempt {ctx.attempt} "
                f"(fail_attempts={args['fail_attempts']})"
            )
        failpoint("op.request", ctx.op_id)  # past the gate; the world has not seen it yet
        if declared is not None:
            result = run_declared(declared, world, args, ctx)
        else:
            assert implementation is not None
            result = implementation(world, args, ctx)
        failpoint("op.reply", ctx.op_id)  # the effect is committed; the reply is on its way
        return result

    return execute
