"""Shared test helpers: a fake tool that counts its calls, a journal path, failpoint arming,
the harness's command line in a subprocess.

The fake tool is the test's ground truth for "did the runtime execute this op":
it records every invocation (op id, tool, attempt), so a test can count
executions per op id without trusting the journal it is checking.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.failpoints import FAILPOINTS_ENV, arm, disarm, parse_failpoints
from harness.runtime import CallContext, IdempotencyClass, ToolTable
from harness.runtime.journal import scan_journal
from harness.runtime.records import Record
from harness.runtime.runtime import Runtime

Script = Mapping[str, Sequence[BaseException | None]]
"""Per op id, what attempt 1, 2, ... does: raise the exception, or succeed (None)."""

# The four classes, short, for tables of cases.
RO, IW = IdempotencyClass.READ_ONLY, IdempotencyClass.IDEMPOTENT_WRITE
NI, UNK = IdempotencyClass.NON_IDEMPOTENT, IdempotencyClass.UNKNOWN


@dataclass(frozen=True, slots=True)
class Invocation:
    """One real execution of the fake tool."""

    op_id: str
    tool: str
    attempt: int
    args: Mapping[str, Any]


class FakeTool:
    """A tool function that records every invocation and fails as its script says.

    Attempt ``n`` of an op raises ``script[op_id][n - 1]`` when that entry is an
    exception, and otherwise returns ``{"op_id": ..., "attempt": n}``.
    ``on_call`` runs inside the tool, before it answers (to look at the journal
    from where the effect happens).
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        on_call: Callable[[CallContext], None] | None = None,
    ) -> None:
        self.script: Script = script or {}
        self.on_call = on_call
        self.invocations: list[Invocation] = []

    def __call__(self, tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        self.invocations.append(Invocation(ctx.op_id, tool, ctx.attempt, dict(args)))
        if self.on_call is not None:
            self.on_call(ctx)
        steps = self.script.get(ctx.op_id, ())
        failure = steps[ctx.attempt - 1] if ctx.attempt <= len(steps) else None
        if failure is not None:
            raise failure
        return {"op_id": ctx.op_id, "attempt": ctx.attempt}

    def count(self, op_id: str) -> int:
        """How many times the tool really ran for this op id."""
        return sum(1 for i in self.invocations if i.op_id == op_id)

    def counts(self) -> Counter[str]:
        return Counter(i.op_id for i in self.invocations)

    def attempts(self, op_id: str) -> list[int]:
        return [i.attempt for i in self.invocations if i.op_id == op_id]


def open_runtime(path: Path, *, table: ToolTable | None = None, max_attempts: int = 3) -> Runtime:
    """A runtime on ``path`` with the shipped table, unless given another (failpoints are
    armed by the tests themselves)."""
    table = ToolTable.shipped() if table is None else table
    return Runtime.open(path, table=table, max_attempts=max_attempts)


def journal_records(path: Path) -> list[Record]:
    """The records a reader proves in the journal at ``path``."""
    return [s.record for s in scan_journal(path).records]


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    """A journal file in a fresh directory (not created yet)."""
    return tmp_path / "agent.journal"


@pytest.fixture
def fake_tool() -> FakeTool:
    """A fake tool that always succeeds and counts its calls."""
    return FakeTool()


@pytest.fixture(autouse=True)
def _no_armed_failpoints(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees failpoints armed by another test, or harness settings from outside."""
    for name in [n for n in os.environ if n.startswith("HARNESS_")]:
        monkeypatch.delenv(name)
    assert FAILPOINTS_ENV.startswith("HARNESS_")
    disarm()
    yield
    disarm()


@pytest.fixture
def armed() -> Iterator[Callable[[str], None]]:
    """Arm failpoints from a spec for this test; all are disarmed afterwards."""

    def arm_spec(spec: str) -> None:
        arm(parse_failpoints(spec, source="test"))

    yield arm_spec
    disarm()


def subprocess_env(**extra: str) -> dict[str, str]:
    """The test's environment without any harness settings (failpoints, observer), plus
    ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.update(extra)
    return env


ROOT = Path(__file__).parent.parent


def run_harness(
    *args: str,
    timeout: float = 600,
    pythonpath: Path | None = None,
    env: Mapping[str, str] | None = None,
    **extra: str,
) -> subprocess.CompletedProcess[str]:
    """``python -m harness ARGS`` from the project's root, in a session of its own, with
    ``subprocess_env`` plus ``env`` and ``extra`` (``PYTHONPATH`` only as given). Past
    ``timeout`` its whole process group is killed (its pool's workers and their agents too,
    not the harness alone) and ``TimeoutExpired`` raised."""
    environ = subprocess_env(**{**(env or {}), **extra})
    environ.pop("PYTHONPATH", None)
    if pythonpath is not None:
        environ["PYTHONPATH"] = str(pythonpath)
    with subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        cwd=ROOT,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as harness:
        try:
            out, err = harness.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(harness.pid, signal.SIGKILL)
            harness.communicate()
            raise
    return subprocess.CompletedProcess(harness.args, harness.returncode, out, err)
