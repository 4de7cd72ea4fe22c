"""The harness end to end: real agent processes, real SIGKILL, real restarts."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.agent.broken import BROKEN_RUNTIMES
from harness.chaos.campaign import CampaignConfig, random_picks, run_trials, scenario_seed
from harness.chaos.mutations import MUTATIONS
from harness.chaos.schedule import COMPACTION_FAILPOINTS, OP_FAILPOINTS, RECOVERY_FAILPOINTS
from harness.chaos.trial import Golden, TrialResult
from harness.check.invariants import check_trial
from harness.runtime.journal import scan_journal
from harness.runtime.records import DecisionRecord
from harness.world.store import read_ledger
from tests.integration.conftest import MINI, TrialRunner

ROOT = Path(__file__).parent.parent.parent


def _failed(result: TrialResult) -> str:
    return "\n".join(
        f"{v.invariant}: {'; '.join(v.evidence)}" for v in result.verdicts if v.status != "pass"
    )


class TestKillAtEachFailpoint:
    @pytest.mark.parametrize("failpoint", OP_FAILPOINTS)
    def test_every_op_failpoint_keeps_every_invariant(
        self, failpoint: str, run_mini: TrialRunner, mini_golden: Golden
    ) -> None:
        """A kill at each op failpoint, at each of its hits, keeps every invariant."""
        hits = mini_golden.hits.get(failpoint, 0)
        assert hits > 0, f"the mini scenario never reaches {failpoint}"
        for hit in range(1, hits + 1):
            result = run_mini(json.dumps([{"failpoints": f"{failpoint}@{hit}=kill"}]))
            assert result.kills == 1 and result.reached[0].startswith(f"{failpoint} {hit}")
            assert result.status == "pass", _failed(result)

    @pytest.mark.parametrize(
        ("point", "first_kill", "op_id", "decision"),
        [
            ("recovery.after_decision", "op.after_intent@3", "s003", "verify"),
            ("recovery.after_hint", "op.after_intent@3", "s003", "verify"),
            ("recovery.before_retry", "op.after_intent@1", "s001", "retry"),
        ],
    )
    def test_kill_during_recovery_decides_the_same(
        self, point: str, first_kill: str, op_id: str, decision: str, run_mini: TrialRunner
    ) -> None:
        """A second kill inside recovery leads to the same decisions on the next start."""
        assert point in RECOVERY_FAILPOINTS
        result = run_mini(
            json.dumps([{"failpoints": f"{first_kill}=kill"}, {"failpoints": f"{point}@1=kill"}])
        )
        assert result.kills == 2, result.reached
        assert result.status == "pass", _failed(result)
        decisions = [
            (s.record.state.value, s.record.decision.value)
            for s in scan_journal(result.directory / "journal").records
            if isinstance(s.record, DecisionRecord) and s.record.op_id == op_id
        ]
        # life 1: not started; lives 2 (killed in recovery) and 3: the same decision
        assert decisions == [("not_started", "skip"), ("running", decision), ("running", decision)]

    def test_verify_redoes_an_absent_effect_as_a_linked_op(self, run_mini: TrialRunner) -> None:
        """A tap killed before its effect is checked, found absent, and redone once as s003.redo."""
        result = run_mini(json.dumps([{"failpoints": "op.after_intent@3=kill"}]))
        ops = [(e.op_id, e.tool) for e in read_ledger(result.directory / "world.db")]
        assert ("s003", "ui_tap") not in ops
        assert ops.count(("s003.redo", "ui_tap")) == 1
        assert ("s003.check", "ui_dump") in ops

    def test_verify_keeps_a_present_effect(self, run_mini: TrialRunner) -> None:
        """A tap killed after its effect is checked, found present, and not redone."""
        result = run_mini(json.dumps([{"failpoints": "op.after_effect@3=kill"}]))
        ops = [e.op_id for e in read_ledger(result.directory / "world.db")]
        assert ops.count("s003") == 1 and "s003.redo" not in ops and "s003.check" in ops
        assert result.status == "pass", _failed(result)


TARGETED = {
    "replay-success": '[{"failpoints":"op.before_intent@3=kill"}]',
    "retry-non-idempotent": '[{"failpoints":"op.after_intent@3=kill"}]',
    "effect-before-intent": "[]",
    "decide-from-current-table": (
        '[{"failpoints":"op.after_intent@3=kill"},{"table":"reclassified"}]'
    ),
    "retry-failed": '[{"failpoints":"op.before_intent@5=kill"}]',
    "drop-verify-hint": '[{"failpoints":"op.after_intent@3=kill"}]',
    "running-as-not-started": '[{"failpoints":"op.after_intent@3=kill"}]',
    "no-intent-fsync": '[{"failpoints":"op.after_effect@3=kill"}]',
    "no-finish-fsync": '[{"failpoints":"op.before_intent@2=kill"}]',
    "verify-safe": '[{"failpoints":"op.after_intent@1=kill"}]',
    "wrong-snapshot": "[]",
    "forgets-resolution": '[{"failpoints":"op.after_intent@3=kill"}]',
    "no-tail-report": '[{"failpoints":"journal.before_fsync@3=kill"}]',
    "retry-lost-reply": '[{"failpoints":"op.after_effect@2=kill"}]',
    "no-crc-check": '[{"failpoints":"op.after_finish@3=kill","after_death":"corrupt:0.5"}]',
    "zeros-end-journal": '[{"failpoints":"op.after_finish@3=kill","after_death":"corrupt:0.5"}]',
    "newer-frame-cut": '[{"failpoints":"op.after_finish@3=kill","after_death":"corrupt:0.5"}]',
    "unlisted-as-read-only": '[{"failpoints":"op.after_intent@3=kill"},{"table":"reclassified"}]',
    "unawaited-intent": '[{"failpoints":"op.after_effect@2=kill"}]',
    "one-current-op": '[{"failpoints":"op.before_intent@5=kill"}]',
    "no-op-lock": "[]",
    "stale-offset-truncate": '[{"failpoints":"journal.append@3=enospc"}]',
    "cancel-left-running": '[{"failpoints":"op.after_intent@3=kill"}]',
    "gives-up-unknown": "[]",
    "lost-reply-ok": '[{"failpoints":"op.after_effect@3=kill"}]',
    "wrong-result": '[{"failpoints":"op.after_finish@2=kill"}]',
    "content-by-tool": '[{"failpoints":"op.after_intent@3=kill"}]',
    "cuts-last-record": '[{"failpoints":"op.after_finish@3=kill"}]',
    "effect-reported-failed": '[{"failpoints":"op.after_effect@2=kill"}]',
    "retry-never-run": '[{"failpoints":"op.after_effect@1=kill"}]',
    "fsync-wrong-fd": '[{"failpoints":"op.before_intent@2=kill"}]',
    "no-dir-fsync": '[{"failpoints":"op.before_intent@2=kill"}]',
    "no-journal-lock": '[{"failpoints":"op.after_intent@2=kill"}]',
    "compaction-drops-running": '[{"failpoints":"op.after_intent@3=kill"}]',
    "compaction-drops-resolution": (
        '[{"failpoints":"op.after_intent@3=kill"},{"failpoints":"agent.before_exit@1=kill"}]'
    ),
    "compaction-unsynced": '[{"failpoints":"op.after_intent@3=kill"}]',
    "compaction-no-dir-fsync": '[{"failpoints":"op.after_intent@3=kill"}]',
    "sync-file-range": '[{"failpoints":"op.before_intent@2=kill"}]',
    "pwritev-no-fsync": '[{"failpoints":"op.before_intent@2=kill"}]',
    "stdio-no-fsync": '[{"failpoints":"op.before_intent@2=kill"}]',
    "rename-no-file-fsync": '[{"failpoints":"op.before_intent@2=kill"}]',
    "truncate-rewrite-no-fsync": '[{"failpoints":"op.before_intent@2=kill"}]',
    "key-changes-on-retry": '[{"failpoints":"op.after_effect@1=kill"}]',
    "reconcile-new-key": (
        '[{"failpoints":"op.after_intent@3=kill"},{"failpoints":"op.after_effect@1=kill"}]'
    ),
    "key-window-never-passes": '[{"failpoints":"op.after_intent@1=kill"}]',
    "answers-reused-id": '[{"failpoints":"op.after_intent@3=kill"}]',
    "awaits-nothing": '[{"failpoints":"op.after_intent@3=kill"}]',
    "recovers-in-flight": '[{"failpoints":"op.after_intent@3=kill"}]',
    "failed-group-write-fails-all": '[{"failpoints":"journal.append@3=enospc"}]',
    "reconciles-at-once": '[{"failpoints":"op.after_intent@3=kill"}]',
    "both-apis-at-once": '[{"failpoints":"op.after_intent@3=kill"}]',
    "key-from-args": '[{"failpoints":"op.after_intent@3=kill"}]',
    "content-one-op": '[{"failpoints":"op.after_intent@3=kill"}]',
    "settled-index-one-per-content": '[{"failpoints":"op.after_intent@3=kill"}]',
    # Caught under the drifting model: tests/integration/test_drift.py.
    "content-ignores-volatile": '[{"failpoints":"op.after_finish@2=kill"}]',
    "drift-by-tool": '[{"failpoints":"op.after_finish@2=kill"}]',
    "forwards-in-doubt": '[{"failpoints":"op.after_intent@3=kill"}]',
}
# Caught where a provider deduplicates by key, or is asked by key by a reconciler
# (tests/integration/test_keys.py, test_new_faults.py); mini has neither.
KEYED_ELSEWHERE = frozenset(
    {"key-changes-on-retry", "reconcile-new-key", "key-window-never-passes", "reconciles-at-once"}
)
# Caught where calls are made twice alike on purpose (tests/integration/test_repeated_shapes.py);
# mini's calls all differ.
EQUAL_CALLS_ELSEWHERE = frozenset(
    {"key-from-args", "content-one-op", "settled-index-one-per-content"}
)
# Killed once a restarted life's compaction is done (renamed, its folder fsynced).
_AFTER_COMPACTION = (
    '[{"failpoints":"op.after_intent@3=kill"},{"failpoints":"compact.after_dir_fsync@1=kill"%s}]'
)
# The trial of mini_compact (mini, each restarted life compacting first) that exposes each
# mistake of a compaction: the same schedule in mini, which never compacts, passes.
COMPACTED = {
    "compaction-drops-running": TARGETED["compaction-drops-running"],
    "compaction-drops-resolution": TARGETED["compaction-drops-resolution"],
    "compaction-unsynced": _AFTER_COMPACTION % ',"after_death":"power-loss:drop"',
    "compaction-no-dir-fsync": (
        '[{"failpoints":"op.after_intent@3=kill"},'
        '{"failpoints":"agent.before_exit@1=kill","after_death":"power-loss:drop"}]'
    ),
}
# A kill inside a restarted life's compaction, at each point, with the tap left in flight,
# alone and followed by a power cut.
IN_A_COMPACTION = [
    f'[{{"failpoints":"op.after_intent@3=kill"}},{{"failpoints":"{point}@1=kill"{cut}}}]'
    for point in COMPACTION_FAILPOINTS
    for cut in ("", ',"after_death":"power-loss:drop"')
]
# The trial of mini_batch (a batch of three calls) that exposes each mistake of a batch.
IN_A_BATCH = {
    "both-apis-at-once": '[{"failpoints":"op.after_intent@3=sync-call"}]',
    "unawaited-intent": '[{"failpoints":"op.after_effect@2=kill"}]',
    "one-current-op": '[{"failpoints":"op.before_intent@5=kill"}]',  # the step after the batch
    "cancel-left-running": '[{"failpoints":"op.after_intent@2=cancel"}]',  # the typed text
    # the batch's three intents in one write, cut short by a full disk: the first is whole
    "failed-group-write-fails-all": '[{"failpoints":"journal.append@4=enospc-mid"}]',
}
# The fault beyond SIGKILL that each remaining broken runtime needs (power loss for most).
POWER_LOSS = {
    "no-intent-fsync": (
        '[{"failpoints":"op.after_effect@3=kill","after_death":"power-loss:drop"}]'
    ),
    "no-finish-fsync": (
        '[{"failpoints":"op.before_intent@2=kill","after_death":"power-loss:drop"}]'
    ),
    "no-tail-report": (
        '[{"failpoints":"journal.before_fsync@3=kill","after_death":"power-loss:tear:0.5:3"}]'
    ),
    "retry-lost-reply": '[{"failpoints":"op.reply@2=lost-reply"}]',
    "no-crc-check": '[{"failpoints":"op.after_finish@3=kill","after_death":"corrupt-crc:0.5"}]',
    "zeros-end-journal": (
        '[{"failpoints":"op.after_finish@3=kill","after_death":"sector:zero:0.5"}]'
    ),
    "newer-frame-cut": '[{"failpoints":"op.after_finish@3=kill","after_death":"version-skew"}]',
    "unlisted-as-read-only": (
        '[{"failpoints":"op.after_intent@3=kill","table":"unlisted"},{"table":"unlisted"}]'
    ),
    "lost-reply-ok": '[{"failpoints":"op.request@3=lost-request"}]',
    "effect-reported-failed": '[{"failpoints":"op.reply@2=lost-reply"}]',
    "fsync-wrong-fd": (
        '[{"failpoints":"op.before_intent@2=kill","after_death":"power-loss:drop"}]'
    ),
    "no-dir-fsync": ('[{"failpoints":"op.before_intent@2=kill","after_death":"power-loss:drop"}]'),
    # The next life started while the first is stopped in a call: only the lock stops it.
    "no-journal-lock": '[{"failpoints":"op.after_intent@2=pause(200)"}]',
    # The agent's own misuse of the runtime, which it must refuse.
    "answers-reused-id": '[{"failpoints":"model.issue@3=reuse-id"}]',
    "awaits-nothing": '[{"failpoints":"model.issue@3=async-tool"}]',
    "recovers-in-flight": '[{"failpoints":"op.after_intent@2=recover"}]',
    **dict.fromkeys(
        [
            "sync-file-range",
            "pwritev-no-fsync",
            "stdio-no-fsync",
            "rename-no-file-fsync",
            "truncate-rewrite-no-fsync",
        ],
        '[{"failpoints":"op.before_intent@2=kill","after_death":"power-loss:drop"}]',
    ),
}


class TestBrokenRuntimesAreCaught:
    def test_every_broken_runtime_has_a_targeted_trial(self) -> None:
        """Each shipped broken runtime is exercised below."""
        assert set(TARGETED) == set(BROKEN_RUNTIMES)

    @pytest.mark.parametrize("name", sorted(BROKEN_RUNTIMES))
    def test_caught_by_the_invariant_it_breaks(
        self,
        name: str,
        run_mini: TrialRunner,
        run_mini_batch: TrialRunner,
        run_mini_compact: TrialRunner,
    ) -> None:
        """Each broken runtime fails the invariant it breaks, under the fault it needs (or,
        for a mistake of calls at once, in a batch: the same kill without one passes)."""
        runtime = BROKEN_RUNTIMES[name]
        result = run_mini(TARGETED[name], runtime=name)
        if runtime.needs_threads:
            # Caught on a batch run on threads: tests/integration/test_threads.py.
            assert result.status == "pass", "steps of one call should not expose " + name
            return
        if runtime.needs_model is not None:
            # Caught under the model it needs: tests/integration/test_replan.py, test_drift.py.
            assert result.status == "pass", "the scripted model should not expose " + name
            return
        if name in KEYED_ELSEWHERE:
            assert result.status == "pass", "tools that ignore the key should not expose " + name
            return
        if name in EQUAL_CALLS_ELSEWHERE:
            assert result.status == "pass", "calls that all differ should not expose " + name
            return
        if name in COMPACTED:
            assert result.status == "pass", "a journal never compacted should not expose " + name
            if runtime.needs_fault != "sigkill":
                result = run_mini_compact(_AFTER_COMPACTION % "", runtime=name)
                assert result.status == "pass", "SIGKILL alone should not expose " + name
            result = run_mini_compact(COMPACTED[name], runtime=name)
        elif runtime.needs_batch:
            assert result.status == "pass", "steps of one call should not expose " + name
            result = run_mini_batch(IN_A_BATCH[name], runtime=name)
        elif runtime.needs_fault != "sigkill":
            assert result.status == "pass", "SIGKILL alone should not expose " + name
            result = run_mini(POWER_LOSS[name], runtime=name)
        assert set(runtime.caught_by) & set(result.failed_invariants), _failed(result)

    def test_real_runtime_passes_the_same_trials(
        self, run_mini: TrialRunner, run_mini_batch: TrialRunner, run_mini_compact: TrialRunner
    ) -> None:
        """The real runtime holds every invariant on every targeted schedule."""
        for schedule in {*COMPACTED.values(), *IN_A_COMPACTION}:
            result = run_mini_compact(schedule)
            assert result.status == "pass", _failed(result)
        for schedule in {*TARGETED.values(), *POWER_LOSS.values()}:
            result = run_mini(schedule)
            assert result.status == "pass", _failed(result)
        for schedule in set(IN_A_BATCH.values()):
            result = run_mini_batch(schedule)
            assert result.status == "pass", _failed(result)


class TestReplay:
    def test_replay_command_reproduces_the_verdict(
        self, run_mini: TrialRunner, tmp_path: Path
    ) -> None:
        """The printed replay command runs the same trial and reaches the same verdict."""
        result = run_mini(TARGETED["retry-non-idempotent"], runtime="retry-non-idempotent")
        assert result.status == "fail"
        command = shlex.split(result.spec.replay_command())
        command[0] = sys.executable  # the line names the interpreter relative to the cwd
        replay = subprocess.run(
            [*command, "--reports", str(tmp_path / "replay")],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert replay.returncode == 1, replay.stderr
        verdicts_file = next((tmp_path / "replay").glob("*/trial/verdicts.json"))
        replayed = {v["invariant"]: v["status"] for v in json.loads(verdicts_file.read_text())}
        assert replayed == {v.invariant: v.status for v in result.verdicts}


class TestBadInput:
    def test_malformed_scenario_is_refused_before_any_process(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A scenario folder with a malformed file exits 2 and starts no process."""
        bad = tmp_path / "scenarios"
        bad.mkdir()
        (bad / "ok.toml").write_text((ROOT / "tests/data/scenarios/mini.toml").read_text())
        (bad / "bad.toml").write_text(
            'name = "bad"\ndescription = "x"\n[[steps]]\ntool = "app_instal"\n'
            'args = { package = "p" }\n'
        )

        def no_process(*args: object, **kwargs: object) -> None:
            raise AssertionError("a process was started")

        monkeypatch.setattr(subprocess, "Popen", no_process)
        code = cli.main(["chaos", "--scenarios", str(bad), "--reports", str(tmp_path / "r")])
        assert code == 2
        err = capsys.readouterr().err
        assert "bad.toml" in err and "step 1" in err and "'tool'" in err
        assert not (tmp_path / "r").exists()


SOME_SCENARIOS = (
    "scenarios/phone_task.toml",
    "scenarios/long_lived.toml",
    "scenarios/repo_edit.toml",
)


class TestCampaign:
    def test_small_campaign_in_a_pool_passes(self, tmp_path: Path) -> None:
        """A campaign over a pool of workers runs exhaustive and random trials, all passing."""
        config = CampaignConfig(tmp_path, (MINI,), seed=11, random_trials=4, workers=2)
        seen: list[TrialResult] = []
        results = run_trials(config, seen.append)
        kinds = {r.spec.kind for r in results}
        assert kinds == {"exhaustive", "random"} and len(seen) == len(results) > 40
        assert [r.spec.trial_id for r in results if r.status != "pass"] == []

    def test_same_seed_lists_the_same_random_trials(self, tmp_path: Path) -> None:
        """The campaign seed alone fixes each random trial's scenario, seed and kill draws."""

        def picks(seed: int) -> list[tuple[str, int, float]]:
            config = CampaignConfig(tmp_path, SOME_SCENARIOS, seed, 20)
            return [(s, n, rng.random()) for s, n, rng in random_picks(config)]

        assert picks(5) == picks(5)
        assert picks(5) != picks(6)

    def test_a_sampled_scenario_keeps_its_seed_in_random_trials(self, tmp_path: Path) -> None:
        """A random trial draws its task from a seed of its own, but on a scenario that
        samples its exhaustive trials (a long run): there it shares their seed, so their
        golden run, and only its schedule is its own."""
        config = CampaignConfig(tmp_path, SOME_SCENARIOS, 5, 40)
        picks = random_picks(config)
        long_lived = [(n, rng.random()) for s, n, rng in picks if s.endswith("long_lived.toml")]
        others = [n for s, n, _ in picks if not s.endswith("long_lived.toml")]
        assert len(long_lived) > 1 and len(others) > 1
        assert {n for n, _ in long_lived} == {scenario_seed(5, "scenarios/long_lived.toml")}
        assert len({draw for _, draw in long_lived}) == len(long_lived)
        assert len(set(others)) == len(others)


class TestMutations:
    def test_an_extra_effect_is_seen_beside_a_step_left_out(
        self, run_mini: TrialRunner, mini_golden: Golden, tmp_path: Path
    ) -> None:
        """The extra-effect mutation fails I8 even in a trial whose I8 leaves a step out (a
        step with no check killed after its effect): the row it adds is no step's."""
        result = run_mini('[{"failpoints":"op.after_effect@6=kill"}]')
        i8 = next(v for v in result.verdicts if v.invariant == "I8")
        assert i8.status == "pass" and "unverifiable, left out" in i8.evidence[0]
        mutation = next(m for m in MUTATIONS if m.name == "extra-effect")
        assert mutation.fits(result)
        copy = mutation.copy_and_apply(result, tmp_path / "self-check")
        verdicts = check_trial(copy, mini_golden.directory, restart_budget=8)
        assert [v.status for v in verdicts if v.invariant == "I8"] == ["fail"]


class TestBranchesShownAbleToFail:
    """Each broken runtime below reaches one branch of one invariant, and on its targeted
    trial nothing else fails: the checks as they were before that branch passed it."""

    def test_a_compaction_that_drops_a_resolution_is_named_by_i9(
        self, run_mini_compact: TrialRunner
    ) -> None:
        """Killed after s003's intent, life 2 verifies the tap and resolves it, then is killed
        once done; life 3 compacts without the resolution, verifies s003 again and is
        answered from the journal. Nothing runs twice and the user is told the same: every
        other check holds, and I9 names life 3's compaction and the op it changed."""
        name = "compaction-drops-resolution"
        result = run_mini_compact(COMPACTED[name], runtime=name)
        assert result.failed_invariants == ("I9",), _failed(result)
        assert result.unknown_invariants == (), _failed(result)
        i9 = next(v for v in result.verdicts if v.invariant == "I9")
        assert i9.evidence == (
            "life 3's compaction changed the journal's ops: s003 (ui_tap) was RUNNING and "
            "resolved, is RUNNING",
        )

    def test_a_compaction_that_drops_an_open_op_is_named_by_i9(
        self, run_mini_compact: TrialRunner
    ) -> None:
        """Killed after s003's intent, life 2 compacts the file without the tap, yet decides
        and verifies it from what it read before: every other check holds (a later life
        would find the tap unknown), and I9 names the op life 2's compaction lost."""
        name = "compaction-drops-running"
        result = run_mini_compact(COMPACTED[name], runtime=name)
        assert result.failed_invariants == ("I9",), _failed(result)
        assert result.unknown_invariants == (), _failed(result)
        i9 = next(v for v in result.verdicts if v.invariant == "I9")
        assert i9.evidence == (
            "life 2's compaction changed the journal's ops: s003 (ui_tap, RUNNING) is gone",
        )

    def test_a_life_that_cut_a_whole_record_is_named_by_i9(self, run_mini: TrialRunner) -> None:
        """Killed after s003's finish, life 2 cuts that finish at its start (as a torn tail,
        reported so), verifies s003 and finds its effect: every other check holds, and I9
        names life 2, the life that cut the journal it was handed."""
        result = run_mini(TARGETED["cuts-last-record"], runtime="cuts-last-record")
        assert result.failed_invariants == ("I9",), _failed(result)
        assert result.unknown_invariants == (), _failed(result)
        i9 = next(v for v in result.verdicts if v.invariant == "I9")
        assert len(i9.evidence) == 1, i9.evidence
        assert i9.evidence[0].startswith("life 2 did not keep the journal it started with")
        assert "no torn tail" in i9.evidence[0]
        assert i9.evidence[0].endswith(
            "the journal at the start of life 2 is no prefix of the final journal"
        )

    def test_a_step_reported_failed_that_left_its_effect_fails_i10(
        self, run_mini: TrialRunner
    ) -> None:
        result = run_mini(POWER_LOSS["effect-reported-failed"], runtime="effect-reported-failed")
        assert result.failed_invariants == ("I10",), _failed(result)
        assert result.unknown_invariants == (), _failed(result)
        i10 = next(v for v in result.verdicts if v.invariant == "I10")
        assert i10.evidence[0].startswith("s002 was reported failed, yet left 1 row of world state")

    def test_a_retry_decided_but_never_run_fails_i3(self, run_mini: TrialRunner) -> None:
        """Killed after s001's effect, life 2 decides RETRY and journals a success it never
        ran: the world is the golden run's; I3 sees the decision, and I11 the ack of a
        result no execution returned (the first run's result was never journaled)."""
        result = run_mini(TARGETED["retry-never-run"], runtime="retry-never-run")
        assert result.failed_invariants == ("I3", "I11"), _failed(result)
        assert result.unknown_invariants == (), _failed(result)
        i3 = next(v for v in result.verdicts if v.invariant == "I3")
        assert i3.evidence == (
            "s001: decided RETRY in life 2 but never run again under its id there",
        )
