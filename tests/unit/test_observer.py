"""The power cut's replay on hand-written traces: what a folder holds after the cut.

Each test writes the files as the agent left them and the trace the observer would have
written (``harness.chaos.fsobserve.c``), then rebuilds the folder as a power cut leaves it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.chaos import observer
from harness.chaos.faults import apply_after_death
from harness.chaos.observer import SECTOR, TRACE_FOLDER, power_cut, read_trace, start_trace


def _trace(root: Path, lines: list[str], images: dict[str, bytes] | None = None) -> None:
    """Append ``lines`` (``{root}`` stands for the folder) to the trace, with their images."""
    folder = root / TRACE_FOLDER
    folder.mkdir(exist_ok=True)
    for name, data in (images or {}).items():
        (folder / name).write_bytes(data)
    with open(folder / "trace", "a", encoding="utf-8") as out:
        out.writelines(line.format(root=root) + "\n" for line in lines)


def test_an_append_past_the_last_fsync_is_dropped(tmp_path: Path) -> None:
    (tmp_path / "journal").write_bytes(b"synced" + b"unsynced")
    _trace(
        tmp_path,
        [
            "create 1\t{root}/journal",
            "write 1 0 6\t{root}/journal",
            "fsync 1 img-1-1\t{root}/journal",
            "dirfsync 1\t{root}",
            "write 1 6 8\t{root}/journal",
        ],
        {"img-1-1": b"synced"},
    )
    done = power_cut(tmp_path, ["drop"], "power-loss:drop")
    assert (tmp_path / "journal").read_bytes() == b"synced"
    assert done["files"]["journal"] == {
        "synced": 6,
        "size": 14,
        "kept": 6,
        "lost": 8,
        "garbage": 0,
        "unsynced_writes": 1,
    }


def test_a_file_whose_folder_was_never_fsynced_is_gone(tmp_path: Path) -> None:
    """Its content was fsynced, its name never was: the cut removes the name."""
    (tmp_path / "journal").write_bytes(b"header")
    _trace(
        tmp_path,
        ["create 1\t{root}/journal", "fsync 1 img-1-1\t{root}/journal"],
        {"img-1-1": b"header"},
    )
    done = power_cut(tmp_path, ["drop"], "power-loss:drop")
    assert not (tmp_path / "journal").exists()
    assert done["removed"] == ["journal"] and done["files"]["journal"]["removed"]


def test_created_linked_and_folder_fsynced_survives_its_temporary_name_comes_back(
    tmp_path: Path,
) -> None:
    """The journal's creation: a temporary file fsynced, linked into place, the folder
    fsynced, the temporary name removed after (no fsync of that): both names survive, one
    file, with the content of its fsync."""
    (tmp_path / "journal").write_bytes(b"head" + b"more")
    _trace(
        tmp_path,
        [
            "create 1\t{root}/j.tmp",
            "fsync 1 img-1-1\t{root}/j.tmp",
            "link 1\t{root}/j.tmp\t{root}/journal",
            "dirfsync 1\t{root}",
            "unlink 1\t{root}/j.tmp",
            "write 1 4 4\t{root}/journal",
        ],
        {"img-1-1": b"head"},
    )
    done = power_cut(tmp_path, ["drop"], "power-loss:drop")
    assert (tmp_path / "journal").read_bytes() == b"head"
    assert (tmp_path / "j.tmp").read_bytes() == b"head"
    assert (tmp_path / "j.tmp").stat().st_ino == (tmp_path / "journal").stat().st_ino
    assert done["restored"] == ["j.tmp"]


def test_a_rename_not_made_durable_is_undone(tmp_path: Path) -> None:
    (tmp_path / "new").write_bytes(b"v1v2")
    _trace(
        tmp_path,
        [
            "create 1\t{root}/old",
            "fsync 1 img-1-1\t{root}/old",
            "dirfsync 1\t{root}",
            "rename 1\t{root}/old\t{root}/new",
            "write 1 2 2\t{root}/new",
        ],
        {"img-1-1": b"v1"},
    )
    done = power_cut(tmp_path, ["drop"], "power-loss:drop")
    assert not (tmp_path / "new").exists()
    assert (tmp_path / "old").read_bytes() == b"v1"
    assert done["removed"] == ["new"] and done["restored"] == ["old"]


def test_a_file_the_harness_made_is_durable_as_made(tmp_path: Path) -> None:
    """The baseline: removed or rewritten by the agent without a folder fsync, it comes back
    as it was before the first life; a name the trace never touched is left alone."""
    (tmp_path / "plan.json").write_text("plan")
    (tmp_path / "events.jsonl").write_text("mine")
    start_trace(tmp_path)
    (tmp_path / "events.jsonl").write_text("supervisor's")  # not in the trace: not touched
    (tmp_path / "plan.json").unlink()
    _trace(tmp_path, ["unlink 1\t{root}/plan.json"])
    power_cut(tmp_path, ["drop"], "power-loss:drop")
    assert (tmp_path / "plan.json").read_text() == "plan"
    assert (tmp_path / "events.jsonl").read_text() == "supervisor's"


def _rewritten(root: Path) -> tuple[bytes, bytes]:
    old = bytes(range(256)) * 16  # 8 sectors
    new = bytearray(old)
    for sector in (1, 3, 4, 6):
        new[sector * SECTOR : sector * SECTOR + 10] = b"X" * 10
    (root / "db").write_bytes(bytes(new))
    _trace(
        root,
        ["create 1\t{root}/db", "fsync 1 img-1-1\t{root}/db", "dirfsync 1\t{root}"]
        + [f"write 1 {s * SECTOR} 10\t{{root}}/db" for s in (1, 3, 4, 6)],
        {"img-1-1": old},
    )
    return old, bytes(new)


@pytest.mark.parametrize("spec", ["power-loss:tear:0.5:3", "power-loss:tear-sector"])
def test_a_file_rewritten_in_place_keeps_each_sector_old_or_new(tmp_path: Path, spec: str) -> None:
    """Not an append: every changed sector is old or new, chosen by the spec's seed (so a
    replay cuts alike); unchanged sectors stay; no garbage is added."""
    results = []
    for attempt in ("a", "b"):
        root = tmp_path / attempt
        root.mkdir()
        old, new = _rewritten(root)
        done = power_cut(root, spec.split(":")[1:], spec)
        got = (root / "db").read_bytes()
        assert len(got) == len(old)
        for start in range(0, len(old), SECTOR):
            assert got[start : start + SECTOR] in (
                old[start : start + SECTOR],
                new[start : start + SECTOR],
            )
        figures = done["files"]["db"]
        assert figures["sectors_new"] + figures["sectors_old"] == 4
        results.append(got)
    assert results[0] == results[1]


def test_drop_of_a_file_rewritten_in_place_is_its_image(tmp_path: Path) -> None:
    old, _ = _rewritten(tmp_path)
    power_cut(tmp_path, ["drop"], "power-loss:drop")
    assert (tmp_path / "db").read_bytes() == old


def test_a_shared_writable_mapping_comes_back_empty(tmp_path: Path) -> None:
    """SQLite's -shm index: never durable data; SQLite rebuilds it from an empty file."""
    (tmp_path / "x.db-shm").write_bytes(b"index" * 100)
    _trace(
        tmp_path,
        ["create 1\t{root}/x.db-shm", "dirfsync 1\t{root}", "mmap 1\t{root}/x.db-shm"],
    )
    done = power_cut(tmp_path, ["tear", "1.0", "0"], "power-loss:tear:1.0:0")
    assert (tmp_path / "x.db-shm").read_bytes() == b""
    assert done["mapped"] == ["x.db-shm"]


def test_the_trace_replays_from_its_first_line_after_a_cut(tmp_path: Path) -> None:
    """A cut appends its rebuild as a baseline: a second cut, with nothing new, keeps all."""
    (tmp_path / "journal").write_bytes(b"synced" + b"tail")
    _trace(
        tmp_path,
        [
            "create 1\t{root}/journal",
            "fsync 1 img-1-1\t{root}/journal",
            "dirfsync 1\t{root}",
            "write 1 6 4\t{root}/journal",
        ],
        {"img-1-1": b"synced"},
    )
    power_cut(tmp_path, ["tear", "1.0", "0"], "power-loss:tear:1.0:0")
    assert (tmp_path / "journal").read_bytes() == b"synced" + b"tail"  # kept it all
    (tmp_path / "journal").write_bytes(b"synced" + b"tail" + b"next")
    _trace(tmp_path, ["write 2 10 4\t{root}/journal"])
    power_cut(tmp_path, ["drop"], "power-loss:drop")
    assert (tmp_path / "journal").read_bytes() == b"synced" + b"tail"
    assert [line.kind for line in read_trace(tmp_path / TRACE_FOLDER)].count("rebuilt") == 2


def test_a_line_cut_short_by_a_kill_is_not_read(tmp_path: Path) -> None:
    _trace(tmp_path, ["create 1\t{root}/a"])
    with open(tmp_path / TRACE_FOLDER / "trace", "a") as out:
        out.write("fsync 1 img-1")
    assert [line.kind for line in read_trace(tmp_path / TRACE_FOLDER)] == ["create"]


def test_what_the_replay_cannot_take_is_refused(tmp_path: Path) -> None:
    """sync() is refused (no image of every file was taken): the fault did not land."""
    (tmp_path / "journal").write_bytes(b"x")
    _trace(tmp_path, ["create 1\t{root}/journal", "sync 1"])
    done = apply_after_death(tmp_path, "power-loss:drop")
    assert not done["landed"] and "sync()" in done["why"]
    assert (tmp_path / "journal").read_bytes() == b"x"  # nothing was changed


def test_without_a_trace_power_loss_is_refused(tmp_path: Path) -> None:
    """A trial that ran unobserved: no trust in the runtime's word, the fault did not land."""
    (tmp_path / "journal").write_bytes(b"x")
    done = apply_after_death(tmp_path, "power-loss:drop")
    assert not done["landed"] and "observer" in done["why"]
    assert (tmp_path / "journal").read_bytes() == b"x"


def test_without_a_compiler_the_library_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder without the library and no cc on PATH: none, and the reason says why."""
    monkeypatch.setenv(observer.ENV_LIBRARY_DIR, str(tmp_path / "lib"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CC", raising=False)
    observer._located.cache_clear()
    try:
        assert observer.library() is None
        assert "compiler" in (observer.unavailable() or "")
    finally:
        observer._located.cache_clear()


def test_turned_off_the_library_is_unavailable_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HARNESS_FS_OBSERVER=off: no library whatever is built, and the reason names the switch."""
    monkeypatch.setenv(observer.ENV_SWITCH, "off")
    assert observer.library() is None
    assert f"{observer.ENV_SWITCH}=off" in (observer.unavailable() or "")
    monkeypatch.delenv(observer.ENV_SWITCH)
    assert observer.ENV_SWITCH not in (observer.unavailable() or "")
