"""The docs site builds with ``mkdocs build --strict``, and every block the docs mark
runnable runs and exits 0.

A block is runnable when the line before its fence is ``<!-- runnable -->``. A ``sh``
block runs as written; a ``console`` block runs its ``$ `` lines (with their ``\\``
continuations) and leaves the printed output aside. Each runs under bash, in a temporary
copy of what the docs' commands read (``scenarios/``, ``examples/``), with ``python``
meaning this interpreter, so that no report or file lands in the working tree.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LEFT_OUT = shutil.ignore_patterns("__pycache__", ".venv", "node_modules")
"""Not copied for a block: caches, and the example agents' environments (3 GB once built)."""
_RUNNABLE = re.compile(r"^<!-- runnable -->\n```(sh|console)\n(.*?)\n```$", re.M | re.S)


def runnable_blocks() -> list[tuple[str, str]]:
    """(where, script) for every runnable block of the README and the docs pages."""
    blocks = []
    for page in PAGES:
        text = page.read_text("utf-8")
        for found in _RUNNABLE.finditer(text):
            kind, body = found.groups()
            line = text[: found.start()].count("\n") + 1
            where = f"{page.relative_to(ROOT)}:{line}"
            blocks.append((where, body if kind == "sh" else _commands(body)))
    return blocks


def _commands(console: str) -> str:
    """The ``$ `` lines of a console block, with their continuation lines."""
    commands: list[str] = []
    going_on = False
    for line in console.splitlines():
        if line.startswith("$ ") or going_on:
            commands.append(line[2:] if line.startswith("$ ") and not going_on else line)
            going_on = line.endswith("\\")
    return "\n".join(commands)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as ``mkdocs build --strict`` (any warning fails it) builds it."""
    site = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def test_the_site_builds_strict(site: Path) -> None:
    """Every page builds, and the command reference generated from the parsers holds every
    command's usage."""
    from harness import cli

    commands = html.unescape((site / "reference" / "commands" / "index.html").read_text())
    for command in cli.COMMANDS:
        parser_name = command.__name__.rsplit(".", 1)[-1].replace("_", "-")
        assert f"usage: python -m harness {parser_name}" in commands, parser_name
    invariants = (site / "reference" / "invariants" / "index.html").read_text()
    assert "generated:" not in invariants  # every marker was replaced by its table
    assert "I1</td>" in invariants


def test_some_blocks_are_marked_runnable() -> None:
    """The marker is in use: a typo in it would leave the test below with nothing to run."""
    assert len(runnable_blocks()) >= 3


@pytest.mark.parametrize(("where", "script"), runnable_blocks(), ids=lambda v: str(v)[:40])
def test_runnable_block_exits_0(where: str, script: str, tmp_path: Path) -> None:
    """Each runnable block exits 0, run in a temporary copy with ``python`` this Python."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("scenarios", "examples"):
        shutil.copytree(ROOT / name, work / name, ignore=LEFT_OUT)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, f"{where}\n{script}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.mark.browser
def test_the_home_page_shows_what_it_is_and_where_to_go(site: Path, browser: None) -> None:
    """The home page, opened in a headless Chromium: its heading, the picture of a real
    run loaded (not a broken image), and the navigation to the docs' sections."""
    from harness.report.browser import open_page

    with open_page(site / "index.html") as page:
        heading = page.inner_text("article h1")
        picture = page.eval_on_selector(
            "article img[src*='index.png']", "img => img.complete && img.naturalWidth"
        )
        nav = page.inner_text("nav.md-nav--primary")
        text = page.inner_text("article")
    assert heading.rstrip("¶") == "agent-crash-harness"  # the permalink sign follows
    assert picture and picture > 0, "the picture of a real run did not load"
    for section in ("Concepts", "Guides", "Reference", "Findings"):
        assert section in nav, nav
    assert "SKIP" in text and "VERIFY" in text, text[:500]
