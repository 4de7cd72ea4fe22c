"""A commit whose outcome the driver cannot know is never taken as failed or as done.

A proxy on 127.0.0.1 (``harness.chaos.wirecut``) between the journal and the server
cuts the connection at a COMMIT: before passing it on (the server rolls back), or
once the server answered it (committed, the reply lost). The journal connects again
and reads back whether the write is there; when it cannot, the call says its outcome
is unknown, and the next start hands the op on by its class.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import psycopg
import pytest

from harness.chaos.wirecut import CommitCutter, Cut
from harness.runtime import Decision, JournalWriteError, Runtime, ToolTable
from tests.conftest import NI, FakeTool

TABLE = ToolTable({"pay": NI}, source="<test>")


@pytest.fixture
def cutter(database: str) -> Iterator[CommitCutter]:
    port = urlsplit(database).port
    assert port is not None
    with CommitCutter(port) as proxy:
        yield proxy


def _through(database: str, cutter: CommitCutter) -> str:
    """The test's database reached through the proxy."""
    parts = urlsplit(database)
    return parts._replace(netloc=f"harness@127.0.0.1:{cutter.port}").geturl() + "&journal=t"


def _kinds(database: str) -> list[str]:
    with psycopg.connect(database) as conn:
        rows = conn.execute(
            "SELECT record::json->>'kind' FROM harness_journal_records ORDER BY seq"
        ).fetchall()
    return [str(kind) for (kind,) in rows]


class TestReadBack:
    @pytest.mark.parametrize("cut", list(Cut))
    def test_an_intent_cut_at_its_commit_is_read_back(
        self, database: str, cutter: CommitCutter, cut: Cut
    ) -> None:
        """Committed or not, the journal asks and goes on: one intent, the tool run once."""
        tool = FakeTool()
        with Runtime.open(_through(database, cutter), table=TABLE) as runtime:
            runtime.recover(tool)
            cutter.arm(cut)
            outcome = runtime.call("s1", "pay", {"amount": 5}, tool)
        assert cutter.cuts == 1
        assert outcome.ok and tool.count("s1") == 1
        kinds = _kinds(database)
        assert kinds.count("intent") == 1 and kinds.count("finish") == 1

    def test_a_finish_whose_reply_was_lost_is_not_written_twice(
        self, database: str, cutter: CommitCutter
    ) -> None:
        """The finish committed, its reply lost: the call answers ok, one finish journaled."""
        tool = FakeTool(on_call=lambda ctx: cutter.arm(Cut.AFTER_COMMIT))
        with Runtime.open(_through(database, cutter), table=TABLE) as runtime:
            runtime.recover(tool)
            assert runtime.call("s1", "pay", {"amount": 5}, tool).ok
            assert runtime.call("s1", "pay", {"amount": 5}, tool).ok  # answered, not run
        assert cutter.cuts == 1 and tool.count("s1") == 1
        assert _kinds(database).count("finish") == 1


class TestCannotAsk:
    @pytest.mark.parametrize(
        ("cut", "decision"), [(Cut.AFTER_COMMIT, Decision.VERIFY), (Cut.BEFORE_COMMIT, None)]
    )
    def test_an_intent_nobody_can_ask_about_is_an_unknown_outcome(
        self,
        database: str,
        cutter: CommitCutter,
        cut: Cut,
        decision: Decision | None,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """The database unreachable after the cut: the call raises ``JournalWriteError``
        with ``outcome_unknown``, its tool not run, and the journal takes no more
        writes; the next start decides by what committed (VERIFY for an unsafe op), or
        finds nothing and the op runs as new."""
        monkeypatch.setattr("harness.runtime.postgres.RECONNECT_SECONDS", 1.0)
        tool = FakeTool()
        runtime = Runtime.open(_through(database, cutter), table=TABLE)
        runtime.recover(tool)
        cutter.arm(cut)
        cutter.refuse()
        with pytest.raises(JournalWriteError) as failed:
            runtime.call("s1", "pay", {"amount": 5}, tool)
        assert failed.value.outcome_unknown is True
        assert "could not be asked" in str(failed.value)
        with pytest.raises(JournalWriteError):
            runtime.call("s2", "pay", {"amount": 1}, tool)
        runtime.close()  # it cannot let go of its lease: the next worker waits it out
        assert tool.count("s1") == 0
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute("UPDATE harness_journals SET lease_until = now()")
        with Runtime.open(f"{database}&journal=t", table=TABLE) as after:
            report = after.recover(tool)
            decided = {d.op_id: d.decision for d in report.decisions}
            assert decided.get("s1") is decision
            outcome = after.call("s1", "pay", {"amount": 5}, tool)
        assert tool.count("s1") == (0 if decision is Decision.VERIFY else 1)
        assert outcome.status == ("info" if decision is Decision.VERIFY else "ok")
