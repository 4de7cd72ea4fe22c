"""Hypothesis over real agent processes: the real runtime holds, broken ones shrink and replay.

Every example is a real trial (``harness.strategies.run_case``): a golden run
and a trial of forked agent incarnations, killed by real SIGKILLs. The real
runtime must hold every invariant on drawn scenarios and schedules (15
examples in ``make test``, the audit profile's budget under
``HYPOTHESIS_PROFILE=audit``). Each broken runtime's failure must shrink to at
most 3 steps and 2 kills, and the command its failure message prints must
reproduce it in a fresh process.

Scenarios here draw no transient tool failures, and broken-runtime searches
no random-time kills: see ``TestFindings`` for what the former exposes
in the real runtime, and the latter would not replay exactly.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from harness.agent.broken import BROKEN_RUNTIMES
from harness.chaos.scenario import Scenario, load_scenario, parse_scenario
from harness.chaos.schedule import OP_FAILPOINTS, CrashSchedule
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import TrialResult
from harness.runtime.journal import scan_journal
from harness.runtime.records import FinishRecord
from harness.strategies import (
    crash_schedules,
    describe_failure,
    prepare_case,
    process_settings,
    run_case,
    scenarios,
)

ROOT = Path(__file__).parent.parent.parent
SUPERVISOR = Supervisor(restart_budget=8, timeout_s=60)

# A failure is found in a few examples; shrinking it takes most of the budget.
SEARCH = settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    report_multiple_bugs=False,
    phases=(Phase.generate, Phase.shrink),
    suppress_health_check=(HealthCheck.too_slow,),
)

# Fixed bounds, not a golden run's counts: a kill then names the same crash
# point while shrinking deletes the steps around it.
SEARCH_HITS = dict.fromkeys(OP_FAILPOINTS, 4)

# Broken runtimes a small drawn scenario exposes within the budget: the last
# one only with a power loss. (retry-failed needs one of the few calls that
# fail for good, then a kill after it: about a hundred examples.)
SHRUNK_RUNTIMES = (
    "drop-verify-hint",
    "replay-success",
    "retry-non-idempotent",
    "no-finish-fsync",
)


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the module's cases: equal scenarios share their golden run."""
    return tmp_path_factory.mktemp("cases")


def _shrink(runtime: str, root: Path) -> tuple[TrialResult, str]:
    """Search for a failure of ``runtime``; the shrunk trial and the message it failed with."""
    tried: list[TrialResult] = []

    @SEARCH
    @given(
        scenario=scenarios(max_steps=4, transient_failures=False),
        schedule=crash_schedules(SEARCH_HITS, random_time=False),
    )
    def no_invariant_fails(scenario: Scenario, schedule: CrashSchedule) -> None:
        result = run_case(scenario, schedule, runtime=runtime, root=root, supervisor=SUPERVISOR)
        tried.append(result)
        if result.status == "fail":  # raised, not asserted: the message stays as printed
            raise AssertionError(describe_failure(result))

    with pytest.raises(AssertionError) as failure:
        no_invariant_fails()
    return tried[-1], str(failure.value)  # Hypothesis runs the shrunk example last


def _replay(message: str, reports: Path) -> subprocess.CompletedProcess[str]:
    line = next(line for line in message.splitlines() if line.startswith("replay: "))
    command = shlex.split(line.removeprefix("replay: "))
    command[0] = sys.executable  # the line names the interpreter as a user would type it
    return subprocess.run(
        [*command, "--reports", str(reports)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def _holds(scenario: Scenario, data: st.DataObject, cases: Path) -> None:
    """A drawn crash schedule of ``scenario``'s golden run passes every invariant."""
    golden = prepare_case(scenario, root=cases, supervisor=SUPERVISOR)
    schedule = data.draw(crash_schedules(golden.hits, working_ms=golden.working_ms))
    result = run_case(scenario, schedule, root=cases, supervisor=SUPERVISOR)
    assert result.status == "pass", describe_failure(result)


class TestRealRuntimeHolds:
    @process_settings(15)
    @given(scenario=scenarios(), data=st.data())
    def test_every_invariant_holds_on_drawn_cases(
        self, cases: Path, scenario: Scenario, data: st.DataObject
    ) -> None:
        """The real runtime passes every invariant on drawn scenarios and crash schedules."""
        _holds(scenario, data, cases)

    @process_settings(10)
    @given(scenario=scenarios(max_steps=6, batches=True), data=st.data())
    def test_every_invariant_holds_with_batches(
        self, cases: Path, scenario: Scenario, data: st.DataObject
    ) -> None:
        """The same with calls issued together: kills land among a batch's calls."""
        _holds(scenario, data, cases)


@pytest.mark.long
class TestBrokenRuntimesShrink:
    @pytest.mark.parametrize("runtime", SHRUNK_RUNTIMES)
    def test_failure_shrinks_small_and_replays(self, runtime: str, tmp_path: Path) -> None:
        """A broken runtime's failure shrinks to at most 3 steps and 2 kills and replays."""
        assert runtime in BROKEN_RUNTIMES
        result, message = _shrink(runtime, tmp_path / "cases")
        print(f"shrunk: {message}")  # shown with -rP, and with the failure of any assert below
        scenario = load_scenario(result.spec.scenario)
        assert len(scenario.steps) <= 3 and result.spec.schedule.kills <= 2, message
        real = run_case(
            scenario, result.spec.schedule, root=tmp_path / "cases", reject_unlanded=False
        )
        # The real runtime may not reach a recovery point the broken one did
        # (its kill then does not land: F unknown), but it must fail nothing.
        assert not real.failed_invariants, f"not {runtime}'s mistake: {describe_failure(real)}"
        assert set(real.unknown_invariants) <= {"F"}, describe_failure(real)

        replay = _replay(message, tmp_path / "replay")
        assert replay.returncode == 1, replay.stdout + replay.stderr
        verdicts = json.loads(next((tmp_path / "replay").glob("*/trial/verdicts.json")).read_text())
        replayed = {v["invariant"] for v in verdicts if v["status"] == "fail"}
        assert replayed == set(result.failed_invariants), replay.stdout


# Findings of these strategies (in the runtime or the checkers), reduced by
# hand to a failpoint schedule that replays them exactly. A fixed one stays as
# a regression test; an open one is a strict xfail, so that fixing it turns
# the test into an unexpected pass: the cue to drop the marker (and, for the
# transient retry, to let the tests above draw transient failures again).
TRANSIENT_NAVIGATE = """
name = "transient_navigate"
description = "An idempotent write whose first attempt fails with a transient error"

[[steps]]
tool = "browser_navigate"
args = { url = "https://news.example.org/checkout", fail_attempts = 1 }
[steps.verify]
tool = "browser_snapshot"
path = "history"
contains = "{url}"
"""

READ_THEN_TYPE = """
name = "read_then_type"
description = "A read, then typed text that a kill leaves running"

[[steps]]
tool = "ui_dump"

[[steps]]
tool = "input_text"
args = { field = "title", text = "Buy milk" }
[steps.verify]
tool = "ui_dump"
path = "fields.title"
equals = "{text}"
"""


class TestFindings:
    def test_kill_before_an_in_process_retry_keeps_the_effect(self, cases: Path) -> None:
        """A kill between a transient failure and its retry still ends with the effect."""
        scenario = parse_scenario(TRANSIENT_NAVIGATE, source="<transient>")
        schedule = CrashSchedule.from_json('[{"failpoints":"op.before_intent@2=kill"}]')
        result = run_case(scenario, schedule, root=cases, supervisor=SUPERVISOR, keep_passes=True)
        # The kill landed where it was meant to: at the retry's intent, after the first
        # attempt's transient failure was journaled as retrying (so the op was unsettled).
        assert result.reached == ("op.before_intent 2 s001",), describe_failure(result)
        first_life = [
            s.record
            for s in scan_journal(result.directory / "journal").records
            if isinstance(s.record, FinishRecord) and s.record.incarnation == 1
        ]
        assert [(f.op_id, f.attempt, f.transient, f.retrying) for f in first_life] == [
            ("s001", 1, True, True)
        ]
        verdicts = {v.invariant: v.status for v in result.verdicts}
        assert verdicts["I8"] == "pass", describe_failure(result)  # the effect is there
        assert result.status == "pass", describe_failure(result)  # and nothing else broke

    def test_kill_after_dropping_a_torn_tail_is_no_lost_report(self, cases: Path) -> None:
        """A life killed after cutting a torn tail, before reporting it, fails no invariant."""
        plain = TRANSIENT_NAVIGATE.replace(", fail_attempts = 1", "")
        scenario = parse_scenario(plain, source="<plain>")
        # The kill lands between the journal's truncate-and-fsync and the report's append.
        schedule = CrashSchedule.from_json(
            '[{"failpoints":"journal.before_fsync@2=kill","after_death":"power-loss:tear:0.5:3"},'
            '{"failpoints":"journal.append@1=kill"}]'
        )
        result = run_case(scenario, schedule, root=cases, supervisor=SUPERVISOR)
        assert result.status == "pass", describe_failure(result)

    def test_torn_batch_of_decisions_is_no_violation(self, cases: Path) -> None:
        """A life whose decisions a power loss tore, before it ran anything, is not at fault."""
        scenario = parse_scenario(READ_THEN_TYPE, source="<read-then-type>")
        # Life 1 leaves s002 running; life 2 is killed before fsyncing its decisions
        # (s001 SKIP, s002 VERIFY), and the tear keeps s001's and cuts s002's.
        schedule = CrashSchedule.from_json(
            '[{"failpoints":"op.after_intent@2=kill"},'
            '{"failpoints":"journal.before_fsync@2=kill","after_death":"power-loss:tear:0.5:0"}]'
        )
        result = run_case(scenario, schedule, root=cases, supervisor=SUPERVISOR)
        assert result.status == "pass", describe_failure(result)
