"""Crash states: the folders a power cut may legally leave, from one trace.

A cut that drops every unsynced change is one crash state; a file system may leave others.
This module lists, for one cut, the independent choices a file system may make, each a
*unit* with its options (option 0 always loses what was not synced):

- a file's unsynced appends: an in-order prefix of them kept (the writes of an append-only
  file reach the disk in order, as ext4's ``data=ordered`` writes them);
- a file's unsynced writes in place: each region kept or lost on its own;
- a file truncated since its last fsync: the truncation undone, kept with the writes after
  it lost, or kept with them;
- the name changes (create, rename, link, unlink) of one file or folder not yet made
  durable by a folder's fsync: undone or kept, together, whatever happened to its data;
- in the ``weak`` model only, a file's changed 512-byte sectors: all as chosen above, or
  some of them lost (``tear_masks``): a write that reached the disk sector by sector.

Two file-system models (``MODELS``): ``ordered``, the default, as ext4's
``data=ordered`` (appends kept as in-order prefixes, no write torn); ``weak``, the weakest
POSIX one (any changed sector of an unsynced write lost on its own). ``pick`` turns a
state number into one option per unit: state 0 keeps nothing unsynced; with few states
(``EXHAUSTIVE_LIMIT``) states 1 to N-1 are the other combinations in an order drawn from
``seed``; with many, each option is drawn from ``seed`` and the state's number.
Pure functions: the observer builds the units from its trace and applies the choice.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

__all__ = [
    "EXHAUSTIVE_LIMIT",
    "MAX_REGIONS",
    "MODELS",
    "SECTOR",
    "TEAR_PATTERNS",
    "changed_sectors",
    "file_options",
    "pick",
    "tear",
    "tear_masks",
]

EXHAUSTIVE_LIMIT = 4096
"""At most this many states in all: each is enumerated, state ``k`` the ``k``-th of them."""
MAX_REGIONS = 8
"""Regions of a file rewritten in place chosen one by one; past them, the rest as one."""
MODELS = ("ordered", "weak")
"""The file-system models a cut's crash states follow (the module's docstring)."""
SECTOR = 512
"""The unit a write may be torn in, in the ``weak`` model: a disk sector."""
TEAR_PATTERNS = 8
"""At most this many ways a file's changed sectors are torn: every one when there are
few, else drawn from ``seed``."""


def file_options(
    durable: bytes,
    current: bytes,
    writes: Sequence[tuple[int, int]],
    cut_to: int | None,
) -> list[tuple[str, bytes]]:
    """A file's possible contents after the cut, as ``(label, bytes)``, the first its
    durable content: from what it holds now (``current``), its unsynced ``writes``
    (offset, length, in order) and the length it was truncated to since its last fsync
    (``cut_to``, None if it was not)."""
    options = [("lost", durable)]
    if current == durable:
        return options
    if cut_to is not None:
        truncated = durable[:cut_to]
        if truncated not in (durable, current):
            options.append((f"truncated to {cut_to} bytes, the writes after it lost", truncated))
        options.append(("kept", current))
        return options
    if writes and _appends(len(durable), writes, len(current)):
        end = len(durable)
        for n, (_, length) in enumerate(writes, 1):
            end += length
            label = "kept" if n == len(writes) else f"{n} of {len(writes)} appends kept"
            options.append((label, current[:end]))
        return options
    regions = _regions(writes, len(current))
    if not regions:
        options.append(("kept", current))
        return options
    for mask in range(1, 2 ** len(regions)):
        kept = [r for i, r in enumerate(regions) if mask >> i & 1]
        label = "kept" if len(kept) == len(regions) else _kept_regions(kept, len(regions))
        options.append((label, _overlay(durable, current, kept)))
    return options


def _appends(start: int, writes: Sequence[tuple[int, int]], size: int) -> bool:
    """Whether the writes append, each where the one before ended, from ``start`` to
    ``size``."""
    end = start
    for offset, length in writes:
        if offset != end:
            return False
        end += length
    return end == size


def _regions(writes: Sequence[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """The writes' byte ranges merged where they overlap or touch (one region's bytes are
    one write's or several's, past telling apart), at most ``MAX_REGIONS``, within the
    file's size now."""
    spans = sorted((offset, min(offset + length, size)) for offset, length in writes)
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    if len(merged) > MAX_REGIONS:
        merged[MAX_REGIONS - 1 :] = [(merged[MAX_REGIONS - 1][0], merged[-1][1])]
    return merged


def _overlay(durable: bytes, current: bytes, kept: list[tuple[int, int]]) -> bytes:
    """The durable content with the kept regions' bytes as they are now; a region past the
    durable end extends the file (a gap before it reads as zeros, as a hole does)."""
    result = bytearray(durable)
    for start, end in kept:
        if end > len(result):
            result.extend(bytes(end - len(result)))
        result[start:end] = current[start:end]
    return bytes(result)


def _kept_regions(kept: list[tuple[int, int]], of: int) -> str:
    spans = ", ".join(f"{start}-{end}" for start, end in kept)
    return f"{len(kept)} of {of} regions kept (bytes {spans})"


def changed_sectors(durable: bytes, current: bytes, sector: int = SECTOR) -> list[int]:
    """The numbers of the ``sector``-sized blocks where ``current`` differs from
    ``durable`` (a block past the durable end differs)."""
    return [
        start // sector
        for start in range(0, len(current), sector)
        if current[start : start + sector] != durable[start : start + sector]
    ]


def tear_masks(count: int, seed: str) -> list[frozenset[int]]:
    """Ways to tear ``count`` changed sectors: each a set of them (by position, from 0)
    that did not reach the disk, never empty. Every one when there are at most
    ``TEAR_PATTERNS``, else that many distinct ones drawn from ``seed``."""
    if count < 1:
        return []
    if 2**count - 1 <= TEAR_PATTERNS:
        return [frozenset(i for i in range(count) if mask >> i & 1) for mask in range(1, 2**count)]
    rng = random.Random(seed)
    masks: list[frozenset[int]] = []
    while len(masks) < TEAR_PATTERNS:
        lost = frozenset(i for i in range(count) if rng.random() < 0.5)
        if lost and lost not in masks:
            masks.append(lost)
    return masks


def tear(durable: bytes, data: bytes, lost: Sequence[int], sector: int = SECTOR) -> bytes:
    """``data`` with the sectors numbered in ``lost`` as the disk held them before: the
    durable bytes there, zeros past the durable end (the file's size reached the disk,
    that sector's data did not). The length stays ``data``'s."""
    result = bytearray(data)
    for number in lost:
        start = number * sector
        if start >= len(result):
            continue
        end = min(start + sector, len(result))
        old = durable[start:end]
        result[start:end] = old + bytes(end - start - len(old))
    return bytes(result)


def pick(sizes: Sequence[int], state: int, seed: str) -> tuple[list[int], int, bool]:
    """Each unit's option in crash state ``state``, the number of states, and whether they
    are enumerated (else drawn from ``seed`` and ``state``). State 0 chooses option 0
    everywhere; enumerated, states 1 to N-1 are the other combinations in an order drawn
    from ``seed``, and a state past them is one of them again."""
    total = math.prod(sizes)
    if state == 0 or total == 1:
        return [0] * len(sizes), total, total <= EXHAUSTIVE_LIMIT
    if total <= EXHAUSTIVE_LIMIT:
        order = list(range(1, total))
        random.Random(seed).shuffle(order)
        rest = order[(state - 1) % (total - 1)]
        choices = []
        for size in sizes:
            rest, choice = divmod(rest, size)
            choices.append(choice)
        return choices, total, True
    rng = random.Random(f"{seed}:{state}")
    return [rng.randrange(size) for size in sizes], total, False
