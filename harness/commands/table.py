"""``python -m harness table --from-mcp [--out FILE] [--force] -- CMD ARGS...``: MCP tools.

Starts the MCP server ``CMD ARGS...`` over stdio (with this process's
environment), lists its tools and writes a ``tools.toml`` in the format
``ToolTable.load`` reads: to ``FILE``, or to stdout without ``--out``. An
existing ``FILE`` is refused, before the server is started, unless ``--force``
(a table that classes a user's tools is not silently replaced); the file is
written whole or not at all (a temporary file beside it, then a link or a
rename). A comment header names the server and the mapping
(``MCP_ANNOTATION_CLASSES`` in ``harness.runtime.classes``), and each tool's
line carries a comment with the annotation that decided its class. The file loads back to the table
``ToolTable.from_mcp`` gives for the same server; that is checked before
anything is written.

Exit 0 when written, 2 (one line on stderr naming the command and the
problem, nothing written) when the server cannot be started, exits early,
does not speak MCP, lists a tool twice or does not answer in time, when
``--out`` cannot be written, or when the MCP SDK is not installed. The
server's process is gone by then (``harness.runtime.mcp_table``'s contract).

The server runs in a temporary folder, removed once it is gone (on Ctrl-C too):
a database it makes on a relative path is not left in the current folder. An
argument naming an existing path of the current folder (the server's script)
is handed to it as an absolute path.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import shlex
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.runtime.classes import IdempotencyClass, ToolTable, class_from_annotations
from harness.runtime.errors import HarnessError, McpServerError, ToolTableError
from harness.runtime.mcp_table import DEFAULT_TIMEOUT_S, McpListing, list_mcp_tools

__all__ = ["add_parser", "render", "run", "whole_path", "write_whole"]

_MAPPING_EXAMPLES: tuple[tuple[str, dict[str, object] | None], ...] = (
    ("readOnlyHint: true", {"readOnlyHint": True}),
    ("idempotentHint: true, readOnlyHint not true", {"idempotentHint": True}),
    ("annotations, neither of those hints true", {"destructiveHint": True}),
    ("no annotations at all", None),
)
"""The mapping as the header states it: each line's class is computed, not written down."""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    table: argparse.ArgumentParser = sub.add_parser(
        "table",
        help="write a tool table (tools.toml) from an MCP server's tool annotations",
        description="Write a tool table from an MCP server's tool annotations: "
        "python -m harness table --from-mcp [--out FILE [--force]] -- CMD ARGS...",
    )
    table.add_argument(
        "--from-mcp",
        action="store_true",
        help="read the tools of the MCP server started by the command after --",
    )
    table.add_argument("--out", default=None, help="the file to write (default: stdout)")
    table.add_argument("--force", action="store_true", help="replace the --out file if it exists")
    table.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds the server has to start and list its tools (default {DEFAULT_TIMEOUT_S:g})",
    )
    table.add_argument("command", nargs="*", help="the MCP server's command and its arguments")
    return table


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def render(listing: McpListing, table: ToolTable) -> str:
    """The tools.toml of ``table``, read from ``listing``, with its comments."""
    header = [
        "A tool table read from an MCP server's tool annotations by",
        f"  python -m harness table --from-mcp -- {shlex.join(listing.command)}",
        f"Server: {listing.server_name} {listing.server_version} "
        f"(MCP protocol {listing.protocol_version}), {len(listing.tools)} tools.",
        "Mapping (a server's hints are untrusted: what they leave out is the conservative side):",
        *(
            f"  {text:<46} -> {class_from_annotations(example).idempotency.value}"
            for text, example in _MAPPING_EXAMPLES
        ),
        "Each tool's comment gives the annotation that decided its class. A tool this table",
        "does not list is unknown. Check the classes against what the tools really do.",
    ]
    notes = {tool.name: class_from_annotations(tool.annotations).reason for tool in listing.tools}
    return table.to_toml(header=header, notes=notes)


def run(args: argparse.Namespace) -> int:
    if not args.from_mcp:
        raise HarnessError("table: say where the table comes from: --from-mcp -- CMD ARGS...")
    if not args.command:
        raise HarnessError("table --from-mcp: give the MCP server's command after --")
    if args.force and args.out is None:
        raise HarnessError("table: --force replaces the --out file; there is no --out")
    if args.out is not None:
        _check_out(Path(args.out), force=args.force)  # before the server is started
    # The SDK logs a line it cannot parse with a traceback; the error raised says it in one.
    logging.getLogger("mcp").addHandler(logging.NullHandler())
    listing = list_in_scratch(args.command, args.timeout)
    listing = dataclasses.replace(listing, command=tuple(args.command))
    try:
        table = ToolTable.from_annotations(listing.tools, source=listing.source)
    except ToolTableError as exc:  # the server's fault, said like its other faults
        raise McpServerError(
            listing.command, f"listed tools no table can hold: {exc.entry}: {exc.problem}"
        ) from None
    text = render(listing, table)
    if dict(ToolTable.parse(text, source="<written>").entries) != dict(table.entries):
        raise AssertionError("the written table does not read back equal")  # a bug of to_toml
    if args.out is None:
        sys.stdout.write(text)
        where = "stdout"
    else:
        write_whole(Path(args.out), text, force=args.force)
        where = args.out
    counts = Counter(c.idempotency for c in table.entries.values())
    by_class = ", ".join(f"{counts[c]} {c.value}" for c in IdempotencyClass if counts[c])
    print(
        f"harness: {len(table)} tools from {listing.server_name} {listing.server_version}"
        f"{': ' + by_class if by_class else ''}; table written to {where}",
        file=sys.stderr,
    )
    return 0


def list_in_scratch(server: Sequence[str], timeout: float) -> McpListing:
    """The tools of the MCP server ``server`` (``list_mcp_tools``), run over stdio in a scratch
    folder, gone afterwards, so that what it makes of a relative path (its database, say) is
    not left in this one; a path this folder has is passed to it whole. On Ctrl-C, a server
    still running (one the SDK had not yet taken charge of) is killed before this returns."""
    with tempfile.TemporaryDirectory(prefix="harness-mcp-") as scratch:
        command = [whole_path(arg) for arg in server]
        try:
            return list_mcp_tools(command, env=os.environ, timeout=timeout, cwd=scratch)
        except KeyboardInterrupt:
            _kill_children()
            raise


def _kill_children() -> None:
    """SIGKILL and reap every process this one still has running."""
    import psutil

    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(children, timeout=10)


def whole_path(arg: str) -> str:
    """``arg`` made absolute when it names a file or folder of this folder (the server's
    script, say), else as it is (an option, or a file the server is to make)."""
    if arg.startswith("-") or os.path.isabs(arg) or not os.path.exists(arg):
        return arg
    return os.path.abspath(arg)


def _check_out(path: Path, *, force: bool) -> None:
    """Refuse an ``--out`` that could not be written, before any process is started."""
    if path.is_dir():
        raise HarnessError(f"--out {path}: is a folder")
    if not path.parent.is_dir():
        raise HarnessError(f"--out {path}: no folder {path.parent}")
    if path.exists() and not force:
        raise HarnessError(f"--out {path}: exists (--force replaces it)")


def write_whole(path: Path, text: str, *, force: bool) -> None:
    """Write ``text`` to ``path`` whole or not at all: a temporary file beside it, then
    renamed over ``path`` (``force``) or linked to it, which fails if it appeared since."""
    partial: Path | None = None
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
        partial = Path(name)
        with os.fdopen(fd, "w", encoding="utf-8") as partial_file:
            partial_file.write(text)
        os.chmod(partial, 0o666 & ~_umask())  # mkstemp's 0600, as a plain open() makes it
        if force:
            os.replace(partial, path)
        else:
            os.link(partial, path)
    except FileExistsError:
        raise HarnessError(f"--out {path}: exists (--force replaces it)") from None
    except OSError as exc:
        raise HarnessError(f"--out {path}: cannot write: {exc.strerror or exc}") from None
    finally:
        if partial is not None:
            partial.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
