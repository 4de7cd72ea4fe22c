"""Figure 12, a black box's start-up: a life of a Python agent started plain and warm.

A sample is one life of an example agent (``examples/agents/NAME``) on a fresh trial
folder, through the real supervisor, killed by its first model request
(``model.received@1=kill``). Its start-up is the time from its host's ``ready`` (the
host starts the agent right after it) to that kill: the interpreter's start, the
agent's imports and its set-up (its MCP session) up to the first question to its model.
Plain, the host starts the agent's command; warm (``--launch warm``), the agent's zygote
forks it, once the crash-free run's imports are adopted (``harness.blackbox.warm``). The
zygote's own start is once per worker: it is reported, not counted in a sample.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.bench.figures import BenchError
from harness.blackbox.warm import PLAN_ENV

__all__ = [
    "AGENTS",
    "NODE",
    "PLAN_ENV",
    "BlackBox",
    "built",
    "prepare",
    "program_ms",
    "startup_ms",
]

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ("plain_python", "langgraph", "openai_agents")
"""Plain Python and two frameworks of the scoreboard with a slow import."""
NODE = "node"
"""Measured plain only, for the guide's word on whether Node needs a warm start too."""
SCENARIO = ROOT / "scenarios" / "phone_task.toml"
FIRST_QUESTION = "model.received@1=kill"


@dataclass(frozen=True, slots=True)
class BlackBox:
    """An example agent ready to be measured: its runtime, and its zygote's import time."""

    name: str
    runtime: str
    import_s: float


def built(name: str) -> str | None:
    """The example agent's ``cmd:`` runtime, or None when its environment is not built."""
    folder = ROOT / "examples" / "agents" / name
    command = tomllib.loads((folder / "agent.toml").read_text("utf-8"))["command"]
    for pins, stamp in (("requirements.txt", ".venv"), ("package-lock.json", "node_modules")):
        if (folder / pins).exists() and not (folder / stamp / ".installed").exists():
            return None
    return f"cmd:{command}"


@contextlib.contextmanager
def _at_root() -> Iterator[None]:
    """The example agents' commands name paths from the project's root."""
    before = os.getcwd()
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(before)


def prepare(name: str, runtime: str) -> BlackBox:
    """Run the agent's crash-free run once (recording its imports) and adopt them."""
    from harness.adapters import get_adapter
    from harness.blackbox import AGENT_COMMAND_ENV, AGENT_HOME_ENV, resolve_command
    from harness.blackbox.preflight import check_agent
    from harness.blackbox.warm import adopt

    with _at_root(), tempfile.TemporaryDirectory(prefix="harness-bench-warm-") as folder:
        env = get_adapter(runtime).env
        record = Path(folder) / "imports.json"
        check_agent(runtime, str(SCENARIO), launch="warm", record=record)
        words = resolve_command(env[AGENT_COMMAND_ENV], env[AGENT_HOME_ENV])
        adopted = adopt(env[AGENT_COMMAND_ENV], words, record)
    if adopted.plan is None:
        raise BenchError(f"{name}: {adopted.line}")
    return BlackBox(name, runtime, adopted.import_s)


_program_ms: dict[str, list[float]] = {}


def program_ms() -> dict[str, list[float]]:
    """Of each start-up measured so far, by agent and launcher, the part from the agent's
    process being started (its host's ``agent`` line) to its first model request: the
    program's own set-up, which a warm start does not remove."""
    return {name: list(values) for name, values in _program_ms.items()}


def startup_ms(box: BlackBox, launch: str, scratch: Path) -> float:
    """One life's start-up (see module), started ``launch`` (``fork``: plain; ``warm``)."""
    from harness.chaos.schedule import CrashSchedule, Life
    from harness.chaos.supervisor import Supervisor
    from harness.chaos.trial import write_plan_for

    folder = Path(tempfile.mkdtemp(prefix="blackbox-", dir=scratch))
    try:
        write_plan_for(str(SCENARIO), 0, folder)
        with _at_root():
            lives = Supervisor(restart_budget=1, launch=launch).run(
                folder, CrashSchedule((Life(failpoints=FIRST_QUESTION),)), runtime=box.runtime
            )
        if lives[-1].killed != "failpoint":
            raise BenchError(
                f"{box.name} ({launch}): its life was not killed at its first "
                f"model request ({lives[-1].stderr.strip()[-200:]!r})"
            )
        events = [json.loads(line) for line in (folder / "events.jsonl").open()]
        ready = next(e["t_ns"] for e in events if e["event"] == "ready")
        started = [e for e in events if e["event"] == "agent"]
        if launch == "warm" and started[0]["start"] != "warm":
            raise BenchError(f"{box.name}: a warm life started plain ({started[0]['said']})")
        killed = next(e["t_ns"] for e in events if e["event"] == "kill")
        _program_ms.setdefault(f"{box.name}-{launch}", []).append(
            float(killed - started[0]["t_ns"]) / 1e6
        )
        return float(killed - ready) / 1e6
    finally:
        shutil.rmtree(folder, ignore_errors=True)
