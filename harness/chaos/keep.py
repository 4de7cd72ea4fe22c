"""Which trial folders a run keeps, and the record of every trial in ``trials.jsonl``.

A trial folder (journal, world, events, history) is what a person reads when a
trial failed; a passing one is evidence nobody opens, and ten thousand of them
weigh a gigabyte. So a campaign keeps the folder of every trial that did not
pass, and of a sample of the passing ones (``SAMPLE_ONE_IN``, chosen by the
trial's id, so the same trials of a seed are kept on every run); the others
are removed once checked, with the golden run only they used, and the world
of each kept one (and of each golden run, once the campaign is over) is folded
into a single file (``harness.world.store.fold_wal``: the same rows, a third
of the space). ``--keep all`` keeps every folder as its trial left it.

Every trial, kept or not, has a line in ``trials.jsonl`` at the top of the run
folder: its spec (scenario, seed, schedule, runtime), its verdicts with their
evidence, its lives, kills and kill windows, the folder it kept (or null), and
the one command that runs it again. A merge rebuilds a trial from its line when
its folder is gone (``result_from_record``).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from harness.chaos.schedule import CrashSchedule
from harness.chaos.trial import TrialResult, TrialSpec
from harness.check.invariants import TITLES, Status, Verdict

__all__ = [
    "KEEP_MODES",
    "SAMPLE_ONE_IN",
    "TRIALS_FILE",
    "keeps_folder",
    "read_trial_records",
    "result_from_record",
    "sampled",
    "spec_from_json",
    "trial_record",
    "verdicts_from_json",
    "write_trial_records",
]

KEEP_MODES = ("sample", "all")
"""``--keep``: the failing trials and a sample of the passing ones, or every trial."""

SAMPLE_ONE_IN = 50
"""One passing trial in this many keeps its folder (a 10,000-trial run keeps about 200)."""

TRIALS_FILE = "trials.jsonl"


def sampled(trial_id: str) -> bool:
    """Whether a passing trial is in the sample: fixed by its id, the same on every run."""
    return zlib.crc32(trial_id.encode()) % SAMPLE_ONE_IN == 0


def keeps_folder(result: TrialResult, keep: str) -> bool:
    """Whether a checked trial's folder stays: every folder, or all but unsampled passes."""
    return keep == "all" or result.status != "pass" or sampled(result.spec.trial_id)


def trial_record(result: TrialResult, run_dir: Path) -> dict[str, Any]:
    """The line of ``trials.jsonl`` for a trial: enough to list, judge and replay it."""
    folder = None
    if result.kept:
        try:
            folder = result.directory.relative_to(run_dir).as_posix()
        except ValueError:
            folder = str(result.directory)
    return {
        "trial": result.spec.trial_id,
        "status": result.status,
        "folder": folder,
        "spec": result.spec.to_json(),
        # Without their titles (``TITLES`` has them): ten thousand lines carry each once;
        # ``applied`` only where it is False (a pass with nothing to judge).
        "verdicts": [
            {
                "invariant": v.invariant,
                "status": v.status,
                "evidence": list(v.evidence),
                **({} if v.applied else {"applied": False}),
            }
            for v in result.verdicts
        ],
        "lives": result.lives,
        "kills": result.kills,
        "windows": list(result.windows),
        "reached": list(result.reached),
        "duration_ms": round(result.duration_ms, 3),
    }


def write_trial_records(run_dir: Path, results: Iterable[TrialResult]) -> None:
    lines = (json.dumps(trial_record(r, run_dir), separators=(",", ":")) for r in results)
    (run_dir / TRIALS_FILE).write_text("".join(f"{line}\n" for line in lines), "utf-8")


def read_trial_records(run_dir: Path) -> list[dict[str, Any]]:
    """The lines of a run's ``trials.jsonl`` (none for a run folder without it);
    ``ValueError`` names the line that is not a trial's record."""
    path = run_dir / TRIALS_FILE
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("spec"), dict):
                raise ValueError("no spec")
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not a trial's record ({exc})") from None
        records.append(record)
    return records


def spec_from_json(data: dict[str, Any]) -> TrialSpec:
    """A trial's spec from ``TrialSpec.to_json`` (``trial.json`` or a record's ``spec``)."""
    return TrialSpec(
        str(data["scenario"]),
        int(data["seed"]),
        CrashSchedule.from_json(json.dumps(data["schedule"])),
        str(data["runtime"]),
        str(data["label"]),
        str(data["kind"]),
        None if data.get("model") is None else str(data["model"]),
        bool(data.get("generated", False)),
    )


def verdicts_from_json(data: Iterable[dict[str, Any]]) -> tuple[Verdict, ...]:
    """Verdicts from ``verdicts.json`` or a record (whose titles ``TITLES`` gives); one
    that does not say whether it applied (written before it could) applied."""
    return tuple(
        Verdict(
            str(v["invariant"]),
            str(v.get("title") or TITLES.get(str(v["invariant"]), v["invariant"])),
            cast(Status, v["status"]),
            tuple(str(line) for line in v["evidence"]),
            v.get("applied", True) is not False,
        )
        for v in data
    )


def result_from_record(record: dict[str, Any], run_dir: Path) -> TrialResult:
    """A trial's result from its record; ``ValueError`` (or ``KeyError``) on a bad one."""
    spec = spec_from_json(record["spec"])
    folder = record.get("folder")
    return TrialResult(
        spec,
        run_dir / (folder or f"trials/{spec.trial_id}"),
        verdicts_from_json(record["verdicts"]),
        int(record["lives"]),
        int(record["kills"]),
        tuple(str(w) for w in record.get("windows", ())),
        tuple(str(r) for r in record.get("reached", ())),
        float(record.get("duration_ms", 0.0)),
        kept=bool(folder),
    )
