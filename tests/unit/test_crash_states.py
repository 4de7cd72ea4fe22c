"""Crash states: the folders a power cut may legally leave, enumerated from one trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.chaos.crashstates import EXHAUSTIVE_LIMIT, file_options, pick
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

    @pytest.mark.parametrize(
        ("state", "journal", "other"),
        [
            (0, b"synced", False),
            (1, b"syncedaa", False),
            (2, b"syncedaabb", False),
            (3, b"synced", True),
            (5, b"syncedaabb", True),
            (6, b"synced", False),  # six states: the seventh is the first again
        ],
    )
    def test_each_state_is_one_legal_folder(
        self, tmp_path: Path, state: int, journal: bytes, other: bool
    ) -> None:
        """The journal's appends (3 prefixes) times the new name (undone or kept)."""
        self._journal(tmp_path)
        spec = f"power-loss:state:{state}"
        done = power_cut(tmp_path, parse_after_death(spec)[1], spec)
        assert (tmp_path / "journal").read_bytes() == journal
        assert (tmp_path / "other").exists() == other
        assert (done["states"], done["enumerated"], done["state"]) == (6, True, state)

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

    def test_a_bad_state_is_refused(self) -> None:
        with pytest.raises(ValueError, match="whole number"):
            parse_after_death("power-loss:state:x")
