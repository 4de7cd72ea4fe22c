"""A watchdog never ends a process group the harness ended itself.

Once a group is gone its id is free, and the next process to lead a group of its own may
get it: a campaign's agents each lead one, thousands a minute. A watchdog that ended "its"
group after the harness had, ended that program instead. These tests stand a live group in
for the id taken again.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.chaos import services
from harness.chaos.services import RunningServices, ServiceSpec
from harness.chaos.watchdog import release, watch

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _other_program() -> subprocess.Popen[bytes]:
    """A program leading a group of its own, as a reused id would name it."""
    return subprocess.Popen(SLEEPER, start_new_session=True)


@pytest.mark.parametrize("forget", [False, True])
def test_a_released_watchdog_ends_the_group_only_when_not_told_to_forget(
    tmp_path: Path, forget: bool
) -> None:
    other = _other_program()
    try:
        release(watch(other.pid, tmp_path), forget=forget)
        time.sleep(0.2)  # what a watchdog would have sent has landed
        assert (other.poll() is None) is forget
        assert tmp_path.exists() is forget
    finally:
        other.kill()
        other.wait()


def test_stopped_services_let_their_watchdogs_go_without_a_word_to_the_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``stop`` and a power cut end the group themselves: each watchdog is told to forget."""
    told: list[bool] = []

    def recorded(dog: subprocess.Popen[bytes], *, forget: bool) -> None:
        told.append(forget)
        release(dog, forget=forget)

    monkeypatch.setattr(services, "release", recorded)
    server = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1"
    running = RunningServices(tmp_path, [ServiceSpec("web", server, str(tmp_path))])
    running.start()
    running.power_cut()
    running.start()
    running.stop()
    assert told == [True, True]
