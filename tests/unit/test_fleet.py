"""The fleet's invariants as pure checks, its world, its faults' catalogue and its refusals
(no PostgreSQL needed: the trials themselves are in ``tests/postgres/test_fleet.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.adapters import get_adapter
from harness.agent.fleet_broken import FLEET_BROKEN
from harness.chaos.faults import FAULT_KINDS, FLEET_KINDS
from harness.chaos.fleet import FLEET_FAULTS, FleetSpecError, FleetTrialSpec, fault_kind
from harness.chaos.schedule import not_applicable
from harness.check.fleet import FLEET_INVARIANTS, FleetEvidence, Pause, Told, check_fleet
from harness.world.fleet import (
    FleetLedgerRow,
    FleetWorld,
    Pulled,
    ledger_mark,
    read_done,
    read_fleet_ledger,
)

ROOT = Path(__file__).resolve().parents[2]


def _row(seq: int, task: str, op: str, pid: int) -> FleetLedgerRow:
    return FleetLedgerRow(seq, task, op.split(".")[0], op, "pay", pid)


def _evidence(*rows: FleetLedgerRow, **kwargs: object) -> FleetEvidence:
    base: dict[str, object] = {
        "tasks": ("t0",),
        "steps": ("s1",),
        "unsafe_steps": frozenset({"s1"}),
        "ledger": rows,
        "done": {"t0": 1},
    }
    return FleetEvidence(**{**base, **kwargs})  # type: ignore[arg-type]


def _verdict(evidence: FleetEvidence, key: str) -> str:
    (verdict,) = check_fleet(evidence, only={key})
    return verdict.status


class TestInvariants:
    def test_an_unsafe_step_run_twice_fails_one_runner(self) -> None:
        """Two runs of one unsafe step, under two op ids by two workers, fail one-runner."""
        ev = _evidence(_row(1, "t0", "s1", 10), _row(2, "t0", "s1.r1", 11))
        assert _verdict(ev, "one-runner") == "fail"
        assert _verdict(_evidence(_row(1, "t0", "s1", 10)), "one-runner") == "pass"

    def test_a_retry_safe_step_may_run_again(self) -> None:
        """A step of a retry-safe tool run twice (a retry after a takeover) is no failure."""
        ev = _evidence(_row(1, "t0", "s1", 10), _row(2, "t0", "s1", 11), unsafe_steps=frozenset())
        assert _verdict(ev, "one-runner") == "pass"

    def test_a_task_not_done_or_a_step_missing_is_lost(self) -> None:
        """A task nobody acknowledged, or one with a step not in the world, is lost."""
        assert _verdict(_evidence(_row(1, "t0", "s1", 10), done={}), "no-task-lost") == "fail"
        assert _verdict(_evidence(), "no-task-lost") == "fail"
        assert _verdict(_evidence(_row(1, "t0", "s1", 10)), "no-task-lost") == "pass"

    def test_a_run_by_a_woken_worker_after_a_takeover_is_a_fenced_write(self) -> None:
        """Stopped at ledger #1, another worker ran the task (#2), woken at #2: its run #3
        is a fenced write; none is a pass; no run by others meanwhile cannot be judged."""
        pause = (Pause(10, "t0", 1, 2),)
        taken = [_row(1, "t0", "s1", 10), _row(2, "t0", "s2.r1", 11)]
        late = _evidence(*taken, _row(3, "t0", "s3", 10), pauses=pause)
        assert _verdict(late, "no-fenced-write") == "fail"
        assert _verdict(_evidence(*taken, pauses=pause), "no-fenced-write") == "pass"
        alone = _evidence(_row(1, "t0", "s1", 10), pauses=(Pause(10, "t0", 1, 1),))
        assert _verdict(alone, "no-fenced-write") == "unknown"

    def test_a_call_told_fail_that_ran_breaks_fail_no_effect(self) -> None:
        """An op its worker told `fail` that the ledger shows run (by anyone) fails."""
        told = (Told(10, "t0", "s1", "fail"),)
        assert _verdict(_evidence(_row(1, "t0", "s1", 11), told=told), "fail-no-effect") == "fail"
        assert _verdict(_evidence(_row(1, "t0", "s1.r1", 10), told=told), "fail-no-effect") == (
            "pass"
        )

    def test_every_invariant_is_judged_and_a_raising_check_is_unknown(self) -> None:
        """All four verdicts, in order; evidence that breaks a check gives unknown, not a pass."""
        keys = [v.invariant for v in check_fleet(_evidence(_row(1, "t0", "s1", 10)))]
        assert keys == list(FLEET_INVARIANTS)
        broken = _evidence(ledger=None)
        assert {v.status for v in check_fleet(broken, only={"one-runner"})} == {"unknown"}


class TestWorld:
    def test_the_queue_hands_each_delivery_once_and_redelivers(self, tmp_path: Path) -> None:
        """Deliveries in order, each taken once; a redelivery is pulled again; done tasks
        are skipped; None once every task is done."""
        path = tmp_path / "world.db"
        FleetWorld.create(path, ["t0", "t1"], twice="t1")
        with FleetWorld(path) as world:
            first, second = world.pull(1), world.pull(2)
            assert isinstance(first, Pulled) and isinstance(second, Pulled)
            assert (first.task, second.task) == ("t1", "t1")
            third = world.pull(3)
            assert isinstance(third, Pulled) and third.task == "t0"
            assert world.pull(4) is True  # all taken, none done
            world.run_effect("t0", "s1", "s1", "pay", 1, 3)
            world.ack("t0", 3)
            world.redeliver("t0")
            assert world.pull(4) is True  # t0 is done: its redelivery is skipped
            world.ack("t1", 1)
            assert world.pull(4) is None
            assert world.has_effect("t0", "s1") and not world.has_effect("t1", "s1")
        assert [(r.seq, r.op_id, r.pid) for r in read_fleet_ledger(path)] == [(1, "s1", 3)]
        assert read_done(path) == {"t0": 3, "t1": 1}
        assert ledger_mark(path) == 1


class TestFaults:
    def test_every_fleet_fault_is_of_a_kind_in_the_catalogue(self) -> None:
        """Each fault spec maps to a kind of ``FAULT_KINDS``; the fleet's own kinds are not
        applicable to the default campaign, with the reason."""
        assert {fault_kind(spec) for spec in FLEET_FAULTS} == FLEET_KINDS | {"sigkill"}
        assert set(FAULT_KINDS) >= FLEET_KINDS
        for kind in FLEET_KINDS:
            assert "chaos-fleet" in (not_applicable(kind, get_adapter("real")) or "")

    def test_a_postgres_fault_on_the_file_journal_is_refused(self) -> None:
        """Every fault but sigkill acts on PostgreSQL alone: refused on the file journal."""
        for spec in FLEET_FAULTS:
            trial = FleetTrialSpec("file", spec)
            if spec == "sigkill":
                trial.check()
            else:
                with pytest.raises(FleetSpecError, match="PostgreSQL journal"):
                    trial.check()

    def test_each_broken_journal_names_a_fault_and_an_invariant(self) -> None:
        """The self-check's table reads these: a fault of a fleet and a fleet invariant."""
        for journal in FLEET_BROKEN.values():
            assert journal.needs_fault in FLEET_FAULTS and journal.mistake
            assert journal.caught_by in FLEET_INVARIANTS

    def test_the_command_refuses_a_fault_on_the_file_journal_in_one_line(self) -> None:
        """``chaos-fleet --journal file --fault pause``: one line, exit 2, nothing run."""
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness",
                "chaos-fleet",
                "--journal",
                "file",
                "--fault",
                "lease-pause",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert done.stdout.count("\n") == 1 and "PostgreSQL journal" in done.stdout
