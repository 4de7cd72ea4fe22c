"""A model that re-plans: re-issued ids, each batch's calls in another order after a restart.

Real trials of ``scenarios/replan_calls.toml`` (three taps of different elements in one
batch), killed once the batch is done. In the next life every call comes again under a
new id; the re-issuing model asks for them in the plan's order, the re-planning model in
a shuffled one. A runtime that matches a re-issued call by its tool alone
(``content-by-tool``) answers each call from the op at its position: right when the
order is the plan's, another tap's op when it is not. The invariants before I12 hold
both trials; I12, which holds the answering op to the call's own tool and arguments,
fails the second.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.chaos.schedule import CrashSchedule
from harness.chaos.supervisor import Supervisor
from harness.chaos.trial import Golden, TrialResult, TrialSpec, prepare_golden, run_trial

ROOT = Path(__file__).resolve().parents[2]
REPLAN = str(ROOT / "scenarios" / "replan_calls.toml")
SEED = 5
AFTER_THE_TAPS = '[{"failpoints":"op.after_finish@3=kill"}]'
"""Life 1 is killed once the three taps of the first batch are finished (journaled)."""


@pytest.fixture(scope="module")
def replan_golden(tmp_path_factory: pytest.TempPathFactory, supervisor: Supervisor) -> Golden:
    return prepare_golden(REPLAN, SEED, tmp_path_factory.mktemp("golden"), supervisor)


def _trial(
    tmp_path: Path,
    golden: Golden,
    supervisor: Supervisor,
    tables: dict[str, Path],
    runtime: str,
    model: str | None,
) -> TrialResult:
    spec = TrialSpec(
        REPLAN, SEED, CrashSchedule.from_json(AFTER_THE_TAPS), runtime, "test", "custom", model
    )
    folder = tmp_path / f"{runtime}-{model or 'own'}"
    return run_trial(spec, folder, golden.directory, supervisor, tables=tables)


def _history(result: TrialResult) -> list[dict[str, Any]]:
    lines = (result.directory / "history.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _invoked(result: TrialResult, life: int) -> list[str]:
    return [h["op"] for h in _history(result) if h["type"] == "invoke" and h["life"] == life]


def _failed(result: TrialResult) -> list[dict[str, object]]:
    return [v.to_json() for v in result.verdicts if v.status != "pass"]


class TestContentByTool:
    def test_escapes_the_reissuing_model_and_is_caught_under_the_replanning_one(
        self,
        tmp_path: Path,
        replan_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        """One trial: every invariant holds ``content-by-tool`` under the re-issuing model;
        under the re-planning one I12 fails it, naming a tap answered from another tap's
        op, and I11 with it (the model was told a result its own tap never returned);
        every other invariant still holds."""
        old = _trial(tmp_path, replan_golden, supervisor, tables, "content-by-tool", "reissue")
        assert old.status == "pass", _failed(old)
        assert _invoked(old, 2)[:3] == ["s001a~2", "s001b~2", "s001c~2"]
        new = _trial(tmp_path, replan_golden, supervisor, tables, "content-by-tool", None)
        assert new.failed_invariants == ("I11", "I12"), _failed(new)
        told = "\n".join(next(v for v in new.verdicts if v.invariant == "I11").evidence)
        assert "which no execution of it returned" in told
        assert sorted(_invoked(new, 2)[:3]) == ["s001a~2", "s001b~2", "s001c~2"]
        assert _invoked(new, 2)[:3] != ["s001a~2", "s001b~2", "s001c~2"]
        evidence = "\n".join(next(v for v in new.verdicts if v.invariant == "I12").evidence)
        assert "was answered in life 2 from s001" in evidence
        assert "another call's content" in evidence

    def test_the_real_runtime_holds_the_reordered_trial(
        self,
        tmp_path: Path,
        replan_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        """The real runtime answers each shuffled tap from its own op: I12 judged them and
        every invariant holds."""
        result = _trial(tmp_path, replan_golden, supervisor, tables, "real", None)
        assert result.status == "pass", _failed(result)
        answered = {h["op"]: h["answered_by"] for h in _history(result) if h.get("answered_by")}
        assert answered == {"s001a~2": "s001a", "s001b~2": "s001b", "s001c~2": "s001c"}
        i12 = next(v for v in result.verdicts if v.invariant == "I12")
        assert i12.evidence == (
            "3 calls answered by content, each from an op of its own tool and arguments",
        )

    def test_the_reordered_trial_replays_exactly(
        self,
        tmp_path: Path,
        replan_golden: Golden,
        supervisor: Supervisor,
        tables: dict[str, Path],
    ) -> None:
        """Two runs of one re-planning trial issue the same calls in the same order."""
        runs = [
            _trial(tmp_path / name, replan_golden, supervisor, tables, "real", None)
            for name in ("first", "again")
        ]
        first, again = ([(h["type"], h["op"], h["life"]) for h in _history(r)] for r in runs)
        assert first == again
