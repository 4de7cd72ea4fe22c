"""Batches side by side on one pool stop after the very trials a campaign run alone stops
after: the first result ``stop`` accepts, in order, and the window's worth in flight."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.chaos import campaign
from harness.chaos.campaign import Batch, CampaignConfig
from harness.chaos.schedule import CrashSchedule
from harness.chaos.trial import TrialResult, TrialSpec


def _result(label: str) -> TrialResult:
    spec = TrialSpec("a.toml", 1, CrashSchedule(()), "real", label)
    return TrialResult(spec, Path(label), (), 1, 0, (), (), 1.0)


class _LastInFirstOut:
    """A pool that finishes the latest task first: results come back out of order."""

    window = 4

    def __init__(self) -> None:
        self.pending: list[tuple[int, Any]] = []
        self.submitted: list[str] = []

    def submit(self, function: Callable[[Any], Any], argument: Any) -> int:
        self.submitted.append(argument)
        self.pending.append((len(self.submitted) - 1, argument))
        return len(self.submitted) - 1

    def next_result(self) -> tuple[int, TrialResult]:
        index, label = self.pending.pop()
        return index, _result(label)


class _Runner(campaign._BatchRunner):
    def __init__(self, batches: list[Batch], sizes: list[int], pool: _LastInFirstOut) -> None:
        self.batches = batches
        self.pool = pool  # type: ignore[assignment]
        self._sizes = dict(zip((id(b) for b in batches), sizes, strict=True))

    def tasks(self, batch: Batch) -> Iterator[Any]:
        name = batch.config.runtime
        yield from (f"{name}{n}" for n in range(self._sizes[id(batch)]))


class TestRunBatches:
    def test_a_stop_ends_a_batch_after_the_window_in_flight(self, tmp_path: Path) -> None:
        """A batch caught at its sixth trial runs nine (the window of four from there), and
        no trial past them is ever handed to the pool; a batch beside it runs whole."""
        caught = Batch(
            CampaignConfig(tmp_path, ("a.toml",), 1, runtime="a"),
            stop=lambda r: r.spec.label == "a5",
        )
        whole = Batch(CampaignConfig(tmp_path, ("a.toml",), 1, runtime="b"))
        pool = _LastInFirstOut()
        ended: list[int] = []
        seen: list[tuple[int, str]] = []
        results = _Runner([caught, whole], [20, 3], pool).run(
            lambda n, r: seen.append((n, r.spec.label)), lambda n, rs: ended.append(n)
        )
        assert [r.spec.label for r in results[0]] == [f"a{n}" for n in range(9)]
        assert [r.spec.label for r in results[1]] == ["b0", "b1", "b2"]
        assert sorted(ended) == [0, 1]
        assert [label for n, label in seen if n == 0] == [f"a{n}" for n in range(9)]
        assert sorted(pool.submitted) == sorted([f"a{n}" for n in range(9)] + ["b0", "b1", "b2"])
