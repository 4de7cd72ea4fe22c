"""Crash points: named places of the write-ahead protocol where a test may stop it.

A crash point is a call ``failpoint("op.after_effect", op_id)`` at a fixed place
of the runtime's write-ahead protocol: before and after an op's intent is made
durable, in the middle of its effect, after its effect and its finish, between
a recovery's decisions and its retries, around a journal append, at each step
of a compaction (before its new file is written, half way through, fsynced but
not yet renamed, renamed but its directory not yet fsynced), after a reconciler
answered but before its answer is journaled. ``CRASH_POINTS``
names every one the runtime hits.

Contract: nothing happens at a crash point unless a test installs a hook
(``set_crash_hook``); unset, ``failpoint`` is one test of a global. An installed
hook is called with the point's name and its detail (the op id, when the point
serves one) and may raise ``FailpointTriggered`` to stop the protocol dead
there, as a crash would: the runtime writes nothing more for that op.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["CRASH_POINTS", "CrashHook", "failpoint", "set_crash_hook"]

CRASH_POINTS: tuple[str, ...] = (
    "op.before_intent",
    "op.after_intent",
    "op.mid_effect",
    "op.after_effect",
    "op.after_finish",
    "recovery.after_decision",
    "recovery.before_retry",
    "recovery.after_hint",
    "journal.append",
    "journal.before_fsync",
    "compact.before_write",
    "compact.mid_write",
    "compact.before_rename",
    "compact.before_dir_fsync",
    "compact.after_dir_fsync",
    "recovery.reconcile",
)
"""Every crash point the runtime hits, in protocol order."""

CrashHook = Callable[[str, str], None]
"""Called as ``hook(name, detail)`` at every crash point while installed."""

_hook: CrashHook | None = None


def set_crash_hook(hook: CrashHook | None) -> None:
    """Install ``hook`` at every crash point of this process (None removes it)."""
    global _hook
    _hook = hook


def failpoint(name: str, detail: str = "") -> None:
    """Mark the crash point ``name``; calls the installed hook, if any.

    ``detail`` (an op id) is passed on to the hook.
    """
    if _hook is not None:  # no hook (the common case): one test of a global, no call
        _hook(name, detail)
