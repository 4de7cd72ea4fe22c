"""Services of the system under test: started once, kept across kills, cut with the power.

The scenario ``tests/data/services/with_service.toml`` declares a tiny HTTP service
(``kv_server.py``) beside a black box that asks it once per life (``agent.py``, then the
plain example agent). What the service logs is the evidence: which of its runs answered
which life, and what it found on disk when it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_blackbox import ROOT, harness

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the observer interposes Linux's C library"
)

SCENARIO = "tests/data/services/with_service.toml"
KILL_THEN_CUT = (
    '[{"failpoints":"tool.received@2=kill"},'
    '{"failpoints":"model.received@3=kill","after_death":"power-loss:drop"}]'
)


def _service_events(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] in ("service", "spawn")]


def _gone(pid: int) -> bool:
    """Whether no process ``pid`` runs the service (a reused pid runs something else)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return True
    return b"kv_server.py" not in command


def _port_closed(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return False
    return True


def test_a_service_is_started_once_kept_across_kills_cut_with_the_power_and_gone_after(
    tmp_path: Path,
) -> None:
    """One start before the first life; the life after a kill reaches the same run of it;
    a power cut brings it down and up again on its rebuilt files (its durable count kept,
    its unsynced file gone); at the end no process, port or data folder is left."""
    reports = tmp_path / "reports"
    ran = harness(
        "trial", SCENARIO, "--seed", "7", "--schedule", KILL_THEN_CUT, "--reports", str(reports)
    )
    assert ran.returncode in (0, 1, 3), ran.stderr  # the verdicts are the agent's business
    (folder,) = reports.glob("*-trial/trial")
    events = _service_events(folder)
    kinds = [(e["event"], e.get("action"), e.get("life")) for e in events]
    assert kinds == [
        ("service", "start", None),
        ("spawn", None, 1),
        ("spawn", None, 2),
        ("service", "power-cut", None),
        ("service", "start", None),
        ("spawn", None, 3),
        ("service", "stop", None),
    ], kinds
    first, second = events[0], events[4]
    assert first["pid"] != second["pid"] and first["port"] == second["port"]
    log = (folder / "service-kv.log").read_text().splitlines()
    assert log == [
        f"started pid={first['pid']} starts_before=0 scratch_left=",
        f"seen pid={first['pid']} life=1",
        f"seen pid={first['pid']} life=2",  # the kill of life 1 left it running
        f"started pid={second['pid']} starts_before=1 scratch_left=",  # cut: synced kept
        f"seen pid={second['pid']} life=3",
    ], log
    (cut,) = [
        json.loads(e)
        for e in (folder / "events.jsonl").read_text().splitlines()
        if json.loads(e)["event"] == "fault"
    ]
    assert cut["landed"], cut
    assert f"service-kv/scratch-{first['pid']}" in cut["removed"]  # never fsynced: lost
    assert _gone(first["pid"]) and _gone(second["pid"])
    assert _port_closed(first["port"])
    assert not (folder / "service-kv").exists()


def _wait_for(predicate: Any, what: str, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "sigkill"])
def test_a_service_is_gone_after_the_harness_is_interrupted(
    tmp_path: Path, how: signal.Signals
) -> None:
    """Ctrl-C while the agent runs beside its service: the harness ends it and removes its
    files; killed outright, its watchdog does."""
    reports = tmp_path / "reports"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    # The first life holds at its second model request long enough to be interrupted there.
    hold = '[{"failpoints":"model.received@2=sleep(60000)"}]'
    command = [sys.executable, "-m", "harness", "trial", SCENARIO, "--seed", "7"]
    harness_process = subprocess.Popen(
        [*command, "--schedule", hold, "--reports", str(reports)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def seen_life_1() -> Path | None:
            for folder in reports.glob("*-trial/trial"):
                log = folder / "service-kv.log"
                if log.exists() and "life=1" in log.read_text():
                    return folder
            return None

        folder = _wait_for(seen_life_1, "the trial's first life to reach its service")
        (start,) = [e for e in _service_events(folder) if e.get("action") == "start"]
        assert (folder / "service-kv" / "starts").exists()
        harness_process.send_signal(how)
        harness_process.wait(timeout=60)
    finally:
        if harness_process.poll() is None:
            harness_process.kill()
            harness_process.wait()
    said = harness_process.stderr.read() if harness_process.stderr is not None else ""
    if how == signal.SIGINT:
        assert harness_process.returncode == 130, said
        assert "interrupted" in said
    _wait_for(lambda: _gone(start["pid"]), "the service to be gone", timeout=30)
    _wait_for(lambda: not (folder / "service-kv").exists(), "its files removed", timeout=30)
    assert _port_closed(start["port"])
