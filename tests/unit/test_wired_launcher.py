"""The wire guard's launcher read from a command line, as a black box's host reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.blackbox.wired import GUARD_JOURNAL, Wiring, read_launcher, wire_env


class TestReadLauncher:
    def test_the_agents_own_command_and_the_wire(self) -> None:
        """``PYTHON -m harness.blackbox.wired [--http] -- COMMAND`` gives the agent's command,
        the wire and the interpreter the guard runs on."""
        words = ["/p/python", "-m", "harness.blackbox.wired", "--http", "--", "node", "a.js"]
        assert read_launcher(words) == Wiring("/p/python", True, ("node", "a.js"))
        stdio = ["python3", "-m", "harness.blackbox.wired", "--", "python", "agent.py"]
        assert read_launcher(stdio) == Wiring("python3", False, ("python", "agent.py"))

    def test_any_other_command_is_not_wired(self) -> None:
        """An agent's own command, another module, or the launcher with no command: None."""
        assert read_launcher(["python", "agent.py"]) is None
        assert read_launcher(["python", "-m", "harness.blackbox.host", "x"]) is None
        assert read_launcher(["python", "-m", "harness.blackbox.wired", "--http", "--"]) is None


class TestWireEnv:
    def test_over_stdio_the_guard_is_the_servers_command(self, tmp_path: Path) -> None:
        """Over stdio the guard, its journal in the agent's folder, fronts the real server's
        command; nothing else of the environment changes."""
        env = {"HARNESS_MCP_COMMAND": "real-server --x", "OTHER": "1"}
        wired = wire_env(Wiring("/p/python", False, ("a",)), env, tmp_path)
        assert wired["OTHER"] == "1"
        command = wired["HARNESS_MCP_COMMAND"]
        assert command.startswith("/p/python -m harness guard --quiet --journal ")
        assert str(tmp_path / GUARD_JOURNAL) in command
        assert command.endswith("--upstream-cmd 'real-server --x'")

    def test_without_a_real_server_it_says_so(self, tmp_path: Path) -> None:
        """An environment that names no real server is a clear error, and no guard starts."""
        with pytest.raises(RuntimeError, match="no HARNESS_MCP_COMMAND"):
            wire_env(Wiring("/p/python", True, ("a",)), {}, tmp_path)
