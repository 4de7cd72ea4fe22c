"""A scenario with tools of its own, end to end: real agent processes, real SIGKILL.

The support/billing scenario declares its tools (their true behaviour is the
world's) and names its own tool table (what the runtime believes). Its whole
exhaustive campaign holds for the real runtime; the naive runtime, which
replays everything after a kill, is caught; a table that classes a tool wrongly
is caught by the world; and a bad declaration stops the command line before
anything runs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.chaos.campaign import CampaignConfig, run_trials
from harness.chaos.schedule import CrashSchedule
from harness.chaos.supervisor import Supervisor
from harness.chaos.tables import BASE, scenario_tables
from harness.chaos.trial import TrialResult, TrialSpec, prepare_golden, run_trial
from harness.world.store import effect_rows, read_ledger
from tests.conftest import run_harness
from tests.integration.test_bad_input import (  # noqa: F401 - observer is a fixture
    SPAWNED,
    observer,
)

ROOT = Path(__file__).resolve().parents[2]
BILLING = ROOT / "scenarios" / "support_billing.toml"


def _not_passed(results: list[TrialResult]) -> list[str]:
    return [
        f"{r.spec.trial_id}: "
        + "; ".join(f"{v.invariant} {v.evidence[:1]}" for v in r.verdicts if v.status != "pass")
        for r in results
        if r.status != "pass"
    ]


@pytest.fixture(scope="module")
def billing_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The billing scenario, its tools file and its table, copied to a folder of their own."""
    folder = tmp_path_factory.mktemp("scenarios")
    shutil.copyfile(BILLING, folder / BILLING.name)
    shutil.copytree(BILLING.with_suffix(""), folder / BILLING.stem)
    return folder / BILLING.name


class TestBillingCampaign:
    @pytest.mark.long
    def test_the_real_runtime_holds_on_every_exhaustive_trial(
        self, billing_copy: Path, tmp_path: Path
    ) -> None:
        """Every failpoint at every hit, with every fault the campaign adds: all pass, and the
        lives ran with the scenario's own table."""
        config = CampaignConfig(tmp_path, (str(billing_copy),), seed=7, random_trials=0)
        results = run_trials(config, lambda result: None)
        assert len(results) > 150
        assert _not_passed(results) == []
        reached = {point.split()[0] for r in results for point in r.reached}
        assert {"op.mid_effect", "op.after_intent", "op.after_effect"} <= reached
        assert any("lost-reply" in r.spec.label for r in results)
        spawns = [
            json.loads(line)
            for line in (results[0].directory / "events.jsonl").read_text().splitlines()
            if '"spawn"' in line
        ]
        assert spawns and all(s["table"].endswith(f"{BASE}.toml") for s in spawns)

    def test_the_naive_runtime_is_caught(self, billing_copy: Path, tmp_path: Path) -> None:
        """A runtime that replays every step after a kill re-runs acknowledged successes (I1),
        replays non-idempotent calls (I2) and leaves a second ticket, refund or e-mail (I8)."""
        config = CampaignConfig(
            tmp_path, (str(billing_copy),), seed=7, random_trials=0, runtime="naive"
        )
        results = run_trials(config, lambda result: None)
        failed = {v.invariant for r in results for v in r.verdicts if v.status == "fail"}
        assert {"I1", "I2", "I8"} <= failed
        extra = [
            line
            for r in results
            for v in r.verdicts
            if v.invariant == "I8"
            for line in v.evidence
            if line.startswith("extra effect ('records', 'tickets'")
        ]
        assert extra, "no duplicated ticket seen"


class TestWrongTable:
    def test_a_create_classed_idempotent_is_retried_and_duplicates(
        self, billing_copy: Path, tmp_path: Path
    ) -> None:
        """The table, not the tool, decides recovery: a table that calls create_ticket an
        idempotent write makes the real runtime RETRY it after a kill past its effect, and the
        world has two tickets where the golden run has one (I8)."""
        folder = billing_copy.parent
        wrong = tmp_path / "scenarios"
        shutil.copytree(folder, wrong)
        table = wrong / "support_billing" / "tools.toml"
        text = table.read_text()
        text = text.replace('non_idempotent = ["create_ticket", ', "non_idempotent = [")
        text = text.replace(
            'idempotent_write = ["update_crm"]',
            'idempotent_write = ["update_crm", "create_ticket"]',
        )
        table.write_text(text)
        scenario = str(wrong / "support_billing.toml")
        supervisor = Supervisor()
        tables = scenario_tables(tmp_path / "tables", scenario)
        golden = prepare_golden(scenario, 1, tmp_path / "golden", supervisor, tables=tables)
        hit = 1 + list(golden.ops["op.after_effect"]).index("s003")
        schedule = CrashSchedule.from_json(
            json.dumps([{"failpoints": f"op.after_effect@{hit}=kill"}])
        )
        spec = TrialSpec(scenario, 1, schedule, "real", "wrong-table")
        result = run_trial(spec, tmp_path / "trial", golden.directory, supervisor, tables=tables)
        assert [e.op_id for e in read_ledger(result.directory / "world.db")].count("s003") == 2
        tickets = [
            r for r in effect_rows(result.directory / "world.db") if r.values[0] == "tickets"
        ]
        assert len(tickets) == 2
        assert result.failed_invariants == ("I8",)


class TestBadDeclarationOnTheCommandLine:
    def test_trial_refuses_a_bad_tools_file_before_anything_runs(
        self,
        billing_copy: Path,
        tmp_path: Path,
        observer: Path,  # noqa: F811
    ) -> None:
        """``trial`` on a scenario whose tools file has a bad declaration exits 2 naming the
        tools file, the tool and the field; no process starts and no run folder is made."""
        bad = tmp_path / "scenarios"
        shutil.copytree(billing_copy.parent, bad)
        tools = bad / "support_billing" / "declared_tools.toml"
        tools.write_text(
            tools.read_text().replace('behaviour = "increment"', 'behaviour = "charge"')
        )
        reports = tmp_path / "r"
        done = run_harness(
            "trial",
            str(bad / "support_billing.toml"),
            "--seed",
            "1",
            "--reports",
            str(reports),
            pythonpath=observer,
        )
        assert done.returncode == 2, done.stderr
        assert f"{tools}: tool 'charge_card', field 'behaviour'" in done.stderr
        assert SPAWNED not in done.stderr
        assert not reports.exists()
