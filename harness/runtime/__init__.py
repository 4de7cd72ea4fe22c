"""The seed's recovery system for agent tool calls, usable on its own.

Classify each tool (``ToolTable``), run every call write-ahead through a
journal (``Runtime.call``), and after a crash get a decision per op
(``Runtime.recover``): SKIP, RETRY or VERIFY. This package imports nothing
else of the project.
"""

from harness.runtime.classes import IdempotencyClass, ToolClass, ToolTable
from harness.runtime.errors import (
    DecisionKeyError,
    FailpointTriggered,
    HarnessError,
    JournalCorruptError,
    JournalError,
    JournalLockedError,
    JournalVersionError,
    JournalWriteError,
    McpNotInstalledError,
    McpServerError,
    ToolError,
    ToolTableError,
    TransientToolError,
)
from harness.runtime.executor import CallContext, CallOutcome, Executor, ToolFunction
from harness.runtime.identity import Identity
from harness.runtime.journal import JournalWriter, scan_journal
from harness.runtime.matrix import (
    DECISION_MATRIX,
    Decision,
    OpState,
    RecoveryDecision,
    decide,
    decide_for_operation,
)
from harness.runtime.records import Resolution
from harness.runtime.recovery import OpHistory, fold, plan_recovery
from harness.runtime.runtime import RecoveryReport, Runtime, VerifyHint

__all__ = [
    "DECISION_MATRIX",
    "CallContext",
    "CallOutcome",
    "Decision",
    "DecisionKeyError",
    "Executor",
    "FailpointTriggered",
    "HarnessError",
    "IdempotencyClass",
    "Identity",
    "JournalCorruptError",
    "JournalError",
    "JournalLockedError",
    "JournalVersionError",
    "JournalWriteError",
    "JournalWriter",
    "McpNotInstalledError",
    "McpServerError",
    "OpHistory",
    "OpState",
    "RecoveryDecision",
    "RecoveryReport",
    "Resolution",
    "Runtime",
    "ToolClass",
    "ToolError",
    "ToolFunction",
    "ToolTable",
    "ToolTableError",
    "TransientToolError",
    "VerifyHint",
    "decide",
    "decide_for_operation",
    "fold",
    "plan_recovery",
    "scan_journal",
]
