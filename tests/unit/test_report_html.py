"""The HTML report: ``index.html`` for a run folder and a ``timeline.html`` per trial.

One real trial is run once for the module (the mini scenario, seed 3, killed
after the intent of its third op, s003, a non-idempotent tap) and each test
copies its folder into a run folder of its own, so tests may damage files.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from harness.chaos.faults import PRISTINE_JOURNAL
from harness.chaos.schedule import CrashSchedule, Life
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import TrialResult, TrialSpec, prepare_golden, run_trial
from harness.check.invariants import TITLES, Verdict
from harness.report import html as report_html
from harness.report.html import TRIAL_PAGE, write_index_html, write_trial_page
from harness.report.model import SelfCheckRow
from harness.report.tables import fault_rows

SCENARIO = "tests/data/scenarios/mini.toml"
LABEL = "after_intent@3 <script>alert(1)</script>"


@pytest.fixture(scope="module")
def real_trial(tmp_path_factory: pytest.TempPathFactory) -> TrialResult:
    """A trial run for real: s003 is killed after its intent, then verified and redone."""
    base = tmp_path_factory.mktemp("real-run")
    supervisor = Supervisor()
    golden = prepare_golden(SCENARIO, 3, base / "golden", supervisor)
    spec = TrialSpec(
        SCENARIO,
        3,
        CrashSchedule((Life("op.after_intent@3=kill"),)),
        label=LABEL,
        kind="exhaustive",
    )
    result = run_trial(spec, base / "trials" / spec.trial_id, golden.directory, supervisor)
    assert result.kills == 1 and result.status == "pass", result.verdicts
    return result


def _copy(result: TrialResult, run_dir: Path, *, label: str | None = None) -> TrialResult:
    """The trial, copied into ``run_dir/trials`` (under a new label if given)."""
    spec = result.spec if label is None else replace(result.spec, label=label)
    directory = run_dir / "trials" / spec.trial_id
    shutil.copytree(result.directory, directory)
    (directory / TRIAL_PAGE).unlink(missing_ok=True)
    return replace(result, spec=spec, directory=directory)


@pytest.fixture
def trial(real_trial: TrialResult, tmp_path: Path) -> TrialResult:
    """The real trial, copied into this test's own run folder (``tmp_path``)."""
    return _copy(real_trial, tmp_path)


def _page_of(result: TrialResult) -> str:
    return (result.directory / TRIAL_PAGE).read_text("utf-8")


def _rows(page: str) -> list[tuple[str, str]]:
    """The timeline rows of a page as (tone, plain text)."""
    found = re.findall(r'<li class="r (\w+)">(.*?)</li>', page, flags=re.S)
    return [(tone, html.unescape(re.sub(r"<[^>]+>", " ", body))) for tone, body in found]


def _failing(result: TrialResult, run_dir: Path) -> TrialResult:
    copy = _copy(result, run_dir, label="zz-broken")
    return replace(copy, verdicts=(Verdict("I1", TITLES["I1"], "fail", ("s001 ran twice",)),))


class TestIndexPage:
    def test_names_the_trial_the_seed_and_links_its_page(self, trial: TrialResult) -> None:
        """The index names the trial and its seed and links the trial's page, which exists."""
        run_dir = trial.directory.parent.parent
        write_index_html(run_dir, [trial], [])
        index = (run_dir / "index.html").read_text("utf-8")
        assert trial.spec.trial_id in index
        assert "<dt>seed</dt><dd>3</dd>" in index
        links = re.findall(r'href="([^"]+)"', index)
        assert len(links) == 1
        assert links[0] == f"trials/{trial.spec.trial_id}/{TRIAL_PAGE}"
        assert (run_dir / html.unescape(links[0])).is_file()

    def test_header_takes_the_campaign_numbers_from_summary_json(self, trial: TrialResult) -> None:
        """When summary.json is there, the header shows its seed and overall verdict."""
        run_dir = trial.directory.parent.parent
        summary = {
            "seed": 987654,
            "runtime": "real",
            "trials": 1,
            "failed": 0,
            "unknown": 0,
            "kills": 1,
            "passed": False,
        }
        (run_dir / "summary.json").write_text(json.dumps(summary), "utf-8")
        write_index_html(run_dir, [trial], [])
        index = (run_dir / "index.html").read_text("utf-8")
        assert "<dt>seed</dt><dd>987654</dd>" in index
        assert '<h1>chaos run <span class="badge fail">FAIL</span></h1>' in index

    def test_counts_invariants_and_failpoint_kills(self, trial: TrialResult) -> None:
        """Every invariant has a row, and the failpoint kill is counted by its name."""
        run_dir = trial.directory.parent.parent
        write_index_html(run_dir, [trial], [])
        index = (run_dir / "index.html").read_text("utf-8")
        for key, title in TITLES.items():
            assert f"<td>{key}</td><td>{html.escape(title)}</td>" in index
        assert '<code>op.after_intent</code></td><td class="n">1</td>' in index
        assert "start-up" in index  # every window is listed, even with no kill in it

    def test_self_check_shows_the_replay_of_the_catching_trial(self, trial: TrialResult) -> None:
        """A self-check row names the broken runtime, its outcome and the replay of its catch."""
        run_dir = trial.directory.parent.parent
        caught = _failing(trial, run_dir)
        row = SelfCheckRow(
            "replay-success", "re-runs durable successes", "sigkill", ("I1",), 9, caught
        )
        write_index_html(run_dir, [trial], [row])
        index = (run_dir / "index.html").read_text("utf-8")
        assert "<code>replay-success</code>" in index
        assert "caught by I1" in index
        assert html.escape(caught.spec.replay_command()) in index
        assert (caught.directory / TRIAL_PAGE).is_file()

    def test_lists_failures_first(self, trial: TrialResult) -> None:
        """A failed trial comes before a passing one, even when its id sorts after it."""
        run_dir = trial.directory.parent.parent
        failed = _failing(trial, run_dir)
        write_index_html(run_dir, [trial, failed], [])
        index = (run_dir / "index.html").read_text("utf-8")
        table = index[index.index('id="trials"') :]
        assert table.index(failed.spec.trial_id) < table.index(trial.spec.trial_id)
        assert '<tr class="fail" data-status="fail">' in table

    def test_failures_at_the_top_with_evidence_and_a_copyable_replay(
        self, trial: TrialResult
    ) -> None:
        """Above every table: each failed trial, the invariant it broke with its first line
        of evidence, and its replay command in a code block with a copy button."""
        run_dir = trial.directory.parent.parent
        failed = _failing(trial, run_dir)
        write_index_html(run_dir, [trial, failed], [])
        index = (run_dir / "index.html").read_text("utf-8")
        top = index[index.index('<h2 id="failures">') : index.index("<h2>Invariants</h2>")]
        assert "Failures: 1 trial failed, 0 could not be judged" in top
        assert failed.spec.trial_id in top and trial.spec.trial_id not in top
        assert "I1</span> " + html.escape(TITLES["I1"]) + ": s001 ran twice" in top
        replay = html.escape(failed.spec.replay_command())
        assert f'<code>{replay}</code><button class="copy"' in top

    def test_no_failure_list_when_every_trial_passed(self, trial: TrialResult) -> None:
        run_dir = trial.directory.parent.parent
        write_index_html(run_dir, [trial], [])
        assert 'id="failures"' not in (run_dir / "index.html").read_text("utf-8")

    def test_self_check_badges_say_caught_or_not_caught(self, trial: TrialResult) -> None:
        """A broken runtime caught is CAUGHT (not PASS: it did not pass); one that escaped
        is NOT CAUGHT; one that does not apply says so; the invariant that caught nothing
        is named in the every-invariant-can-fail table."""
        run_dir = trial.directory.parent.parent
        caught = _failing(trial, run_dir)
        rows = [
            SelfCheckRow("replay-success", "re-runs successes", "sigkill", ("I1",), 9, caught),
            SelfCheckRow("skip-verify", "skips VERIFY", "sigkill", ("I2",), 4, None),
            SelfCheckRow("x", "y", "torn_tail", ("I4",), 0, None, not_applicable="no journal"),
        ]
        write_index_html(run_dir, [trial], rows)
        index = (run_dir / "index.html").read_text("utf-8")
        checks = index[index.index("<h2>Self-check: each") : index.index("<h2>Trials</h2>")]
        assert checks.count('<span class="badge pass">CAUGHT</span>') == 1
        assert checks.count('<span class="badge fail">NOT CAUGHT</span>') == 1
        assert checks.count('<span class="badge not-judged">NOT APPLICABLE</span>') == 1
        assert ">PASS<" not in checks
        every = checks[checks.index("every invariant can fail") :]
        assert "<td>I1</td>" in every and "replay-success" in every
        assert every.count("NOTHING CAUGHT BY IT") == len(TITLES) - 2  # all but I1 and F

    def test_faults_table_as_the_console_prints_it(self, trial: TrialResult) -> None:
        """A row per fault kind, from the same rows as the console's table."""
        run_dir = trial.directory.parent.parent
        write_index_html(run_dir, [trial], [])
        index = (run_dir / "index.html").read_text("utf-8")
        faults = index[index.index("<h2>Faults injected (trials)</h2>") :]
        for row in fault_rows([trial], trial.spec.runtime):
            assert f"<code>{row.kind}</code>" in faults

    def test_trials_filter_by_status_and_page(self, trial: TrialResult) -> None:
        """The trials table has a status filter with the counts and a pager."""
        run_dir = trial.directory.parent.parent
        write_index_html(run_dir, [trial, _failing(trial, run_dir)], [])
        index = (run_dir / "index.html").read_text("utf-8")
        assert '<input type="radio" name="status" value="fail"> failed (1)' in index
        assert '<input type="radio" name="status" value="pass"> passed (1)' in index
        assert 'id="prev"' in index and 'id="next"' in index and "const PAGE=100" in index
        assert "http://" not in index and "https://" not in index  # nothing fetched

    def test_pages_for_passing_trials_are_capped(
        self, trial: TrialResult, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Past the cap, passing trials get no page and the index says so; failures always do."""
        monkeypatch.setattr(report_html, "MAX_PASSING_PAGES", 2)
        run_dir = trial.directory.parent.parent
        passing = []
        for n in range(4):
            directory = run_dir / "trials" / f"empty-{n}"
            directory.mkdir()
            passing.append(
                replace(trial, spec=replace(trial.spec, label=f"p{n}"), directory=directory)
            )
        failed = _failing(trial, run_dir)
        write_index_html(run_dir, [*passing, failed], [])
        assert sum((p.directory / TRIAL_PAGE).exists() for p in passing) == 2
        assert (failed.directory / TRIAL_PAGE).exists()
        index = (run_dir / "index.html").read_text("utf-8")
        assert "at most 2 passing ones (3 of 5 trials)" in index
        assert index.count(f'/{TRIAL_PAGE}">timeline</a>') == 3  # the trials table's links

    def test_a_page_that_cannot_be_written_is_not_linked(self, trial: TrialResult) -> None:
        """A trial whose folder is gone still has its row, without a link."""
        run_dir = trial.directory.parent.parent
        gone = replace(
            trial, spec=replace(trial.spec, label="gone"), directory=run_dir / "trials" / "gone"
        )
        write_index_html(run_dir, [trial, gone], [])
        index = (run_dir / "index.html").read_text("utf-8")
        assert gone.spec.trial_id in index
        assert "trials/gone/" not in index


def _unknown(result: TrialResult, run_dir: Path) -> TrialResult:
    """A copy of the trial whose fault-landing verdict could not be decided."""
    copy = _copy(result, run_dir, label="mm-unjudged")
    verdicts = (
        Verdict("I1", TITLES["I1"], "pass", ("3 successes",)),
        Verdict("I3", TITLES["I3"], "not-judged", ("no journal",)),
        Verdict("F", TITLES["F"], "unknown", ("the kill never fired",)),
    )
    return replace(copy, verdicts=verdicts)


def _index(run_dir: Path) -> str:
    return (run_dir / "index.html").read_text("utf-8")


class TestOutcomes:
    def test_invariants_table_has_a_column_per_outcome(self, trial: TrialResult) -> None:
        """The invariants table shows pass, fail, unknown and not-judged as columns, counted."""
        run_dir = trial.directory.parent.parent
        write_index_html(run_dir, [_unknown(trial, run_dir)], [])
        index = _index(run_dir)
        section = index[index.index("<h2>Invariants</h2>") : index.index("<h2>Where")]
        assert "<th>pass</th><th>fail</th><th>unknown</th><th>not-judged</th>" in section
        assert (
            f'<td>I3</td><td>{html.escape(TITLES["I3"])}</td><td class="n">0</td>'
            '<td class="n">0</td><td class="n">0</td><td class="n">1</td>'
        ) in section
        assert (
            f'<tr class="unknown"><td>F</td><td>{html.escape(TITLES["F"])}</td>'
            '<td class="n">0</td><td class="n">0</td><td class="n">1</td><td class="n">0</td>'
        ) in section

    def test_invariants_table_says_to_how_many_trials_each_applied(
        self, trial: TrialResult
    ) -> None:
        """ "applied to N of M trials" per invariant; one that applied to none is named."""
        run_dir = trial.directory.parent.parent
        idle = Verdict("I9", TITLES["I9"], "pass", ("0 injected tears",), applied=False)
        held = Verdict("I9", TITLES["I9"], "pass", ("1 injected tear",))
        first = replace(_copy(trial, run_dir, label="idle-1"), verdicts=(idle,))
        second = replace(_copy(trial, run_dir, label="idle-2"), verdicts=(idle,))
        write_index_html(run_dir, [first, second], [])
        section = _index(run_dir)[: _index(run_dir).index("<h2>Where")]
        assert "<td>applied to 0 of 2 trials</td>" in section
        assert "Applied to no trial (every pass had nothing to judge): I9" in section
        third = replace(_copy(trial, run_dir, label="held"), verdicts=(held,))
        write_index_html(run_dir, [first, second, third], [])
        section = _index(run_dir)[: _index(run_dir).index("<h2>Where")]
        assert "<td>applied to 1 of 3 trials</td>" in section
        assert "Applied to no trial" not in section

    def test_a_pass_with_nothing_to_judge_says_so_on_the_trial_page(
        self, trial: TrialResult
    ) -> None:
        run_dir = trial.directory.parent.parent
        idle = Verdict("I3", TITLES["I3"], "pass", ("0 safe unknown outcomes",), applied=False)
        held = Verdict("I1", TITLES["I1"], "pass", ("3 successes",))
        copy = replace(_copy(trial, run_dir, label="idle"), verdicts=(held, idle))
        assert write_trial_page(run_dir, copy)
        page = _page_of(copy)
        assert page.count("nothing to judge") == 1
        assert page.index("<td>I3</td>") < page.index("nothing to judge")

    def test_an_unknown_trial_has_its_own_badge_and_place(self, trial: TrialResult) -> None:
        """An unknown trial has an amber COULD NOT JUDGE badge, after failures and before passes."""
        run_dir = trial.directory.parent.parent
        unknown, failed = _unknown(trial, run_dir), _failing(trial, run_dir)
        write_index_html(run_dir, [trial, unknown, failed], [])
        table = _index(run_dir)[_index(run_dir).index('id="trials"') :]
        row = table[table.index(unknown.spec.trial_id) :].split("</tr>")[0]
        assert '<span class="badge unknown">COULD NOT JUDGE</span>' in row
        assert "badge pass" not in row and "F (could not judge)" in row
        assert '<tr class="unknown" data-status="unknown">' in table
        positions = [table.index(r.spec.trial_id) for r in (failed, unknown, trial)]
        assert positions == sorted(positions)
        assert (unknown.directory / TRIAL_PAGE).is_file()

    def test_the_overview_counts_unknown_trials_apart(self, trial: TrialResult) -> None:
        """Without summary.json the header counts unknown trials apart and is not a pass."""
        run_dir = trial.directory.parent.parent
        write_index_html(run_dir, [trial, _unknown(trial, run_dir)], [])
        index = _index(run_dir)
        assert "2: 1 pass, 0 fail, 1 unknown" in index
        assert '<h1>chaos run <span class="badge unknown">COULD NOT JUDGE</span></h1>' in index

    def test_a_failure_outranks_unknown_in_the_header(self, trial: TrialResult) -> None:
        """With a failed and an unknown trial the run's badge is FAIL."""
        run_dir = trial.directory.parent.parent
        write_index_html(run_dir, [_unknown(trial, run_dir), _failing(trial, run_dir)], [])
        index = _index(run_dir)
        assert "2: 0 pass, 1 fail, 1 unknown" in index
        assert '<h1>chaos run <span class="badge fail">FAIL</span></h1>' in index

    def test_missing_shards_make_the_header_incomplete(self, trial: TrialResult) -> None:
        """A merged run with shards missing says which, under an INCOMPLETE badge."""
        run_dir = trial.directory.parent.parent
        summary = {"trials": 1, "failed": 0, "passed": False, "missing_shards": ["2/4", "4/4"]}
        (run_dir / "summary.json").write_text(json.dumps(summary), "utf-8")
        write_index_html(run_dir, [trial], [])
        index = _index(run_dir)
        assert '<span class="badge incomplete">INCOMPLETE</span>' in index
        assert "<dt>missing shards</dt><dd>2/4, 4/4: this is not the whole campaign</dd>" in index

    def test_an_interrupted_run_says_so_in_its_badge_and_headline(self, trial: TrialResult) -> None:
        """An interrupted run (summary.json says so) is INTERRUPTED, not FAIL over passes, and
        says it is not the whole campaign; a failure in what completed keeps its FAIL badge."""
        run_dir = trial.directory.parent.parent
        summary = {"trials": 1, "failed": 0, "passed": False, "interrupted": True}
        (run_dir / "summary.json").write_text(json.dumps(summary), "utf-8")
        write_index_html(run_dir, [trial], [])
        index = _index(run_dir)
        assert '<h1>chaos run <span class="badge interrupted">INTERRUPTED</span></h1>' in index
        assert "<dt>interrupted</dt><dd>after 1 completed trials: this is not the whole" in index
        summary = {"trials": 2, "failed": 1, "passed": False, "interrupted": True}
        (run_dir / "summary.json").write_text(json.dumps(summary), "utf-8")
        write_index_html(run_dir, [trial, _failing(trial, run_dir)], [])
        index = _index(run_dir)
        assert (
            '<h1>chaos run <span class="badge interrupted">INTERRUPTED</span> '
            '<span class="badge fail">FAIL</span></h1>'
        ) in index

    def test_the_trial_page_badges_each_outcome(self, trial: TrialResult) -> None:
        """A trial page shows unknown and not-judged verdicts with badges of their own colour."""
        run_dir = trial.directory.parent.parent
        unknown = _unknown(trial, run_dir)
        write_trial_page(run_dir, unknown)
        page = _page_of(unknown)
        assert '<span class="badge not-judged">NOT-JUDGED</span>' in page
        assert '<span class="badge unknown">COULD NOT JUDGE</span>' in page
        assert ".badge.not-judged{background:" in page


class TestTrialPage:
    def test_shows_the_kill_in_the_first_life(self, trial: TrialResult) -> None:
        """The kill is a red row at the end of life 1, naming the failpoint and the op in flight."""
        write_trial_page(trial.directory.parent.parent, trial)
        page = _page_of(trial)
        kills = [text for tone, text in _rows(page) if tone == "kill"]
        assert len(kills) == 1
        assert "op.after_intent 3 s003" in kills[0]
        assert "s003 (ui_tap, attempt 1) in flight, no effect in the ledger" in kills[0]
        life_1 = page[page.index("Life 1") : page.index("Life 2")]
        assert '<section class="life killed">' in page
        assert 'class="r kill"' in life_1

    def test_shows_the_verify_decision_and_hint_for_s003(self, trial: TrialResult) -> None:
        """The VERIFY decision for s003 and its hint are amber rows of life 2."""
        write_trial_page(trial.directory.parent.parent, trial)
        rows = _rows(_page_of(trial))
        verify = [text for tone, text in rows if tone == "verify"]
        assert any("s003" in t and "running [non_idempotent] → VERIFY" in t for t in verify)
        assert any("hint" in t and "s003" in t and "may already have run" in t for t in verify)

    def test_the_hint_event_is_a_row_in_its_place(self, trial: TrialResult) -> None:
        """The model reading s003's hint is a row right after the hint record, before the
        model resolved it; no raw JSON anywhere on the page."""
        write_trial_page(trial.directory.parent.parent, trial)
        page = _page_of(trial)
        rows = [text for _, text in _rows(page[page.index("Life 2") :])]
        read = next(i for i, t in enumerate(rows) if "hint read" in t)
        assert "s003" in rows[read] and "the model was handed the hint" in rows[read]
        assert "hint" in rows[read - 1] and "may already have run" in rows[read - 1]
        resolved = next(i for i, t in enumerate(rows) if "the model resolved it" in t)
        assert read < resolved
        assert '"event":' not in html.unescape(page)  # the event is not dumped as JSON

    def test_marks_the_rows_of_the_ops_a_failed_invariant_names(self, trial: TrialResult) -> None:
        """The evidence "s001 ran twice" marks s001's rows, and only those."""
        failed = _failing(trial, trial.directory.parent.parent)
        write_trial_page(trial.directory.parent.parent, failed)
        page = _page_of(failed)
        marked = re.findall(r'<li class="r \w+ mark" title="([^"]*)">(.*?)</li>', page, re.S)
        assert marked
        for title, body in marked:
            assert "named by the evidence of I1" in title and "s001" in body
        assert 'class="r ok"' in page  # other ops unmarked

    def test_places_ledger_rows_between_intent_and_finish(self, trial: TrialResult) -> None:
        """Every execution is a blue row, after its intent and before its finish."""
        write_trial_page(trial.directory.parent.parent, trial)
        tones_and_rows = _rows(_page_of(trial))
        rows = [text for _, text in tones_and_rows]
        ledger = " ".join(text for tone, text in tones_and_rows if tone == "ledger")
        assert re.findall(r"ledger #(\d+)", ledger) == [str(n) for n in range(1, 8)]
        redo = next(i for i, t in enumerate(rows) if "ledger #4" in t)
        assert "s003.redo" in rows[redo]
        assert "intent" in rows[redo - 1] and "s003.redo" in rows[redo - 1]
        assert "SUCCEEDED" in rows[redo + 1] and "s003.redo" in rows[redo + 1]

    def test_places_acks_where_the_agent_reported_success(self, trial: TrialResult) -> None:
        """An ack follows its op's finish, or in a later life, the model's verification."""
        write_trial_page(trial.directory.parent.parent, trial)
        page = _page_of(trial)
        life_1 = [text for _, text in _rows(page[: page.index("Life 2")])]
        life_2 = [text for _, text in _rows(page[page.index("Life 2") :])]
        ack = next(i for i, t in enumerate(life_1) if "ack" in t and "s001" in t)
        assert "finish" in life_1[ack - 1] and "s001" in life_1[ack - 1]
        ack = next(i for i, t in enumerate(life_2) if "ack" in t and "s001" in t)
        assert "resolved" in life_2[ack - 1] and "s003" in life_2[ack - 1]

    def test_shows_an_after_death_fault(self, trial: TrialResult) -> None:
        """A fault applied to the dead agent's files is a red row after its life's exit."""
        fault = {"event": "fault", "t_ns": 1, "life": 1, "fault": "power-loss:drop", "lost": 61}
        with open(trial.directory / "events.jsonl", "a", encoding="utf-8") as events:
            events.write(json.dumps(fault) + "\n")
        write_trial_page(trial.directory.parent.parent, trial)
        rows = _rows(_page_of(trial))
        faults = [i for i, (tone, t) in enumerate(rows) if tone == "kill" and "power-loss" in t]
        assert len(faults) == 1
        assert "lost 61" in rows[faults[0]][1]
        assert "exit" in rows[faults[0] - 1][1]

    def test_shows_the_spec_replay_and_verdicts(self, trial: TrialResult) -> None:
        """The page holds the replay command and every verdict with its evidence."""
        write_trial_page(trial.directory.parent.parent, trial)
        page = _page_of(trial)
        assert html.escape(trial.spec.replay_command()) in page
        for verdict in trial.verdicts:
            assert html.escape(verdict.evidence[0]) in page
        assert "op.after_intent@3=kill" in page

    def test_escapes_strings_from_data(self, trial: TrialResult) -> None:
        """A label holding a script tag is shown as text, never as markup."""
        run_dir = trial.directory.parent.parent
        write_index_html(run_dir, [trial], [])
        page = _page_of(trial)
        assert "<script>" not in page
        assert html.escape(LABEL) in page
        assert "alert(1)" not in (run_dir / "index.html").read_text("utf-8")


class TestUnreadableTrial:
    def test_a_corrupt_journal_still_gets_a_page_saying_so(self, trial: TrialResult) -> None:
        """Damage mid-journal is named on the page; the supervisor's events are still shown."""
        journal = trial.directory / "journal"
        data = bytearray(journal.read_bytes())
        data[100:110] = b"\xff" * 10  # inside an early record, with valid records after it
        journal.write_bytes(bytes(data))
        write_index_html(trial.directory.parent.parent, [trial], [])
        page = _page_of(trial)
        assert "the journal could not be read" in page
        assert '<p class="problem">' in page
        rows = _rows(page)
        assert any(tone == "kill" for tone, _ in rows)
        assert sum(tone == "ledger" for tone, _ in rows) == 7  # tied to their lives by pid
        assert "Executions outside" not in page

    def test_an_injected_corruption_shows_the_copy_kept_before_it(self, trial: TrialResult) -> None:
        """When the corrupt fault kept the journal's earlier copy, the timeline is read from it."""
        journal = trial.directory / "journal"
        shutil.copyfile(journal, trial.directory / PRISTINE_JOURNAL)
        data = bytearray(journal.read_bytes())
        data[100] ^= 0xFF
        journal.write_bytes(bytes(data))
        write_trial_page(trial.directory.parent.parent, trial)
        page = _page_of(trial)
        assert "the journal could not be read" in page
        assert f"showing {PRISTINE_JOURNAL}" in page
        assert any(tone == "verify" and "s003" in t for tone, t in _rows(page))

    def test_a_folder_with_nothing_readable_gets_a_page(self, trial: TrialResult) -> None:
        """A trial folder emptied of its files still gets a page that lists what is missing."""
        for path in trial.directory.iterdir():
            path.unlink()
        assert write_trial_page(trial.directory.parent.parent, trial)
        page = _page_of(trial)
        assert "could not be read" in page
        assert "world.db" in page and "events.jsonl" in page

    def test_a_crash_while_building_becomes_the_page(
        self, trial: TrialResult, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An error while building a page is written on the page instead of stopping the report."""

        def explode(trial_dir: Path, *, windows: tuple[str, ...] = ()) -> None:
            raise RuntimeError("cannot <read> this")

        monkeypatch.setattr(report_html, "read_timeline", explode)
        assert write_trial_page(trial.directory.parent.parent, trial)
        page = _page_of(trial)
        assert "this page could not be built: RuntimeError: cannot &lt;read&gt; this" in page
