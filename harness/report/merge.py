"""The merge of shards: one report from the run folders of several (``python -m harness merge``).

A sharded campaign (``--shard K/N`` of ``chaos`` or ``audit``) leaves one run
folder per shard. The merge copies each shard's trial folders and golden runs
into ``OUT``, rebuilds every trial's result from the files it left
(``load_trial_result``: ``trial.json``, ``verdicts.json``, ``lives.json``), or
from its line in the shard's ``trials.jsonl`` when its folder was not kept,
and writes ``summary.json``, ``junit.xml`` and ``index.html`` as one run of
the whole campaign would, with each shard's audit section and Hypothesis suites.

Each shard's ``summary.json`` says which shard it was (``"shard": {"index":
K, "count": N}``, or null for an unsharded run, which is shard 1 of 1), so the
merge knows how many shards the campaign had. It refuses an incomplete set,
naming the missing shards ("shards 2/4, 4/4 are missing"), unless
``--allow-missing`` is given: then the merged ``summary.json`` lists them
(``missing_shards``), says ``"complete": false`` and does not pass, and the
console headline says so; the exit status is still the trials' own.

The full note: docs/reference/modules.md (``harness/report/merge.py``).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from harness.chaos.keep import (
    read_trial_records,
    result_from_record,
    spec_from_json,
    verdicts_from_json,
)
from harness.chaos.shard import Shard
from harness.chaos.trial import TrialResult, golden_dir
from harness.exits import exit_status
from harness.report.files import write_run_reports
from harness.report.html import write_index_html
from harness.report.model import RunInfo
from harness.runtime.errors import HarnessError

__all__ = [
    "HYPOTHESIS_JUNIT",
    "MergeError",
    "MergeOutcome",
    "amend_run_report",
    "describe_missing",
    "load_trial_result",
    "merge_runs",
]

HYPOTHESIS_JUNIT = "hypothesis-junit.xml"
"""The JUnit XML of an audit's Hypothesis run, beside the campaign's ``junit.xml``."""


class MergeError(HarnessError):
    """The run folders cannot be merged: not run folders, different campaigns, overlapping,
    or an incomplete set of shards.

    Remedy: merge every shard of one seed and one runtime, each once, into an empty
    folder (or pass ``--allow-missing`` to merge an incomplete set, marked so).
    """


def load_trial_result(trial_dir: Path, golden: Path | None = None) -> TrialResult:
    """Rebuild a trial's result from its folder (``golden``: its golden run, for kill windows).

    ``duration_ms`` is the time its lives ran (the folder does not record the
    trial's set-up and checking). Raises ``MergeError`` on a folder that is not
    a completed trial.
    """
    try:
        spec = spec_from_json(json.loads((trial_dir / "trial.json").read_text("utf-8")))
        verdicts = verdicts_from_json(json.loads((trial_dir / "verdicts.json").read_text("utf-8")))
        lives = json.loads((trial_dir / "lives.json").read_text("utf-8"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MergeError(f"{trial_dir}: not a completed trial folder: {exc}") from None
    return TrialResult(
        spec,
        trial_dir,
        verdicts,
        len(lives),
        sum(1 for life in lives if life.get("killed") in ("failpoint", "timed")),
        _windows(trial_dir, golden),
        tuple(str(life["reached"]) for life in lives if life.get("reached")),
        float(sum(life.get("duration_ms", 0.0) for life in lives)),
    )


def _windows(trial_dir: Path, golden: Path | None) -> tuple[str, ...]:
    from harness.check.evidence import TrialEvidence
    from harness.check.windows import kill_windows

    try:
        return tuple(kill_windows(TrialEvidence(trial_dir, golden)))
    except Exception:  # a window is a description, never a reason to lose the report
        return ()


@dataclass(frozen=True, slots=True)
class _Run:
    directory: Path
    summary: dict[str, Any]
    trials: tuple[Path, ...]
    records: tuple[dict[str, Any], ...]
    """The lines of its ``trials.jsonl`` for the trials whose folder it did not keep."""
    shard: Shard
    """Which shard of the campaign the run was; an unsharded run is shard 1 of 1."""


@dataclass(frozen=True, slots=True)
class MergeOutcome:
    """What a merge produced: its exit status and the shards it had to do without."""

    status: int
    """``harness.exits``: 0 held, 1 failed, 3 could not judge."""
    shards: int
    """How many shards the campaign had."""
    missing: tuple[Shard, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.missing


def _shard_of(directory: Path, summary: dict[str, Any]) -> Shard:
    if "shard" not in summary:
        raise MergeError(
            f"{directory}/summary.json: no shard field, so merge cannot tell which shard of "
            "how many it is (written by an older harness?): run it again"
        )
    data = summary["shard"]
    if data is None:
        return Shard(1, 1)
    try:
        return Shard(int(data["index"]), int(data["count"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise MergeError(f"{directory}/summary.json: bad shard field {data!r}: {exc}") from None


def describe_missing(missing: Sequence[Shard]) -> str:
    """``"shard 2/4 is missing"`` or ``"shards 2/4, 4/4 are missing"``."""
    names = ", ".join(str(shard) for shard in missing)
    return f"shard {names} is missing" if len(missing) == 1 else f"shards {names} are missing"


def _missing_shards(runs: Sequence[_Run]) -> tuple[int, tuple[Shard, ...]]:
    """The campaign's shard count and the shards none of ``runs`` is; refuses a mixed set."""
    counts = sorted({run.shard.count for run in runs})
    if len(counts) != 1:
        found = ", ".join(f"{run.directory}: shard {run.shard}" for run in runs)
        raise MergeError(
            f"the runs are shards of different counts ({found}): merge the shards of one "
            "campaign, all split the same way"
        )
    seen: dict[int, Path] = {}
    for run in runs:
        if run.shard.index in seen:
            raise MergeError(
                f"shard {run.shard} is given twice ({seen[run.shard.index]} and "
                f"{run.directory}): each shard of a campaign is merged once"
            )
        seen[run.shard.index] = run.directory
    count = counts[0]
    return count, tuple(Shard(k, count) for k in range(1, count + 1) if k not in seen)


def _read_run(directory: Path) -> _Run:
    """A run folder's summary and the folders of its completed trials of the run's runtime."""
    try:
        summary = json.loads((directory / "summary.json").read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise MergeError(
            f"{directory}: no readable summary.json, so not a finished run folder ({exc})"
        ) from None
    if not isinstance(summary, dict) or "seed" not in summary or "runtime" not in summary:
        raise MergeError(f"{directory}/summary.json: no seed or runtime")
    trials = []
    for trial in sorted((directory / "trials").glob("*")):
        spec = _spec_data(trial)
        if spec is not None and spec.get("runtime") == summary["runtime"]:
            trials.append(trial)
    try:
        records = [
            r
            for r in read_trial_records(directory)
            if r.get("folder") is None and r["spec"].get("runtime") == summary["runtime"]
        ]
    except (OSError, ValueError) as exc:
        raise MergeError(str(exc)) from None
    shard = _shard_of(directory, summary)
    return _Run(directory, summary, tuple(trials), tuple(records), shard)


def _spec_data(trial_dir: Path) -> dict[str, Any] | None:
    """``trial.json`` of a completed trial (one with verdicts), else None."""
    if not (trial_dir / "verdicts.json").exists():
        return None
    try:
        data = json.loads((trial_dir / "trial.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _common(runs: Sequence[_Run], key: str) -> Any:
    values = {json.dumps(run.summary[key]) for run in runs}
    if len(values) != 1:
        found = ", ".join(f"{run.directory}: {run.summary[key]}" for run in runs)
        raise MergeError(f"the runs have different {key}s ({found}): merge shards of one campaign")
    return runs[0].summary[key]


def _started(runs: Sequence[_Run]) -> float:
    """When the first shard started (its ``summary.json``), else now: the merged run's
    duration is then from the first shard's start to the merge."""
    starts = []
    for run in runs:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            starts.append(datetime.fromisoformat(str(run.summary["started"])).timestamp())
    return min(starts, default=time.time())


def merge_runs(out: Path, run_dirs: Sequence[Path], *, allow_missing: bool = False) -> MergeOutcome:
    """Merge ``run_dirs`` into ``out``: its exit status, and the shards that were missing.

    Raises ``MergeError`` (before writing anything) on run folders that are not
    the shards of one campaign, or that miss some shard unless ``allow_missing``.
    """
    if not run_dirs:
        raise MergeError("no run folder to merge")
    if out.exists() and any(out.iterdir()):
        raise MergeError(f"{out}: not empty; the merge writes a fresh run folder")
    runs = [_read_run(directory) for directory in run_dirs]
    seed, runtime = _common(runs, "seed"), _common(runs, "runtime")
    count, missing = _missing_shards(runs)
    if missing and not allow_missing:
        raise MergeError(
            f"the campaign had {count} shards and {describe_missing(missing)}: merge every "
            "shard, or pass --allow-missing to merge these and mark the report incomplete"
        )
    owner: dict[str, Path] = {}
    for run in runs:
        names = [t.name for t in run.trials] + [str(r.get("trial")) for r in run.records]
        for name in names:
            if name in owner:
                raise MergeError(
                    f"trial {name} is in both {owner[name]} and {run.directory}: "
                    "shards of one campaign are disjoint"
                )
            owner[name] = run.directory
    out.mkdir(parents=True, exist_ok=True)
    for run in runs:
        for folder in ("golden", "tables"):
            for source in sorted((run.directory / folder).glob("*")):
                target = out / folder / source.name
                if not target.exists():  # the same golden run in two shards is the same run
                    _copy(source, target)
        for trial in run.trials:
            _copy(trial, out / "trials" / trial.name)
    results = []
    for trial in sorted((out / "trials").glob("*")):
        data = _spec_data(trial) or {}
        golden = golden_dir(out, str(data.get("scenario")), int(data.get("seed", 0)))
        results.append(load_trial_result(trial, golden if golden.exists() else None))
    try:
        results += [result_from_record(r, out) for run in runs for r in run.records]
    except (ValueError, KeyError, TypeError) as exc:
        raise MergeError(f"a trial's record in trials.jsonl is not whole: {exc}") from None
    scenarios = sorted({s for run in runs for s in run.summary.get("scenarios", [])})
    commits = sorted({str(c) for run in runs if (c := run.summary.get("commit"))})
    config = RunInfo(
        out,
        int(seed),
        str(runtime),
        tuple(scenarios),
        started=_started(runs),
        commit=commits[0] if len(commits) == 1 else None,
    )
    interrupted = any(run.summary.get("interrupted") for run in runs)
    write_run_reports(
        config, results, [], interrupted=interrupted, missing_shards=[str(s) for s in missing]
    )
    shards = [
        {
            "run": str(run.directory),
            "shard": str(run.shard),
            **run.summary.get("audit", {"passed": run.summary["passed"]}),
        }
        for run in runs
    ]
    suites = [
        (run.directory / HYPOTHESIS_JUNIT, f"{run.directory.name}: ")
        for run in runs
        if (run.directory / HYPOTHESIS_JUNIT).exists()
    ]
    amend_run_report(
        out,
        results,
        section={
            "merged": [str(run.directory) for run in runs],
            "kinds": dict(Counter(r.spec.kind for r in results)),
            "shards": shards,
            "shard_count": count,
            "missing_shards": [str(s) for s in missing],
        },
        passed=all(bool(shard.get("passed")) for shard in shards),
        junit_suites=suites,
    )
    # A shard's failed Hypothesis run, or its interrupted campaign, fails the merge; an
    # unknown trial (which also left its shard "not passed") counts as what it is.
    failed_elsewhere = [
        "fail"
        for run in runs
        if run.summary.get("interrupted")
        or not run.summary.get("audit", {}).get("hypothesis", {}).get("passed", True)
    ]
    status = exit_status([*(r.status for r in results), *failed_elsewhere])
    return MergeOutcome(status, count, missing)


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True)
    else:
        shutil.copy2(source, target)


def amend_run_report(
    run_dir: Path,
    results: list[TrialResult],
    *,
    section: dict[str, Any],
    passed: bool,
    junit_suites: Sequence[tuple[Path, str]] = (),
    key: str = "audit",
) -> bool:
    """Add ``section`` to ``summary.json`` and other JUnit suites to ``junit.xml``.

    ``passed`` (of what the section adds) joins the campaign's own verdict, in
    the section and at the top (a Hypothesis failure fails the run);
    ``index.html`` is written again when that changes its badge.
    Each of ``junit_suites`` is (a JUnit XML file, a prefix for its suite
    names). Returns whether the run passed as a whole.
    """
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text("utf-8"))
    overall = bool(summary["passed"]) and passed
    summary[key] = {**section, "passed": overall}
    changed = overall != summary["passed"]
    summary["passed"] = overall
    summary_path.write_text(json.dumps(summary, indent=1), "utf-8")
    if junit_suites:
        junit_path = run_dir / "junit.xml"
        tree = ET.parse(junit_path)
        for path, prefix in junit_suites:
            for suite in _suites(path):
                suite.set("name", prefix + suite.get("name", "pytest"))
                tree.getroot().append(suite)
        tree.write(junit_path, encoding="utf-8", xml_declaration=True)
    if changed:
        write_index_html(run_dir, results, [])
    return overall


def _suites(path: Path) -> list[ET.Element]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    return [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
