"""Batches on threads in real processes: a SIGKILL inside a threaded batch, and the two
broken runtimes only threads expose, caught there and escaping a scenario without threads.

``scenarios/threaded_service.toml`` opens with a batch run on threads (a non-idempotent
typed text, an idempotent install, a read), its writes delivered twice at once. Killed at
the second call's ``op.after_intent`` (calls start in plan order, so that hit is the
install's in every run), the next life decides each op by its class and the world ends
as in the crash-free run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.chaos.schedule import DISK_FULL_HITS, CrashSchedule
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import Golden, TrialResult, TrialSpec, prepare_golden, run_trial
from harness.runtime.journal import scan_journal
from harness.runtime.records import DecisionRecord, IncarnationRecord

ROOT = Path(__file__).resolve().parents[2]
THREADED = str(ROOT / "scenarios" / "threaded_service.toml")
PLAIN = str(ROOT / "scenarios" / "phone_task.toml")
SEED = 13


@pytest.fixture(scope="module")
def threaded_golden(tmp_path_factory: pytest.TempPathFactory, supervisor: Supervisor) -> Golden:
    return prepare_golden(THREADED, SEED, tmp_path_factory.mktemp("golden"), supervisor)


@pytest.fixture(scope="module")
def plain_golden(tmp_path_factory: pytest.TempPathFactory, supervisor: Supervisor) -> Golden:
    return prepare_golden(PLAIN, SEED, tmp_path_factory.mktemp("golden"), supervisor)


def _trial(
    root: Path,
    golden: Golden,
    supervisor: Supervisor,
    tables: dict[str, Path],
    schedule: str,
    runtime: str = "real",
) -> TrialResult:
    spec = TrialSpec(
        str(golden_scenario(golden)), SEED, CrashSchedule.from_json(schedule), runtime, "t"
    )
    folder = root / f"{runtime}-{abs(hash(schedule))}"
    return run_trial(spec, folder, golden.directory, supervisor, tables=tables)


def golden_scenario(golden: Golden) -> str:
    return str(json.loads((golden.directory / "plan.json").read_text())["source"])


class TestKillInsideAThreadedBatch:
    """A SIGKILL with calls of a threaded batch in flight: decided per class, world as golden."""

    def test_the_crash_free_run_hits_the_intents_in_plan_order(
        self, threaded_golden: Golden
    ) -> None:
        """The hits of ``op.after_intent`` walk the batch's calls in their order."""
        ops = [threaded_golden.op_at("op.after_intent", hit) for hit in range(1, 4)]
        assert ops == ["s001a", "s001b", "s001c"]

    def test_the_next_life_decides_each_op_by_its_class(
        self,
        tmp_path: Path,
        threaded_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        """Killed at the install's intent: the install is retried, the typed text (if its
        finish was not written yet) verified, never replayed; every invariant holds."""
        result = _trial(
            tmp_path,
            threaded_golden,
            supervisor,
            tables,
            '[{"failpoints": "op.after_intent@2=kill"}]',
        )
        assert result.status == "pass", result.verdicts  # I8 among them: the golden world
        assert result.reached == ("op.after_intent 2 s001b",)
        decided: dict[str, str] = {}
        life = 0
        for scanned in scan_journal(result.directory / "journal").records:
            record = scanned.record
            if isinstance(record, IncarnationRecord):
                life = record.incarnation
            if life == 2 and isinstance(record, DecisionRecord):
                decided[record.op_id] = record.decision.value
        assert decided["s001b"] == "retry"
        # The text's finish may or may not have been written before the kill (its thread
        # takes its turn at the runtime's lock): skipped if so, else verified.
        assert decided.get("s001a", "skip") in ("skip", "verify")
        assert "s001c" not in decided or decided["s001c"] == "skip"


class TestBrokenRuntimesOnThreads:
    """Each broken runtime is caught on the threaded scenario by the invariants it names,
    and escapes a scenario without threads under the same faults."""

    def test_no_op_lock(
        self,
        tmp_path: Path,
        threaded_golden: Golden,
        plain_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        """Without the per-op turn a duplicate re-runs an idempotent op: I1.

        (A duplicate that decides while the first's intent is being made durable runs an
        unsafe op beside it as well, which I10 may then report too.) The duplicate must
        decide while the first call is in flight, which the scheduler
        decides: a machine busy enough can run them one after the other in every trial of
        a round, so up to three rounds are run, as a campaign's many trials would."""
        schedules = ["[]", *(f'[{{"failpoints": "op.before_intent@{h}=kill"}}]' for h in (1, 2, 3))]
        caught: list[TrialResult] = []
        for round_no in range(3):
            root = tmp_path / f"round-{round_no}"
            caught += [
                _trial(root, threaded_golden, supervisor, tables, s, "no-op-lock")
                for s in schedules
            ]
            if any("I1" in r.failed_invariants for r in caught):
                break
        assert any("I1" in r.failed_invariants for r in caught), [r.verdicts for r in caught]
        for schedule in schedules:
            plain = _trial(tmp_path, plain_golden, supervisor, tables, schedule, "no-op-lock")
            assert plain.status == "pass", plain.verdicts

    def test_stale_offset_truncate(
        self,
        tmp_path: Path,
        threaded_golden: Golden,
        plain_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        """A full disk among other threads' appends: the cut loses their records, and I1
        or I6 fails; alone in its process the same mistake loses nothing."""
        appends = threaded_golden.hits["journal.append"]
        failed: list[tuple[str, ...]] = []
        for hit in range(3, appends + 1):
            schedule = f'[{{"failpoints": "journal.append@{hit}=enospc"}}]'
            result = _trial(
                tmp_path, threaded_golden, supervisor, tables, schedule, "stale-offset-truncate"
            )
            failed.append(result.failed_invariants)
            if {"I1", "I6"} & set(result.failed_invariants):
                break
        assert {"I1", "I6"} & set(failed[-1]), failed
        for hit in DISK_FULL_HITS:
            if hit > plain_golden.hits["journal.append"]:
                break
            schedule = f'[{{"failpoints": "journal.append@{hit}=enospc"}}]'
            plain = _trial(
                tmp_path, plain_golden, supervisor, tables, schedule, "stale-offset-truncate"
            )
            assert plain.status == "pass", plain.verdicts
