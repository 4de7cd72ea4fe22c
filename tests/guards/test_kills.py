"""Each guard in a real process SIGKILLed inside a tool call, restarted: paid once.

``kill_agents.py`` is the agent: its tool ``pay`` writes the invoice to a file
ledger (the effect, outside the journal) and, in the first life, SIGKILLs its own
process before or after that write. The second life runs the same conversation
again, as a run resumed after a crash does: the guard answers ``call-1`` with the
VERIFY hint, the model reads the ledger and reports, and the payment is redone once
only when it is absent. The ledger, not the journal, says how often it was paid.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runtime.records import IntentRecord, Resolution, ResolvedRecord
from tests.conftest import journal_records
from tests.integration.test_readme_examples import _env

AGENT = Path(__file__).with_name("kill_agents.py")
ROOT = Path(__file__).parents[2]


def _life(sdk: str, folder: Path, where: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(AGENT), sdk, str(folder), where],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("sdk", ["openai", "adk"])
@pytest.mark.parametrize(
    ("where", "resolution", "intents"),
    [
        ("after", Resolution.EFFECT_PRESENT, ["call-1", "call-1.check"]),
        ("before", Resolution.REDONE, ["call-1", "call-1.check", "call-1.redo"]),
    ],
)
def test_killed_in_a_tool_call_it_pays_once(
    sdk: str, where: str, resolution: Resolution, intents: list[str], tmp_path: Path
) -> None:
    first = _life(sdk, tmp_path, where)
    assert first.returncode == -signal.SIGKILL, first.stderr
    ledger = tmp_path / "ledger"
    assert (ledger.read_text().split() if ledger.exists() else []) == (
        ["A-17"] if where == "after" else []
    )
    second = _life(sdk, tmp_path, where)
    assert second.returncode == 0, second.stderr
    assert ledger.read_text().split() == ["A-17"]  # paid once in two lives
    lines = second.stdout.splitlines()
    assert lines[0] == "recovered call-1" and lines[-1] == "done", lines
    outputs = [json.loads(line.removeprefix("output ")) for line in lines[1:-1]]
    assert 'call report_verification with op_id "call-1"' in outputs[0]  # the VERIFY hint
    assert outputs[1] == ("yes" if where == "after" else "no")  # the model's check
    records = journal_records(tmp_path / "agent.journal")
    assert [r.op_id for r in records if isinstance(r, IntentRecord)] == intents
    resolved = [r for r in records if isinstance(r, ResolvedRecord)]
    assert [(r.op_id, r.resolution) for r in resolved] == [("call-1", resolution)], resolved
