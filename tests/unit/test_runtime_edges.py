"""Edges of the runtime's contract found by review: each a promise a caller relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.failpoints import arm, disarm, failpoint, parse_failpoints
from harness.runtime import Runtime, ToolClass
from harness.runtime.journal import scan_journal
from harness.runtime.records import IntentRecord, Resolution
from tests.conftest import FakeTool


class TestResolve:
    def test_only_a_running_op_can_be_resolved(self, tmp_path: Path) -> None:
        """Resolving an unknown or settled op is refused: it would hide an op from recovery."""
        tool = FakeTool()
        with Runtime.open(tmp_path / "journal") as runtime:
            runtime.call("s001", "ui_tap", {"element": "ok"}, tool)
            with pytest.raises(ValueError, match="succeeded"):
                runtime.resolve("s001", Resolution.EFFECT_PRESENT)
            with pytest.raises(ValueError, match="unknown to the journal"):
                runtime.resolve("s999", Resolution.EFFECT_PRESENT)


class TestEncoding:
    def test_lone_surrogate_in_arguments_round_trips(self, tmp_path: Path) -> None:
        """Arguments holding a lone surrogate (a surrogateescape file name) are journaled intact."""
        name = b"caf\xe9.txt".decode("utf-8", "surrogateescape")
        with Runtime.open(tmp_path / "journal") as runtime:
            outcome = runtime.call("s001", "read_file", {"path": name}, FakeTool())
        assert outcome.ok
        intents = [
            s.record
            for s in scan_journal(tmp_path / "journal").records
            if isinstance(s.record, IntentRecord)
        ]
        assert intents[0].args == {"path": name}

    def test_snapshot_with_a_non_boolean_ask_user_is_refused(self) -> None:
        """A snapshot whose ask_user is not a boolean is not a snapshot."""
        with pytest.raises(ValueError, match="ask_user"):
            ToolClass.from_json({"class": "read_only", "ask_user": "no"})


class TestArming:
    def test_rearming_counts_hits_afresh(self) -> None:
        """Arming a point again counts its hits from zero, as the docstring promises."""
        try:
            arm(parse_failpoints("op.after_effect=count"))
            failpoint("op.after_effect")
            failpoint("op.after_effect")
            arm(parse_failpoints("op.after_effect@1=raise"))
            with pytest.raises(Exception, match="hit 1"):
                failpoint("op.after_effect")
        finally:
            disarm()
