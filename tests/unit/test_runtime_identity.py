"""Identity by content: a call re-issued under a new id is answered from the op it stands for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.failpoints import arm, disarm, parse_failpoints
from harness.runtime import FailpointTriggered, Identity, Resolution, Runtime, ToolTable
from harness.runtime.identity import ContentKey, match_by_content
from harness.runtime.journal import FILE_HEADER, HEADER_SIZE
from harness.runtime.records import IntentRecord, ResolvedRecord
from tests.conftest import FakeTool, journal_records

TAP = ContentKey("ui_tap", "d1")


def _open(path: Path, identity: str = "content") -> Runtime:
    return Runtime.open(path, table=ToolTable.shipped(), identity=identity)


def _life(path: Path, calls: list[tuple[str, str, dict[str, str]]], tool: FakeTool) -> None:
    """One life that makes ``calls`` (op id, tool, args) and ends."""
    with _open(path) as rt:
        rt.recover(tool)
        for op_id, name, args in calls:
            rt.call(op_id, name, args, tool)


def _crash_in(path: Path, op_id: str, name: str, args: dict[str, str], tool: FakeTool) -> None:
    """A life killed right after the intent of its first call."""
    with _open(path) as rt:
        rt.recover(tool)
        arm(parse_failpoints("op.after_intent=raise"))
        try:
            with pytest.raises(FailpointTriggered):
                rt.call(op_id, name, args, tool)
        finally:
            disarm()


class TestMatchByContent:
    def test_the_earliest_unclaimed_op_of_the_content_answers(self) -> None:
        """Of two journaled ops of one content, the first unclaimed one is the match."""
        journaled = [("s1", TAP), ("s2", TAP)]
        assert match_by_content(journaled, TAP, set()) == "s1"
        assert match_by_content(journaled, TAP, {"s1"}) == "s2"
        assert match_by_content(journaled, TAP, {"s1", "s2"}) is None

    def test_other_arguments_or_another_tool_never_match(self) -> None:
        """Same tool with another argument digest, or another tool with the same one: no match."""
        journaled = [("s1", TAP)]
        assert match_by_content(journaled, ContentKey("ui_tap", "d2"), set()) is None
        assert match_by_content(journaled, ContentKey("input_text", "d1"), set()) is None

    def test_the_order_given_is_the_order_matched(self) -> None:
        """Position is the order of first intent: a later op of the content is matched later."""
        journaled = [("s1", TAP), ("s4", ContentKey("read_file", "d9")), ("s2", TAP)]
        claimed: set[str] = set()
        order = []
        while (found := match_by_content(journaled, TAP, claimed)) is not None:
            claimed.add(found)
            order.append(found)
        assert order == ["s1", "s2"]


class TestContentIdentity:
    def test_a_reissued_success_is_answered_from_its_record(self, journal_path: Path) -> None:
        """A durable success called again under a new id returns its result and does not run."""
        tool = FakeTool()
        _life(journal_path, [("s1", "write_file", {"path": "/a"})], tool)
        with _open(journal_path) as rt:
            outcome = rt.call("s1~2", "write_file", {"path": "/a"}, tool)
        assert (outcome.status, outcome.matched, outcome.op_id) == ("ok", "s1", "s1~2")
        assert outcome.result == {"op_id": "s1", "attempt": 1}
        assert tool.counts() == {"s1": 1}

    def test_a_claimed_op_never_answers_a_new_call(self, journal_path: Path) -> None:
        """Ops the framework holds the answers of (its saved history) are claimed: a new call
        of their content, a check that must read the world now, runs; an unclaimed one of
        the same content still answers a re-issued call."""
        tool = FakeTool()
        dump: tuple[str, dict[str, str]] = ("ui_dump", {})
        _life(journal_path, [("c1", *dump), ("c2", *dump)], tool)
        with _open(journal_path) as rt:
            rt.claim(["c1", "not-journaled"])
            reissued = rt.call("c2~2", *dump, tool)
            check = rt.call("check", *dump, tool)
        assert (reissued.status, reissued.matched) == ("ok", "c2")
        assert (check.status, check.matched) == ("ok", None)
        assert tool.counts() == {"c1": 1, "c2": 1, "check": 1}

    def test_identity_by_id_runs_the_reissued_call_again(self, journal_path: Path) -> None:
        """The default identity by id takes the new id for a new call (the contrast)."""
        tool = FakeTool()
        _life(journal_path, [("s1", "write_file", {"path": "/a"})], tool)
        with _open(journal_path, identity="id") as rt:
            outcome = rt.call("s1~2", "write_file", {"path": "/a"}, tool)
        assert (outcome.status, outcome.matched) == ("ok", None)
        assert tool.counts() == {"s1": 1, "s1~2": 1}

    def test_two_identical_calls_are_told_apart_by_position(self, journal_path: Path) -> None:
        """Two identical taps are two ops, their re-issues match them in order; a third is new."""
        tool = FakeTool()
        tap = {"element": "add"}
        _life(journal_path, [("s1", "ui_tap", tap), ("s2", "ui_tap", tap)], tool)
        assert tool.counts() == {"s1": 1, "s2": 1}
        with _open(journal_path) as rt:
            matched = [rt.call(f"s{n}~2", "ui_tap", tap, tool).matched for n in (1, 2, 3)]
        assert matched == ["s1", "s2", None]
        assert tool.counts() == {"s1": 1, "s2": 1, "s3~2": 1}

    def test_only_the_journaled_calls_match(self, journal_path: Path) -> None:
        """A life that made one of two identical calls: the second re-issue runs, once."""
        tool = FakeTool()
        tap = {"element": "add"}
        _life(journal_path, [("s1", "ui_tap", tap)], tool)
        with _open(journal_path) as rt:
            first, second = (rt.call(f"s{n}~2", "ui_tap", tap, tool) for n in (1, 2))
        assert (first.matched, second.matched, second.executed) == ("s1", None, True)
        with _open(journal_path) as rt:
            again = [rt.call(f"s{n}~3", "ui_tap", tap, tool).matched for n in (1, 2)]
        assert again == ["s1", "s2~2"]
        assert tool.counts() == {"s1": 1, "s2~2": 1}

    def test_distinct_arguments_are_distinct_calls(self, journal_path: Path) -> None:
        """A call with other arguments is new, whatever the journal holds for its tool."""
        tool = FakeTool()
        _life(journal_path, [("s1", "ui_tap", {"element": "add"})], tool)
        with _open(journal_path) as rt:
            outcome = rt.call("s1~2", "ui_tap", {"element": "remove"}, tool)
        assert outcome.matched is None
        assert tool.counts() == {"s1": 1, "s1~2": 1}

    def test_a_call_known_by_id_claims_its_op(self, journal_path: Path) -> None:
        """A call answered by its own id takes its op: a later call of that content is new."""
        tool = FakeTool()
        tap = {"element": "add"}
        _life(journal_path, [("s1", "ui_tap", tap)], tool)
        with _open(journal_path) as rt:
            assert rt.call("s1", "ui_tap", tap, tool).matched is None
            assert rt.call("s2", "ui_tap", tap, tool).matched is None
        assert tool.counts() == {"s1": 1, "s2": 1}

    def test_a_call_left_running_answers_with_its_verification(self, journal_path: Path) -> None:
        """A re-issue of an op the model resolved answers with the resolution, never runs."""
        tool = FakeTool()
        tap = {"element": "add"}
        _crash_in(journal_path, "s1", "ui_tap", tap, tool)
        with _open(journal_path) as rt:
            report = rt.recover(tool)
            assert [h.op_id for h in report.hints] == ["s1"]
            rt.resolve("s1", Resolution.EFFECT_PRESENT)
            outcome = rt.call("s1~2", "ui_tap", tap, tool)
        assert (outcome.status, outcome.matched) == ("ok", "s1")
        assert tool.counts() == {}

    def test_resolving_under_the_new_id_resolves_the_op(self, journal_path: Path) -> None:
        """An op awaiting verification, reached by content, is resolved under the call's id."""
        tool = FakeTool()
        tap = {"element": "add"}
        _crash_in(journal_path, "s1", "ui_tap", tap, tool)
        with _open(journal_path) as rt:
            rt.recover(tool)
            pending = rt.call("s1~2", "ui_tap", tap, tool)
            assert (pending.status, pending.matched) == ("info", "s1")
            assert pending.hint is not None and "s1" in pending.hint
            rt.resolve("s1~2", Resolution.UNVERIFIABLE)
            assert rt.outcome_of("s1~2").status == "info"
        resolved = [r for r in journal_records(journal_path) if isinstance(r, ResolvedRecord)]
        assert [r.op_id for r in resolved] == ["s1"]

    def test_a_recovery_retry_leaves_its_op_to_the_reissue(self, journal_path: Path) -> None:
        """A read retried by recovery answers its re-issue (recovery claims nothing)."""
        tool = FakeTool()
        _crash_in(journal_path, "s1", "read_file", {"path": "/a"}, tool)
        with _open(journal_path) as rt:
            rt.recover(tool)
            outcome = rt.call("s1~2", "read_file", {"path": "/a"}, tool)
        assert (outcome.status, outcome.matched) == ("ok", "s1")
        assert tool.counts() == {"s1": 1}

    def test_a_redo_is_never_matched(self, journal_path: Path) -> None:
        """A redo of a verified op runs, though the op it redoes has its content."""
        tool = FakeTool()
        tap = {"element": "add"}
        _crash_in(journal_path, "s1", "ui_tap", tap, tool)
        with _open(journal_path) as rt:
            rt.recover(tool)
            redo = rt.call("s1.redo", "ui_tap", tap, tool, redo_of="s1")
            rt.resolve("s1", Resolution.REDONE, redo_op="s1.redo")
        assert (redo.matched, redo.executed) == (None, True)
        with _open(journal_path) as rt:
            # The re-issue answers from s1 (redone), not from the redo as an op of its own.
            assert rt.call("s1~3", "ui_tap", tap, tool).matched == "s1"
            assert rt.call("s2~3", "ui_tap", tap, tool).matched is None
        assert tool.counts() == {"s1.redo": 1, "s2~3": 1}

    def test_a_fresh_call_is_never_matched_nor_matched_to(self, journal_path: Path) -> None:
        """A check looks at the world now, and a later call of its content does not take it."""
        tool = FakeTool()
        with _open(journal_path) as rt:
            rt.call("s1.check", "ui_dump", {}, tool, fresh=True)
        with _open(journal_path) as rt:
            assert rt.call("s1~2.check", "ui_dump", {}, tool, fresh=True).matched is None
            assert rt.call("s5", "ui_dump", {}, tool).matched is None
        assert tool.counts() == {"s1.check": 1, "s1~2.check": 1, "s5": 1}


class TestIdentityOption:
    def test_identity_by_id_is_the_default(self, journal_path: Path) -> None:
        """A runtime opened without ``identity`` knows calls by id, the default."""
        with Runtime.open(journal_path) as rt:
            assert rt.identity is Identity.ID

    def test_an_unknown_identity_is_refused_before_the_journal_is_made(
        self, journal_path: Path
    ) -> None:
        """``identity="name"`` is a ValueError naming the choices; no journal file is created."""
        with pytest.raises(ValueError, match="'id', 'content'"):
            Runtime.open(journal_path, identity="name")
        assert not journal_path.exists()

    def test_fresh_is_journaled_only_when_true(self, journal_path: Path) -> None:
        """An ordinary intent's payload has no ``fresh`` key; a fresh one reads back as fresh."""
        tool = FakeTool()
        with _open(journal_path) as rt:
            rt.call("s1", "ui_dump", {}, tool)
            rt.call("s1.check", "ui_dump", {}, tool, fresh=True)
        intents = [r for r in journal_records(journal_path) if isinstance(r, IntentRecord)]
        assert [(i.op_id, i.fresh) for i in intents] == [("s1", False), ("s1.check", True)]
        data = journal_path.read_bytes()[len(FILE_HEADER) :]
        payloads = []
        while data:
            length = int.from_bytes(data[3:7], "big")
            payloads.append(json.loads(data[HEADER_SIZE : HEADER_SIZE + length]))
            data = data[HEADER_SIZE + length :]
        fresh = [p.get("fresh") for p in payloads if p["kind"] == "intent"]
        assert fresh == [None, True]
