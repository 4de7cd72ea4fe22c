"""Small run folders: which trial folders a campaign keeps, and what every trial leaves.

A campaign of the mini scenario runs through the real command line twice, with
the default ``--keep sample`` and with ``--keep all``; a third uses a broken
runtime so that failing trials exist. The run folder, ``trials.jsonl`` and the
summary are read back.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.chaos.keep import TRIALS_FILE, result_from_record, sampled, trial_record
from tests.integration.conftest import MINI as MINI_PATH

MINI = Path(MINI_PATH)

ROOT = Path(__file__).resolve().parents[2]


def _chaos(reports: Path, *args: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    scenarios = reports / "scenarios"
    scenarios.mkdir(parents=True, exist_ok=True)
    (scenarios / MINI.name).write_text(MINI.read_text("utf-8"), "utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "chaos",
            "--scenarios",
            str(scenarios),
            "--seed",
            "5",
            "--random",
            "20",
            "--no-self-check",
            "--reports",
            str(reports / "runs"),
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    (run_dir,) = (reports / "runs").iterdir()
    return run_dir, done


def _records(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / TRIALS_FILE).read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    run_dir, done = _chaos(tmp_path_factory.mktemp("sample"))
    assert done.returncode == 0, done.stdout + done.stderr
    return run_dir, done.stdout


def test_the_default_keeps_a_sample_and_every_trial_has_its_line(
    sampled_run: tuple[Path, str],
) -> None:
    run_dir, stdout = sampled_run
    records = _records(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text("utf-8"))
    assert len(records) == summary["trials"] == len({r["trial"] for r in records})
    folders = {p.name for p in (run_dir / "trials").iterdir()}
    expected = {r["trial"] for r in records if r["status"] != "pass" or sampled(r["trial"])}
    assert folders == expected
    assert summary["kept_folders"] == len(folders) < len(records)
    # A kept world is folded into one file once checked (the same rows, less space).
    kept = [*(run_dir / "trials").iterdir(), *(run_dir / "golden").iterdir()]
    assert all((f / "world.db").exists() and not (f / "world.db-wal").exists() for f in kept)
    for record in records:
        assert (record["folder"] is None) == (record["trial"] not in folders)
        assert "-m harness trial" in record["spec"]["replay"]
    # A random trial whose folder went took its golden run with it.
    goldens = {p.name for p in (run_dir / "golden").iterdir()}
    gone = [r for r in records if r["folder"] is None and r["spec"]["kind"] == "random"]
    assert gone and all(
        f"{Path(r['spec']['scenario']).stem}-{r['spec']['seed']}" not in goldens for r in gone
    )
    assert f"{len(folders)} of {len(records)} trials kept their folder" in stdout
    assert "trials/s" in stdout


def test_a_trial_without_a_folder_replays_from_its_line(
    sampled_run: tuple[Path, str], tmp_path: Path
) -> None:
    """The record's replay command runs that trial again, to the same verdicts."""
    run_dir, _ = sampled_run
    record = next(r for r in _records(run_dir) if r["folder"] is None)
    command = shlex.split(record["spec"]["replay"])
    command[0] = sys.executable
    done = subprocess.run(
        [*command, "--reports", str(tmp_path)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = json.loads(next(tmp_path.glob("*/trial/verdicts.json")).read_text("utf-8"))
    assert [(v["invariant"], v["status"]) for v in verdicts] == [
        (v["invariant"], v["status"]) for v in record["verdicts"]
    ]


def test_a_record_rebuilds_the_result(sampled_run: tuple[Path, str]) -> None:
    run_dir, _ = sampled_run
    for record in _records(run_dir)[:20]:
        result = result_from_record(record, run_dir)
        assert result.kept == (record["folder"] is not None)
        assert trial_record(result, run_dir) == record


@pytest.mark.long
def test_keep_all_keeps_every_folder(tmp_path: Path) -> None:
    run_dir, done = _chaos(tmp_path, "--keep", "all")
    assert done.returncode == 0, done.stdout + done.stderr
    records = _records(run_dir)
    assert {p.name for p in (run_dir / "trials").iterdir()} == {r["trial"] for r in records}
    assert all(r["folder"] == f"trials/{r['trial']}" for r in records)


@pytest.mark.long
def test_failing_trials_keep_their_folder(tmp_path: Path) -> None:
    """Every trial a broken runtime fails keeps its whole folder under the default."""
    run_dir, done = _chaos(tmp_path, "--runtime", "drop-verify-hint")
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [r for r in _records(run_dir) if r["status"] == "fail"]
    assert failed
    for record in failed:
        folder = run_dir / record["folder"]
        assert (folder / "journal").exists() and (folder / "world.db").exists()
