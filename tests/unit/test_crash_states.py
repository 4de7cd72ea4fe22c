"""Crash states: the folders a power cut may legally leave, enumerated from one trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.chaos.crashstates import (
    EXHAUSTIVE_LIMIT,
    TEAR_PATTERNS,
    changed_sectors,
    file_options,
    pick,
    tear,
    tear_masks,
)
from harness.chaos.faults import parse_after_death
from harness.chaos.observer import TRACE_FOLDER, power_cut


def _trace(root: Path, lines: list[str], images: dict[str, bytes]) -> None:
    folder = root / TRACE_FOLDER
    folder.mkdir(exist_ok=True)
    for name, data in images.items():
        (folder / name).write_bytes(data)
    with open(folder / "trace", "a", encoding="utf-8") as out:
        out.writelines(line.format(root=root) + "\n" for line in lines)


class TestFileOptions:
    def test_unsynced_appends_are_kept_as_in_order_prefixes(self) -> None:
        got = file_options(b"head", b"head" + b"aa" + b"bbb", [(4, 2), (6, 3)], None)
        assert got == [
            ("lost", b"head"),
            ("1 of 2 appends kept", b"headaa"),
            ("kept", b"headaabbb"),
        ]

    def test_writes_in_place_are_kept_or_lost_region_by_region(self) -> None:
        """Two regions apart: four contents, each region old or new on its own."""
        old, new = b"0123456789", b"A12345678B"
        contents = [data for _, data in file_options(old, new, [(0, 1), (9, 1)], None)]
        assert contents == [old, b"A123456789", b"012345678B", new]

    def test_a_truncation_may_be_undone_or_kept_without_the_writes_after_it(self) -> None:
        """O_TRUNC and a write: the old content, an empty file, or the new content."""
        got = file_options(b"old contents", b"new", [(0, 3)], 0)
        assert [data for _, data in got] == [b"old contents", b"", b"new"]

    def test_an_unchanged_file_has_one_option(self) -> None:
        assert file_options(b"same", b"same", [], None) == [("lost", b"same")]


class TestPick:
    def test_state_zero_loses_everything_unsynced(self) -> None:
        assert pick([3, 2, 5], 0, "s") == ([0, 0, 0], 30, True)

    def test_few_states_are_enumerated_each_once(self) -> None:
        seen = {tuple(pick([3, 2], k, "s")[0]) for k in range(6)}
        assert len(seen) == 6

    def test_many_states_are_drawn_from_the_seed(self) -> None:
        sizes = [2] * 20
        assert EXHAUSTIVE_LIMIT < 2**20
        first, total, enumerated = pick(sizes, 5, "power-loss:state:5")
        assert (total, enumerated) == (2**20, False)
        assert pick(sizes, 5, "power-loss:state:5")[0] == first  # a replay draws alike
        assert pick(sizes, 6, "power-loss:state:6")[0] != first


class TestStateCut:
    def _journal(self, root: Path) -> None:
        (root / "journal").write_bytes(b"synced" + b"aa" + b"bb")
        _trace(
            root,
            [
                "create 1\t{root}/journal",
                "write 1 0 6\t{root}/journal",
                "fsync 1 img-1-1 6\t{root}/journal",
                "dirfsync 1\t{root}",
                "write 1 6 2\t{root}/journal",
                "write 1 8 2\t{root}/journal",
                "create 1\t{root}/other",
            ],
            {"img-1-1": b"synced"},
        )
        (root / "other").write_bytes(b"")

    def _state(
        self, root: Path, state: int, model: str = "", seed: int | None = 7
    ) -> tuple[bytes, bool, dict[str, Any]]:
        root.mkdir()
        self._journal(root)
        spec = f"power-loss:state:{state}{model}"
        done = power_cut(root, parse_after_death(spec)[1], spec, seed)
        return (root / "journal").read_bytes(), (root / "other").exists(), done

    def test_every_state_is_one_legal_folder_each_once(self, tmp_path: Path) -> None:
        """The journal's appends (3 prefixes) times the new name (undone or kept): six
        states, state 0 losing everything unsynced, the seventh the first drawn again."""
        seen = []
        for state in range(7):
            journal, other, done = self._state(tmp_path / str(state), state)
            assert (done["states"], done["enumerated"], done["state"]) == (6, True, state)
            seen.append((journal, other))
        assert seen[0] == (b"synced", False)
        assert set(seen[:6]) == {
            (journal, other)
            for journal in (b"synced", b"syncedaa", b"syncedaabb")
            for other in (False, True)
        }
        assert seen[6] == seen[1]

    def test_the_order_of_the_states_is_drawn_from_the_trial_seed(self, tmp_path: Path) -> None:
        """The same seed draws the same state again (a replay); the states come in an order
        drawn from it, so the first few asked for are a sample, not the first choices."""
        orders = {}
        for seed in range(6):
            order = tuple(self._state(tmp_path / f"{seed}-{k}", k, seed=seed)[:2] for k in (1, 2))
            again = self._state(tmp_path / f"{seed}-again", 1, seed=seed)[:2]
            assert again == order[0]
            orders[seed] = order
        assert len(set(orders.values())) > 1

    def test_a_rename_is_kept_or_undone_whole(self, tmp_path: Path) -> None:
        """Not yet durable: the old name or the new one, never both, never neither."""
        names = []
        for state in (0, 1):
            root = tmp_path / str(state)
            root.mkdir()
            (root / "new").write_bytes(b"v1")
            _trace(
                root,
                [
                    "create 1\t{root}/old",
                    "fsync 1 img-1-1 2\t{root}/old",
                    "dirfsync 1\t{root}",
                    "rename 1\t{root}/old\t{root}/new",
                ],
                {"img-1-1": b"v1"},
            )
            done = power_cut(root, ["state", str(state)], f"power-loss:state:{state}")
            names.append(sorted(p.name for p in root.iterdir() if p.name != TRACE_FOLDER))
            assert done["states"] == 2
        assert names == [["old"], ["new"]]

    def test_a_file_replaced_by_a_rename_has_its_own_options(self, tmp_path: Path) -> None:
        """A file written whole to a temporary name and renamed over the old one (not yet
        durable): two files at one path, the old one's options apart from the new one's
        (one's choice once indexed the other's: IndexError in a campaign)."""
        seen = set()
        for state in range(4):
            root = tmp_path / str(state)
            root.mkdir()
            (root / "conv").write_bytes(b"v2xx")
            _trace(
                root,
                [
                    "create 1\t{root}/conv",
                    "write 1 0 6\t{root}/conv",
                    "fsync 1 img-1-1\t{root}/conv",
                    "dirfsync 1\t{root}",
                    "create 1\t{root}/conv.tmp",
                    "write 1 0 2\t{root}/conv.tmp",
                    "fsync 1 img-1-2\t{root}/conv.tmp",
                    "write 1 2 2\t{root}/conv.tmp",
                    "rename 1\t{root}/conv.tmp\t{root}/conv",
                ],
                {"img-1-1": b"synced", "img-1-2": b"v2"},
            )
            done = power_cut(root, ["state", str(state)], f"power-loss:state:{state}", 7)
            assert done["states"] == 4
            seen.add((root / "conv").read_bytes())
        assert seen == {b"synced", b"v2", b"v2xx"}

    def test_a_bad_state_is_refused(self) -> None:
        with pytest.raises(ValueError, match="whole number"):
            parse_after_death("power-loss:state:x")


class TestSectorTears:
    def test_the_changed_sectors_are_those_that_differ_or_lie_past_the_synced_end(self) -> None:
        old = bytes(1024)
        new = bytes(512) + b"x" * 600
        assert changed_sectors(old, new) == [1, 2]
        assert changed_sectors(b"same", b"same") == []

    def test_few_sectors_are_torn_every_way(self) -> None:
        """Three changed sectors: the seven non-empty sets of them lost."""
        masks = tear_masks(3, "s")
        assert len(masks) == 7 == len(set(masks)) and frozenset() not in masks

    def test_many_sectors_are_torn_in_ways_drawn_from_the_seed(self) -> None:
        masks = tear_masks(12, "s")
        assert len(masks) == TEAR_PATTERNS == len(set(masks))
        assert tear_masks(12, "s") == masks  # a replay draws alike
        assert tear_masks(12, "t") != masks

    def test_a_lost_sector_holds_what_was_synced_and_zeros_past_its_end(self) -> None:
        """The size reached the disk, that sector's data did not."""
        durable = b"a" * 700
        data = b"b" * 1200
        torn = tear(durable, data, [1, 2])
        assert torn[:512] == b"b" * 512
        assert torn[512:700] == b"a" * 188 and torn[700:] == bytes(500)
        assert len(torn) == len(data)

    def test_the_weak_model_tears_an_unsynced_append_sector_by_sector(self, tmp_path: Path) -> None:
        """An append of three sectors never synced: in the weak model, besides lost and
        kept, states whose file has the append's length with some sectors zero; the ordered
        model never leaves such a hole."""
        append = b"x" * 1100

        def cut(state: int, model: str) -> tuple[bytes, dict[str, Any]]:
            root = tmp_path / f"{model or 'ordered'}-{state}"
            root.mkdir()
            (root / "journal").write_bytes(b"synced" + append)
            _trace(
                root,
                [
                    "create 1\t{root}/journal",
                    "write 1 0 6\t{root}/journal",
                    "fsync 1 img-1-1 6\t{root}/journal",
                    "dirfsync 1\t{root}",
                    f"write 1 6 {len(append)}\t{{root}}/journal",
                ],
                {"img-1-1": b"synced"},
            )
            spec = f"power-loss:state:{state}{model}"
            done = power_cut(root, parse_after_death(spec)[1], spec, 3)
            return (root / "journal").read_bytes(), done

        ordered = [cut(k, "")[0] for k in range(2)]
        assert sorted(ordered) == [b"synced", b"synced" + append]
        weak = [cut(k, ":weak") for k in range(16)]
        first, done = weak[0]
        assert (first, done["states"], done["model"]) == (b"synced", 16, "weak")
        holes = [data for data, _ in weak if len(data) == 1106 and bytes(512) in data]
        assert holes and all(data[:6] == b"synced" for data, _ in weak)
        torn = [d for _, d in weak if d["files"]["journal"].get("torn_sectors")]
        assert torn and all("changed sectors lost" in " ".join(d["choices"]) for d in torn)
