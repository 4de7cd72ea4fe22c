"""The runtime's crash points (``harness.runtime.hooks``): no test machinery in the product.

Importing the runtime loads no failpoints, installs no signal handler and reads no
``HARNESS_*`` variable for them; a crash point with no hook set does nothing; a hook
that raises ``FailpointTriggered`` stops the write-ahead protocol as a crash would;
``CRASH_POINTS`` names exactly the points the runtime's code hits.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness.runtime
import harness.runtime.hooks as hooks
from harness.runtime import FailpointTriggered, Runtime
from harness.runtime.hooks import CRASH_POINTS, failpoint, set_crash_hook
from harness.runtime.records import FinishRecord, IntentRecord
from tests.conftest import FakeTool, journal_records, subprocess_env

RUNTIME_DIR = Path(harness.runtime.__file__).resolve().parent

# A fresh interpreter imports the runtime with the harness's variables set, and says
# which modules that loaded and which code ran the import of ``signal``, if any did.
FRESH_IMPORT = """
import json, sys

importers = []

class WatchSignal:
    def find_spec(self, name, path=None, target=None):
        if name == "signal":  # who runs the import statement: the first frame outside importlib
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
                frame = frame.f_back
            importers.append(frame.f_code.co_filename if frame is not None else "?")
        return None

# Loaded at start (by a coverage tool, say): forgotten, so that an import of it is seen.
sys.modules.pop("signal", None)
sys.meta_path.insert(0, WatchSignal())
import harness.runtime
print(json.dumps({
    "importers": importers,
    "modules": sorted(sys.modules),
}))
"""


@pytest.fixture
def no_hook() -> Iterator[None]:
    """No crash hook before and after the test, whatever it installs."""
    set_crash_hook(None)
    yield
    set_crash_hook(None)


def _imported_modules(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module or "")
    return found


class TestTheRuntimeCarriesNoTestMachinery:
    def test_importing_the_runtime_loads_no_failpoints_and_no_signals(self) -> None:
        """``import harness.runtime`` in a fresh process, harness variables set, loads no
        ``harness.failpoints`` and none of the project's modules imports ``signal``."""
        env = subprocess_env(
            HARNESS_FAILPOINTS="op.after_intent=raise",
            HARNESS_KILL_AIM="op.after_intent s001@0.01",
        )
        proc = subprocess.run(
            [sys.executable, "-c", FRESH_IMPORT],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        seen = json.loads(proc.stdout)
        assert "harness.runtime.hooks" in seen["modules"]
        assert "harness.failpoints" not in seen["modules"]
        harness_root = str(RUNTIME_DIR.parent)
        by_the_project = [f for f in seen["importers"] if f.startswith(harness_root)]
        assert by_the_project == [], f"the project imports signal: {by_the_project}"
        assert "signal" not in seen["modules"], f"signal imported by {seen['importers']}"

    def test_the_hook_module_uses_no_signal_and_no_environment(self) -> None:
        """``harness.runtime.hooks`` imports only the standard library and names neither
        ``signal`` nor ``os.environ``."""
        source = (RUNTIME_DIR / "hooks.py").read_text("utf-8")
        tree = ast.parse(source)
        imported = _imported_modules(tree)
        outside = {
            name
            for name in imported
            if name.partition(".")[0] not in sys.stdlib_module_names
            and name != "__future__"
            and not (name == "harness.runtime" or name.startswith("harness.runtime."))
        }
        assert outside == set()
        assert not {"os", "signal"} & {name.partition(".")[0] for name in imported}
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        attributes = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert not {"signal", "environ", "os"} & (names | attributes)
        assert "HARNESS_" not in source


@pytest.mark.usefixtures("no_hook")
class TestTheHook:
    def test_an_unset_hook_makes_every_point_a_no_op(self) -> None:
        """With no hook set, hitting any crash point does nothing and returns None."""
        assert hooks._hook is None  # the one thing ``failpoint`` tests
        for name in CRASH_POINTS:
            failpoint(name, "s001")

    def test_a_set_hook_sees_every_point_until_removed(self) -> None:
        """An installed hook is called with each point's name and detail; removed, no more."""
        seen: list[tuple[str, str]] = []
        set_crash_hook(lambda name, detail: seen.append((name, detail)))
        failpoint("op.after_intent", "s001")
        failpoint("journal.append")
        set_crash_hook(None)
        failpoint("op.after_effect", "s001")
        assert seen == [("op.after_intent", "s001"), ("journal.append", "")]

    def test_a_hook_that_raises_stops_the_protocol_as_a_crash_would(self, tmp_path: Path) -> None:
        """A hook raising FailpointTriggered after the intent: the tool never runs and no
        finish is written; the op is left RUNNING, as a kill there would leave it."""

        def crash_after_intent(name: str, detail: str) -> None:
            if name == "op.after_intent":
                raise FailpointTriggered(f"crash at {name} {detail}")

        tool = FakeTool()
        journal = tmp_path / "journal"
        set_crash_hook(crash_after_intent)
        with Runtime.open(journal) as runtime, pytest.raises(FailpointTriggered, match="s001"):
            runtime.call("s001", "send_email", {"to": "a@b.c"}, tool)
        assert tool.count("s001") == 0
        records = journal_records(journal)
        assert [r.op_id for r in records if isinstance(r, IntentRecord)] == ["s001"]
        assert not [r for r in records if isinstance(r, FinishRecord)]

    def test_crash_points_name_exactly_the_points_the_runtime_hits(self) -> None:
        """Every ``failpoint("<name>", ...)`` call in the runtime's code names a point of
        ``CRASH_POINTS``, and every point of it is hit somewhere."""
        hit: set[object] = set()
        for path in RUNTIME_DIR.glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == "failpoint"
                ):
                    first = node.args[0]
                    assert isinstance(first, ast.Constant), f"{path.name}: a computed point name"
                    hit.add(first.value)
        assert hit == set(CRASH_POINTS)
        assert len(CRASH_POINTS) == len(set(CRASH_POINTS))


class TestThePublicFace:
    FACE = frozenset(
        {
            "AsyncRuntime",
            "CallContext",
            "CallOutcome",
            "Compaction",
            "Decision",
            "DecisionKeyError",
            "FailpointTriggered",
            "HarnessError",
            "IdempotencyClass",
            "Identity",
            "JournalCorruptError",
            "JournalError",
            "JournalLockedError",
            "JournalRetiredError",
            "JournalVersionError",
            "JournalWriteError",
            "McpNotInstalledError",
            "McpServerError",
            "OpState",
            "Reconciled",
            "Reconciler",
            "RecoveryDecision",
            "RecoveryReport",
            "Resolution",
            "Retention",
            "Runtime",
            "ToolClass",
            "ToolError",
            "ToolFunction",
            "ToolTable",
            "ToolTableError",
            "TransientToolError",
            "VerifyHint",
            # the journal's events, for a listener's type hints
            "Appended",
            "JournalEvent",
            "JournalListener",
            "Opened",
            "Synced",
            # a fleet's worker whose task another worker claimed (a PostgreSQL journal)
            "JournalFencedError",
            # the errors of misuse
            "JournalClosedError",
            "OpConflictError",
            "RuntimeUsageError",
        }
    )

    def test_all_is_sorted_and_small(self) -> None:
        """``__all__`` is the library's face, sorted; every name in it resolves."""
        exported = harness.runtime.__all__
        assert exported == sorted(exported)
        assert set(exported) == self.FACE
        for name in exported:
            assert getattr(harness.runtime, name) is not None

    def test_recovery_internals_are_not_exported(self) -> None:
        for name in ("fold", "plan_recovery", "DECISION_MATRIX", "Executor", "JournalWriter"):
            assert name not in harness.runtime.__all__
            assert not hasattr(harness.runtime, name)

    def test_async_runtime_is_there_without_importing_asyncio_up_front(self) -> None:
        """``import harness.runtime`` loads no asyncio (an agent's start-up pays for it);
        ``harness.runtime.AsyncRuntime`` loads it on first use."""
        code = (
            "import sys, harness.runtime as r; before = 'asyncio' in sys.modules; "
            "cls = r.AsyncRuntime; print(before, cls.__module__)"
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env=subprocess_env(),
        )
        assert done.stdout.split() == ["False", "harness.runtime.aio"]
