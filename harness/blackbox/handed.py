"""What a black box is handed in its environment, by its host (and by its warm start's zygote).

``agent_env`` is the one place that says it: the life's variables without the harness's own
(but the observer's), the model's and the tools' addresses, and its ``TMPDIR``.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from harness.blackbox import MCP_COMMAND_ENV, MCP_URL_ENV
from harness.chaos.observer import ENV_ROOT, ENV_TRACE

__all__ = ["BRIDGE", "OBSERVED", "agent_env"]

BRIDGE = Path(__file__).with_name("stdio_bridge.py")
OBSERVED = (ENV_TRACE, ENV_ROOT)
"""The harness's variables an agent keeps: those of the file-system observer, whose library
(``LD_PRELOAD``) is idle without them, so that a power loss sees what the agent does."""


def agent_env(base: str, environ: Mapping[str, str], temp: Path) -> dict[str, str]:
    """The agent's environment: the life's, without the harness's own variables (but the
    observer's, ``OBSERVED``), and what it is handed: the model (OpenAI's and Anthropic's
    variables), the tools (two ways), and ``temp`` as its ``TMPDIR``, so that what it (or
    its framework) leaves in a temporary folder stays in the trial folder and goes with it
    (CrewAI leaves lock files there)."""
    env = {k: v for k, v in environ.items() if not k.startswith("HARNESS_") or k in OBSERVED}
    env["TMPDIR"] = str(temp)
    env["OPENAI_BASE_URL"] = f"{base}/v1"
    env["OPENAI_API_KEY"] = "harness"  # any key: the model is the harness's
    env["ANTHROPIC_BASE_URL"] = base  # Anthropic's SDKs add /v1/messages themselves
    env["ANTHROPIC_API_KEY"] = "harness"
    env[MCP_URL_ENV] = f"{base}/mcp"
    env[MCP_COMMAND_ENV] = shlex.join([sys.executable, str(BRIDGE), f"{base}/mcp"])
    return env
