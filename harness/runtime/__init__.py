"""A crash-recovery runtime for agent tool calls, usable on its own.

Classify each tool (``ToolTable``), run every call write-ahead through a
journal (``Runtime.call``, or ``AsyncRuntime`` for asyncio code), and after a
crash get a decision per op (``Runtime.recover``): SKIP, RETRY or VERIFY.
This package needs nothing outside the standard library and imports nothing
else of the project. Its guarantees, limits and versions: ``docs/runtime.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.runtime.classes import IdempotencyClass, ToolClass, ToolTable
from harness.runtime.compaction import Compaction, Retention
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
from harness.runtime.executor import CallContext, CallOutcome, ToolFunction
from harness.runtime.identity import Identity
from harness.runtime.journal import Appended, JournalEvent, JournalListener, Opened, Synced
from harness.runtime.matrix import Decision, OpState, RecoveryDecision
from harness.runtime.reconcile import Reconciled, Reconciler
from harness.runtime.records import Resolution
from harness.runtime.runtime import RecoveryReport, Runtime, VerifyHint

if TYPE_CHECKING:
    from harness.runtime.aio import AsyncRuntime

__all__ = [
    "Appended",
    "AsyncRuntime",
    "CallContext",
    "CallOutcome",
    "Compaction",
    "Decision",
    "DecisionKeyError",
    "FailpointTriggered",
    "HarnessError",
    "IdempotencyClass",
    "Identity",
    "JournalClosedError",
    "JournalCorruptError",
    "JournalError",
    "JournalEvent",
    "JournalFencedError",
    "JournalListener",
    "JournalLockedError",
    "JournalRetiredError",
    "JournalVersionError",
    "JournalWriteError",
    "McpNotInstalledError",
    "McpServerError",
    "OpConflictError",
    "OpState",
    "Opened",
    "Reconciled",
    "Reconciler",
    "RecoveryDecision",
    "RecoveryReport",
    "Resolution",
    "Retention",
    "Runtime",
    "RuntimeUsageError",
    "Synced",
    "ToolClass",
    "ToolError",
    "ToolFunction",
    "ToolTable",
    "ToolTableError",
    "TransientToolError",
    "VerifyHint",
]


def __getattr__(name: str) -> Any:
    # AsyncRuntime is loaded on first use: asyncio costs a process several milliseconds,
    # and an agent restarted after every crash pays its start-up each time.
    if name == "AsyncRuntime":
        from harness.runtime.aio import AsyncRuntime

        return AsyncRuntime
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
