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
    │   ├── JournalFencedError    a newer claim took the journal over from this worker
    │   ├── JournalVersionError   a header, frame or record of a format this runtime does not know
    │   ├── JournalWriteError     an append failed (e.g. ENOSPC); the writer takes no more
    │   └── JournalClosedError    the runtime was closed while a call was in flight
    ├── OpConflictError           an op id reused for another tool or other arguments
    ├── RuntimeUsageError         the runtime used out of order (also a RuntimeError)
    ├── McpServerError            an MCP server would not start, answer or list its tools
    ├── McpNotInstalledError      reading an MCP server needs the ``mcp`` extra
    └── ToolError                 a tool call failed (raised by tools)
        └── TransientToolError    a failure worth retrying, if the class allows
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
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

    def __init__(self, message: str, *, holder: str | None = None) -> None:
        super().__init__(message)
        self.holder = holder
        """Who holds the journal as its lock says (``pid N``), where that is known."""


class JournalFencedError(JournalError):
    """Another worker claimed this journal (a task) with a newer fencing token.

    Cause: this worker's lease ended (it was paused, cut off or slow past the
    lease: a GC pause, a frozen VM, a partition, SIGSTOP) and another worker
    claimed the task. Every write checks the token in its own transaction, so
    this worker's writes are refused from then on, and no tool runs after the
    refusal. Remedy: stop working on the task; its new holder decides the ops
    this worker left open by their class.
    """

    def __init__(self, journal: str, token: int, newer: int | None, holder: str) -> None:
        self.journal = journal
        self.token = token
        self.newer = newer
        self.holder = holder
        now = "" if newer is None else f" (token {newer})"
        super().__init__(
            f"{journal}: fenced: this worker's claim (token {token}) was taken over by "
            f"{holder}{now}; nothing more is written or run here: stop working on this task"
        )


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

    Raised from a call (``Runtime.call``, ``AsyncRuntime.call``), it says what
    the call came to: ``outcome_unknown`` is True when the op's intent may be
    on disk (its frame was written whole before the failure, or an earlier
    append of it held): the tool may never have run, yet at the next start the
    op is found RUNNING and handed on by its class (retried if retry-safe,
    else verified), so treat it as ``info``. False means nothing of the call
    reached the journal: it did not run, and never will unless called again.
    """

    def __init__(
        self,
        message: str,
        *,
        maybe_durable: frozenset[str] = frozenset(),
        op_id: str | None = None,
        outcome_unknown: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.maybe_durable = maybe_durable
        """The op ids of the failed write's intents whose frames were written whole."""
        self.op_id = op_id
        self.outcome_unknown = outcome_unknown

    def also_written(self, records: Iterable[object]) -> JournalWriteError:
        """This failure, the intents among ``records`` (written whole before it) added to
        those that may be on disk."""
        ops = {getattr(r, "op_id", None) for r in records if getattr(r, "kind", "") == "intent"}
        error = JournalWriteError(
            str(self.args[0]) if self.args else "append failed",
            maybe_durable=self.maybe_durable | {op for op in ops if isinstance(op, str)},
        )
        return error

    def for_call(self, op_id: str, *, unknown: bool) -> JournalWriteError:
        """This failure as the call of ``op_id`` is told it."""
        said = (
            "its outcome is unknown: its intent may be on disk, so the next start hands "
            "the op on by its class"
            if unknown
            else "it did not run: nothing of it reached the journal"
        )
        base = self.args[0] if self.args else "append failed"
        error = JournalWriteError(
            f"{base}. Call {op_id}: {said}",
            maybe_durable=self.maybe_durable,
            op_id=op_id,
            outcome_unknown=unknown,
        )
        return error


class JournalClosedError(JournalError):
    """The runtime was closed (``close``, ``aclose``) while this call was under way.

    Cause: the call outlived the close's wait. Its tool may have run, but its
    finish could not be journaled, so its outcome is unknown; the op stays
    RUNNING in the journal, and the next start decides it by its class (a
    retry, or a VERIFY hint). Remedy: close with a longer ``timeout``, or let
    the calls end before closing.
    """


class OpConflictError(HarnessError):
    """An op id the journal knows was called again for another tool or other arguments.

    Cause: op ids were reused (a counter restarted, two steps given one id).
    The journal answers an op id from what it holds, so answering this call
    would hand back another call's result, and never running it would lose
    its effect. Nothing was journaled or run. Remedy: give each distinct call
    its own op id; call an op again only with its own tool and arguments.
    """

    def __init__(self, op_id: str, journaled: tuple[str, str], asked: tuple[str, str]) -> None:
        self.op_id = op_id
        self.journaled = journaled
        self.asked = asked
        super().__init__(
            f"op {op_id!r} is journaled as {journaled[0]} with arguments digest "
            f"{journaled[1]}, and was called as {asked[0]} with arguments digest "
            f"{asked[1]}: one op id, one call; nothing was journaled or run"
        )


class RuntimeUsageError(HarnessError, RuntimeError):
    """The runtime was used out of order.

    Cause: ``recover`` while calls are in flight; a call before ``recover`` on a
    journal that holds ops an earlier life left open; the synchronous and the
    asynchronous API used on one runtime at once; a call after ``close``.
    Nothing was journaled or run. Remedy: the message names the order to keep.
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
