"""The guard tests need the SDKs of .venv-guards (`make test-guards`); `make test` leaves
them out, and so does any pytest run in an environment without them."""

from __future__ import annotations

import importlib.util

collect_ignore_glob = (
    []
    if importlib.util.find_spec("agents") and importlib.util.find_spec("google.adk")
    else ["*.py"]
)
