"""Which window of the write-ahead protocol a random-time kill landed in.

A kill at a random moment has no failpoint to name it; afterwards the journal
and the ledger tell where the victim stood:

- ``start-up``: before the life's first append (no incarnation record: it
  goes out with the life's first decisions);
- ``during recovery``: the incarnation began but never finished recovering;
- ``before intent``: recovered, and the call the life invoked last has no
  intent yet (none in this life, or a new call after a finish);
- ``intent-effect``: the last intent has no ledger row (the effect had not run);
- ``effect-finish``: the effect ran (ledger row) but the finish was not written;
- ``batch in flight``: two calls or more had their intents and no finish yet (the
  calls of a batch, run at once), whatever their effects;
- ``after finish``: the last op of the life had finished, and no new call
  was invoked since (its reply on its way to the model, or a call the journal
  answered without an intent);
- ``held at exit``: the moment came after the life's work, and the kill
  landed at its last point (``agent.before_exit``), before it could exit.

A black box keeps no journal: its kills are placed by what the harness's servers
saw of its life last (``harness.blackbox.windows``).
"""

from __future__ import annotations

from harness.agent.plan import plan_id
from harness.check.evidence import TrialEvidence

__all__ = ["EXIT_HOLD_POINT", "WINDOWS", "kill_windows"]

EXIT_HOLD_POINT = "agent.before_exit"
"""The agent's last failpoint (``harness.failpoints.EXIT_HOLD_POINT``, which imports the
runtime's hooks; a unit test holds the two equal)."""

WINDOWS = (
    "start-up",
    "during recovery",
    "before intent",
    "intent-effect",
    "effect-finish",
    "batch in flight",
    "after finish",
    "held at exit",
)


def kill_windows(ev: TrialEvidence) -> list[str]:
    """The window of each random-time kill of the trial, in life order."""
    from harness.blackbox.windows import black_box_window, is_black_box_trial

    black_box = is_black_box_trial(ev.trial_dir)
    windows = []
    for life in ev.lives:
        if life.killed != "timed":
            continue
        if (life.reached or "").startswith(EXIT_HOLD_POINT):
            windows.append("held at exit")
        elif black_box:  # no journal: where the harness's servers saw it last
            windows.append(black_box_window(ev.trial_dir, life.pid))
        else:
            windows.append(_window(ev, life.life, life.pid))
    return windows


def _window(ev: TrialEvidence, life: int, pid: int) -> str:
    wrote = ev.entries_of(life)
    if not wrote:
        return "start-up"
    if not any(e.kind == "recovered" for e in wrote):
        return "during recovery"
    in_flight: set[str | None] = set()
    for entry in wrote:
        if entry.kind == "intent":
            in_flight.add(entry.op_id)
        elif entry.kind == "finish":
            in_flight.discard(entry.op_id)
    if len(in_flight) > 1:
        return "batch in flight"
    last = next((e for e in reversed(wrote) if e.kind in ("intent", "finish")), None)
    if last is None:
        return "before intent"
    if last.kind == "finish":
        return "before intent" if _new_call_invoked(ev, life) else "after finish"
    ran = any(e.op_id == last.op_id and e.pid == pid for e in ev.ledger)
    return "effect-finish" if ran else "intent-effect"


def _new_call_invoked(ev: TrialEvidence, life: int) -> bool:
    """Whether the call the life invoked last has no intent in the journal as the life
    left it (a later life may write one when it makes the call again)."""
    invoked = [h["op"] for h in ev.history if h["type"] == "invoke" and int(h["life"]) == life]
    _, end = ev.span_of(life)
    # A call re-issued under a new id (s003~2) has an intent when its plan call has one.
    return bool(invoked) and not any(
        e.kind == "intent"
        and e.op_id is not None
        and plan_id(e.op_id) == plan_id(invoked[-1])
        and e.offset < end
        for e in ev.entries
    )
