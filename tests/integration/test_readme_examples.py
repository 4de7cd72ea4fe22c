"""The examples of the README and the docs pages run as written.

Each ``<!-- example: NAME ... -->`` marker in README.md or a page under docs/ is
followed by a ```python block; the test takes the block as it stands, writes it to a
file and runs it the way the page says: the runtime example as a script (twice:
the second run is answered from the journal the first left), the LangGraph guard
example likewise (under containment: it reaches no network), the adapter
example as ``--runtime module:my_agent`` in real trials.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runtime.records import IntentRecord
from tests.conftest import journal_records

ROOT = Path(__file__).resolve().parents[2]
MINI = ROOT / "tests" / "data" / "scenarios" / "mini.toml"


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def example(name: str) -> str:
    """The code block that follows the ``<!-- example: name`` marker of one page."""
    pattern = rf"<!-- example: {re.escape(name)}\b[^>]*-->\n```python\n(.*?)\n```"
    found = [
        m.group(1) for page in PAGES for m in re.finditer(pattern, page.read_text("utf-8"), re.S)
    ]
    assert len(found) == 1, f"example {name!r}: {len(found)} python blocks after its marker"
    return found[0] + "\n"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.update(extra)
    return env


def _run_script(script: Path) -> subprocess.CompletedProcess[str]:
    """Run an example as a script, in its own folder, without harness variables."""
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=script.parent,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


class TestQuickStart:
    def test_the_readme_quick_start_calls_once_in_two_runs(self, tmp_path: Path) -> None:
        """The README's quick start runs as a script twice: ``ok`` both times, and the
        call journaled (and so run) once, the second run answered from the journal."""
        script = tmp_path / "example.py"
        script.write_text(example("quick-start"), "utf-8")
        for _ in range(2):
            run = _run_script(script)
            assert run.returncode == 0, run.stderr
            assert run.stdout.splitlines() == ["ok"], run.stdout
        intents = [
            r.op_id
            for r in journal_records(tmp_path / "agent.journal")
            if isinstance(r, IntentRecord)
        ]
        assert intents == ["step-7"]


class TestRuntimeExample:
    def test_runs_as_written_and_is_answered_from_the_journal(self, tmp_path: Path) -> None:
        """The snippet runs as a script; run again, the same call is answered, not resent."""
        script = tmp_path / "example.py"
        script.write_text(example("runtime"), "utf-8")
        runs = [_run_script(script) for _ in range(2)]
        for run in runs:
            assert run.returncode == 0, run.stderr
            assert run.stdout.strip().splitlines()[-1] == "ok {'message': 1}", run.stdout
        assert (tmp_path / "agent.journal").exists()


class TestAsyncRuntimeExample:
    def test_runs_as_written_and_is_answered_from_the_journal(self, tmp_path: Path) -> None:
        """The async snippet runs as a script twice; the second run taps nothing again."""
        script = tmp_path / "example.py"
        script.write_text(example("async-runtime"), "utf-8")
        for _ in range(2):
            run = _run_script(script)
            assert run.returncode == 0, run.stderr
            assert run.stdout.splitlines() == ["0 to verify", "ok ok"], run.stdout
        intents = [
            r.op_id
            for r in journal_records(tmp_path / "agent.journal")
            if isinstance(r, IntentRecord)
        ]
        assert intents == ["turn3-a", "turn3-b"]  # each call journaled once, in two lives


class TestLangGraphGuardExample:
    def test_runs_as_written_offline_and_taps_once(self, tmp_path: Path) -> None:
        """The LangGraph agent with the guard runs twice under containment (no network);
        the second run's call is answered from the journal, not run again.

        Containment comes after the imports, as in every agent program: at import,
        urllib3 (under langsmith, which langchain-core imports) binds an IPv6 socket to
        ``::1`` to learn whether the host has IPv6, which containment would stop."""
        script = tmp_path / "example.py"
        script.write_text(example("langgraph-guard"), "utf-8")
        guarded = (
            "import langchain_core.language_models, langgraph.graph, langgraph.prebuilt; "
            "import harness.integrations.langgraph, runpy; "
            "from harness.agent.audit import install_containment; from pathlib import Path; "
            "install_containment(Path.cwd()); runpy.run_path('example.py', run_name='__main__')"
        )
        for _ in range(2):
            run = subprocess.run(
                [sys.executable, "-c", guarded],
                cwd=tmp_path,
                env=_env(),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert run.returncode == 0, run.stderr
            assert run.stdout.splitlines() == ["tapped pay"], run.stdout
        records = journal_records(tmp_path / "agent.journal")
        intents = [r.op_id for r in records if isinstance(r, IntentRecord)]
        assert intents == ["call-7"]  # journaled, and so run, once in two lives


class TestAdapterExample:
    @pytest.fixture
    def agent_dir(self, tmp_path: Path) -> Path:
        folder = tmp_path / "agent"
        folder.mkdir()
        shutil.copyfile(ROOT / "examples" / "my_agent.py", folder / "my_agent.py")
        return folder

    def _trial(
        self, agent_dir: Path, reports: Path, schedule: str, launch: str = "fork"
    ) -> tuple[int, str, dict[str, str]]:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness",
                "trial",
                str(MINI),
                "--seed",
                "3",
                "--runtime",
                "module:my_agent",
                "--schedule",
                schedule,
                "--reports",
                str(reports),
                "--launch",
                launch,
            ],
            cwd=ROOT,
            env=_env(PYTHONPATH=str(agent_dir)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        verdicts = {
            v["invariant"]: v["status"]
            for v in json.loads(next(reports.glob("*/trial/verdicts.json")).read_text())
        }
        return done.returncode, done.stdout + done.stderr, verdicts

    @pytest.mark.parametrize("launch", ["fork", "exec"])
    def test_holds_under_a_kill_before_the_effect(
        self, agent_dir: Path, tmp_path: Path, launch: str
    ) -> None:
        """A kill before step 2's effect: the restarted agent re-reports step 1, passes,
        forked or exec'd (the user's module on PYTHONPATH is found either way)."""
        code, output, verdicts = self._trial(
            agent_dir, tmp_path / "r", '[{"failpoints":"op.after_intent@2=kill"}]', launch
        )
        assert code == 0, output
        assert "Traceback" not in output
        assert verdicts["F"] == "pass" and verdicts["I7"] == "pass"

    def test_a_kill_after_the_effect_is_caught(self, agent_dir: Path, tmp_path: Path) -> None:
        """A kill between step 2's effect and its done-file: the replay fails I2, as it says."""
        code, output, verdicts = self._trial(
            agent_dir, tmp_path / "r", '[{"failpoints":"op.after_effect@2=kill"}]'
        )
        assert code == 1, output
        assert verdicts["I2"] == "fail" and verdicts["F"] == "pass"


class TestPydanticAiGuardExample:
    def test_runs_as_written_and_pays_once_in_two_runs(self, tmp_path: Path) -> None:
        """The guard snippet runs offline as a script twice: both runs end "done", the
        second answered from the journal the first left, so the invoice is paid once."""
        script = tmp_path / "example.py"
        script.write_text(example("pydantic-ai-guard"), "utf-8")
        outputs = []
        for _ in range(2):
            run = subprocess.run(
                [sys.executable, str(script)],
                cwd=tmp_path,
                env=_env(),
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert run.returncode == 0, run.stderr
            outputs.append(run.stdout.splitlines())
        assert outputs == [["paying A-17", "done"], ["done"]]
        intents = [
            r.op_id
            for r in journal_records(tmp_path / "agent.journal")
            if isinstance(r, IntentRecord)
        ]
        assert intents == ["call-1"]
