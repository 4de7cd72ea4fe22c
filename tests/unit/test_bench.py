"""Benchmarks: the arithmetic of figures, the report file, the CLI's refusals, one smoke run.

Nothing here asserts a time: a figure's value is the machine's business; the
tests only check that figures are computed, judged and written as documented.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, ClassVar

import pytest

import harness.bench
from harness import cli
from harness.bench import BenchError, BenchReport, Figure, Target, interleave, median_of
from harness.bench.cycles import cycle_scenario_text
from harness.bench.plot import plot_scaling
from harness.bench.run import (
    QUICK,
    Measurements,
    bench_batch,
    bench_failpoint,
    bench_planning,
    bench_restarts,
    bench_threads,
)
from harness.bench.scaling import synthetic_journal
from harness.bench.startup import parse_importtime, stdlib_floor_command
from harness.chaos.scenario import parse_scenario
from harness.commands.bench import EXIT_BAD_ARGUMENTS, main
from harness.runtime.journal import scan_bytes


class TestMedian:
    def test_odd_count(self) -> None:
        """The median of an odd count is the middle sample."""
        assert median_of([5.0, 1.0, 3.0]) == 3.0

    def test_even_count(self) -> None:
        """The median of an even count is the mean of the two middle samples."""
        assert median_of([4.0, 1.0, 2.0, 3.0]) == 2.5

    def test_empty_is_refused(self) -> None:
        """No samples is an error, never a zero."""
        with pytest.raises(BenchError):
            median_of([])


class TestTarget:
    def test_at_least(self) -> None:
        """A lower bound holds at the bound and above it."""
        target = Target(low=1.0)
        assert target.holds(1.0) and target.holds(3.0) and not target.holds(0.99)

    def test_at_most(self) -> None:
        """An upper bound holds at the bound and below it."""
        target = Target(high=1.25)
        assert target.holds(1.25) and target.holds(0.5) and not target.holds(1.26)

    def test_band(self) -> None:
        """A band holds inside, at both edges, and nowhere else."""
        target = Target(0.85, 1.15)
        assert [target.holds(r) for r in (0.84, 0.85, 1.0, 1.15, 1.16)] == [
            False,
            True,
            True,
            True,
            False,
        ]

    def test_nan_never_holds(self) -> None:
        """A ratio that could not be computed holds no target."""
        assert not Target(high=10.0).holds(math.nan)

    @pytest.mark.parametrize(
        ("target", "text"),
        [
            (Target(low=1.0), "≥ 1x"),
            (Target(high=1.25), "≤ 1.25x"),
            (Target(0.85, 1.15), "0.85-1.15x"),
            (Target(low=0.5, moonshot=True), "≥ 0.5x (moonshot)"),
        ],
    )
    def test_describe(self, target: Target, text: str) -> None:
        """A target prints as its bound and the ratio sign."""
        assert target.describe() == text

    @pytest.mark.parametrize("bounds", [(None, None), (2.0, 1.0)])
    def test_bad_bounds_are_refused(self, bounds: tuple[float | None, float | None]) -> None:
        """A target without a bound, or with an empty band, is refused."""
        with pytest.raises(ValueError):
            Target(*bounds)


class TestFigure:
    def test_ratio_is_subject_over_baseline(self) -> None:
        """The ratio is subject / baseline and is judged by the target."""
        figure = Figure("f", 3.0, 2.0, "ms", Target(high=1.25))
        assert figure.ratio == 1.5
        assert figure.holds is False and figure.verdict == "misses"

    def test_no_target_is_information(self) -> None:
        """A figure without a target neither holds nor misses."""
        figure = Figure("f", 1.0, 2.0, "ms")
        assert figure.holds is None and figure.verdict == "—"

    def test_zero_baseline(self) -> None:
        """A zero baseline gives no ratio (null in JSON) and misses its target."""
        figure = Figure("f", 1.0, 0.0, "ms", Target(low=1.0))
        assert math.isnan(figure.ratio) and figure.holds is False
        assert figure.to_json()["ratio"] is None


class TestInterleave:
    def test_rounds_alternate(self) -> None:
        """Subjects run A B A B ..., one sample each per round."""
        calls: list[str] = []

        def subject(name: str, value: float) -> float:
            calls.append(name)
            return value

        samples = interleave(
            {"a": lambda: subject("a", 1.0), "b": lambda: subject("b", 2.0)}, repeats=3
        )
        assert calls == ["a", "b", "a", "b", "a", "b"]
        assert samples == {"a": [1.0, 1.0, 1.0], "b": [2.0, 2.0, 2.0]}

    def test_no_rounds_is_refused(self) -> None:
        """Zero repeats would give no samples: refused."""
        with pytest.raises(ValueError):
            interleave({"a": lambda: 1.0}, repeats=0)


class TestReport:
    def test_written_json(self, tmp_path: Path) -> None:
        """The report lands at <out>/<run-id>.json with every documented field."""
        figures = (
            Figure("holds", 1.0, 1.0, "ms", Target(high=1.5)),
            Figure("misses", 3.0, 1.0, "ms", Target(high=1.5)),
        )
        report = BenchReport("run-1", {"cpu_count": 2}, figures, notes=("no plot",))
        path = report.write(tmp_path / "bench")
        assert path == tmp_path / "bench" / "run-1.json"
        assert sorted(p.name for p in path.parent.iterdir()) == ["run-1.json"]
        data = json.loads(path.read_text("utf-8"))
        assert data["run_id"] == "run-1" and data["machine"] == {"cpu_count": 2}
        assert [f["holds"] for f in data["figures"]] == [True, False]
        assert data["figures"][1] == {
            "name": "misses",
            "subject": 3.0,
            "baseline": 1.0,
            "unit": "ms",
            "ratio": 3.0,
            "target": "≤ 1.5x",
            "holds": False,
            "note": "",
        }
        assert data["broken"] == [] and report.misses == (figures[1],)


class TestHelpers:
    def test_importtime_lines(self) -> None:
        """-X importtime lines parse into module, self and cumulative microseconds."""
        text = (
            "import time: self [us] | cumulative | imported package\n"
            "import time:       120 |        120 |   _io\n"
            "import time:      3804 |       7524 |           harness.runtime.records\n"
            "something else\n"
        )
        entries = parse_importtime(text)
        assert [(e.module, e.self_us, e.cumulative_us) for e in entries] == [
            ("_io", 120, 120),
            ("harness.runtime.records", 3804, 7524),
        ]

    @pytest.mark.parametrize("records", [1, 2, 19, 20, 21])
    def test_synthetic_journal_size(self, records: int) -> None:
        """A synthetic journal holds exactly the records asked for, all provable."""
        scan = scan_bytes(synthetic_journal(records))
        assert len(scan.records) == records and scan.torn is None

    def test_cycle_scenario_is_valid(self) -> None:
        """The cycle-rate scenario is a valid scenario of distinct writes."""
        scenario = parse_scenario(cycle_scenario_text(8), source="<test>")
        assert len(scenario.steps) == 8


class TestCli:
    @pytest.mark.parametrize(
        "argv", [["--cycles", "0"], ["--cycles", "many"], ["--no-such-option"]]
    )
    def test_bad_arguments_exit_2(self, argv: list[str]) -> None:
        """Bad arguments exit 2 before anything is measured."""
        assert main(argv) == EXIT_BAD_ARGUMENTS

    def test_out_must_be_a_directory(self, tmp_path: Path) -> None:
        """--out naming a file exits 2."""
        file = tmp_path / "file"
        file.write_text("x")
        assert main(["--out", str(file), "--quick"]) == EXIT_BAD_ARGUMENTS

    def test_the_bench_sub_command_refuses_the_same(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``python -m harness bench`` takes the same options and refuses the same input."""
        file = tmp_path / "file"
        file.write_text("x")
        assert cli.main(["bench", "--out", str(file), "--quick"]) == EXIT_BAD_ARGUMENTS
        assert "python -m harness bench: error: --out" in capsys.readouterr().err
        with pytest.raises(SystemExit) as exc:
            cli.main(["bench", "--cycles", "0"])
        assert exc.value.code == EXIT_BAD_ARGUMENTS


class TestSmoke:
    def test_failpoint_and_planning(self, tmp_path: Path) -> None:
        """The failpoint and planning benchmarks, with tiny counts, give a well-formed report."""
        tiny = dataclasses.replace(
            QUICK,
            failpoint_loops=1_000,
            failpoint_repeats=2,
            planning_sizes=(10, 100),
            planning_records=200,
            planning_repeats=2,
        )
        measured = Measurements()
        bench_failpoint(tiny, measured)
        bench_planning(tiny, measured)
        report = BenchReport("smoke", harness.bench.machine_info(), tuple(measured.figures))
        data = json.loads(report.write(tmp_path).read_text("utf-8"))
        assert set(data) >= {"run_id", "machine", "figures"}
        assert set(data["machine"]) >= {"cpu_count", "python", "platform"}
        assert len(data["figures"]) == 2
        for figure in data["figures"]:
            assert set(figure) >= {
                "name",
                "subject",
                "baseline",
                "unit",
                "ratio",
                "target",
                "holds",
            }
            assert figure["subject"] > 0 and figure["baseline"] > 0
            assert isinstance(figure["holds"], bool)
        assert [p["records"] for p in measured.series["planning"]] == [10, 100]


class TestPublicFace:
    def test_all_is_what_is_exported(self) -> None:
        """``harness.bench.__all__`` names exactly its public, non-module attributes."""
        public = {
            name
            for name, value in vars(harness.bench).items()
            if not name.startswith("_") and not isinstance(value, types.ModuleType)
        }
        assert set(harness.bench.__all__) == public
        assert len(harness.bench.__all__) == len(public)


class TestPlot:
    SERIES: ClassVar[dict[str, Any]] = {
        "campaigns": [
            {"trials": t, "workers": w, "trials_per_s": 30.0 / w, "worker_rss_bytes": 4e7}
            for t, w in ((20, 2), (20, 1), (60, 2), (20, 2))
        ],
        "planning": [
            {
                "records": n,
                "scan_us_per_record": 6.0,
                "fold_plan_us_per_record": 1.0,
                "total_us_per_record": 7.0,
            }
            for n in (10, 100, 1000)
        ],
    }

    def test_writes_a_png(self, tmp_path: Path) -> None:
        """The scaling series become a PNG file beside the report."""
        path = tmp_path / "run.png"
        assert plot_scaling(self.SERIES, path) is None
        assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    def test_without_matplotlib_says_why(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """No matplotlib: no file, and a note naming the reason."""
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        note = plot_scaling(self.SERIES, tmp_path / "run.png")
        assert note is not None and "matplotlib" in note
        assert not (tmp_path / "run.png").exists()

    def test_nothing_measured_draws_nothing(self, tmp_path: Path) -> None:
        assert plot_scaling({}, tmp_path / "run.png") is not None
        assert not (tmp_path / "run.png").exists()


def test_the_start_up_floor_imports_the_agents_stdlib_and_nothing_of_ours() -> None:
    """The floor is the standard library the agent brings in, runnable on its own."""
    command = stdlib_floor_command()
    modules = command[-1].removeprefix("import ").split(", ")
    assert {"sqlite3", "json", "signal"} <= set(modules)
    assert not any(m.startswith("harness") for m in modules)
    assert subprocess.run(command, capture_output=True, check=False).returncode == 0


def test_the_batch_figure(tmp_path: Path) -> None:
    """The batch figure: a batch's calls share two journal writes, whatever the timing."""
    measured = Measurements()
    bench_batch(dataclasses.replace(QUICK, calls=16, call_repeats=1), tmp_path, measured)
    (figure,) = measured.figures
    assert figure.name == "2 batch of 8 calls / 8 calls one after another"
    assert "a batch took 2.0 journal writes, the calls one after another 16" in figure.note
    assert figure.subject > 0 and figure.baseline > 0  # measured, never asserted as a speed
    assert list(tmp_path.iterdir()) == []  # its scratch is gone


def test_the_restart_and_thread_figures(tmp_path: Path) -> None:
    """Figures 8 and 9 are measured and judged against their targets (tiny journals: the
    values are the machine's business; the second restart writes one decision per op
    left open, which no machine changes)."""
    settings = dataclasses.replace(
        QUICK,
        restart_ops=300,
        restart_short_ops=100,
        restart_running=3,
        restart_repeats=1,
        thread_callers=2,
        thread_calls=3,
        thread_repeats=1,
    )
    out = Measurements()
    bench_restarts(settings, tmp_path, out)
    bench_threads(settings, tmp_path, out)
    names = [f.name for f in out.figures]
    assert [n.split(" ")[0] for n in names] == ["8", "8", "8", "8", "9"]
    second = next(f for f in out.figures if "second restart" in f.name)
    assert (second.subject, second.baseline, second.holds) == (3.0, 3.0, True)
    writes = out.series["restarts"]["restart_writes"]
    assert writes[0]["decisions"] == writes[1]["decisions"] == 3
    assert all(f.target is not None for f in out.figures if "first call" not in f.name)


def test_figure_13_is_skipped_in_one_line_without_postgresql(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No PostgreSQL on the machine: no figure, one note that says why, nothing started."""
    from harness.bench.run import Measurements, bench_fleet
    from harness.chaos import postgres

    def missing() -> Path:
        raise postgres.PostgresUnavailable("PostgreSQL is not installed: no initdb")

    monkeypatch.setattr(postgres, "find_binaries", missing)
    out = Measurements()
    bench_fleet(QUICK, tmp_path, out)
    assert out.figures == [] and list(tmp_path.iterdir()) == []
    assert out.notes == ["figure 13: skipped: PostgreSQL is not installed: no initdb"]
