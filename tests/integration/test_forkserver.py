"""The fork server: one small warm process per supervising process, forking real incarnations."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.chaos.forkserver import FORK_SERVER_MODULE
from harness.chaos.launch import ForkServer
from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.supervisor import Supervisor, sweep_agents
from harness.chaos.trial import Golden


def _trial(golden: Golden, path: Path) -> Path:
    path.mkdir()
    shutil.copyfile(golden.directory / "plan.json", path / "plan.json")
    return path


def _gone(pid: int, timeout: float = 10.0) -> bool:
    try:
        psutil.Process(pid).wait(timeout=timeout)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return False
    return True


class TestForkServer:
    def test_every_life_is_a_new_child_of_one_small_server(
        self, mini_golden: Golden, tmp_path: Path
    ) -> None:
        """Two trials, four lives: four distinct pids, all forked by the same server."""
        parents = set()

        def lives(trial: Path) -> list[int]:
            results = Supervisor(launch="fork").run(
                trial,
                CrashSchedule((Life("op.after_intent@2=kill"), Life("op.after_effect@1=kill"))),
            )
            server = ForkServer.get(sys.executable)
            parents.add(server.process.pid)
            return [r.pid for r in results if r.killed == "failpoint"]

        pids = lives(_trial(mini_golden, tmp_path / "a")) + lives(
            _trial(mini_golden, tmp_path / "b")
        )
        assert len(pids) == len(set(pids)) == 4
        assert len(parents) == 1
        (server_pid,) = parents
        server = psutil.Process(server_pid)
        assert FORK_SERVER_MODULE in server.cmdline()
        # The server holds the agent's modules, not the harness's: no pydantic, no rich.
        assert server.memory_info().rss < psutil.Process().memory_info().rss

    def test_the_death_of_its_owner_takes_server_and_agents_with_it(
        self, mini_golden: Golden, tmp_path: Path
    ) -> None:
        """SIGKILL the process that owns a server while an agent sleeps: neither survives."""
        trial = _trial(mini_golden, tmp_path / "trial")
        owner = subprocess.Popen(
            [
                sys.executable,
                "-c",
                textwrap.dedent(
                    f"""
                    import os, sys, time
                    from pathlib import Path
                    from harness.chaos.launch import ForkServer, launch
                    read_fd, write_fd = os.pipe()
                    env = {{"HARNESS_FAILPOINTS": "op.before_intent@1=sleep(60000)"}}
                    agent = launch("fork", sys.executable, Path({str(trial)!r}), env, write_fd,
                                   Path({str(tmp_path / "agent.stderr")!r}))
                    assert os.read(read_fd, 100).startswith(b"ready")
                    server = ForkServer.get(sys.executable)
                    print(agent.pid, server.process.pid, flush=True)
                    time.sleep(120)
                    """
                ),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert owner.stdout is not None
            agent_pid, server_pid = map(int, owner.stdout.readline().split())
            assert psutil.pid_exists(agent_pid) and psutil.pid_exists(server_pid)
            owner.send_signal(signal.SIGKILL)
            owner.wait()
            assert _gone(agent_pid), "the agent outlived the death of its supervisor"
            assert _gone(server_pid), "the fork server outlived its owner"
        finally:
            if owner.poll() is None:
                owner.kill()
                owner.wait()

    def test_a_forked_process_starts_a_server_of_its_own(self) -> None:
        """A pool worker forked from a process with a server must not share that socket."""
        mine = ForkServer.get(sys.executable)
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: a worker
            code = 1
            try:
                theirs = ForkServer.get(sys.executable)
                os.write(write_fd, str(theirs.process.pid).encode())
                theirs.close()
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        try:
            child_server = int(os.read(read_fd, 100))
        finally:
            os.close(read_fd)
            _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert child_server != mine.process.pid
        assert _gone(child_server)
        assert mine.process.poll() is None, "the parent's server was disturbed"

    def test_a_swept_server_is_replaced_on_next_use(
        self, mini_golden: Golden, tmp_path: Path
    ) -> None:
        """sweep_agents kills this process's server and its agents; the next trial starts anew."""
        before = ForkServer.get(sys.executable).process.pid
        trial = _trial(mini_golden, tmp_path / "trial")
        read_fd, write_fd = os.pipe()
        try:
            from harness.chaos.launch import launch

            agent = launch(
                "fork",
                sys.executable,
                trial,
                {"HARNESS_FAILPOINTS": "op.before_intent@1=sleep(60000)"},
                write_fd,
                tmp_path / "agent.stderr",
            )
            assert os.read(read_fd, 100).startswith(b"ready")
            assert sweep_agents(tmp_path) >= 2  # the agent and its server
            assert _gone(agent.pid) and _gone(before)
        finally:
            os.close(read_fd)
            os.close(write_fd)
        results = Supervisor(launch="fork").run(
            _trial(mini_golden, tmp_path / "again"), CrashSchedule()
        )
        assert [r.returncode for r in results] == [0]
        assert ForkServer.get(sys.executable).process.pid != before


@pytest.fixture(autouse=True)
def _no_child_of_the_server_outlives_a_test() -> Iterator[None]:
    yield
    server = ForkServer._mine
    if server is not None and server.process.poll() is None:
        assert psutil.Process(server.process.pid).children() == []


def test_a_forked_child_does_not_keep_its_parents_server_alive() -> None:
    """The parent's server sees its socket close even while a forked child lives on."""
    mine = ForkServer.get(sys.executable)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child holds on until the parent is done
        try:
            os.close(write_fd)
            os.read(read_fd, 1)
        finally:
            os._exit(0)
    os.close(read_fd)
    try:
        mine.close()
        assert mine.process.returncode == 0, "the server had to be killed: the child kept it open"
    finally:
        os.close(write_fd)
        os.waitpid(pid, 0)


def test_preload_imports_in_the_server_and_reports_a_bad_module() -> None:
    """A preload forks nothing; an unknown module is an error and the server goes on."""
    server = ForkServer.get(sys.executable)
    server.preload("harness.agent")
    assert psutil.Process(server.process.pid).children() == []
    with pytest.raises(OSError, match="no_such_agent_module"):
        server.preload("no_such_agent_module")
    assert server.process.poll() is None
    server.preload("harness.agent")  # still answering
