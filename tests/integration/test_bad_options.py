"""Bad options and schedules through the real command line: exit 2, one line, nothing run.

Each case runs ``python -m harness`` as a subprocess watched by the observer
of ``test_bad_input`` (it reports every process the interpreter starts): the
refusal must name the option or the schedule entry and the problem, print no
traceback, start no process and create no reports folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_bad_input import SPAWNED, observer, run_harness

__all__ = ["observer"]  # the fixture, imported for its use below

MINI = "tests/data/scenarios/mini.toml"

CASES: list[tuple[str, list[str], str]] = [
    ("unknown module", ["chaos", "--runtime", "module:nosuchmod"], "cannot import nosuchmod"),
    ("module without main", ["chaos", "--runtime", "module:os.path"], "has no main(argv)"),
    ("unknown runtime", ["chaos", "--runtime", "nosuch"], "unknown runtime 'nosuch'"),
    ("no workers", ["chaos", "--workers", "0"], "--workers: 0 is not at least 1"),
    ("negative workers", ["chaos", "--workers", "-1"], "--workers: -1 is not at least 1"),
    ("negative random", ["chaos", "--random", "-5"], "--random: -5 is not a count"),
    ("compare no workers", ["compare", "--workers", "0"], "--workers: 0 is not at least 1"),
    (
        "bogus power loss",
        ["trial", MINI, "--seed", "1", "--schedule", '[{"after_death":"power-loss:bogus"}]'],
        "life 1: 'power-loss:bogus': power-loss is drop",
    ),
    (
        "unknown failpoint",
        ["trial", MINI, "--seed", "1", "--schedule", '[{"failpoints":"op.nonsense@3=kill"}]'],
        "life 1: failpoints: entry 'op.nonsense@3=kill': unknown failpoint",
    ),
    (
        "unknown action",
        [
            "trial",
            MINI,
            "--seed",
            "1",
            "--schedule",
            '[{"failpoints":"op.after_effect@3=explode"}]',
        ],
        "unknown action 'explode'",
    ),
    (
        "negative kill time",
        ["trial", MINI, "--seed", "1", "--schedule", '[{"kill_after_ms":-3}]'],
        "life 1: kill_after_ms: -3 is not a number of milliseconds >= 0",
    ),
    (
        "aim without a kill time",
        ["trial", MINI, "--seed", "1", "--schedule", '[{"aim":"invoke s002"}]'],
        "life 1: aim: 'invoke s002' must be 'invoke <op>' or '<failpoint> <op>'",
    ),
    (
        "unknown table",
        ["trial", MINI, "--seed", "1", "--schedule", '[{"table":"mine"}]'],
        "life 1: table: 'mine' is not a table variant",
    ),
    (
        "schedule not json",
        ["trial", MINI, "--seed", "1", "--schedule", "[{"],
        "--schedule: not JSON",
    ),
    (
        "trial with an unknown module",
        ["trial", MINI, "--seed", "1", "--runtime", "module:nosuchmod"],
        "cannot import nosuchmod",
    ),
]


class TestBadOptions:
    @pytest.mark.parametrize(("case", "args", "says"), CASES, ids=[c[0] for c in CASES])
    def test_refused_before_anything_runs(
        self, case: str, args: list[str], says: str, tmp_path: Path, observer: Path
    ) -> None:
        """The bad option or schedule entry exits 2 naming it; no process, no run folder."""
        reports = tmp_path / "r"
        done = run_harness(*args, "--reports", str(reports), observer=observer)
        assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr)
        assert says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr + done.stdout
        assert SPAWNED not in done.stderr
        assert not reports.exists()
