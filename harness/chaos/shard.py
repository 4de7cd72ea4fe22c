"""A shard of a campaign (``--shard K/N``): a deterministic share of its trials.

The shards of one campaign seed are disjoint and together are the whole
campaign, on every machine: a trial belongs to the shard its id hashes to, a
numbered random batch to the shard its number falls to. ``summary.json``
records which shard a run folder was, so ``python -m harness merge`` can tell
whether every shard is there.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.chaos.trial import TrialSpec

__all__ = ["Shard"]


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` of ``count`` (from 1): a deterministic share of a campaign's trials.

    A trial belongs to the shard its id hashes to (CRC-32: the same on every
    machine and Python), so shards of one seed are disjoint and their union is
    the whole campaign; a numbered batch belongs to shard ``(batch % count) + 1``.
    """

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise ValueError(f"shard {self.index}/{self.count}: want 1 <= K <= N")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"K/N"``, for example ``"2/4"``; ValueError otherwise."""
        index, slash, count = text.partition("/")
        if not (slash and index.isdigit() and count.isdigit()):
            raise ValueError(f"shard {text!r}: expected K/N, for example 2/4")
        return cls(int(index), int(count))

    def keeps(self, spec: TrialSpec) -> bool:
        return zlib.crc32(spec.trial_id.encode()) % self.count == self.index - 1

    def owns_batch(self, batch: int) -> bool:
        return batch % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
