"""MkDocs hook: the pages that are generated from the code at build time, so they never go stale.

- ``reference/commands.md``: the ``--help`` of ``python -m harness`` and of each of its
  commands, rendered from the argument parsers themselves.
- In any page, a line ``<!-- generated: NAME -->`` is replaced by the table NAME, built from
  the registry that the code runs on: ``invariants`` (``harness.check.invariants.TITLES``),
  ``faults`` (``harness.chaos.faults.FAULT_KINDS``), ``broken-runtimes``
  (``harness.agent.broken.BROKEN_RUNTIMES``). The exit statuses' tables are written by
  hand; ``tests/unit/test_exits.py`` holds them to ``harness.exits``.
"""

from __future__ import annotations

import argparse
import os
import re
from typing import Any

from mkdocs.structure.files import File, Files

COMMANDS_PAGE = "reference/commands.md"
_MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)
_WIDTH = "100"  # argparse wraps help at $COLUMNS: a fixed width gives the same page anywhere


def _help(parser: argparse.ArgumentParser) -> str:
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = _WIDTH
    try:
        return parser.format_help().rstrip()
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def commands_page() -> str:
    """Every command's help, from the parser ``python -m harness`` itself builds."""
    from harness import cli

    parser = cli._parser()
    lines = [
        "# Commands",
        "",
        "Every command of `python -m harness` (the venv's Python: `.venv/bin/python -m "
        "harness`), with the help its parser prints. This page is generated from the "
        "parsers when the site is built, so it always matches the code.",
        "",
        "```text",
        _help(parser),
        "```",
    ]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                lines += ["", f"## `{name}`", "", "```text", _help(sub), "```"]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _invariants() -> str:
    from harness.check.invariants import TITLES

    rows = [f"| {key} | {_cell(title)} |" for key, title in TITLES.items()]
    return "\n".join(["| invariant | what it holds |", "|---|---|", *rows])


def _faults() -> str:
    from harness.chaos.faults import FAULT_KINDS

    rows = [f"| `{kind}` | {_cell(what)} |" for kind, what in FAULT_KINDS.items()]
    return "\n".join(["| fault | what it does |", "|---|---|", *rows])


def _broken_runtimes() -> str:
    from harness.agent.broken import BROKEN_RUNTIMES

    rows = [
        f"| `{name}` | {_cell(cls.mistake)} | {', '.join(cls.caught_by)} | {cls.needs_fault} |"
        for name, cls in BROKEN_RUNTIMES.items()
    ]
    header = "| broken runtime | its mistake | caught by | fault it needs |"
    return "\n".join([header, "|---|---|---|---|", *rows])


_TABLES = {
    "invariants": _invariants,
    "faults": _faults,
    "broken-runtimes": _broken_runtimes,
}


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, COMMANDS_PAGE, content=commands_page()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    def table(found: re.Match[str]) -> str:
        name = found.group(1)
        if name not in _TABLES:
            raise ValueError(f"{page.file.src_uri}: no generated table {name!r}")
        return _TABLES[name]()

    return _MARKER.sub(table, markdown)
