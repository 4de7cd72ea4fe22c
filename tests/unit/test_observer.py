"""The power cut's replay on hand-written traces: what a folder holds after the cut.

Each test writes the files as the agent left them and the trace the observer would have
written (``harness.chaos.fsobserve.c``), then rebuilds the folder as a power cut leaves it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.chaos import observer
from harness.chaos.faults import apply_after_death
from harness.chaos.observer import (
    SECTOR,
    TRACE_FOLDER,
    common_prefix,
    power_cut,
    read_trace,
    start_trace,
)


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


def test_a_tracer_that_cannot_trace_here_is_unavailable_with_its_reason(tmp_path: Path) -> None:
    """Its probe's failure (ptrace refused, say) is the one-line reason static programs get."""
    fake = tmp_path / "fstrace"
    fake.write_text("#!/bin/sh\necho 'ptrace: Operation not permitted'\nexit 1\n")
    fake.chmod(0o755)
    assert observer._probe(fake) == "the tracer cannot run here: ptrace: Operation not permitted"
    fake.write_text("#!/bin/sh\necho ok\n")
    assert observer._probe(fake) == fake


def test_a_tracer_that_does_not_build_says_why_in_one_line(tmp_path: Path) -> None:
    """The compiler's first error, on one line: the reason a static program's refusal gives."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler (cc or gcc) to fail a build with")
    source = tmp_path / "fstrace.c"
    source.write_text("int main(void) { return undeclared; }\n")
    with pytest.raises(OSError) as failed:
        observer.build_tracer(tmp_path / "out", source=source)
    (said,) = str(failed.value).splitlines()
    assert said.startswith("building the observer's fstrace failed: ") and "undeclared" in said
    assert list((tmp_path / "out").iterdir()) == []  # no half-built file left


def test_turned_off_the_tracer_is_unavailable_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HARNESS_FS_TRACER=off: no tracer, and the reason names the switch."""
    monkeypatch.setenv(observer.ENV_TRACER_SWITCH, "off")
    assert observer.tracer() is None
    assert f"{observer.ENV_TRACER_SWITCH}=off" in (observer.tracer_unavailable() or "")


def test_only_the_library_leaves_ld_preload_under_the_tracer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A static program's command under the tracer keeps another preloaded library."""
    program = tmp_path / "static"
    program.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(57))  # 64-bit, no program header
    monkeypatch.setattr(observer, "tracer", lambda: tmp_path / "fstrace")
    monkeypatch.setattr(observer, "library", lambda: None)  # no kind to compare with
    env = {observer.ENV_TRACE: "t", "LD_PRELOAD": "/b/fsobserve-1.so /other/libx.so"}
    words, traced = observer.observed_command([str(program)], env)
    assert words == [str(tmp_path / "fstrace"), "--", str(program)]
    assert traced == {observer.ENV_TRACE: "t", "LD_PRELOAD": "/other/libx.so"}
    # Not observed (no trace folder): as given.
    assert observer.observed_command([str(program)], {}) == ([str(program)], {})


class TestOnlyWhatSyncsCounts:
    """The durability rules of the cut: what each call makes durable, and what it does not."""

    def test_sync_file_range_makes_nothing_durable(self, tmp_path: Path) -> None:
        """Its line says it was called: the bytes it ranged over are lost all the same."""
        (tmp_path / "journal").write_bytes(b"head" + b"ranged")
        _trace(
            tmp_path,
            [
                "create 1\t{root}/journal",
                "write 1 0 4\t{root}/journal",
                "fsync 1 img-1-1 4\t{root}/journal",
                "dirfsync 1\t{root}",
                "write 1 4 6\t{root}/journal",
                "rangesync 1\t{root}/journal",
            ],
            {"img-1-1": b"head"},
        )
        done = power_cut(tmp_path, ["drop"], "power-loss:drop")
        assert (tmp_path / "journal").read_bytes() == b"head"
        assert done["files"]["journal"]["lost"] == 6

    def test_a_file_first_met_by_a_rename_is_not_durable_until_synced(self, tmp_path: Path) -> None:
        """Made by a call the trace did not see, renamed into place, its folder fsynced: the
        name is durable, the content never was (ALICE's rename without an fsync)."""
        (tmp_path / "journal").write_bytes(b"x" * 1000)
        _trace(tmp_path, ["rename 1\t{root}/tmp1\t{root}/journal", "dirfsync 1\t{root}"])
        power_cut(tmp_path, ["drop"], "power-loss:drop")
        assert (tmp_path / "journal").read_bytes() == b""

    def test_a_file_first_met_by_a_link_is_not_durable_until_synced(self, tmp_path: Path) -> None:
        (tmp_path / "a").write_bytes(b"x" * 100)
        (tmp_path / "b").hardlink_to(tmp_path / "a")
        _trace(tmp_path, ["link 1\t{root}/a\t{root}/b", "dirfsync 1\t{root}"])
        power_cut(tmp_path, ["drop"], "power-loss:drop")
        assert (tmp_path / "b").read_bytes() == b""

    def test_a_truncation_not_synced_is_undone(self, tmp_path: Path) -> None:
        """O_TRUNC and a shorter write, no fsync: the cut brings back the synced content."""
        (tmp_path / "journal").write_bytes(b"new")
        _trace(
            tmp_path,
            [
                "create 1\t{root}/journal",
                "fsync 1 img-1-1 12\t{root}/journal",
                "dirfsync 1\t{root}",
                "trunc 1\t{root}/journal",
                "write 1 0 3\t{root}/journal",
            ],
            {"img-1-1": b"old contents"},
        )
        power_cut(tmp_path, ["drop"], "power-loss:drop")
        assert (tmp_path / "journal").read_bytes() == b"old contents"


def _stat_words(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns}"


class TestFailsClosed:
    """A change in the trial folder the trace does not account for: the cut is refused."""

    def _synced(self, root: Path) -> None:
        (root / "journal").write_bytes(b"synced")
        _trace(
            root,
            [
                "create 1 0 0\t{root}/journal",
                f"fsync 1 img-1-1 {_stat_words(root / 'journal')}\t{{root}}/journal",
                "dirfsync 1\t{root}",
            ],
            {"img-1-1": b"synced"},
        )

    def test_a_file_as_its_last_fsync_saw_it_is_cut(self, tmp_path: Path) -> None:
        self._synced(tmp_path)
        power_cut(tmp_path, ["drop"], "power-loss:drop")
        assert (tmp_path / "journal").read_bytes() == b"synced"

    def test_bytes_no_traced_call_wrote_are_refused(self, tmp_path: Path) -> None:
        """Changed in place after its fsync, size kept: only the image tells, byte for byte."""
        self._synced(tmp_path)
        (tmp_path / "journal").write_bytes(b"SYNCED")
        with pytest.raises(observer.Refused, match="journal: holds 6 bytes unlike the 6"):
            power_cut(tmp_path, ["drop"], "power-loss:drop")
        assert (tmp_path / "journal").read_bytes() == b"SYNCED"  # nothing was changed

    def test_a_size_its_last_write_did_not_leave_is_refused(self, tmp_path: Path) -> None:
        self._synced(tmp_path)
        with open(tmp_path / "journal", "ab") as out:
            out.write(b"seen")
        _trace(tmp_path, [f"write 1 6 4 {_stat_words(tmp_path / 'journal')}\t{{root}}/journal"])
        with open(tmp_path / "journal", "ab") as out:
            out.write(b"unseen")
        with pytest.raises(observer.Refused, match="journal: 16 bytes, where its last"):
            power_cut(tmp_path, ["drop"], "power-loss:drop")

    def test_a_time_its_last_write_did_not_leave_is_refused(self, tmp_path: Path) -> None:
        """Rewritten in place after its last traced write, same size: its time tells."""
        self._synced(tmp_path)
        (tmp_path / "journal").write_bytes(b"synced" + b"seen")
        words = _stat_words(tmp_path / "journal")
        _trace(tmp_path, [f"write 1 6 4 {words}\t{{root}}/journal"])
        (tmp_path / "journal").write_bytes(b"synced" + b"SEEN")
        os.utime(tmp_path / "journal", ns=(0, int(words.split()[1]) + 1))
        with pytest.raises(observer.Refused, match="journal: modified after its last traced"):
            power_cut(tmp_path, ["drop"], "power-loss:drop")

    def test_a_file_removed_unseen_is_refused(self, tmp_path: Path) -> None:
        self._synced(tmp_path)
        (tmp_path / "journal").unlink()
        with pytest.raises(observer.Refused, match="journal: gone"):
            power_cut(tmp_path, ["drop"], "power-loss:drop")

    def test_a_file_no_traced_call_made_is_refused(self, tmp_path: Path) -> None:
        """Not the harness's own files (its events, the agent's stderr): those it writes."""
        self._synced(tmp_path)
        (tmp_path / "events.jsonl").write_text("{}\n")
        (tmp_path / "agent-1.stderr").write_text("")
        power_cut(tmp_path, ["drop"], "power-loss:drop")
        (tmp_path / "progress.jsonl").write_text("{}\n")
        with pytest.raises(observer.Refused, match=r"progress\.jsonl: made by a call the observer"):
            power_cut(tmp_path, ["drop"], "power-loss:drop")

    def test_damage_at_rest_is_told_to_the_trace(self, tmp_path: Path) -> None:
        """A corruption the harness makes between lives is on disk: the next cut keeps it and
        does not take it for an unseen change."""
        self._synced(tmp_path)
        (tmp_path / "journal").write_bytes(b"damage")
        observer.harness_wrote(tmp_path, ["journal"])
        power_cut(tmp_path, ["drop"], "power-loss:drop")
        assert (tmp_path / "journal").read_bytes() == b"damage"

    def test_the_agents_stderr_is_the_harnesss_not_cut(self, tmp_path: Path) -> None:
        """A life writes its stderr to a file the supervisor opened (a descriptor it
        inherits): written, never fsynced, yet the cut leaves it whole."""
        self._synced(tmp_path)
        (tmp_path / "agent-1.stderr").write_text("a warning\n")
        _trace(tmp_path, ["write 1 0 10 10 1\t{root}/agent-1.stderr"])
        power_cut(tmp_path, ["drop"], "power-loss:drop")
        assert (tmp_path / "agent-1.stderr").read_text() == "a warning\n"


@given(st.binary(max_size=64), st.binary(max_size=64), st.binary(max_size=64))
def test_common_prefix_is_where_two_contents_first_differ(
    shared: bytes, tail_a: bytes, tail_b: bytes
) -> None:
    a, b = shared + tail_a, shared + tail_b
    kept = common_prefix(a, b)
    assert a[:kept] == b[:kept]
    assert kept == min(len(a), len(b)) or a[kept] != b[kept]
