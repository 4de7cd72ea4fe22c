"""Failpoints: the harness arms the crash points of an agent process from outside.

A failpoint is a call ``failpoint("op.after_effect", op_id)`` at a fixed place
of the code. The runtime's own points (``harness.runtime.hooks.CRASH_POINTS``)
are hit through its crash hook; the harness hits its own (``op.reply`` in the
world's tools once an effect is committed, ``agent.before_exit`` in an agent
program after its work) with this module's ``failpoint``. Arming installs one
dispatcher as the runtime's hook, and this module's ``failpoint`` goes through
the same dispatcher, so the hits of every point are counted in one place.
Unarmed, a point costs the call and one truth test. Armed, through the
environment variable ``HARNESS_FAILPOINTS``, it acts on its N-th hit in this
process:

    spec    := entry ("," entry)*
    entry   := name ["@" N] "=" action ["(" arg ")"]
    action  := kill | exit | raise | sleep | enospc | enospc-mid | lost-reply | count
             | cancel | lost-request | pause | rate-limit | server-error | overloaded
             | stream-cut | stream-hang | lost-answer | ...

The full note: docs/reference/modules.md (``harness/failpoints.py``).
"""

from __future__ import annotations

import _thread
import errno
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from harness.errors import FailpointSpecError
from harness.exits import AGENT_FAILPOINT_EXIT
from harness.failpoint_spec import (
    AGENT_HOOKS,
    MODEL_FAULTS,
    MODEL_WIRE_FAULTS,
    FailpointSpec,
    parse_spec,
)
from harness.runtime.errors import FailpointTriggered, TransientToolError
from harness.runtime.hooks import CRASH_POINTS, set_crash_hook

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

__all__ = [
    "AIMED_KILL_SIGNAL",
    "AIM_ENV",
    "AIM_PAUSE_ENV",
    "CHANNEL_ENV",
    "COUNTS_ENV",
    "EXIT_HOLD_POINT",
    "FAILPOINTS",
    "FAILPOINTS_ENV",
    "MODEL_FAULTS",
    "FailpointSpec",
    "ModelFault",
    "ModelReplyFault",
    "absorb_hits",
    "aim_at_process_group",
    "arm",
    "arm_from_environ",
    "disarm",
    "failpoint",
    "hit_counts",
    "hit_ops",
    "hit_ops_path",
    "hit_report",
    "invoked",
    "parse_failpoints",
    "pause_left_at_exit",
    "report_hit_counts",
    "report_hit_counts_once",
    "set_agent_hook",
    "tell_supervisor",
]

FAILPOINTS_ENV = "HARNESS_FAILPOINTS"
CHANNEL_ENV = "HARNESS_FAILPOINT_CHANNEL"
COUNTS_ENV = "HARNESS_FAILPOINT_COUNTS"
AIM_ENV = "HARNESS_KILL_AIM"
"""``<anchor>@<seconds>``: once the agent gets to the anchor, a timer of the kernel kills it
so many seconds later, wherever it then is (``AIMED_KILL_SIGNAL``). The anchor is a line
the agent tells (``ready``, ``invoke <op>``) or a point of a call and the op it serves
(``op.after_intent s004``). A random-time kill is timed by the agent's own clock from
the moment it is aimed at: in RAM a call lasts a tenth of a millisecond, less than a
supervisor sharing the CPUs takes to wake up and kill. A call a model re-issued under a
new id that names it (``s004~2``, the harness's re-issuing model) is aimed at as the call
it re-issues: the crash-free run the aim was drawn from knew it as ``s004``."""

AIM_PAUSE_ENV = "HARNESS_KILL_AIM_PAUSE"
"""Set to ``1``: the timer of ``AIM_ENV`` pauses the life instead (its handler tells the
supervisor ``paused timer <anchor>`` and stops the process group, as ``pause`` does)."""

AIMED_KILL_SIGNAL = signal.SIGALRM
"""What the timer delivers: SIGALRM at its default action, which no Python code can
catch. Linux carries out a fatal signal nobody handles as a group kill, as it does
SIGKILL (the process runs no more user code: no handler, no ``finally``, no flush);
only the exit status differs, and tells the supervisor the timer fired."""

_AFTER_MID_EFFECT = CRASH_POINTS.index("op.mid_effect") + 1

FAILPOINTS: tuple[str, ...] = (
    "model.issue",  # the harness's: the scripted model is about to issue a step's call
    *CRASH_POINTS[: _AFTER_MID_EFFECT - 1],
    "op.request",  # the harness's: a tool's request is on its way, the world has not seen it
    *CRASH_POINTS[_AFTER_MID_EFFECT - 1 : _AFTER_MID_EFFECT],
    "op.reply",  # the harness's: a tool's effect is committed, its reply not yet given
    *CRASH_POINTS[_AFTER_MID_EFFECT:],
    "reconcile.lookup",  # the harness's: a reconciler looks an op's key up in the world
    "agent.before_exit",  # the harness's: an agent program's work is done
    # A black box's, in the harness's servers (harness.blackbox): a tool call received,
    # its reply ready; a model request received, its answer ready.
    "tool.received",
    "tool.before_reply",
    "model.received",
    "model.before_reply",
)
"""Every failpoint an agent process hits, in protocol order: the runtime's crash points
(the compaction's four among them) and the harness's own."""

EXIT_HOLD_POINT = "agent.before_exit"
"""An agent program's last point, after its work and before it exits: a supervisor
holds a life there when a random-time kill it scheduled has not fired yet."""


_AIM = "aim"
"""The action of a point a random-time kill is timed from (``AIM_ENV``); not in the
grammar: the supervisor arms it through ``AIM_ENV`` only."""

# How long a victim waits for the supervisor's SIGKILL before killing itself,
# so that a dead supervisor never leaves it hanging.
_HANDSHAKE_TIMEOUT_S = 30.0


def parse_failpoints(text: str, *, source: str = FAILPOINTS_ENV) -> tuple[FailpointSpec, ...]:
    """Parse a spec (``harness.failpoint_spec.parse_spec``), every entry naming one of
    ``FAILPOINTS``; ``FailpointSpecError`` names the source, the entry and the problem."""
    try:
        return parse_spec(text, source=source, known=FAILPOINTS)
    except ValueError as exc:
        raise FailpointSpecError(str(exc)) from None


class _Trigger:
    __slots__ = ("details", "hits", "specs", "times")

    def __init__(self) -> None:
        self.hits = 0
        self.specs: list[FailpointSpec] = []
        self.details: list[str] | None = None
        """The detail (op id) of every hit, kept only when a ``count`` spec is armed."""
        self.times: list[int] = []
        """When each kept hit happened (``time.monotonic_ns``)."""

    def fire(self, name: str, detail: str) -> None:
        self.hits += 1
        if self.details is not None:
            self.details.append(detail)
            self.times.append(time.monotonic_ns())
        for spec in self.specs:
            if spec.hit is None or spec.hit == self.hits:
                _act(spec, self.hits, detail)


_armed: dict[str, _Trigger] = {}
_invoked: set[str] = set()
"""The op ids this process told the supervisor it invoked (``invoked``)."""
_ready_ns: int | None = None
_agent_hooks: dict[str, Callable[[str], None]] = {}
_aim_group = False


def failpoint(name: str, detail: str = "") -> None:
    """Mark one of the harness's own points; acts only when armed for this name.

    ``detail`` (an op id) is passed on to a listening supervisor.
    """
    if _armed:  # unarmed (the common case): one truth test of a global, no call
        _dispatch(name, detail)


def _dispatch(name: str, detail: str) -> None:
    """Every armed point's hit, the runtime's (as its crash hook) and the harness's."""
    trigger = _armed.get(name)
    if trigger is not None:
        trigger.fire(name, detail)


def _install_hook() -> None:
    # The runtime calls its hook at every one of its points: installed only once
    # something is armed, so that an unarmed process pays one truth test there too.
    if _armed:
        set_crash_hook(_dispatch)


def report_hit_counts() -> None:
    """Write the hit counts to the file ``HARNESS_FAILPOINT_COUNTS`` names, if any.

    A crash-free run armed with ``count`` tells the supervisor where its points are.
    """
    path = os.environ.get(COUNTS_ENV)
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(hit_counts(), out, sort_keys=True)
        # Which op each hit served, beside it: a supervisor plans kills in
        # recovery from what the op at a hit is (see ``hit_ops_path``).
        with open(hit_ops_path(path), "w", encoding="utf-8") as out:
            json.dump({"ops": hit_ops(), "ms": hit_times()}, out, sort_keys=True)


def report_hit_counts_once() -> None:
    """``report_hit_counts``, unless the agent program already did: the launchers call it
    once its ``main`` has returned, so that a user's agent program (``module:``), which
    knows nothing of counted runs, tells where its points are too."""
    path = os.environ.get(COUNTS_ENV)
    if path and not os.path.exists(path):
        report_hit_counts()


def hit_ops_path(counts_path: str | os.PathLike[str]) -> str:
    """Where ``report_hit_counts`` writes the op id of every hit of a counted point."""
    return f"{os.fspath(counts_path)}.ops"


def hit_ops() -> dict[str, list[str]]:
    """The detail (op id) of each hit of every point armed to ``count``, in hit order."""
    return {name: list(t.details) for name, t in _armed.items() if t.details is not None}


def hit_times() -> dict[str, list[float]]:
    """When each hit of ``hit_ops`` happened: milliseconds after the agent said ``ready``."""
    start = _ready_ns or 0
    return {
        name: [round((t - start) / 1e6, 3) for t in trigger.times]
        for name, trigger in _armed.items()
        if trigger.details is not None
    }


def hit_counts() -> dict[str, int]:
    """How often each armed point was hit in this process (``count`` arms one to count)."""
    return {name: trigger.hits for name, trigger in _armed.items()}


def hit_report() -> dict[str, dict[str, object]]:
    """Every armed point's hits in this process, for another process of its life to absorb.

    ``{name: {"hits": N, "ops": [op id, ...] | None, "ns": [monotonic ns, ...]}}``: a
    helper process that hits some of an agent's points (a tool server running its
    calls) hands this to the agent (``absorb_hits``), which reports them as its own.
    The clock is the system's monotonic clock, the same in every process.
    """
    return {name: {"hits": t.hits, "ops": t.details, "ns": t.times} for name, t in _armed.items()}


def absorb_hits(report: Mapping[str, Mapping[str, object]]) -> None:
    """Count the hits of another process of this life (its ``hit_report``) as this one's.

    ``report_hit_counts`` then reports them with this process's own, each point's
    kept hits in the order they happened, timed from this process's ``ready``.
    """
    for name, seen in report.items():
        trigger = _armed.setdefault(name, _Trigger())
        hits = seen.get("hits", 0)
        trigger.hits += hits if isinstance(hits, int) else 0
        ops, times = seen.get("ops"), seen.get("ns")
        if isinstance(ops, list) and isinstance(times, list):
            moments = [*trigger.times, *map(int, times)]
            merged = sorted(zip(moments, [*(trigger.details or ()), *map(str, ops)], strict=True))
            trigger.times = [moment for moment, _ in merged]
            trigger.details = [op for _, op in merged]
    _install_hook()


def aim_at_process_group() -> None:
    """Have a random-time kill timed from a point of this process end its process group.

    For a helper process that runs in an agent's process group and hits some of its
    points (a tool server hits ``op.reply``): a kill timed from one of them must
    end the life, not the helper alone. Its timer's signal is then caught and sent
    on to the group, where it ends the agent as ``AIMED_KILL_SIGNAL`` does. Being a
    Python handler, it runs between two bytecodes of the helper's main thread,
    after a system call or C function under way there returns: a commit under way
    completes first, which a kill landing a moment later would also have allowed.
    """
    global _aim_group
    _aim_group = True


def _end_the_group(signum: int, frame: object) -> None:
    signal.signal(signum, signal.SIG_DFL)  # this process dies of it too, with the others
    os.killpg(os.getpgrp(), signum)


def arm(specs: tuple[FailpointSpec, ...]) -> None:
    """Arm these specs (in addition to any already armed); their points count hits from 0."""
    for spec in specs:
        trigger = _armed.setdefault(spec.name, _Trigger())
        trigger.specs.append(spec)
        trigger.hits = 0
        if spec.action == "count":
            trigger.details = []
    _install_hook()


def disarm() -> None:
    """Forget every armed point and its hits; the runtime's points cost one test again."""
    _armed.clear()
    set_crash_hook(None)


def arm_from_environ(environ: Mapping[str, str] = os.environ) -> tuple[FailpointSpec, ...]:
    """Arm what ``HARNESS_FAILPOINTS`` asks for; refuse a bad spec before anything runs."""
    specs = parse_failpoints(environ.get(FAILPOINTS_ENV, ""))
    channel = environ.get(CHANNEL_ENV)
    if channel is not None and not channel.isdigit():
        raise FailpointSpecError(f"{CHANNEL_ENV}: {channel!r} is not a file descriptor number")
    arm(specs)
    anchor = environ.get(AIM_ENV, "").rpartition("@")[0].partition(" ")[0]
    if environ.get(AIM_PAUSE_ENV) == "1" and _on_main_thread():
        # A Python handler, which runs on the main thread whatever thread the timer started
        # on: it must say where it stopped before it stops.
        signal.signal(AIMED_KILL_SIGNAL, _pause_by_timer)
    if anchor in FAILPOINTS:
        arm((FailpointSpec(anchor, _AIM),))  # a kill timed from a point of a call
        if _on_main_thread() and environ.get(AIM_PAUSE_ENV) != "1":
            # The timer may start on a thread of a framework's (a DBOS worker), where
            # Python sets no handler: the signal's action there is the one set now.
            signal.signal(AIMED_KILL_SIGNAL, signal.SIG_DFL)
    return specs


_MAIN_THREAD = _thread.get_ident()
"""The thread that imported this module: the agent's main thread (``threading`` costs the
agent's start half a millisecond; ``_thread`` is built in)."""


def _on_main_thread() -> bool:
    """Whether this is the thread on which Python lets ``signal.signal`` be called."""
    return _thread.get_ident() == _MAIN_THREAD


def _aim_reached(anchor: str) -> None:
    """Start the timer of ``AIM_ENV`` if ``anchor`` is where it is timed from (once)."""
    aim, _, after_s = os.environ.get(AIM_ENV, "").rpartition("@")
    if aim and aim in (anchor, _as_first_issued(anchor)):
        del os.environ[AIM_ENV]  # once: the op may be invoked again after a lost reply
        if os.environ.get(AIM_PAUSE_ENV) == "1":
            _paused_from.append(aim)
            if _on_main_thread():
                signal.signal(AIMED_KILL_SIGNAL, _pause_by_timer)
        elif _on_main_thread():
            signal.signal(AIMED_KILL_SIGNAL, _end_the_group if _aim_group else signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_REAL, max(float(after_s), 1e-6))


def _as_first_issued(anchor: str) -> str:
    """``op.after_intent s004~2`` -> ``op.after_intent s004`` (see ``AIM_ENV``)."""
    head, space, op_id = anchor.rpartition(" ")
    call, mark, life = op_id.partition("~")
    return f"{head}{space}{call}" if space and mark and life.isdigit() else anchor


def _act(spec: FailpointSpec, hit: int, detail: str) -> None:
    if spec.action == "count":
        return
    if spec.action == "kill":
        _kill_here(spec.name, hit, detail)
    elif spec.action == "pause":
        _pause_here(spec.name, hit, detail)
    elif spec.action == "exit":
        os._exit(AGENT_FAILPOINT_EXIT if spec.arg is None else spec.arg)
    elif spec.action == "raise":
        raise FailpointTriggered(f"failpoint {spec.name} fired on hit {hit}")
    elif spec.action == "sleep":
        time.sleep((spec.arg or 0) / 1000)
    elif spec.action == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    elif spec.action == "enospc-mid":
        _disk_fills_mid_write(spec, hit, detail)
    elif spec.action == _AIM:
        _aim_reached(f"{spec.name} {detail}")
    elif spec.action == "lost-reply":
        # The effect is done; the caller sees a timeout, as if the reply never came.
        tell_supervisor(f"fault lost-reply {spec.name} {hit} {detail}".rstrip())
        raise TransientToolError(
            f"{detail or spec.name}: timed out waiting for the reply (failpoint {spec}: the "
            "effect happened, the reply was lost)"
        )
    elif spec.action == "cancel":
        _cancel_here(spec, hit, detail)
    elif spec.action in AGENT_HOOKS:
        # The agent uses its runtime again while this call is in flight (AGENT_HOOKS).
        at = f"{spec.name} {hit} {detail}".rstrip()
        hook = _agent_hooks.get(spec.action)
        if hook is None:
            print(f"harness.failpoints: {spec}: no agent to act at {at}", file=sys.stderr)
        else:
            hook(at)
    elif spec.action in MODEL_FAULTS:
        # The agent's own bug in the call it is about to issue (``ModelFault``): the model
        # makes it, and tells the supervisor once it has.
        raise ModelFault(spec.action, f"{spec.name} {hit} {detail}".rstrip(), spec.arg)
    elif spec.action in MODEL_WIRE_FAULTS:
        # The scripted model's answer fails on the wire as a provider's does (ModelReplyFault).
        kind = MODEL_WIRE_FAULTS[spec.action]
        at = f"{spec.name} {hit} {detail}".rstrip()
        tell_supervisor(f"fault {kind} {at}")
        raise ModelReplyFault(spec.action, at, spec.arg)
    elif spec.action == "lost-request":
        # Nothing is done; the caller sees the same timeout, and cannot tell the two apart.
        tell_supervisor(f"fault lost-request {spec.name} {hit} {detail}".rstrip())
        raise TransientToolError(
            f"{detail or spec.name}: timed out waiting for the reply (failpoint {spec}: the "
            "request was lost, nothing happened)"
        )


class ModelFault(Exception):
    """Raised by an action of ``MODEL_FAULTS``: the agent program acts as one with that
    fault. At ``model.issue``, ``reuse-id`` issues the call under the op id of an earlier
    call of other content (its ids collide) and ``async-tool`` hands the synchronous
    runtime an ``async def`` tool; at ``reconcile.lookup``, ``lag(ms)`` makes the lookup
    miss effects younger than ``arg`` ms. ``at`` is the hit (``model.issue 3 s003``)."""

    def __init__(self, kind: str, at: str, arg: int | None = None) -> None:
        super().__init__(f"{kind} at {at}")
        self.kind = kind
        self.at = at
        self.arg = arg


class ModelReplyFault(Exception):
    """Raised by an action of ``MODEL_WIRE_FAULTS`` at ``model.before_reply``: the scripted
    model's answer, decided, fails on the wire (``harness.blackbox.model`` shapes it). ``at``
    is the hit (``model.before_reply 3 s003``); ``arg`` its milliseconds, if any."""

    def __init__(self, action: str, at: str, arg: int | None = None) -> None:
        super().__init__(f"{action} at {at}")
        self.action = action
        self.at = at
        self.arg = arg


def _disk_fills_mid_write(spec: FailpointSpec, hit: int, detail: str) -> None:
    """The disk fills up in the middle of a write. At ``journal.append`` (right before the
    write): the write stores the first half of its bytes and says so, as ``write`` does on
    a disk that fills up part way (a short write; the journal then fails the append with
    ENOSPC), so that a group write of several callers' intents leaves some frames whole.
    Anywhere else (``journal.before_fsync``: written whole, not yet durable): ENOSPC, as
    an fsync returns where the file system allocates at writeback."""
    tell_supervisor(f"fault disk-full-mid-write {spec.name} {hit} {detail}".rstrip())
    if spec.name != "journal.append":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    real = os.write
    writer = _thread.get_ident()

    def short_write(fd: int, data: ReadableBuffer) -> int:
        if _thread.get_ident() != writer:
            return real(fd, data)
        os.write = real  # this write only: the next one meets the full disk itself
        view = memoryview(data)
        return real(fd, view[: len(view) // 2])

    os.write = short_write


def _cancel_here(spec: FailpointSpec, hit: int, detail: str) -> None:
    """Cancel the asyncio task running this hit; outside one, say so and do nothing."""
    # asyncio only if the process has imported it: without it no task can be running,
    # and an agent without batches does not pay for the import.
    aio = sys.modules.get("asyncio")
    task = None
    if aio is not None:
        try:
            task = aio.current_task()
        except RuntimeError:  # no event loop is running in this thread
            task = None
    if task is None:
        print(
            f"harness.failpoints: {spec}: hit {hit} came outside an asyncio task, "
            "nothing to cancel",
            file=sys.stderr,
        )
        return
    task.cancel(f"failpoint {spec}")
    tell_supervisor(f"fault cancel {spec.name} {hit} {detail}".rstrip())


def invoked() -> frozenset[str]:
    """The op ids this process has told the supervisor it invoked so far (``invoke s003``):
    the world ledgers with each execution whether its step's call was among them, so
    that a checker can tell a call the model made from one the runtime made alone."""
    return frozenset(_invoked)


def set_agent_hook(action: str, hook: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """What an action of ``AGENT_HOOKS`` calls (with the hit, ``op.after_intent 3 s003``):
    the agent using its runtime while a call is in flight; None to unset it. Returns the
    hook it replaces, for a batch to put back."""
    earlier = _agent_hooks.pop(action, None)
    if hook is not None:
        _agent_hooks[action] = hook
    return earlier


def tell_supervisor(message: str) -> bool:
    """Write one line on the supervisor's channel; False when nobody listens.

    The one way an agent talks to the harness: ``ready``, ``reached ...``,
    ``invoke <op>``, ``ack <op> <result digest>``, ``fail <op>``, ``info <op>`` (each
    followed by the op that answered the call, when identity by content answered it
    from another: ``ack <op> <digest> <other>``), ``hint <op>``, ``check <op> <result
    digest> present|absent``.
    """
    global _ready_ns
    if message == "ready":
        _ready_ns = time.monotonic_ns()  # hit times of a counted run are told from here
    elif message.startswith("invoke "):
        _invoked.add(message.split(" ", 2)[1])
    channel = os.environ.get(CHANNEL_ENV, "")
    if not channel.isdigit():
        return False
    try:
        os.write(int(channel), f"{message}\n".encode())
    except OSError:
        return False  # no supervisor is listening any more (run by hand, or it died)
    _aim_reached(message)
    return True


_paused_from: list[str] = []
"""Where a pause timer was started from (``AIM_PAUSE_ENV``), for its ``paused`` line."""


_timer_paused: list[bool] = []
"""Set once the pause timer fired (``pause_left_at_exit`` then has nothing to do)."""


def _pause_by_timer(signum: int, frame: object) -> None:
    """The timer of a random-moment pause fired: tell the supervisor and stop the group."""
    del signum, frame
    _timer_paused.append(True)
    _stop_group(f"paused timer {_paused_from[-1] if _paused_from else ''}".rstrip())


def pause_left_at_exit() -> None:
    """A random-moment pause whose moment did not come before the work was done (its call
    never came in this life, or came and went sooner than the golden run's) lands here, at
    the agent's last point, as a random-time kill does (``EXIT_HOLD_POINT``)."""
    if os.environ.get(AIM_PAUSE_ENV) != "1" or _timer_paused:
        return
    signal.setitimer(signal.ITIMER_REAL, 0)
    _timer_paused.append(True)
    since = _paused_from[-1] if _paused_from else os.environ.get(AIM_ENV, "").rpartition("@")[0]
    _stop_group(f"paused timer {since or 'ready'} (at {EXIT_HOLD_POINT})")


def _pause_here(name: str, hit: int, detail: str) -> None:
    """Stop the whole process group here (SIGSTOP, which no process can catch or delay):
    the supervisor, told first, holds it stopped, starts the next life beside it, then
    sends SIGCONT, and the call goes on from this point. Nobody listening: no pause."""
    _stop_group(f"paused {name} {hit} {detail}".rstrip())


def _stop_group(told: str) -> None:
    """Tell the supervisor ``told`` (a ``paused`` line), then stop the whole process group;
    nobody listening: no pause."""
    if tell_supervisor(told):
        os.killpg(os.getpgrp(), signal.SIGSTOP)


def _kill_here(name: str, hit: int, detail: str) -> None:
    if tell_supervisor(f"reached {name} {hit} {detail}".rstrip()):
        deadline = time.monotonic() + _HANDSHAKE_TIMEOUT_S
        while time.monotonic() < deadline:
            time.sleep(0.05)  # SIGKILL arrives from outside while we wait
    os.kill(os.getpid(), signal.SIGKILL)
