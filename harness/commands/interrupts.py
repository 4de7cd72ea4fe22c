"""Ctrl-C and SIGTERM on the command line: the handler, the signals received, and the
moment a command's result is final.

Every signal interrupts the command it lands in (the handler raises ``KeyboardInterrupt``)
until the command says its result is final: its reports written and its last line
printed. From then on a signal is held, and dropped at exit: it came after the result it
would interrupt, and exit status 130 beside a report that says the run completed would
disagree with it.
"""

from __future__ import annotations

import signal
from types import FrameType

__all__ = ["SIGNALS", "drop_held", "on_signal", "received", "result_final", "start"]

SIGNALS = {signal.SIGINT, signal.SIGTERM}

received: list[int] = []
"""The signals that interrupted the command, first first."""

_final = False


def start() -> None:
    """A command begins: nothing received, nothing final."""
    global _final
    received.clear()
    _final = False


def on_signal(signum: int, frame: FrameType | None) -> None:
    received.append(signum)
    raise KeyboardInterrupt  # for SIGTERM too: the status is 128 + the first signal


def result_final() -> None:
    """The command's result is written and told: hold every signal from here on."""
    global _final
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    _final = True


def drop_held() -> None:
    """With the result final, drop the signals held since (call with them blocked)."""
    while _final and signal.sigtimedwait(SIGNALS, 0) is not None:
        pass
