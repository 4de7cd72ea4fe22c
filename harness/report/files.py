"""The run folder's files: ``summary.json``, ``trials.jsonl``, ``junit.xml`` and ``index.html``.

Writers read results and verdicts; they never decide. Each trial's own folder
(journal, world.db, events, verdicts) was written by the trial itself. They are
given a ``RunInfo`` (``harness.report.model``), never a campaign's config.
An interrupted run first drops the folders of trials that did not complete
(``discard_incomplete``), then writes its report marked interrupted.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from harness.chaos.keep import TRIALS_FILE, write_trial_records
from harness.chaos.trial import TrialResult
from harness.check.invariants import OUTCOMES
from harness.report.html import write_index_html
from harness.report.model import (
    NOT_APPLIED,
    RunInfo,
    SelfCheckRow,
    applied,
    count_verdicts,
    never_applied,
    trials_with_verdict,
)
from harness.report.tables import fault_rows

__all__ = ["INTERRUPTED_CASE", "discard_incomplete", "folder_bytes", "write_run_reports"]

INTERRUPTED_CASE = "campaign interrupted"
"""The name of the ``junit.xml`` test case, an ``<error>``, that an interrupted run adds to
its campaign's suite: a CI page then shows the run as broken, not as a short green one."""


def _outcomes(counts: Counter[str]) -> dict[str, int]:
    """Every outcome of ``OUTCOMES`` (zero included), then any other status the files held,
    then the passes that had nothing to judge (``not-applied``, counted within ``pass``)."""
    return {
        **{o: counts[o] for o in OUTCOMES},
        **{k: n for k, n in counts.items() if k not in (*OUTCOMES, NOT_APPLIED)},
        NOT_APPLIED: counts[NOT_APPLIED],
    }


def _trial_entry(result: TrialResult, invariants: tuple[str, ...]) -> dict[str, Any]:
    return {
        "trial": result.spec.trial_id,
        "invariants": list(invariants),
        "seed": result.spec.seed,
        "replay": result.spec.replay_command(),
    }


DISTRIBUTION = "agent-crash-harness"
"""The installed distribution whose version ``summary.json`` states (pyproject's name)."""


def _version() -> str | None:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return None


def _when(config: RunInfo) -> dict[str, Any]:
    """When the run started (ISO 8601, UTC), how long it took until now, what ran it."""
    started = datetime.fromtimestamp(config.started, UTC)
    facts: dict[str, Any] = {
        "started": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "duration_s": round(max(0.0, time.time() - config.started), 1),
        "version": _version(),
    }
    if config.commit is not None:
        facts["commit"] = config.commit
    return facts


def _summary(
    config: RunInfo,
    results: list[TrialResult],
    checks: list[SelfCheckRow],
    interrupted: bool,
    missing_shards: Sequence[str],
) -> dict[str, Any]:
    invariants = count_verdicts(results)
    failures = [r for r in results if r.status == "fail"]
    unjudged = [r for r in results if r.status == "unknown"]
    complete = not interrupted and not missing_shards
    shard = config.shard
    return {
        **_when(config),
        "seed": config.seed,
        "runtime": config.runtime,
        "scenarios": list(config.scenarios),
        "shard": None if shard is None else {"index": shard.index, "count": shard.count},
        "trials": len(results),
        "kinds": dict(Counter(r.spec.kind for r in results)),
        "generated": sum(r.spec.generated for r in results),
        "failed": len(failures),
        "unknown": len(unjudged),
        "kills": sum(r.kills for r in results),
        "kept_folders": sum(r.kept for r in results),
        "trials_file": TRIALS_FILE,
        "invariants": {k: _outcomes(v) for k, v in sorted(invariants.items())},
        "never_applied": never_applied(invariants),
        "windows": dict(Counter(w for r in results for w in r.windows)),
        "faults": dict(Counter(k for r in results for k in r.spec.schedule.fault_kinds)),
        "not_applicable": {
            row.kind: row.not_applicable
            for row in fault_rows(results, config.runtime)
            if row.not_applicable is not None
        },
        "failures": [_trial_entry(r, r.failed_invariants) for r in failures],
        "unjudged": [_trial_entry(r, r.unknown_invariants) for r in unjudged],
        "self_check": [c.to_json() for c in checks],
        "interrupted": interrupted,
        "missing_shards": list(missing_shards),
        "complete": complete,
        "passed": complete and not failures and not unjudged and all(c.as_expected for c in checks),
    }


def _replay_text(result: TrialResult, lines: Iterable[str]) -> str:
    return "\n".join((*lines, f"replay: {result.spec.replay_command()}"))


def _junit(
    results: list[TrialResult], checks: list[SelfCheckRow], *, interrupted: bool
) -> ET.ElementTree[ET.Element]:
    """One test case per trial: a ``<failure>`` per failed invariant; a trial with no
    failure but some invariant that could not be judged gets one ``<error>``. An interrupted
    run adds the case ``INTERRUPTED_CASE``, an ``<error>`` of its own."""
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="chaos campaign",
        tests=str(len(results) + interrupted),
        failures=str(sum(r.status == "fail" for r in results)),
        errors=str(sum(r.status == "unknown" for r in results) + interrupted),
    )
    # Per invariant, the trials it judged something in ("applied to N of M trials").
    properties = ET.SubElement(suite, "properties")
    for key, counts in count_verdicts(results).items():
        ET.SubElement(
            properties,
            "property",
            name=f"applied {key}",
            value=f"{applied(counts)} of {trials_with_verdict(counts)}",
        )
    for result in sorted(results, key=lambda r: r.spec.trial_id):
        case = ET.SubElement(
            suite,
            "testcase",
            classname=result.spec.scenario_name,
            name=result.spec.trial_id,
            time=f"{result.duration_ms / 1000:.3f}",
        )
        idle = [v.invariant for v in result.verdicts if v.status == "pass" and not v.applied]
        if idle:  # passes that tested nothing are not to be read as held
            ET.SubElement(
                ET.SubElement(case, "properties"),
                "property",
                name="not-applied",
                value=" ".join(idle),
            )
        for verdict in result.verdicts:
            if verdict.status == "fail":
                failure = ET.SubElement(
                    case, "failure", message=f"{verdict.invariant} {verdict.title}"
                )
                failure.text = _replay_text(result, verdict.evidence)
        if result.status == "unknown":
            unknown = [v for v in result.verdicts if v.status == "unknown"]
            error = ET.SubElement(
                case,
                "error",
                type="could-not-judge",
                message="could not judge " + "; ".join(f"{v.invariant} {v.title}" for v in unknown),
            )
            error.text = _replay_text(
                result,
                (
                    line
                    for v in unknown
                    for line in (f"{v.invariant} {v.title}:", *(f"  {e}" for e in v.evidence))
                ),
            )
    if interrupted:
        case = ET.SubElement(suite, "testcase", classname="chaos campaign", name=INTERRUPTED_CASE)
        ET.SubElement(
            case,
            "error",
            type="interrupted",
            message=f"INTERRUPTED after {len(results)} completed trials: the report holds what "
            "completed, not the whole campaign",
        )
    checks_suite = ET.SubElement(
        suites,
        "testsuite",
        name="self-check",
        tests=str(len(checks)),
        failures=str(sum(not c.as_expected for c in checks)),
    )
    for check in checks:
        case = ET.SubElement(checks_suite, "testcase", classname="self-check", name=check.name)
        if not check.as_expected:
            ET.SubElement(case, "failure", message=check.outcome).text = check.mistake
    return ET.ElementTree(suites)


def write_run_reports(
    config: RunInfo,
    results: list[TrialResult],
    checks: list[SelfCheckRow],
    *,
    interrupted: bool = False,
    missing_shards: Sequence[str] = (),
) -> None:
    """Write ``summary.json``, ``trials.jsonl`` (a line per trial, ``harness.chaos.keep``),
    ``junit.xml`` and ``index.html`` into ``config.run_dir``.

    ``missing_shards`` (``"K/N"``, from a merge allowed to miss some): the run
    is then not complete, and does not pass whatever its trials did.
    """
    run_dir = config.run_dir
    summary = _summary(config, results, checks, interrupted, missing_shards)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1), "utf-8")
    write_trial_records(run_dir, results)
    junit = _junit(results, checks, interrupted=interrupted)
    junit.write(run_dir / "junit.xml", encoding="utf-8", xml_declaration=True)
    write_index_html(run_dir, results, checks)


def folder_bytes(folder: Path) -> int:
    """The disk space the files under ``folder`` take (their allocated blocks, as du counts)."""
    total = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):  # a file gone meanwhile takes no space
            total += path.lstat().st_blocks * 512
    return total


def discard_incomplete(run_dir: Path, results: list[TrialResult]) -> None:
    """Remove the folders of trials an interrupt cut short, and of unfinished golden runs.

    A trial counts as completed once its result reached this process: one whose
    worker finished but was stopped before handing it over is not in the report,
    so its folder goes too.
    """
    kept = {result.directory for result in results}
    for trial in (run_dir / "trials").glob("*"):
        if trial not in kept:
            shutil.rmtree(trial, ignore_errors=True)
    for golden in (run_dir / "golden").glob("*"):
        if not (golden / "golden.json").exists():
            shutil.rmtree(golden, ignore_errors=True)
