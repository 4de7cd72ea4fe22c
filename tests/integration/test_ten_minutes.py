"""The page "Test your agent in ten minutes" runs as written, step by step.

Each ``<!-- ten-minutes: STEP -->`` marker on the page is followed by a console block; its
``$`` lines are run in a fresh copy of what the page reads (``examples/``, ``scenarios/``),
with ``python`` meaning this interpreter, and each step's output is held against what the
page says it shows: the agent's own venv chosen, a crash-free pass, a first campaign that
fails on I2 with a replay command, that command failing on I2 again. Then the campaign
``make chaos`` runs (narrowed to one shard, with no self-check) still runs, and says it left
the agent's scenario out.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guides" / "ten-minutes.md"
STEPS = ("copy", "init", "trial", "campaign", "replay")
LEFT_OUT = shutil.ignore_patterns("__pycache__", ".venv", "node_modules")


def steps() -> dict[str, list[str]]:
    """Each step's commands: the ``$`` lines of the console block after its marker."""
    text = PAGE.read_text("utf-8")
    found: dict[str, list[str]] = {}
    for match in re.finditer(r"<!-- ten-minutes: (\w+) -->\n```console\n(.*?)\n```", text, re.S):
        name, block = match.groups()
        found[name] = [line[2:] for line in block.splitlines() if line.startswith("$ ")]
    return found


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A fresh copy of what the page reads, with ``python`` on PATH this interpreter."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("scenarios", "examples"):
        shutil.copytree(ROOT / name, work / name, ignore=LEFT_OUT)
    return work


def shell(command: str, work: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = work.parent / "bin"
    bin_dir.mkdir(exist_ok=True)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        ["bash", "-c", command],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_page_has_every_step() -> None:
    """The markers are in place: a typo in one would leave a step untested."""
    assert list(steps()) == list(STEPS)


def test_the_steps_run_as_the_page_says(work: Path) -> None:
    """Copy and venv, init (the venv chosen), a passing trial, a first campaign that fails on
    I2 and prints a replay command, which fails on I2 again; then the default campaign
    runs, leaving the agent's scenario out in one line."""
    page = steps()
    for command in page["copy"]:
        done = shell(command, work)
        assert done.returncode == 0, (command, done.stderr)

    (init,) = page["init"]
    done = shell(init, work)
    assert done.returncode == 0, done.stderr
    assert "the agent runs under my_agent/.venv/bin/python (a venv beside it;" in done.stderr
    printed = done.stdout.splitlines()
    assert printed[:3] == [*page["trial"], *page["campaign"], printed[2]]

    (trial,) = page["trial"]
    done = shell(trial, work)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert done.stdout.splitlines()[-1] == "PASS"

    (campaign,) = page["campaign"]
    done = shell(campaign, work)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    assert "s001 (example_tool, non_idempotent) ran 2 times in 2 lives" in done.stdout
    last = done.stdout.splitlines()[-1]
    assert last.startswith("replay the first failure with: python -m harness trial "), last
    replayed = shell(shlex.join(shlex.split(last.split(": ", 1)[1])), work)
    assert replayed.returncode == 1, replayed.stdout[-3000:] + replayed.stderr
    assert "fail       I2 " in replayed.stdout

    (replay,) = page["replay"]
    done = shell(replay, work)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    assert "fail       I2 " in done.stdout and done.stdout.splitlines()[-1] == "FAIL"

    # make chaos, narrowed: one shard of the default campaign's trials, no self-check.
    narrowed = "python -m harness chaos --random 0 --no-self-check --shard 1/2000 --seed 1"
    done = shell(narrowed, work)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert done.stderr.splitlines()[0].startswith(
        "harness: left out scenarios/my_agent.toml, which names an [agent]"
    )
