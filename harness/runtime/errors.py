"""The runtime's errors: one root, each leaf naming its cause and its remedy.

The runtime is usable on its own, so its part of the tree lives here and
imports nothing else of the project; ``harness.errors`` adds the harness's
leaves under the same root.

    HarnessError
    ├── ToolTableError            a tool table file is malformed
    ├── DecisionKeyError          no cell of the decision matrix for a key
    ├── FailpointTriggered        a crash hook stopped the protocol here, as a crash would
    ├── JournalError
    │   ├── JournalCorruptError   a record before the tail fails its checks
    │   ├── JournalLockedError    another process holds the journal
    │   ├── JournalVersionError   a header, frame or record of a format this runtime does not know
    │   └── JournalWriteError     an append failed (e.g. ENOSPC); the writer takes no more
    ├── McpServerError            an MCP server would not start, answer or list its tools
    ├── McpNotInstalledError      reading an MCP server needs the ``mcp`` extra
    └── ToolError                 a tool call failed (raised by tools)
        └── TransientToolError    a failure worth retrying, if the class allows
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path


class HarnessError(Exception):
    """Root of every error this project raises on purpose.

    Remedy: catch this to handle any of them; the message of each leaf says
    what to change.
    """


class ToolTableError(HarnessError):
    """A tool table file is malformed: unknown class, duplicate tool, wrong type.

    Remedy: fix the named entry of the named file; nothing was loaded.
    """

    def __init__(self, path: Path | str, entry: str, problem: str) -> None:
        self.path = str(path)
        self.entry = entry
        self.problem = problem
        super().__init__(f"{self.path}: entry {entry!r}: {problem}")


class DecisionKeyError(HarnessError, KeyError):
    """The decision matrix has no cell for a (state, class, ask_user) key.

    Cause: a state or class value the recovery table (docs/runtime.md) does not
    know, for example a record written by a newer version. Remedy: upgrade the runtime or repair
    the journal; the runtime refuses to guess a decision.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown decision key"


class FailpointTriggered(HarnessError):
    """A crash hook stopped the protocol here, as a crash would.

    Cause: a test installed a hook at the runtime's crash points
    (``harness.runtime.hooks``) and it raised this on purpose. Remedy: none
    needed; the runtime writes nothing more for the op, as if the process had
    died at that exact point.
    """


class JournalError(HarnessError):
    """A journal cannot be read or written.

    Remedy: see the leaf; the message names the file.
    """


class JournalCorruptError(JournalError):
    """A record before the journal's tail fails its length, checksum or format.

    Cause: the file was damaged in the middle (a torn *tail* is normal after a
    crash and is dropped, not reported). Nothing was run: the runtime refuses
    to recover from a history it cannot prove. Remedy: restore the journal from
    a copy, or move it away to start over, knowing that every op it recorded
    will be forgotten.
    """

    def __init__(self, path: Path | str, offset: int, record_number: int, problem: str) -> None:
        self.path = str(path)
        self.offset = offset
        self.record_number = record_number
        self.problem = problem
        super().__init__(
            f"{self.path}: corrupt journal at byte {offset} (record #{record_number}): {problem}"
        )


class JournalLockedError(JournalError):
    """Another live process holds the journal's lock.

    Cause: a second agent was started on the same journal. Remedy: stop the
    other agent, or give this one its own journal. The lock is an OS lock that
    the kernel frees when its holder dies, so a killed agent never blocks.
    """


class JournalRetiredError(JournalError):
    """The journal belongs to a task that was retired (``Runtime.retire``).

    Cause: an agent was started on the journal of a finished task. Remedy:
    give the new task a journal of its own; archive or delete the retired one.
    """


class JournalVersionError(JournalError):
    """The journal holds a header, frame or record of a format this runtime does not know.

    Cause: a newer version of the runtime wrote it (after an upgrade that was
    rolled back, say). The frame is whole and its checksum holds, so it is not
    damage: it is never cut as a torn tail. Nothing was run or changed. Remedy:
    open the journal with the version that wrote it (or a newer one).
    """

    def __init__(self, path: Path | str, offset: int, what: str) -> None:
        self.path = str(path)
        self.offset = offset
        self.what = what
        super().__init__(
            f"{self.path}: at byte {offset}: {what}, which this runtime does not know "
            "(written by a newer version?); nothing was run or changed: open it with "
            "the version that wrote it"
        )


class JournalWriteError(JournalError):
    """An append could not be made (the disk is full, an I/O error, an interrupted write).

    The writer then takes no more appends (it is poisoned) and lets go of the
    journal: what an append wrote in part is never truncated by the process
    that failed, since only a fresh read of the file can tell where its
    records end. The message says what is durable. If the failed record was
    an intent, the tool was not run; if it was a finish, the op stays RUNNING.
    Remedy: free space if the disk is full, then open the journal again (in
    this process or the next): a partial last frame is cut as a torn tail and
    reported, and recovery decides every op left RUNNING by its class.
    """


class McpServerError(HarnessError):
    """An MCP server could not be started, did not answer, or broke the protocol.

    Cause: the command does not exist or cannot be run, the server exited or
    crashed before it listed its tools, it printed something other than
    JSON-RPC on its stdout (a log line, say), it answered with an error, or it
    did not answer within the timeout. The server's process is gone when this
    is raised (stdin closed, then SIGTERM and SIGKILL to its process group).
    Remedy: run the named command by hand and read its stderr; the message
    quotes its last line.
    """

    def __init__(self, command: Sequence[str], problem: str) -> None:
        self.command = tuple(command)
        self.problem = problem
        super().__init__(f"MCP server `{shlex.join(self.command)}`: {problem}")


class McpNotInstalledError(HarnessError, ImportError):
    """The MCP SDK (the ``mcp`` package) is not installed.

    Cause: the runtime is the standard library only; reading a tool table from
    an MCP server (``ToolTable.from_mcp``, ``harness table --from-mcp``) is the
    one part that needs the SDK. Remedy: ``pip install
    'agent-crash-harness[mcp]'``.
    """


class ToolError(HarnessError):
    """A tool call failed; the op is journaled FAILED.

    Remedy: none at the runtime level; the model decides what to do next.
    """


class TransientToolError(ToolError):
    """A tool failure that may succeed if tried again (timeout, busy resource).

    The executor retries it in-process only when the tool's class is
    retry-safe (read-only or idempotent), a bounded number of times.
    """
