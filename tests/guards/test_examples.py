"""The docs' guard examples for the OpenAI Agents SDK and Google ADK, run as written, twice.

Each runs offline under containment (no socket but Unix ones, no write outside its
folder), its imports first, as the LangGraph guard example's test does: urllib3 binds an
IPv6 socket to ``::1`` at import to learn whether the host has IPv6, and ADK imports it
lazily. The second run's call is answered from the journal the first left: paid once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.runtime.records import IntentRecord
from tests.conftest import journal_records
from tests.integration.test_readme_examples import _env, example

CONTAINED = (
    "import runpy, urllib3, {imports}; "
    "from harness.agent.audit import install_containment; from pathlib import Path; "
    "install_containment(Path.cwd()); runpy.run_path('example.py', run_name='__main__')"
)


@pytest.mark.parametrize(
    ("name", "imports", "first", "second"),
    [
        (
            "openai-agents-guard",
            "agents, agents.testing, harness.integrations.openai_agents",
            ["paying A-17", "paid done"],
            ["paid done"],
        ),
        (
            "adk-guard",
            "google.adk.agents, google.adk.runners, google.genai, harness.integrations.adk",
            ["paying A-17", "paid", "done"],
            ["paid", "done"],
        ),
    ],
)
def test_runs_as_written_offline_and_pays_once(
    name: str, imports: str, first: list[str], second: list[str], tmp_path: Path
) -> None:
    (tmp_path / "example.py").write_text(example(name), "utf-8")
    outputs = []
    for _ in range(2):
        run = subprocess.run(
            [sys.executable, "-c", CONTAINED.format(imports=imports)],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        assert "containment" not in run.stderr, run.stderr
        outputs.append(run.stdout.splitlines())
    assert outputs == [first, second]
    intents = [
        r.op_id for r in journal_records(tmp_path / "agent.journal") if isinstance(r, IntentRecord)
    ]
    assert intents == ["call-1"]  # journaled, and so run, once in two lives
