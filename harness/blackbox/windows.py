"""Where a random-time kill of a black box landed, from the harness's own records.

A black box keeps no journal of this project's, so the windows of the write-ahead
protocol (``harness.check.windows``) say nothing of it. Its life's last act the
harness's servers recorded (``model.jsonl`` and ``tools.jsonl``, each line with the
life's pid) says where it stood instead:

- ``start-up``: the life asked nothing of the model or the tools;
- ``after a model answer``: the model had asked for calls, the agent had not sent the
  next of them (or was running one the server had not received);
- ``after a tool call``: a tool had run (its effect in the world's ledger) or answered,
  and the model had not been shown the result: where an agent that keeps its progress
  after each result loses it;
- ``after the final answer``: the model had answered with its final text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.blackbox import MODEL_RECORD, TOOL_RECORD
from harness.world.store import read_ledger

__all__ = ["BLACK_BOX_WINDOWS", "black_box_window", "is_black_box_trial"]

BLACK_BOX_WINDOWS = (
    "start-up",
    "after a model answer",
    "after a tool call",
    "after the final answer",
)


def _lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text("utf-8").splitlines() if path.exists() else ():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def is_black_box_trial(trial_dir: Path) -> bool:
    """Whether the trial's servers were the harness's (a ``cmd:`` runtime's)."""
    return (trial_dir / MODEL_RECORD).exists() or (trial_dir / TOOL_RECORD).exists()


def black_box_window(trial_dir: Path, pid: int) -> str:
    """The window the life of ``pid`` was killed in (see the module)."""
    seen = [(int(line["t_ns"]), "model", line) for line in _lines(trial_dir / MODEL_RECORD)]
    seen += [(int(line["t_ns"]), "tool", line) for line in _lines(trial_dir / TOOL_RECORD)]
    if (trial_dir / "world.db").exists():  # an effect committed before its call's record
        seen += [(e.time_ns, "tool", {"pid": e.pid}) for e in read_ledger(trial_dir / "world.db")]
    mine = sorted(
        ((t, kind, line) for t, kind, line in seen if line.get("pid") == pid),
        key=lambda item: item[0],
    )
    if not mine:
        return "start-up"
    _, kind, line = mine[-1]
    if kind == "tool":
        return "after a tool call"
    return "after the final answer" if line.get("final") is not None else "after a model answer"
