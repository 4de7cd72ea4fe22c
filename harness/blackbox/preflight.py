"""Before any trial: does a black box's command start, call the model and call a tool?

``check_agent`` runs the agent once, crash-free, on a scenario's plan in a folder of
its own (removed after), through the supervisor as a trial would, and refuses
(``HarnessError``: one line, exit 2) a command that does not start, exits at once,
never calls the model at ``OPENAI_BASE_URL``, or calls no tool at either MCP
endpoint, or does not finish in time. Whatever it started is reaped by the
supervisor before it returns.
"""

from __future__ import annotations

import json
import shlex
import shutil
import tempfile
import time
from pathlib import Path

from harness.blackbox import MODEL_RECORD, TOOL_RECORD, resolve_command
from harness.exits import AGENT_CANNOT_START
from harness.runtime.errors import HarnessError

__all__ = ["PREFLIGHT_TIMEOUT_S", "check_agent"]

PREFLIGHT_TIMEOUT_S = 300.0


def _count(path: Path) -> int:
    return len(path.read_text("utf-8").splitlines()) if path.exists() else 0


def _found(word: str) -> bool:
    return Path(word).exists() if "/" in word else shutil.which(word) is not None


def check_agent(
    runtime: str,
    scenario: str,
    *,
    launch: str = "fork",
    timeout_s: float = PREFLIGHT_TIMEOUT_S,
    record: Path | None = None,
) -> float:
    """Refuse a black box (``cmd:`` runtime) that cannot take part in a trial (see module);
    the seconds its crash-free run took. ``record``: where a Python agent's crash-free run
    writes the modules it imported (``harness.blackbox.warm``)."""
    from harness.blackbox.warm import RECORD_ENV
    from harness.chaos.schedule import CrashSchedule, Life
    from harness.chaos.supervisor import Supervisor
    from harness.chaos.trial import seed_world, write_plan_for

    command = runtime.removeprefix("cmd:").strip()
    name = f"--runtime {shlex.quote(runtime)}"
    try:
        words = resolve_command(command, str(Path.cwd()))
    except ValueError as exc:
        raise HarnessError(f"{name}: the command cannot be read: {exc}") from None
    if not words:
        raise HarnessError(f"{name}: no command given")
    if not _found(words[0]):
        raise HarnessError(f"{name}: the command does not start: {words[0]!r} is not found")
    folder = Path(tempfile.mkdtemp(prefix="harness-preflight-"))
    try:
        write_plan_for(scenario, 0, folder)
        seed_world(folder)
        extra_env = {} if record is None else {RECORD_ENV: str(record)}
        supervisor = Supervisor(
            restart_budget=1, timeout_s=timeout_s, launch=launch, extra_env=extra_env
        )
        started = time.monotonic()
        life = supervisor.run(folder, CrashSchedule((Life(),)), runtime=runtime)[-1]
        took = time.monotonic() - started
        asked, called = _count(folder / MODEL_RECORD), _count(folder / TOOL_RECORD)
        said = life.stderr.strip().splitlines()[-1:] or ["nothing on stderr"]
        if life.killed == "timeout":
            raise HarnessError(
                f"{name}: the agent did not finish a crash-free run of {Path(scenario).stem} "
                f"within {timeout_s:g} s (it called the model {asked} times, tools {called} "
                "times)"
            )
        if life.returncode == AGENT_CANNOT_START:
            raise HarnessError(f"{name}: the command does not start: {said[0]}")
        if life.returncode != 0 and not asked:
            raise HarnessError(
                f"{name}: the agent exited at once with status {life.returncode}, before "
                f"calling the model ({said[0]})"
            )
        if not asked:
            raise HarnessError(
                f"{name}: the agent exited {life.returncode} without calling the model at "
                "OPENAI_BASE_URL"
            )
        if not called:
            raise HarnessError(
                f"{name}: the agent called the model but no tool, at neither HARNESS_MCP_URL "
                f"nor HARNESS_MCP_COMMAND (exit {life.returncode}: {said[0]})"
            )
        if life.returncode != 0:
            finals = [
                line
                for line in (folder / MODEL_RECORD).read_text("utf-8").splitlines()
                if json.loads(line).get("final") is not None
            ]
            raise HarnessError(
                f"{name}: the agent exited {life.returncode} in a crash-free run of "
                f"{Path(scenario).stem} ({'after' if finals else 'before'} the model's final "
                f"answer: {said[0]})"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return took
