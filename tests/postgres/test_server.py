"""The harness's own PostgreSQL server: found or refused in one line, run as an unprivileged
user when the harness is root, in a RAM folder, and gone after, even on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.chaos import postgres
from harness.chaos.postgres import PostgresServer, PostgresUnavailable, server_user

ROOT = Path(__file__).resolve().parents[2]


class TestRefusals:
    def test_no_postgresql_installed_is_one_line(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """With no initdb on PATH nor in Debian's folder, the refusal says how to get one."""
        monkeypatch.setenv("PATH", str(tmp_path))
        monkeypatch.setattr(postgres, "DEBIAN_FOLDERS", str(tmp_path / "none" / "*" / "bin"))
        with pytest.raises(PostgresUnavailable) as refused:
            PostgresServer.start()
        message = str(refused.value)
        assert "PostgreSQL is not installed" in message and "apt-get install postgresql" in message
        assert "\n" not in message

    def test_root_without_a_user_to_run_as_is_refused(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """As root, a server user that does not exist is named in the refusal."""
        monkeypatch.setattr(os, "geteuid", lambda: 0)
        monkeypatch.setenv(postgres.SERVER_USER_VARIABLE, "no-such-user-here")
        with pytest.raises(PostgresUnavailable, match="no user 'no-such-user-here'"):
            server_user()


class TestLifecycle:
    def test_runs_unprivileged_in_ram_and_leaves_nothing(
        self, postgres_server: PostgresServer
    ) -> None:
        """The session's server: its folder in /dev/shm (where there is one), its processes
        never root; a server of its own is gone, folder and processes, once stopped."""
        if Path("/dev/shm").is_dir():
            assert postgres_server.folder.parent == Path("/dev/shm")
        postmaster = psutil.Process(postgres_server.process.pid)
        assert postmaster.uids().real != 0
        server = PostgresServer.start()
        pids = [server.process.pid, *(c.pid for c in psutil.Process(server.process.pid).children())]
        url = server.create_database("one_trial")
        assert url.endswith("/one_trial?sslmode=disable")
        server.stop()
        assert not server.folder.exists()
        assert not [pid for pid in pids if psutil.pid_exists(pid)]

    def test_ctrl_c_removes_the_server(self, postgres_server: PostgresServer) -> None:
        """A harness interrupted by SIGINT while its server runs stops it and removes its
        folder on the way out."""
        code = (
            "import sys, time\n"
            "from harness.chaos.postgres import PostgresServer\n"
            "with PostgresServer.start() as server:\n"
            "    print(server.folder, server.process.pid, flush=True)\n"
            "    time.sleep(120)\n"
        )
        child = subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout is not None
            folder, pid = child.stdout.readline().split()
            assert Path(folder).exists() and psutil.pid_exists(int(pid))
            os.kill(child.pid, signal.SIGINT)
            child.wait(60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
        assert child.returncode != 0  # KeyboardInterrupt
        assert not Path(folder).exists()
        assert not psutil.pid_exists(int(pid))

    def test_a_harness_killed_leaves_no_server(self, postgres_server: PostgresServer) -> None:
        """A harness killed by SIGKILL cannot stop its server: the watchdog does, and
        removes its folder."""
        code = (
            "import time\n"
            "from harness.chaos.postgres import PostgresServer\n"
            "server = PostgresServer.start()\n"
            "print(server.folder, server.process.pid, flush=True)\n"
            "time.sleep(120)\n"
        )
        child = subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout is not None
            folder, pid = child.stdout.readline().split()
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
            postmaster = psutil.Process(int(pid))
            postmaster.wait(30)  # ended by the watchdog, not by this test
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
        for _ in range(100):
            if not Path(folder).exists():
                break
            time.sleep(0.05)  # the watchdog removes it right after the server ends
        assert not Path(folder).exists()
