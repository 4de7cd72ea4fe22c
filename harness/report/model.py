"""What the report writers are given: the run's identity and the self-check's rows.

The writers (``harness.report.files``, ``harness.report.html``, the console)
import their row types from here, and nothing of a campaign: a ``RunInfo`` is
the few facts of a run folder a report states (where it is, which seed,
runtime, scenarios and shard), filled in by whoever ran the trials.
``SelfCheckRow`` is one line of the self-check, built by the ``chaos`` command
from the broken runtimes' table (``harness.agent.broken``) and the mutations'
(``harness.chaos.mutations``). ``count_verdicts`` counts each invariant's
outcomes over the trials, and apart, its passes with nothing to judge.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.chaos.shard import Shard
from harness.chaos.trial import TrialResult
from harness.words import many

__all__ = [
    "BATCH",
    "MODEL",
    "MUTATION",
    "NOT_APPLIED",
    "SOURCE",
    "THREADS",
    "RunInfo",
    "SelfCheckRow",
    "applied",
    "count_verdicts",
    "never_applied",
    "source_commit",
    "trials_with_verdict",
]


MUTATION = "mutation"
"""``needs_fault`` of a self-check row that damages a recorded trial folder instead."""
BATCH = "batch"
"""``needs_fault`` of a self-check row whose mistake only calls run at once can expose: its
trials "without" are those of the scenarios without batches, under every fault."""
THREADS = "threads"
"""``needs_fault`` of a self-check row whose mistake only a batch on threads can expose
(``threads+<fault>`` when it also needs that fault): its trials "without" are those of
the scenarios without threads, under every fault (and the threaded scenarios' trials
without that fault)."""
MODEL = "model"
"""``needs_fault`` of a self-check row whose mistake only one scripted model can expose
(``model:<name>``): its trials "without" are those of the scenarios that know calls by
content under another model, under every fault."""


SOURCE = Path(__file__).resolve().parents[2]
"""The folder the harness runs from: a git checkout's commit is stated, where it is one."""


def source_commit(folder: Path = SOURCE) -> str | None:
    """The commit checked out in ``folder``, or None outside git (or without git, or slow)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The run folder a report is written into, and the campaign facts ``summary.json`` states."""

    run_dir: Path
    seed: int
    runtime: str
    scenarios: tuple[str, ...]
    shard: Shard | None = None
    """The shard of the campaign the run was; None for the whole campaign."""
    started: float = field(default_factory=time.time)
    """When the run started (``time.time()``): when its ``RunInfo`` was made, unless told."""
    commit: str | None = field(default_factory=source_commit)
    """The commit the harness ran from, read when the run started (a checkout changed
    during a long run does not relabel it); None outside a git checkout."""


@dataclass(frozen=True, slots=True)
class SelfCheckRow:
    """One broken runtime in the self-check, and whether it was caught as expected."""

    name: str
    mistake: str
    needs_fault: str
    expected: tuple[str, ...]
    trials: int
    caught: TrialResult | None
    sigkill_trials: int = 0
    """Trials without the fault it needs (SIGKILL, and every other fault), for a mistake
    that needs a fault beyond SIGKILL."""
    caught_by_sigkill: TrialResult | None = None
    not_applicable: str | None = None
    """Why the selected scenarios cannot expose this mistake (then it was not run)."""

    @property
    def as_expected(self) -> bool:
        # A mistake that only another fault can expose must also escape SIGKILL
        # alone; if it did not, the harness sees what it should not be able to.
        if self.not_applicable is not None:
            return True
        return self.caught is not None and self.caught_by_sigkill is None

    @property
    def outcome(self) -> str:
        if self.not_applicable is not None:
            return f"not applicable to this selection: {self.not_applicable}"
        if self.caught is None:
            if self.needs_fault == MUTATION and self.trials == 0:
                return "NOT CAUGHT: no trial of the campaign has what it changes"
            return (
                f"NOT CAUGHT in {many(self.trials, 'trial')}: "
                f"no trial made {', '.join(self.expected)} fail"
            )
        by = ", ".join(self.caught.failed_invariants)
        if self.needs_fault == MUTATION:
            return f"caught by {by} in a mutated copy of a passing trial"
        if self.needs_fault == "sigkill":
            return f"caught by {by}"
        if self.caught_by_sigkill is not None:
            return (
                f"caught by {by}, but a trial without {self.needs_fault} also caught it: unexpected"
            )
        if self.needs_fault.startswith(THREADS):
            fault = self.needs_fault.partition("+")[2]
            under = f" under {fault}" if fault else ""
            besides = f" or without {fault}" if fault else " (every fault)"
            return (
                f"caught by {by} in batches on threads{under} only; escapes the "
                f"{many(self.sigkill_trials, 'trial')} without threads{besides}"
            )
        if self.needs_fault.startswith(MODEL + ":"):
            model = self.needs_fault.partition(":")[2]
            return (
                f"caught by {by} under the {model} model only; escapes the "
                f"{many(self.sigkill_trials, 'trial')} of scenarios that know calls by content "
                "under another model (every fault)"
            )
        if self.needs_fault == BATCH:
            return (
                f"caught by {by} in batches only; escapes the {many(self.sigkill_trials, 'trial')} "
                "of scenarios without batches (every fault)"
            )
        return (
            f"caught by {by} under {self.needs_fault} only; escapes the "
            f"{many(self.sigkill_trials, 'trial')} without it (SIGKILL and every other fault)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "runtime": self.name,
            "mistake": self.mistake,
            "needs_fault": self.needs_fault,
            "expected": list(self.expected),
            "trials": self.trials,
            "outcome": self.outcome,
            "as_expected": self.as_expected,
            "caught_in": None if self.caught is None else self.caught.spec.trial_id,
            "replay": None if self.caught is None else self.caught.spec.replay_command(),
        }


NOT_APPLIED = "not-applied"
"""The count, beside an invariant's outcomes, of its passes that had nothing to judge (no op
in flight at a restart, no fault...): part of its ``pass`` count, never an outcome of its own."""


def count_verdicts(
    results: Iterable[TrialResult], keys: Iterable[str] = ()
) -> dict[str, Counter[str]]:
    """Invariant -> its outcomes over ``results`` and its ``NOT_APPLIED`` passes; ``keys``
    are listed (at zero) even where no trial has their verdict."""
    counts: dict[str, Counter[str]] = {key: Counter() for key in keys}
    for result in results:
        for verdict in result.verdicts:
            counted = counts.setdefault(verdict.invariant, Counter())
            counted[verdict.status] += 1
            counted[NOT_APPLIED] += verdict.status == "pass" and not verdict.applied
    return counts


def applied(counts: Counter[str]) -> int:
    """The trials in which an invariant judged something: its failures and real passes."""
    return counts["fail"] + counts["pass"] - counts[NOT_APPLIED]


def trials_with_verdict(counts: Counter[str]) -> int:
    """The trials that have a verdict of the invariant at all."""
    return sum(n for key, n in counts.items() if key != NOT_APPLIED)


def never_applied(counts: dict[str, Counter[str]]) -> list[str]:
    """The invariants that passed somewhere, yet applied to no trial: every pass had
    nothing to judge."""
    return [key for key, c in counts.items() if c["pass"] and not applied(c)]
