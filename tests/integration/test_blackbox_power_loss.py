"""A black box loses power: its files and its children's are rebuilt from what they asked.

A tiny ``cmd:`` agent first has a child it starts append to ``notes.txt`` without fsync,
makes ``durable.txt`` durable itself (written, fsynced, its folder fsynced: the child's
file's name too), then becomes the plain example agent, whose ``progress.jsonl`` is
never fsynced. Killed and cut, the
unsynced bytes must be lost (or the trial left unjudged), never kept, and the synced ones
kept. A program the library cannot load into (a statically linked one where the tracer
cannot run, or one set-user-ID to another user) is refused a power loss in one line
before anything runs; that it is truly unseen is shown by running it under the library
beside the same program dynamically linked and not set-ID.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.adapters import black_box
from harness.chaos import observer
from harness.chaos.schedule import not_applicable
from tests.integration.test_blackbox import AGENT, PHONE, ROOT, harness

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the observer interposes Linux's C library"
)

NOTES = 1000
WRITES_THEN_RUNS_THE_AGENT = """\
import os, subprocess, sys
# A child it starts appends to a file of the trial folder and never fsyncs it.
child = "open('notes.txt', 'a').write('x' * {notes})"
subprocess.run([sys.executable, "-c", child], check=True)
# It makes one file durable: written, fsynced, its folder fsynced.
fd = os.open("durable.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"kept" * 100)
os.fsync(fd)
os.close(fd)
folder = os.open(".", os.O_RDONLY)
os.fsync(folder)
os.close(folder)
os.execv(sys.executable, [sys.executable, {agent!r}])
"""

CUT_AT_THE_SECOND_MODEL_REQUEST = (
    '[{"failpoints":"model.received@2=kill","after_death":"power-loss:drop"}]'
)


def test_unsynced_files_of_a_black_box_and_its_child_are_lost_synced_ones_kept(
    tmp_path: Path,
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(WRITES_THEN_RUNS_THE_AGENT.format(notes=NOTES, agent=str(ROOT / AGENT)))
    reports = tmp_path / "reports"
    ran = harness(
        "trial",
        PHONE,
        "--seed",
        "7",
        "--runtime",
        f"cmd:python {script}",
        "--schedule",
        CUT_AT_THE_SECOND_MODEL_REQUEST,
        "--reports",
        str(reports),
    )
    (folder,) = reports.glob("*-trial/trial")
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    (cut,) = [e for e in events if e["event"] == "fault"]
    verdicts = {v["invariant"]: v for v in json.loads((folder / "verdicts.json").read_text())}
    if not cut["landed"]:  # a change the observer did not see: unjudged, never passed
        assert verdicts["F"]["status"] == "unknown", verdicts["F"]
        pytest.fail(f"a dynamically linked Python agent should be observed: {cut['why']}")
    files = cut["files"]
    assert files["notes.txt"]["lost"] == NOTES and files["notes.txt"]["kept"] == 0, files
    assert files["progress.jsonl"]["kept"] == 0 and files["progress.jsonl"]["lost"] > 0, files
    # The agent's folder fsync made the name of the child's file durable, not its data: it
    # comes back empty. The conversation, made after that fsync, comes back not at all.
    assert "notes.txt" not in cut["removed"] and "progress.jsonl" in cut["removed"], cut
    assert files["durable.txt"]["kept"] == 400 and files["durable.txt"]["lost"] == 0, files
    # The notes were written by another process than the agent's: the child was followed.
    trace = observer.read_trace(folder / observer.TRACE_FOLDER)
    writers = {
        name: {line.pid for line in trace if line.kind == "write" and line.paths[0].endswith(name)}
        for name in ("notes.txt", "progress.jsonl")
    }
    assert writers["notes.txt"] and writers["progress.jsonl"]
    assert not writers["notes.txt"] & writers["progress.jsonl"], writers
    # The plain agent's conversation is gone: restarted, it does the task again.
    assert verdicts["F"]["status"] == "pass", verdicts["F"]
    assert verdicts["I1"]["status"] == "fail", verdicts["I1"]
    assert "s001 (app_install) ran again in life 2" in str(verdicts["I1"]["evidence"])
    assert ran.returncode == 1, ran.stderr


STATIC_SOURCE = r"""
#include <stdio.h>
int main(void) {
    FILE *f = fopen("written.txt", "w");
    if (!f) return 1;
    fputs("never synced", f);
    return fclose(f) != 0;
}
"""


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same C program built statically and dynamically (skipped with no way to)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a statically linked program")
    folder = tmp_path_factory.mktemp("programs")
    (folder / "writes.c").write_text(STATIC_SOURCE)
    built = {}
    for how, flags in (("static", ["-static"]), ("dynamic", [])):
        done = subprocess.run(
            [cc, *flags, "-o", str(folder / how), str(folder / "writes.c")],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot build a {how} program here: {done.stderr.strip()[-200:]}")
        built[how] = folder / how
    return built["static"], built["dynamic"]


def test_a_statically_linked_program_is_truly_unseen_by_the_library(
    programs: tuple[Path, Path], tmp_path: Path
) -> None:
    """Run under the library, the dynamic build's file is traced, the static build's not."""
    lib = observer.library()
    assert lib is not None, observer.unavailable()
    traced = {}
    for program in programs:
        root = tmp_path / program.name
        root.mkdir()
        observer.start_trace(root)
        env = {**os.environ, **observer.observer_env(root, lib)}
        subprocess.run([str(program)], cwd=root, env=env, check=True)
        assert (root / "written.txt").read_text() == "never synced"
        lines = observer.read_trace(root / observer.TRACE_FOLDER)
        traced[program.name] = [line.kind for line in lines if line.kind != "baseline"]
    assert traced["dynamic"][:1] == ["create"], traced
    assert traced["static"] == [], traced


def test_a_statically_linked_agent_is_refused_power_loss_in_one_line(
    programs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the tracer: refused before any run (no reports folder), exit 2; and not
    applicable in a campaign."""
    static, dynamic = programs
    assert observer.library() is not None, observer.unavailable()
    monkeypatch.setenv(observer.ENV_TRACER_SWITCH, "off")
    why = not_applicable("power-loss", black_box(f"cmd:{static} --flag"))
    assert why == (
        f"cmd:{static} --flag cannot be observed: {static} is statically linked: no loader "
        f"preloads the observer's library into it; the tracer is turned off "
        f"({observer.ENV_TRACER_SWITCH}=off)"
    )
    assert not_applicable("power-loss", black_box(f"cmd:{dynamic}")) is None
    # Behind env and its settings, as a scenario's [agent] table writes it.
    behind_env = black_box(f"cmd:env GREETING=hi {static}")
    assert "statically linked" in (not_applicable("power-loss", behind_env) or "")
    reports = tmp_path / "reports"
    ran = harness(
        "trial",
        PHONE,
        "--seed",
        "7",
        "--runtime",
        f"cmd:{static}",
        "--schedule",
        CUT_AT_THE_SECOND_MODEL_REQUEST,
        "--reports",
        str(reports),
        **{observer.ENV_TRACER_SWITCH: "off"},
    )
    assert ran.returncode == 2, ran.stderr
    (said,) = ran.stderr.strip().splitlines()
    refused = not_applicable("power-loss", black_box(f"cmd:{static}"))
    assert said == f"harness: --schedule: no power loss for it: {refused}"
    assert not reports.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a program set-user-ID to another needs root")
def test_a_set_user_id_program_is_unseen_and_refused(
    programs: tuple[Path, Path], tmp_path: Path
) -> None:
    """The dynamic build made set-user-ID to nobody: the loader ignores ``LD_PRELOAD`` for
    it (no trace line), and power loss is refused for it, saying why."""
    _, dynamic = programs
    lib = observer.library()
    assert lib is not None, observer.unavailable()
    program = tmp_path / "set-id"
    shutil.copy(dynamic, program)
    os.chown(program, 65534, -1)  # nobody
    os.chmod(program, 0o4755)
    root = tmp_path / "root"
    root.mkdir()
    observer.start_trace(root)
    for folder in (root, root / observer.TRACE_FOLDER):
        os.chmod(folder, 0o777)  # it runs as nobody
    env = {**os.environ, **observer.observer_env(root, lib)}
    subprocess.run([str(program)], cwd=root, env=env, check=True)
    assert (root / "written.txt").read_text() == "never synced"
    lines = observer.read_trace(root / observer.TRACE_FOLDER)
    assert [line.kind for line in lines if line.kind != "baseline"] == []
    assert not_applicable("power-loss", black_box(f"cmd:{program}")) == (
        f"cmd:{program} cannot be observed: {program} is set-user-ID or set-group-ID: the "
        "loader ignores LD_PRELOAD there"
    )
