"""A service the observer cannot load into: power loss is decided before any trial.

A power cut takes a scenario's services down with the agent and rebuilds their files from
what they asked the kernel. A service whose command starts a statically linked program (an
engine's server built in Go or Rust) runs under the tracer where it can run; where it
cannot (here: turned off), the service asks the kernel unseen, so no cut of its system
could be judged. Its scenario's power loss is then not applicable, with the reason naming
the service: no trial plans it, none draws it, and ``harness trial`` refuses it in one
line. The shipped scenario's Python service keeps it.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.adapters import black_box
from harness.chaos import observer
from harness.chaos.campaign import applicable, exhaustive_specs, random_specs
from harness.chaos.scenario import load_scenario
from harness.chaos.schedule import (
    FILE_FAULTS,
    Call,
    CrashSchedule,
    Life,
    Window,
    black_box_schedules,
    not_applicable,
)
from harness.chaos.trial import Golden
from tests.integration.test_blackbox import ROOT, harness
from tests.integration.test_blackbox_power_loss import STATIC_SOURCE

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the observer interposes Linux's C library"
)

SHIPPED = ROOT / "tests" / "data" / "services" / "with_service.toml"
PYTHON_SERVICE = 'command = "python3 kv_server.py {port} {data}"'
RUNTIME = "cmd:python3 agent.py"
CUT = CrashSchedule((Life("model.received@2=kill", after_death="power-loss:drop"),))
HITS = {"model.received": 3, "agent.before_exit": 1, "tool.received": 3, "op.reply": 3}


@pytest.fixture(scope="module")
def static_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A statically linked C program (skipped with no way to build one here)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a statically linked program")
    folder = tmp_path_factory.mktemp("static")
    (folder / "server.c").write_text(STATIC_SOURCE)
    done = subprocess.run(
        [cc, "-static", "-o", str(folder / "server"), str(folder / "server.c")],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot build a static program here: {done.stderr.strip()[-200:]}")
    return folder / "server"


@pytest.fixture
def static_scenario(static_program: Path, tmp_path: Path) -> str:
    """The shipped scenario with a service whose command is the static program, beside
    copies of its agent and service files."""
    for name in ("agent.py", "kv_server.py"):
        shutil.copy(SHIPPED.parent / name, tmp_path / name)
    text = SHIPPED.read_text("utf-8")
    assert PYTHON_SERVICE in text
    scenario = tmp_path / "with_static_service.toml"
    scenario.write_text(
        text.replace(PYTHON_SERVICE, f'command = "{static_program} {{port}} {{data}}"'), "utf-8"
    )
    return str(scenario)


@pytest.fixture
def observer_here() -> None:
    if observer.library() is None:
        pytest.skip(f"no observer here: {observer.unavailable()}")


@pytest.fixture
def no_tracer(observer_here: None, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The tracer turned off (as where ptrace is not permitted): its setting, for a harness
    started as a process."""
    monkeypatch.setenv(observer.ENV_TRACER_SWITCH, "off")
    return {observer.ENV_TRACER_SWITCH: "off"}


def _golden(directory: Path) -> Golden:
    """A crash-free run of three calls, for drawing and listing (nothing runs)."""
    calls = [
        Call(
            f"s00{n}",
            100.0 * n,
            100.0 * n + 50,
            (Window("tool.received", 100.0 * n, 100 * n + 50),),
        )
        for n in (1, 2, 3)
    ]
    return Golden(directory, dict(HITS), 400.0, calls=calls)


class TestAStaticServiceUnderTheTracer:
    def test_its_power_loss_is_applicable_where_the_tracer_runs(
        self, observer_here: None, static_scenario: str
    ) -> None:
        """The tracer observes it: every file fault applies, as to a dynamic service."""
        assert observer.tracer() is not None, observer.tracer_unavailable()
        services = load_scenario(static_scenario).services
        for kind in FILE_FAULTS:
            assert not_applicable(kind, black_box(RUNTIME), services) is None
        assert applicable(CUT, black_box(RUNTIME), services)


class TestAStaticServiceWithoutTheTracer:
    def test_its_power_loss_is_not_applicable_and_names_the_service(
        self, no_tracer: dict[str, str], static_scenario: str, static_program: Path
    ) -> None:
        """Every file fault is not applicable, the reason naming the service and its program."""
        services = load_scenario(static_scenario).services
        adapter = black_box(RUNTIME)
        for kind in FILE_FAULTS:
            assert not_applicable(kind, adapter, services) == (
                f"its service kv cannot be observed: {static_program} is statically linked: "
                "no loader preloads the observer's library into it; the tracer is turned off "
                f"({observer.ENV_TRACER_SWITCH}=off)"
            )
        assert not applicable(CUT, adapter, services)
        # The agent alone would be cut: it is the service that takes the cut away.
        assert not_applicable("power-loss", adapter) is None

    def test_no_exhaustive_trial_plans_it_and_no_random_trial_draws_it(
        self, no_tracer: dict[str, str], static_scenario: str, tmp_path: Path
    ) -> None:
        """The campaign's lists of trials hold no power cut, and still hold the kills."""
        golden = _golden(tmp_path)
        listed = list(black_box_schedules(golden.hits, golden.op_at))
        assert any("power-loss" in s.fault_kinds for _, s in listed)
        planned = exhaustive_specs(static_scenario, 7, golden, RUNTIME, listed=listed)
        assert planned and not any("power-loss" in s.schedule.fault_kinds for s in planned)
        picks = [(static_scenario, n, random.Random(n)) for n in range(60)]
        drawn = random_specs(picks, {(static_scenario, n): golden for n in range(60)}, RUNTIME)
        assert len(drawn) == 60
        assert not any("power-loss" in s.schedule.fault_kinds for s in drawn)

    def test_a_trial_asked_for_it_is_refused_in_one_line(
        self, no_tracer: dict[str, str], static_scenario: str, tmp_path: Path
    ) -> None:
        """Before anything runs (no reports folder), exit 2, the reason as the campaign's."""
        reports = tmp_path / "reports"
        ran = harness(
            "trial",
            static_scenario,
            "--seed",
            "7",
            "--schedule",
            CUT.to_json(),
            "--reports",
            str(reports),
            **no_tracer,
        )
        assert ran.returncode == 2, ran.stderr
        (said,) = ran.stderr.strip().splitlines()
        services = load_scenario(static_scenario).services
        why = not_applicable("power-loss", black_box(RUNTIME), services)
        assert said == f"harness: --schedule: no power loss for it: {why}"
        assert not reports.exists()


class TestAPythonService:
    def test_it_keeps_power_loss_planned_and_drawn(
        self, observer_here: None, tmp_path: Path
    ) -> None:
        """The shipped scenario's service runs on Python, which the observer loads into."""
        scenario = str(SHIPPED)
        services = load_scenario(scenario).services
        adapter = black_box(RUNTIME)
        assert not_applicable("power-loss", adapter, services) is None
        assert applicable(CUT, adapter, services)
        golden = _golden(tmp_path)
        planned = exhaustive_specs(scenario, 7, golden, RUNTIME)
        assert any("power-loss" in s.schedule.fault_kinds for s in planned)
        picks = [(scenario, n, random.Random(n)) for n in range(60)]
        drawn = random_specs(picks, {(scenario, n): golden for n in range(60)}, RUNTIME)
        assert any("power-loss" in s.schedule.fault_kinds for s in drawn)
