"""Trials run in a scratch folder (RAM by default), then move to the run folder.

Where a trial ran must change nothing it is judged by, and the scratch folder
goes when the campaign ends: normally, on a failure, or on an interrupt.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.chaos.campaign import CampaignConfig, run_trials
from harness.chaos.trial import TrialResult
from harness.chaos.workdir import SCRATCH_PREFIX, ram_folder
from tests.integration.conftest import MINI


def _base(tmp_path: Path) -> Path:
    """A RAM folder where this machine has one; a folder on the disk otherwise."""
    return ram_folder() or tmp_path / "work"


def _scratches(base: Path) -> list[str]:
    """This process's scratch folders under ``base``."""
    return [p.name for p in base.glob(f"{SCRATCH_PREFIX}{os.getpid()}-*")]


def _verdicts(results: list[TrialResult]) -> dict[str, list[tuple[str, str, tuple[str, ...]]]]:
    return {
        r.spec.trial_id: [(v.invariant, v.status, v.evidence) for v in r.verdicts] for r in results
    }


class TestWorkdir:
    @pytest.mark.long
    def test_the_same_verdicts_in_ram_and_in_the_run_folder(self, tmp_path: Path) -> None:
        """Every exhaustive trial of a fixed seed: the same verdicts, evidence included, and
        each trial's folder in the run folder either way."""
        base = _base(tmp_path)
        runs = {}
        for name, workdir in (("disk", None), ("scratch", base)):
            config = CampaignConfig(
                tmp_path / name, (MINI,), seed=11, random_trials=0, workdir=workdir
            )
            results = run_trials(config, lambda _: None)
            for result in results:
                assert result.directory == tmp_path / name / "trials" / result.spec.trial_id
                assert (result.directory / "verdicts.json").exists()
                assert (result.directory / "journal").exists()
            runs[name] = _verdicts(results)
            goldens = list((tmp_path / name / "golden").glob("*"))
            assert goldens and all((g / "golden.json").exists() for g in goldens)
        assert len(runs["disk"]) > 40
        assert runs["scratch"] == runs["disk"]
        assert _scratches(base) == [], "the scratch folder must go with the campaign"

    @pytest.mark.parametrize("how", [KeyboardInterrupt, RuntimeError])
    def test_nothing_is_left_after_an_interrupt_or_a_failure(
        self, tmp_path: Path, how: type[BaseException]
    ) -> None:
        """An interrupt (or any error) in mid-campaign still removes the scratch folder."""
        base = _base(tmp_path)
        seen: list[TrialResult] = []

        def on_result(result: TrialResult) -> None:
            seen.append(result)
            if len(seen) == 3:
                raise how("stop here")

        config = CampaignConfig(tmp_path / "run", (MINI,), seed=11, random_trials=0, workdir=base)
        with pytest.raises(how):
            run_trials(config, on_result)
        assert _scratches(base) == []
        # What completed was moved out before the end, and stays.
        for result in seen:
            assert json.loads((result.directory / "verdicts.json").read_text())
