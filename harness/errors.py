"""Every error this project raises on purpose: one root, each leaf naming cause and remedy.
The runtime's leaves (``harness.runtime.errors``) are re-exported; catch ``HarnessError``:
    HarnessError
    ├── ToolTableError            a tool table file is malformed
    ├── DecisionKeyError          no cell of the decision matrix for a key
    ├── FailpointTriggered        a crash hook stopped the protocol here, as a crash would
    ├── JournalError
    │   ├── JournalCorruptError   a record before the tail fails its checks
    │   ├── JournalLockedError    another process holds the journal
    │   ├── JournalFencedError    a newer claim took the journal over from this worker
    │   ├── JournalRetiredError   the journal of a retired task: nothing runs on it
    │   ├── JournalVersionError   a header, frame or record of a format this runtime does not know
    │   ├── JournalWriteError     an append failed (e.g. ENOSPC); the writer takes no more
    │   └── JournalClosedError    the runtime was closed while a call was in flight
    ├── OpConflictError           an op id reused for another tool or other arguments
    ├── RuntimeUsageError         the runtime used out of order (also a RuntimeError)
    ├── McpServerError            an MCP server would not start, answer or list its tools
    ├── McpNotInstalledError      reading an MCP server needs the ``mcp`` extra
    ├── ToolError                 a tool call failed (raised by tools)
    │   └── TransientToolError    a failure worth retrying, if the class allows
    ├── FailpointSpecError        a failpoint spec cannot be parsed          (harness)
    ├── ScenarioError             a scenario file is unreadable or invalid   (harness)
    ├── SupervisorError           the supervisor cannot start the agent      (harness)
    └── TrialError                a trial's crash-free runs did not finish   (harness)
"""

from __future__ import annotations

from pathlib import Path

from harness.runtime.errors import (
    DecisionKeyError,
    FailpointTriggered,
    HarnessError,
    JournalClosedError,
    JournalCorruptError,
    JournalError,
    JournalFencedError,
    JournalLockedError,
    JournalRetiredError,
    JournalVersionError,
    JournalWriteError,
    McpNotInstalledError,
    McpServerError,
    OpConflictError,
    RuntimeUsageError,
    ToolError,
    ToolTableError,
    TransientToolError,
)

__all__ = [
    "DecisionKeyError",
    "FailpointSpecError",
    "FailpointTriggered",
    "HarnessError",
    "JournalClosedError",
    "JournalCorruptError",
    "JournalError",
    "JournalFencedError",
    "JournalLockedError",
    "JournalRetiredError",
    "JournalVersionError",
    "JournalWriteError",
    "McpNotInstalledError",
    "McpServerError",
    "OpConflictError",
    "RuntimeUsageError",
    "ScenarioError",
    "SupervisorError",
    "ToolError",
    "ToolTableError",
    "TransientToolError",
    "TrialError",
]


class FailpointSpecError(HarnessError, ValueError):
    """A failpoint spec (``name@N=action,...``) cannot be parsed.

    Cause: ``HARNESS_FAILPOINTS`` (or another source named in the message)
    holds a malformed entry, an unknown point or action, or
    ``HARNESS_FAILPOINT_CHANNEL`` is not a file descriptor number
    (``harness.failpoints``). Raised before anything runs. Remedy: fix the
    spec in the environment variable named in the message; nothing was run.
    """


class ScenarioError(HarnessError):
    """A scenario file (or a tools file it names) cannot be read, is not valid TOML, or
    breaks the tool catalog.

    Cause: the file is missing, malformed, or a step names an unknown tool, a
    missing or unknown argument, a wrong type, or a verify check that is not
    read-only; or a declared tool has a behaviour outside the vocabulary, a
    field its behaviour does not take, or a built-in tool's name. Raised
    before anything runs. Remedy: fix the named step (or declared tool) and
    field of the named file (steps count from 1).
    """

    def __init__(
        self,
        path: Path | str,
        step: int | None,
        field: str | None,
        problem: str,
        *,
        tool: str | None = None,
        call: int | None = None,
    ) -> None:
        self.path = str(path)
        self.step = step
        self.call = call
        self.tool = tool
        self.field = field
        self.problem = problem
        where = []
        if step is not None:
            where.append(f"step {step}")
        if call is not None:
            where.append(f"call {call}")
        if tool is not None:
            where.append(f"tool {tool!r}")
        if field is not None:
            where.append(f"field {field!r}")
        location = f"{self.path}: {', '.join(where)}" if where else self.path
        super().__init__(f"{location}: {problem}")


class SupervisorError(HarnessError):
    """The supervisor cannot start an incarnation of the agent.

    Cause: the launcher failed (``harness.chaos.launch``): the interpreter does not
    exist or cannot be run, or the fork server would not start, import the agent
    program or fork it. Raised by ``Supervisor.run`` before the life runs. Remedy:
    the message names the trial folder, the life and the launcher; check the
    interpreter and the agent program (``--runtime``), or try ``--launch exec``.
    An agent that starts and then dies is no error: the checkers judge its lives.
    """


class TrialError(HarnessError):
    """A trial cannot be set up: a crash-free run it needs did not finish.

    Cause: the golden run of its scenario and seed (``prepare_golden``), or the run
    that proves the scenario's checks (``prove_checks``), ended without the plan
    done: the agent refused or failed with no fault injected. Raised before any
    trial of that scenario runs. Remedy: the message gives the exit status and the
    end of the agent's stderr; the run's folder is kept under the run folder's
    ``golden``. A trial that runs out of restarts is no error: I7 judges it.
    """
