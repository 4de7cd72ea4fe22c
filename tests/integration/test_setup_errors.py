"""What cannot be run is refused with the project's own errors: an agent the launcher
cannot start (``SupervisorError``), a golden run that does not finish (``TrialError``).

Both are ``HarnessError``s, so the command line answers them with one line and
``EXIT_BAD_INPUT`` instead of a traceback.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from harness.chaos import supervisor as supervising
from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import prepare_golden
from harness.errors import HarnessError, SupervisorError, TrialError
from harness.exits import AGENT_REFUSED
from tests.integration.conftest import MINI, MINI_SEED


def _pipes() -> int:
    """How many pipes this process holds (a fork server it replaced held a socket)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
    return count


@pytest.mark.parametrize("how", ["exec", "fork"])
def test_an_agent_the_launcher_cannot_start_is_a_supervisor_error(tmp_path: Path, how: str) -> None:
    """A missing interpreter: the life never starts, the error names the trial, its life
    and the launcher, and the channel's pipe is closed."""
    pipes = _pipes()
    missing = tmp_path / "no-such-python"
    supervisor = Supervisor(python=str(missing), launch=how)
    with pytest.raises(SupervisorError, match=r"life 1: the agent harness\.agent could not be"):
        supervisor.run(tmp_path, CrashSchedule((Life(),)))
    assert _pipes() == pipes
    assert not supervising._LIVE


def test_a_golden_run_that_does_not_finish_is_a_trial_error(tmp_path: Path) -> None:
    """An agent that refuses with no fault injected (an unknown identity) leaves no golden
    run to judge trials against: ``TrialError``, with its status and its stderr."""
    supervisor = Supervisor(timeout_s=60, extra_env={"HARNESS_IDENTITY": "no-such-identity"})
    with pytest.raises(TrialError, match=f"did not finish: exit {AGENT_REFUSED}") as info:
        prepare_golden(MINI, MINI_SEED, tmp_path / "golden", supervisor)
    assert isinstance(info.value, HarnessError)
    assert "refused" in str(info.value)
