"""The runtime's log: standard ``logging`` under the logger ``harness.runtime``.

What it logs: a torn tail cut at open and a journal given its identity
(warning), every recovery decision and every VERIFY hint handed over (info),
a failed append (error), a call cancelled or interrupted inside its tool
(warning). Configure it as any library's logger.

``logging`` is imported only when it is needed: it costs a process several
milliseconds, and an agent restarted after every crash pays its start-up
each time. A warning or an error imports it and is logged. An info line is
logged only if the program has imported ``logging`` itself: one that never
did has configured no handler, so the line would go nowhere.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["LOGGER_NAME", "error", "info", "warning"]

LOGGER_NAME = "harness.runtime"


def info(message: str, *args: object) -> None:
    logging: Any = sys.modules.get("logging")
    if logging is not None:
        logging.getLogger(LOGGER_NAME).info(message, *args)


def warning(message: str, *args: object) -> None:
    import logging

    logging.getLogger(LOGGER_NAME).warning(message, *args)


def error(message: str, *args: object) -> None:
    import logging

    logging.getLogger(LOGGER_NAME).error(message, *args)
