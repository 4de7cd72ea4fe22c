"""Faults beyond SIGKILL, end to end: power loss, tears, corruption, full disk, two agents."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from harness.chaos.faults import PRISTINE_JOURNAL
from harness.chaos.trial import Golden, TrialResult
from harness.check.evidence import TrialEvidence
from harness.check.invariants import check_trial
from harness.exits import AGENT_REFUSED, AGENT_WRITE_FAILED
from harness.runtime.journal import FILE_HEADER, encode_frame, scan_journal
from harness.runtime.records import TailDroppedRecord
from harness.world.store import read_ledger
from tests.integration.conftest import TrialRunner


def _verdict(result: TrialResult, key: str) -> tuple[str, tuple[str, ...]]:
    verdict = next(v for v in result.verdicts if v.invariant == key)
    return verdict.status, verdict.evidence


def _events(result: TrialResult, kind: str) -> list[dict[str, object]]:
    lines = (result.directory / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


class TestPowerLoss:
    def test_real_runtime_loses_nothing_it_reported(self, run_mini: TrialRunner) -> None:
        """A power cut after every kind of kill leaves the real runtime's invariants whole."""
        for point in ("op.before_intent@4", "op.after_effect@2", "op.after_finish@3"):
            result = run_mini(
                json.dumps([{"failpoints": f"{point}=kill", "after_death": "power-loss:drop"}])
            )
            assert result.status == "pass", (point, result.verdicts)
            assert _events(result, "fault")[0]["lost"] == 0  # every append was fsynced

    def test_drop_cuts_the_unsynced_tail(self, run_mini: TrialRunner) -> None:
        """Killed between a write and its fsync, the journal loses exactly that write."""
        result = run_mini(
            '[{"failpoints":"journal.before_fsync@6=kill","after_death":"power-loss:drop"}]'
        )
        fault = _events(result, "fault")[0]
        assert isinstance(fault["lost"], int) and fault["lost"] > 0
        assert fault["kept"] == fault["synced"]
        assert result.status == "pass", result.verdicts

    def test_tear_is_dropped_where_it_began(self, run_mini: TrialRunner) -> None:
        """A torn write (a prefix and garbage) is reported dropped at its first byte, never read."""
        result = run_mini(
            '[{"failpoints":"journal.before_fsync@6=kill","after_death":"power-loss:tear:0.5:5"}]'
        )
        fault = _events(result, "fault")[0]
        assert isinstance(fault["torn"], int) and fault["torn"] > 0
        dropped = [
            s.record
            for s in scan_journal(result.directory / "journal").records
            if isinstance(s.record, TailDroppedRecord)
        ]
        assert [(d.offset, d.length) for d in dropped] == [(fault["valid_end"], fault["torn"])]
        status, evidence = _verdict(result, "I9")
        assert status == "pass" and "1 injected" in evidence[0]

    @pytest.mark.parametrize("second", ["power-loss:drop", "power-loss:tear:0.5:3"])
    def test_a_second_cut_before_the_report_is_judged_by_what_it_left(
        self, second: str, run_mini: TrialRunner
    ) -> None:
        """A tear, then a life cut between its open and its first fsync: the last tail counts."""
        result = run_mini(
            json.dumps(
                [
                    {
                        "failpoints": "journal.before_fsync@6=kill",
                        "after_death": "power-loss:tear:0.5:5",
                    },
                    {"failpoints": "journal.before_fsync@1=kill", "after_death": second},
                ]
            )
        )
        assert [f["fault"] for f in _events(result, "fault")] == ["power-loss:tear:0.5:5", second]
        assert result.status == "pass", result.verdicts

    def test_a_torn_decision_batch_is_decided_again(self, run_mini: TrialRunner) -> None:
        """A power cut through a life's decisions: the next life decides again, nothing is lost."""
        result = run_mini(
            json.dumps(
                [
                    {"failpoints": "op.after_intent@3=kill"},
                    {
                        "failpoints": "journal.before_fsync@2=kill",
                        "after_death": "power-loss:tear:0.5:0",
                    },
                ]
            )
        )
        fault = _events(result, "fault")[0]
        assert isinstance(fault["lost"], int) and fault["lost"] > 0
        assert result.status == "pass", result.verdicts

    def test_i9_fails_when_a_tear_is_never_reported(
        self, run_mini: TrialRunner, mini_golden: Golden
    ) -> None:
        """The checker fails a trial whose journal does not show the torn tail dropped."""
        result = run_mini(
            '[{"failpoints":"journal.before_fsync@6=kill","after_death":"power-loss:tear:0.5:5"}]'
        )
        journal = result.directory / "journal"
        kept = [
            s.record
            for s in scan_journal(journal).records
            if not isinstance(s.record, TailDroppedRecord)
        ]
        journal.write_bytes(FILE_HEADER + b"".join(encode_frame(r) for r in kept))
        verdicts = {v.invariant: v for v in check_trial(result.directory, mini_golden.directory)}
        assert verdicts["I9"].status == "fail"
        assert "never reported it dropped" in verdicts["I9"].evidence[0]


class TestCorruption:
    @pytest.mark.parametrize(
        "damage", ["corrupt:0.5", "corrupt-crc:0.5", "sector:zero:0.5", "sector:stale:0.5"]
    )
    def test_next_start_refuses_before_any_tool(self, damage: str, run_mini: TrialRunner) -> None:
        """A flipped byte, a digit only the CRC sees or a bad sector inside an earlier record
        stops the next life, naming the file, the offset and the record."""
        result = run_mini(f'[{{"failpoints":"op.after_finish@3=kill","after_death":"{damage}"}}]')
        fault = _events(result, "fault")[0]
        assert fault["landed"], fault
        lives = json.loads((result.directory / "lives.json").read_text())
        assert [life["returncode"] for life in lives] == [-signal.SIGKILL, AGENT_REFUSED]
        assert f"byte {fault['record_offset']} (record #{fault['record']})" in lives[1]["stderr"]
        assert str(result.directory / "journal") in lives[1]["stderr"]
        assert not [
            e for e in read_ledger(result.directory / "world.db") if e.pid == lives[1]["pid"]
        ]
        assert (result.directory / PRISTINE_JOURNAL).exists()
        assert result.status == "pass", result.verdicts

    def test_i9_fails_when_the_agent_runs_on(
        self, run_mini: TrialRunner, mini_golden: Golden
    ) -> None:
        """The checker fails a trial whose agent did not refuse the corrupt journal."""
        result = run_mini('[{"failpoints":"op.after_finish@3=kill","after_death":"corrupt:0.5"}]')
        lives_file = result.directory / "lives.json"
        lives = json.loads(lives_file.read_text())
        lives[1].update(returncode=0, stderr="")
        lives_file.write_text(json.dumps(lives))
        verdicts = {v.invariant: v for v in check_trial(result.directory, mini_golden.directory)}
        assert verdicts["I9"].status == "fail"


class TestVersionSkew:
    SKEW = '[{"failpoints":"op.after_finish@3=kill","after_death":"version-skew"}]'

    def test_next_start_refuses_and_changes_nothing(self, run_mini: TrialRunner) -> None:
        """A newer runtime's frame at the journal's end stops the next life before any tool,
        naming the journal, the offset and the version; the file stays as the fault left it."""
        result = run_mini(self.SKEW)
        fault = _events(result, "fault")[0]
        assert fault["landed"] and fault["version"] == 2, fault
        lives = json.loads((result.directory / "lives.json").read_text())
        assert [life["returncode"] for life in lives] == [-signal.SIGKILL, AGENT_REFUSED]
        assert f"journal: at byte {fault['offset']}: a frame of format 2" in lives[1]["stderr"]
        assert not [
            e for e in read_ledger(result.directory / "world.db") if e.pid == lives[1]["pid"]
        ]
        data = (result.directory / "journal").read_bytes()
        assert (len(data), zlib.crc32(data)) == (fault["journal_size"], fault["journal_crc"])
        assert result.status == "pass", result.verdicts
        assert _verdict(result, "I9")[0] == "pass"
        assert _verdict(result, "I7")[0] == "pass"
        assert _verdict(result, "I8")[0] == "not-judged"

    def test_a_runtime_that_cuts_it_fails_i9(self, run_mini: TrialRunner) -> None:
        """newer-frame-cut takes the frame for a torn tail, cuts it and runs on: I9 fails on
        each count (no refusal, tools run, the file changed); without the fault it passes."""
        result = run_mini(self.SKEW, runtime="newer-frame-cut")
        status, evidence = _verdict(result, "I9")
        assert status == "fail", result.verdicts
        assert any("did not refuse the frame of format 2" in line for line in evidence)
        assert any(" ran s00" in line for line in evidence)
        assert any("is gone" in line for line in evidence)
        plain = run_mini(
            '[{"failpoints":"op.after_finish@3=kill","after_death":"corrupt:0.5"}]',
            runtime="newer-frame-cut",
        )
        assert plain.status == "pass", plain.verdicts


class TestDiskFull:
    @pytest.mark.parametrize("hit", [1, 3, 8])
    def test_full_disk_stops_cleanly_and_recovers(self, hit: int, run_mini: TrialRunner) -> None:
        """ENOSPC on an append stops the agent (AGENT_WRITE_FAILED) before the op; the next
        start recovers."""
        result = run_mini(json.dumps([{"failpoints": f"journal.append@{hit}=enospc"}]))
        lives = json.loads((result.directory / "lives.json").read_text())
        assert lives[0]["returncode"] == AGENT_WRITE_FAILED and "failed" in lives[0]["stderr"]
        assert lives[-1]["returncode"] == 0
        assert result.status == "pass", result.verdicts


# The agent program, with the failpoints' sleep replaced by a hold the test controls:
# where an armed sleep would pause, it says "holding" on stdout and waits for a line
# on stdin. Armed at op.before_intent@1, it holds its journal open (and locked) at
# its first op until the test lets it go on.
HELD_AGENT = """
import sys, time
import harness.failpoints as failpoints
from harness.agent.__main__ import main

class HeldClock:
    def __getattr__(self, name):
        return getattr(time, name)

    def sleep(self, seconds):
        print("holding", flush=True)
        sys.stdin.readline()

failpoints.time = HeldClock()
raise SystemExit(main(sys.argv[1:]))
"""


class TestSecondAgent:
    def test_second_agent_on_one_journal_is_refused(
        self, mini_golden: Golden, tmp_path: Path
    ) -> None:
        """While one agent holds the journal, a second is refused at once and the first goes on."""
        trial = tmp_path / "trial"
        trial.mkdir()
        shutil.copyfile(mini_golden.directory / "plan.json", trial / "plan.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
        with subprocess.Popen(
            [sys.executable, "-I", "-c", HELD_AGENT, str(trial)],
            env={**env, "HARNESS_FAILPOINTS": "op.before_intent@1=sleep(1)"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as first:
            assert first.stdout is not None
            try:
                # The hand-shake: the first has opened the journal and holds at its first op.
                ready, _, _ = select.select([first.stdout], [], [], 30)
                assert ready, "the first agent never reached its first op"
                assert first.stdout.readline() == "holding\n", first.poll()
                second = subprocess.run(
                    [sys.executable, "-I", "-m", "harness.agent", str(trial)],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=30,
                )
                assert second.returncode == AGENT_REFUSED
                assert "held by another live process" in second.stderr
                assert first.poll() is None, "the first agent was disturbed"
                first.communicate("go on\n", timeout=30)  # let go only after the refusal
                assert first.returncode == 0
                assert len(read_ledger(trial / "world.db")) >= len(
                    json.loads((trial / "plan.json").read_text())["steps"]
                )
            finally:
                if first.poll() is None:
                    first.kill()


class TestATornTailLeftForALaterLife:
    def test_a_life_that_died_before_dropping_it_passes_the_tail_on(
        self, run_mini: TrialRunner
    ) -> None:
        """Killed before s003's finish was fsynced, and a power cut tears it: s003 is left
        running behind a torn tail. Life 2 dies at once, before it touches the journal;
        life 3 drops the tail and decides from its valid end, and the trial holds. (Where
        each life's records begin is tested in tests/unit/test_evidence_spans.py.)"""
        tear = {"failpoints": "journal.before_fsync@7=kill", "after_death": "power-loss:tear:0.5:7"}
        result = run_mini(
            json.dumps(
                [
                    tear,
                    {"kill_after_ms": 0},
                    {},
                ]
            )
        )
        spawns = _events(result, "spawn")
        assert spawns[1]["journal_size"] == spawns[2]["journal_size"]  # life 2 wrote nothing
        assert spawns[1]["journal_crc"] == spawns[2]["journal_crc"]
        fault = _events(result, "fault")[0]
        assert fault["garbage"] == 7 and int(str(fault["valid_end"])) < int(
            str(spawns[2]["journal_size"])
        )
        evidence = TrialEvidence(result.directory, None)
        assert evidence.ops_at_start(3)["s003"].state == "running"
        assert result.status == "pass", result.verdicts
