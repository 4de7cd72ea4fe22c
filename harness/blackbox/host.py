"""``harness.blackbox.host TRIAL_DIR``: one life of a black box, and the servers it talks to.

The agent program the supervisor starts for a ``cmd:`` runtime. It leads the life's
process group: it arms the life's failpoints, serves the model and the tools on one
HTTP port of 127.0.0.1 (``/v1/...``: ``harness.blackbox.model``; ``/mcp``:
``harness.blackbox.tools``), tells the supervisor ``ready``, and starts the agent's
command (``HARNESS_AGENT_COMMAND``) in the trial folder, in the same process group,
with ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``ANTHROPIC_BASE_URL``,
``ANTHROPIC_API_KEY``, ``HARNESS_MCP_URL`` and ``HARNESS_MCP_COMMAND`` in its
environment, ``TMPDIR`` the trial folder's ``tmp/``, and the file-system observer's
variables (so it, and all it starts, is observed in a power-loss trial, a statically
linked program under the tracer; the harness's other variables are not passed on). It
exits with the agent's status, once the agent has exited and anything the agent left in
the group is stopped; after an exit 0 it hits ``agent.before_exit`` first.

The supervisor's SIGKILL of the group ends the host, the agent and whatever the
agent started at once; a random-time kill's timer, which fires in the host, is sent
on to the group. Requests are served one at a time (one lock): a kill at a point
hand-shakes from the thread that hit it and waits there for the SIGKILL.

Exit status: the agent's; 127 when its command cannot start.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from harness.agent.plan import load_plan
from harness.blackbox import (
    AGENT_COMMAND_ENV,
    AGENT_HOME_ENV,
    MODEL_RECORD,
    TOOL_RECORD,
    resolve_command,
)
from harness.blackbox.handed import agent_env
from harness.blackbox.model import ModelEndpoint, Reply
from harness.blackbox.tools import ToolEndpoint, issued_calls
from harness.blackbox.warm import RECORD_ENV, WARM_FD_ENV, WarmAgent, recording_command, start_warm
from harness.blackbox.wired import read_launcher, wire_env
from harness.chaos.observer import observed_command
from harness.exits import AGENT_CANNOT_START
from harness.failpoints import (
    AIMED_KILL_SIGNAL,
    aim_at_process_group,
    arm_from_environ,
    failpoint,
    report_hit_counts,
    tell_supervisor,
)
from harness.runtime.classes import ToolTable
from harness.world.store import WorldStore

TABLE_ENV = "HARNESS_TOOL_TABLE"  # the supervisor's (harness.chaos.supervisor.TABLE_ENV)

__all__ = ["main"]

AGENT_TEMP = "tmp"
"""The agent's ``TMPDIR``, in the trial folder: nothing it leaves there outlives the trial."""


class _Handler(BaseHTTPRequestHandler):
    server: BlackBoxServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the record says it all
        return

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with self.server.lock:
            reply = self.server.route(method, self.path, body)
        if reply is None:  # dropped: the connection closes with no answer
            self.close_connection = True
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        for name, value in reply.headers:
            self.send_header(name, value)
        if reply.content_type == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in reply.chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
            _hang(reply.hang_s)
            self.close_connection = True
            return
        data = b"".join(reply.chunks)
        self.send_header(
            "Content-Length", str(len(data) if reply.declared is None else reply.declared)
        )
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        _hang(reply.hang_s)
        if reply.declared is not None:  # cut, or hung: the rest never comes
            self.close_connection = True


def _hang(seconds: float | None) -> None:
    """A hung answer: nothing more is sent for ``seconds`` (forever: until the life ends),
    outside the server's lock, so that the agent's other requests are still served."""
    if seconds is None:
        return
    if math.isinf(seconds):
        threading.Event().wait()
    time.sleep(seconds)


class BlackBoxServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, model: ModelEndpoint, tools: ToolEndpoint) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.model = model
        self.tools = tools
        self.lock = threading.Lock()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def route(self, method: str, path: str, body: bytes) -> Reply | None:
        if path.split("?", 1)[0].rstrip("/") == "/mcp":
            return self.tools.handle(method, body)
        if path.startswith("/v1/"):
            return self.model.handle(method, path, body)
        return Reply(404, "application/json", (b'{"error": "not served: /v1/... or /mcp"}',))


def serve(trial: Path, world: WorldStore) -> BlackBoxServer:
    """The model and the tools of one life, on a free port of 127.0.0.1, served from a thread."""
    plan = load_plan(trial / "plan.json")
    table = (
        ToolTable.load(os.environ[TABLE_ENV]) if TABLE_ENV in os.environ else ToolTable.shipped()
    )
    tools = ToolEndpoint(
        plan, world, trial / TOOL_RECORD, failpoint, issued_calls(trial / MODEL_RECORD), table
    )
    model = ModelEndpoint(
        plan,
        trial / MODEL_RECORD,
        tell_supervisor,
        failpoint,
        tools.note_issued,
        lambda tool: table.classify(tool).retry_safe,
    )
    server = BlackBoxServer(model, tools)
    threading.Thread(target=server.serve_forever, name="blackbox-server", daemon=True).start()
    return server


def _end_the_group(signum: int, frame: object) -> None:
    # A random-time kill's timer fired here: the whole life dies of it, at once.
    signal.signal(signum, signal.SIG_DFL)
    os.killpg(os.getpgrp(), signum)


def _stop_leftovers() -> None:
    """Stop what the agent left running in the life's group (a tool bridge it never closed)."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgrp(), signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _start_agent(
    words: list[str], trial: Path, env: dict[str, str], out: int
) -> WarmAgent | subprocess.Popen[bytes]:
    """The agent's process: forked by its zygote in a warm start (``WARM_FD_ENV``), else
    started by its command (through ``zygote.py --record`` in a run that records imports).
    A command of the wire guard's launcher (``harness.blackbox.wired``) has its guard wired
    here, and the agent's own command started: a warm start forks the agent itself."""
    wiring = read_launcher(words)
    if wiring is not None:
        env = wire_env(wiring, env, trial, out)
        words = list(wiring.agent)
    if WARM_FD_ENV in os.environ:
        zygote = socket.socket(fileno=int(os.environ.pop(WARM_FD_ENV)))
        started = start_warm(zygote, words, trial, env, out)
        if isinstance(started, WarmAgent):
            tell_supervisor(f"agent warm {started.pid}")
            return started
        zygote.close()
        # Refused for this life only (the campaign's check did not see why): a plain start.
        tell_supervisor(f"agent plain refused: {started}")
    if RECORD_ENV in os.environ:
        words = recording_command(words, os.environ[RECORD_ENV])
    # Observed, a statically linked agent program runs under the tracer, not the library.
    words, env = observed_command(words, env)
    agent = subprocess.Popen(words, cwd=trial, env=env, stdin=subprocess.DEVNULL, stdout=out)
    tell_supervisor(f"agent plain {agent.pid}")
    return agent


def main(argv: list[str]) -> int:
    trial = Path(argv[0]).resolve()
    command = os.environ.get(AGENT_COMMAND_ENV, "")
    arm_from_environ()
    aim_at_process_group()  # a timer started on this thread ends the group too
    signal.signal(AIMED_KILL_SIGNAL, _end_the_group)
    words = resolve_command(command, os.environ.get(AGENT_HOME_ENV))
    with WorldStore.open(trial / "world.db") as world:
        server = serve(trial, world)
        temp = trial / AGENT_TEMP
        temp.mkdir(exist_ok=True)
        env = agent_env(server.base, os.environ, temp)
        tell_supervisor("ready")
        try:
            with open(trial / "agent.stdout", "ab") as out:
                agent = _start_agent(words, trial, env, out.fileno())
        except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: its wire guard
            print(f"harness: the agent's command {command!r} cannot start: {exc}", file=sys.stderr)
            return AGENT_CANNOT_START
        code = agent.wait()
        _stop_leftovers()
        with server.lock:  # a request under way finishes first
            server.shutdown()
    if code == 0:
        failpoint("agent.before_exit")
    report_hit_counts()  # a counted (golden) run says where its points are
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
