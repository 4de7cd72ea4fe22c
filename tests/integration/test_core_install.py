"""The core install: ``pip install agent-crash-harness`` is the runtime alone, stdlib only.

A fresh venv (``python -m venv``) gets a non-editable install of the project without
extras, built by pip as a user's ``pip install`` would build it (an isolated build
environment with the ``[build-system]`` requirements: the venv's own setuptools may
be older than the one declared, or absent). In that venv the runtime imports and
survives real crashes (a process that dies inside a tool call, restarted on the
same journal), none of the harness's dependencies is installed, and a later
``pip install pytest`` (the plugin is registered by entry point, so pytest loads it
in every run) leaves a user's pytest run working.

Run time: about 8 s here, cache warm or not (the wheels come from local indexes):
``python -m venv`` with its ensurepip ~3 s, the isolated build and install ~2.5 s,
``pip install pytest`` ~1.5 s, the three lives and the import checks ~1 s. Marked
slow, but part of ``make test``. It needs only what pip's own index configuration
gives (this machine's local indexes, PyPI in CI). Everything lives in ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent
CONSTRAINTS = ROOT / "constraints.txt"

HARNESS_ONLY = (
    "pytest",
    "pydantic",
    "hypothesis",
    "faker",
    "rich",
    "psutil",
    "multiprocess",
    "mcp",
    "anyio",
)
"""Third-party modules of the extras: none may come with the core install."""

BOOTSTRAP = {"pip", "setuptools", "wheel"}
"""What ``python -m venv`` itself may put into a venv (setuptools up to Python 3.11)."""

PIP_TIMEOUT_S = 240

LIVES = '''
"""One life of an agent on the core install: python lives.py JOURNAL LEDGER LIFE."""
import json
import os
import sys

from harness.runtime import IdempotencyClass, Runtime, ToolTable

journal, ledger, life = sys.argv[1], sys.argv[2], int(sys.argv[3])
table = ToolTable.shipped().with_overrides(
    {"send_email": IdempotencyClass.NON_IDEMPOTENT, "write_note": IdempotencyClass.IDEMPOTENT_WRITE}
)
STEPS = [
    ("s1", "send_email", {"to": "a@b.c"}),
    ("s2", "write_note", {"text": "hello"}),
    ("s3", "send_email", {"to": "d@e.f"}),
]
dies_in = {1: "s2", 2: "s3"}.get(life)  # the op whose effect this life dies in


def execute(tool, args, ctx):
    with open(ledger, "a", encoding="utf-8") as f:  # the outside world: every execution
        f.write(f"{ctx.op_id} {tool}\\n")
        f.flush()
        os.fsync(f.fileno())
    if ctx.op_id == dies_in:
        os._exit(137)  # after the effect, before the runtime can journal its finish
    return {"done": ctx.op_id}


with Runtime.open(journal, table=table) as runtime:
    report = runtime.recover(execute)
    outcomes = {}
    for op_id, tool, args in STEPS:
        outcome = runtime.call(op_id, tool, args, execute)
        outcomes[op_id] = [outcome.status, outcome.executed]
print(json.dumps({
    "decisions": {d.op_id: d.decision.value for d in report.decisions},
    "hints": [h.op_id for h in report.hints],
    "retried": [[o.op_id, o.status] for o in report.retried],
    "outcomes": outcomes,
}))
'''
"""Three lives on one journal; the first two die inside a tool call (a real process exit)."""

USER_TEST = "def test_users_own() -> None:\n    assert 1 + 1 == 2\n"


def _env() -> dict[str, str]:
    """This environment (pip's index configuration included) without anything that
    would let the tmp venv see this project's venv or source tree."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH"}
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in drop and not k.startswith(("HARNESS_", "PYTEST_"))
    }
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    return env


def _run(
    cmd: list[str], cwd: Path, *, timeout: float = 60, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    if check:
        assert proc.returncode == 0, (
            f"{' '.join(cmd)} exited {proc.returncode}\n"
            f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
        )
    return proc


def _project_copy(dest: Path) -> Path:
    """What a build of the project reads (pyproject.toml, README.md, harness/).

    Copied so that pip's in-tree build writes its build/ and egg-info into tmp_path,
    never into the working tree other tests and engineers are using.
    """
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(
        ROOT / "harness", dest / "harness", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    return dest


@pytest.mark.long
@pytest.mark.slow
def test_core_install_is_the_runtime_alone(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    py = str(venv / "bin" / "python")
    src = _project_copy(tmp_path / "src")
    # An absolute path: a bare name ("src") would be looked up on the index.
    _run([py, "-m", "pip", "install", "-q", str(src)], tmp_path, timeout=PIP_TIMEOUT_S)
    work = tmp_path / "work"  # the cwd of every check: no harness/ beside it to import
    work.mkdir()

    listed = json.loads(_run([py, "-m", "pip", "list", "--format=json"], work).stdout)
    installed = {p["name"].lower() for p in listed} - BOOTSTRAP
    assert installed == {"agent-crash-harness"}, f"the core install pulled in {installed}"
    metadata = "import importlib.metadata as m, json; print(json.dumps(m.requires(DIST) or []))"
    requires = _run([py, "-c", metadata.replace("DIST", "'agent-crash-harness'")], work).stdout
    for line in json.loads(requires):  # every requirement belongs to an extra
        assert "extra ==" in line, f"an unconditional dependency: {line}"

    where = _run([py, "-c", "import harness.runtime as r; print(r.__file__)"], work).stdout
    assert Path(where.strip()).is_relative_to(venv), f"harness.runtime came from {where}"
    for module in HARNESS_ONLY:
        found = _run([py, "-c", f"import {module}"], work, check=False)
        assert found.returncode != 0, f"{module} is importable in the core venv"
        assert "ModuleNotFoundError" in found.stderr, found.stderr

    # A table from an MCP server is the one part of the runtime that needs an extra: it says so.
    no_sdk = "from harness.runtime import ToolTable\nToolTable.from_mcp(['true'])"
    refused = _run([py, "-c", no_sdk], work, check=False)
    assert "McpNotInstalledError" in refused.stderr, refused.stderr
    assert "pip install 'agent-crash-harness[mcp]'" in refused.stderr, refused.stderr

    # The runtime around a user's tools, through real crashes.
    (work / "lives.py").write_text(LIVES, encoding="utf-8")
    journal, ledger = work / "agent.journal", work / "ledger"
    lives = [
        _run([py, "lives.py", str(journal), str(ledger), str(n)], work, check=False)
        for n in (1, 2, 3)
    ]
    assert [p.returncode for p in lives] == [137, 137, 0], [p.stderr for p in lives]
    last = json.loads(lives[2].stdout)
    assert last == {
        "decisions": {"s1": "skip", "s2": "skip", "s3": "verify"},
        "hints": ["s3"],  # non-idempotent, left running: the model checks, nothing replays it
        "retried": [],
        "outcomes": {"s1": ["ok", False], "s2": ["ok", False], "s3": ["info", False]},
    }, lives[2].stdout
    executions = ledger.read_text("utf-8").split("\n")[:-1]
    # s2 (idempotent) was retried by the second life; s1 and s3 ran exactly once.
    assert executions == ["s1 send_email", "s2 write_note", "s2 write_note", "s3 send_email"]

    # The README's runtime example, as written, in the core venv.
    from tests.integration.test_readme_examples import example

    readme = tmp_path / "readme"
    readme.mkdir()
    (readme / "example.py").write_text(example("runtime"), encoding="utf-8")
    shown = _run([py, "example.py"], readme).stdout.strip().splitlines()
    assert shown[-1] == "ok {'message': 1}", shown

    # Without the harness extra the command line says which extra to install.
    cli = _run([py, "-m", "harness", "--help"], work, check=False)
    assert cli.returncode == 2 and "agent-crash-harness[harness]" in cli.stderr, cli.stderr
    assert "Traceback" not in cli.stderr, cli.stderr

    # pytest installed for other reasons loads the plugin; a user's run must not break.
    _run(
        [py, "-m", "pip", "install", "-q", "-c", str(CONSTRAINTS), "pytest"],
        work,
        timeout=PIP_TIMEOUT_S,
    )
    suite = tmp_path / "users_suite"
    suite.mkdir()
    (suite / "test_users_own.py").write_text(USER_TEST, encoding="utf-8")
    run = _run([py, "-m", "pytest", "-p", "no:cacheprovider", str(suite)], suite)
    assert "plugins: agent-crash-harness" in run.stdout, run.stdout
    assert "1 passed" in run.stdout, run.stdout
    for module in ("pydantic", "faker"):  # the plugin pulled in no extra
        assert _run([py, "-c", f"import {module}"], work, check=False).returncode != 0
