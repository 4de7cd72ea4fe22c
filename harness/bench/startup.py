"""Figure 4, agent start-up: a fresh agent process that has nothing left to do.

The subject is ``python -I -m harness.agent TRIAL_DIR`` on a trial that has
already finished: it imports, opens and scans the journal, recovers (every
step is a durable success: all SKIP), opens the world and exits. The baseline
is the least a fresh interpreter that keeps a world must do:
``python -I -S -c "import sqlite3"``. Each sample is one process, spawn to
reap. When the figure misses, ``import_profile`` gives the agent's heaviest
imports from ``-X importtime`` (cumulative microseconds).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.bench.figures import BenchError

__all__ = [
    "ImportTime",
    "agent_command",
    "import_profile",
    "parse_importtime",
    "prepare_finished_trial",
    "stdlib_floor_command",
    "time_process",
]

_STEPS = 3


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}


def agent_command(trial: Path) -> list[str]:
    return [sys.executable, "-I", "-m", "harness.agent", str(trial)]


BASELINE_COMMAND = (sys.executable, "-I", "-S", "-c", "import sqlite3")

_STDLIB_OF_AGENT = (
    "import sys\n"
    "before = set(sys.modules)\n"
    "import harness.agent.__main__\n"
    "brought = set(sys.modules) - before\n"
    "import json, sysconfig\n"
    "std = sysconfig.get_paths()['stdlib']\n"
    "def stdlib(m): return (getattr(m, '__file__', None) or std).startswith(std)\n"
    "new = {n.split('.')[0] for n in brought if stdlib(sys.modules[n])}\n"
    "print(json.dumps(sorted(n for n in new if n.isidentifier() and n != 'harness')))"
)


def stdlib_floor_command() -> list[str]:
    """``python -I -c "import ..."`` of the standard-library modules the agent's imports
    bring in (beyond what the interpreter loads at start): what an agent made of no code
    of its own would still pay, started as the agent is."""
    listed = subprocess.run(
        [sys.executable, "-I", "-c", _STDLIB_OF_AGENT],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    names = json.loads(listed.stdout)
    return [sys.executable, "-I", "-c", "import " + ", ".join(names)]


def prepare_finished_trial(trial: Path) -> None:
    """A small trial run to completion once, so that later starts find every step done."""
    from harness.bench.cycles import cycle_scenario_text
    from harness.chaos.scenario import compile_plan, parse_scenario, write_plan

    trial.mkdir(parents=True, exist_ok=True)
    scenario = parse_scenario(cycle_scenario_text(_STEPS), source="<bench>")
    write_plan(compile_plan(scenario, seed=0, source="<bench>"), trial / "plan.json")
    finished = subprocess.run(
        agent_command(trial), env=_clean_env(), capture_output=True, text=True, timeout=120
    )
    if finished.returncode != 0:
        raise BenchError(
            f"agent start-up: the first run exited {finished.returncode}: {finished.stderr[-500:]}"
        )


def time_process(command: list[str] | tuple[str, ...]) -> float:
    """Milliseconds from spawn to reap of one process, which must exit 0."""
    started = time.perf_counter_ns()
    code = subprocess.call(
        list(command),
        env=_clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=120,
    )
    elapsed_ms = (time.perf_counter_ns() - started) / 1e6
    if code != 0:
        raise BenchError(f"{' '.join(command)} exited {code}")
    return elapsed_ms


@dataclass(frozen=True, slots=True)
class ImportTime:
    """One line of ``-X importtime``: a module and its own and cumulative microseconds."""

    module: str
    self_us: int
    cumulative_us: int


def parse_importtime(text: str) -> list[ImportTime]:
    """The entries of ``-X importtime`` output (its header and other lines are skipped)."""
    entries = []
    for line in text.splitlines():
        if not line.startswith("import time:"):
            continue
        fields = line.removeprefix("import time:").split("|")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            continue  # the header line
        entries.append(ImportTime(fields[2].strip(), int(fields[0]), int(fields[1])))
    return entries


def import_profile(trial: Path, top: int = 10) -> list[ImportTime]:
    """The agent's ``top`` imports by cumulative time, heaviest first."""
    command = [sys.executable, "-X", "importtime", *agent_command(trial)[1:]]
    run = subprocess.run(command, env=_clean_env(), capture_output=True, text=True, timeout=120)
    entries = parse_importtime(run.stderr)
    return sorted(entries, key=lambda e: e.cumulative_us, reverse=True)[:top]
