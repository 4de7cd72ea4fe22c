"""Fixtures for tests that run real agent processes, and the check that none outlives them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.chaos.launch import ForkServer
from harness.chaos.schedule import CrashSchedule
from harness.chaos.supervisor import Supervisor
from harness.chaos.tables import write_table_variants
from harness.chaos.trial import Golden, TrialResult, TrialSpec, prepare_golden, run_trial
from harness.report.browser import BrowserMissing, chromium_path

MINI = str(Path(__file__).parent.parent / "data" / "scenarios" / "mini.toml")
MINI_SEED = 3
MINI_BATCH = str(Path(__file__).parent.parent / "data" / "scenarios" / "mini_batch.toml")
MINI_COMPACT = str(Path(__file__).parent.parent / "data" / "scenarios" / "mini_compact.toml")
PAYMENT = str(Path(__file__).parent.parent.parent / "scenarios" / "payment_flow.toml")


AGENT_PROGRAMS = (
    "harness.agent",
    "harness.adapters.mcp_tools_server",
    "harness.adapters.langgraph_agent",
    "harness.adapters.pydantic_ai_agent",
)
"""What an exec'd agent process, or the tool server of an ``mcp`` agent, names on its
command line."""


def agent_processes(under: Path) -> list[psutil.Process]:
    """Live agent processes (tool servers of mcp agents included) whose trial folder lies
    under ``under``."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        named = any(program in cmdline for program in AGENT_PROGRAMS)
        if named and any(arg.startswith(str(under)) for arg in cmdline):
            found.append(proc)
    return found


@pytest.fixture(scope="session", autouse=True)
def no_agent_survives(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After the integration tests, no agent process they started may be alive."""
    yield
    survivors = agent_processes(tmp_path_factory.getbasetemp())
    server = ForkServer._mine  # forked agents are the children of this process's fork server
    if server is not None and server.process.poll() is None:
        survivors += psutil.Process(server.process.pid).children()
    assert not survivors, f"agent processes leaked: {[p.pid for p in survivors]}"


@pytest.fixture(scope="session")
def supervisor() -> Supervisor:
    return Supervisor(restart_budget=8, timeout_s=60)


@pytest.fixture(scope="session")
def mini_golden(tmp_path_factory: pytest.TempPathFactory, supervisor: Supervisor) -> Golden:
    return prepare_golden(MINI, MINI_SEED, tmp_path_factory.mktemp("golden"), supervisor)


@pytest.fixture(scope="session")
def mini_batch_golden(tmp_path_factory: pytest.TempPathFactory, supervisor: Supervisor) -> Golden:
    return prepare_golden(MINI_BATCH, MINI_SEED, tmp_path_factory.mktemp("golden"), supervisor)


@pytest.fixture(scope="session")
def mini_compact_golden(tmp_path_factory: pytest.TempPathFactory, supervisor: Supervisor) -> Golden:
    return prepare_golden(MINI_COMPACT, MINI_SEED, tmp_path_factory.mktemp("golden"), supervisor)


@pytest.fixture(scope="session")
def payment_golden(tmp_path_factory: pytest.TempPathFactory, supervisor: Supervisor) -> Golden:
    return prepare_golden(PAYMENT, MINI_SEED, tmp_path_factory.mktemp("golden"), supervisor)


@pytest.fixture(scope="session")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_table_variants(tmp_path_factory.mktemp("tables"))


class TrialRunner:
    def __init__(
        self,
        root: Path,
        golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
        scenario: str = MINI,
    ) -> None:
        self.root, self.golden, self.supervisor, self.tables = root, golden, supervisor, tables
        self.scenario = scenario

    def __call__(self, schedule_json: str, runtime: str = "real") -> TrialResult:
        schedule = CrashSchedule.from_json(schedule_json)
        spec = TrialSpec(self.scenario, MINI_SEED, schedule, runtime, "test")
        return run_trial(
            spec,
            self.root / spec.trial_id,
            self.golden.directory,
            self.supervisor,
            tables=self.tables,
        )


@pytest.fixture
def run_mini(
    tmp_path: Path, mini_golden: Golden, supervisor: Supervisor, tables: dict[str, Path]
) -> TrialRunner:
    return TrialRunner(tmp_path, mini_golden, supervisor, tables)


@pytest.fixture
def run_mini_batch(
    tmp_path: Path, mini_batch_golden: Golden, supervisor: Supervisor, tables: dict[str, Path]
) -> TrialRunner:
    """Trials of ``mini_batch``: a batch of three calls between two steps of one."""
    return TrialRunner(tmp_path / "batch", mini_batch_golden, supervisor, tables, MINI_BATCH)


@pytest.fixture
def run_payment(
    tmp_path: Path, payment_golden: Golden, supervisor: Supervisor, tables: dict[str, Path]
) -> TrialRunner:
    """Trials of the shipped payment flow: keyed tools, and a receipt found by its key."""
    return TrialRunner(tmp_path / "payment", payment_golden, supervisor, tables, PAYMENT)


@pytest.fixture
def run_mini_compact(
    tmp_path: Path, mini_compact_golden: Golden, supervisor: Supervisor, tables: dict[str, Path]
) -> TrialRunner:
    """Trials of ``mini_compact``: mini, each restarted life compacting its journal first."""
    return TrialRunner(tmp_path / "compact", mini_compact_golden, supervisor, tables, MINI_COMPACT)


@pytest.fixture(scope="module")
def browser() -> None:
    """The headless Chromium, fetched by ``make browser`` when it is not there yet."""
    try:
        chromium_path()
        import playwright  # noqa: F401
    except (BrowserMissing, ImportError):
        try:
            done = subprocess.run(
                [
                    "make",
                    "-C",
                    str(Path(__file__).resolve().parents[2]),
                    "browser",
                    f"PY={sys.executable}",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            own = ("make:", "make[")  # make's own lines say only that the target failed
            said = [s for s in done.stderr.splitlines() if s and not s.startswith(own)]
            why = (said or ["no message"])[-1]
        except OSError as exc:  # no make
            done, why = None, str(exc)
        if done is None or done.returncode != 0:
            pytest.fail(f"no headless Chromium, and `make browser` could not fetch it: {why}")
