"""A real report, opened in a headless Chromium: what a reader sees, not the HTML written.

Two real trials of the mini scenario under the ``replay-success`` broken runtime
(killed after the intent of s003: it runs s001 and s002 again, so it fails; and
one life without a kill, which passes), written as a run folder with a
self-check row that caught it. The browser is the one ``make browser`` fetches;
when it is missing the test fetches it through that target, and fails with the
reason when it cannot: never skipped.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import Golden, TrialResult
from harness.report.browser import open_page, render
from harness.report.files import write_run_reports
from harness.report.html import write_index_html
from harness.report.model import RunInfo, SelfCheckRow
from tests.integration.conftest import TrialRunner

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def trials(
    tmp_path_factory: pytest.TempPathFactory,
    mini_golden: Golden,
    supervisor: Supervisor,
    tables: dict[str, Path],
) -> tuple[Path, TrialResult, TrialResult]:
    """A run folder with one failed and one passing trial, and a self-check that caught."""
    run_dir = tmp_path_factory.mktemp("rendered")
    trial = TrialRunner(run_dir / "trials", mini_golden, supervisor, tables)
    failed = trial('[{"failpoints":"op.after_intent@3=kill"}]', "replay-success")
    passed = trial("[{}]", "replay-success")
    assert (failed.status, passed.status) == ("fail", "pass"), (failed.verdicts, passed.verdicts)
    caught = SelfCheckRow(
        "replay-success", "re-runs durable successes", "sigkill", ("I1",), 1, failed
    )
    results: list[TrialResult] = [failed, passed]
    write_run_reports(RunInfo(run_dir, 3, "replay-success", ("mini",)), results, [caught])
    return run_dir, failed, passed


@pytest.fixture
def run_dir(trials: tuple[Path, TrialResult, TrialResult]) -> Path:
    return trials[0]


def test_the_failures_list_shows_each_failure_with_its_replay(browser: None, run_dir: Path) -> None:
    shown = render(
        run_dir / "index.html",
        {
            "heading": "#failures",
            "failure": "ol.failures > li",
            "replay": "ol.failures .replay code",
            "self-check": "table .badge",
        },
    )
    assert shown.found["heading"] == ["Failures: 1 trial failed, 0 could not be judged"]
    (failure,) = shown.found["failure"]
    assert "I1 success never re-executed once durable or reported" in failure
    (replay,) = shown.found["replay"]
    assert " -m harness trial " in replay
    assert "--runtime replay-success" in replay
    assert "CAUGHT" in shown.found["self-check"] and "PASS" in shown.found["self-check"]


def test_the_copy_button_copies_the_replay(browser: None, run_dir: Path) -> None:
    shown = render(run_dir / "index.html", ["ol.failures button.copy"], clicks=["button.copy"])
    assert shown.found["ol.failures button.copy"] == ["copied"]


def test_the_status_filter_shows_only_that_status(browser: None, run_dir: Path) -> None:
    with open_page(run_dir / "index.html") as page:

        def statuses() -> list[str]:
            """The status badges of the trial rows shown."""
            badges = page.query_selector_all("#trials tbody tr .badge")
            return [badge.inner_text() for badge in badges if badge.is_visible()]

        assert sorted(statuses()) == ["FAIL", "PASS"]
        assert page.inner_text("#shown") == "trials 1-2 of 2 shown (page 1 of 1)"
        page.check("input[name=status][value=fail]")
        assert statuses() == ["FAIL"]
        page.check("input[name=status][value=pass]")
        assert statuses() == ["PASS"]
        page.check("input[name=status][value=unknown]")
        assert statuses() == []
        assert page.inner_text("#shown").startswith("trials 0-0 of 0 shown")


def test_the_trials_come_a_page_at_a_time(
    browser: None, trials: tuple[Path, TrialResult, TrialResult], tmp_path: Path
) -> None:
    """150 passing trials and a failed one: 100 a page, the failed one first; the next
    page holds the rest; filtering by "failed" goes back to one page."""
    _, failed, passed = trials
    many = [replace(passed, spec=replace(passed.spec, label=f"p{n:03}")) for n in range(150)]
    write_index_html(tmp_path, [*many, failed], [])
    with open_page(tmp_path / "index.html") as page:
        rows = page.locator("#trials tbody tr:visible")
        assert page.inner_text("#shown") == "trials 1-100 of 151 shown (page 1 of 2)"
        assert rows.count() == 100 and "FAIL" in rows.first.inner_text()
        page.click("#next")
        assert page.inner_text("#shown") == "trials 101-151 of 151 shown (page 2 of 2)"
        assert rows.count() == 51 and page.is_disabled("#next")
        page.check("input[name=status][value=fail]")
        assert page.inner_text("#shown") == "trials 1-1 of 1 shown (page 1 of 1)"
