"""Compaction changes no answer: random histories run twice, one journal compacted.

Each example runs one random history of lives (a recovery, then calls of random
tools whose attempts succeed, fail, fail transiently or blow up, and resolutions
of the ops left unknown) on two journals side by side, with two fake tools
scripted alike. One journal is compacted at a random moment of a random life;
from then on, every answer must be the same on both: each call's outcome, each
exception, each recovery report (decisions, hints, retries), each executions
count, and at the end ``outcome_of`` and ``plan`` of every op, after a restart
(which reads the compacted journal's settled ops only as they are asked for).
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from harness.runtime import (
    OpConflictError,
    Resolution,
    Runtime,
    ToolError,
    ToolTable,
    TransientToolError,
)
from harness.runtime.compaction import Compaction
from harness.runtime.journal import scan_journal
from harness.runtime.records import SettledRecord
from tests.conftest import FakeTool

TABLE = ToolTable.shipped()
TOOLS = ["read_file", "write_file", "send_email", "ask_user_confirm", "unlisted_tool"]
OPS = [f"op{i}" for i in range(6)]


class ToolCrash(Exception):
    """An exception no tool declares: the op's outcome is left unknown."""


FAILURES: dict[str, BaseException | None] = {
    "ok": None,
    "transient": TransientToolError("busy"),
    "permanent": ToolError("refused"),
    "crash": ToolCrash("blew up"),
}


@dataclass(frozen=True)
class Call:
    op: str
    tool: str
    redo: bool = False  # call op + ".redo" as a redo of op, then resolve op REDONE


@dataclass(frozen=True)
class Resolve:
    op: str
    resolution: Resolution


Action = Call | Resolve

actions = st.one_of(
    st.builds(Call, st.sampled_from(OPS), st.sampled_from(TOOLS), st.booleans()),
    st.builds(Resolve, st.sampled_from(OPS), st.sampled_from(list(Resolution))),
)
lives = st.lists(st.lists(actions, max_size=6), min_size=1, max_size=4)
scripts = st.dictionaries(
    st.sampled_from([*OPS, *(f"{op}.redo" for op in OPS)]),
    st.lists(st.sampled_from(list(FAILURES)), max_size=3),
)


def _answer(do: Callable[[], Any]) -> Any:
    """What an action answered: its value, or the exception it raised (by type and text)."""
    try:
        return do()
    except (ToolCrash, ValueError, OpConflictError) as exc:
        return (type(exc).__name__, str(exc))


def _act(rt: Runtime, action: Action, tool: FakeTool) -> list[Any]:
    if isinstance(action, Resolve):
        redo = f"{action.op}.redo" if action.resolution is Resolution.REDONE else None
        return [_answer(lambda: rt.resolve(action.op, action.resolution, redo_op=redo))]
    if not action.redo:
        return [_answer(lambda: rt.call(action.op, action.tool, {"op": action.op}, tool))]
    redo = f"{action.op}.redo"
    return [
        _answer(lambda: rt.call(redo, action.tool, {"op": action.op}, tool, redo_of=action.op)),
        _answer(lambda: rt.resolve(action.op, Resolution.REDONE, redo_op=redo)),
    ]


def _final(rt: Runtime) -> list[Any]:
    known = sorted(rt.ops)
    return [
        [rt.outcome_of(op_id) for op_id in known],
        rt.plan({"op-new": "read_file"}),
        sorted(rt._awaiting_verify),
    ]


class TestCompactionChangesNoAnswer:
    @settings(max_examples=300, deadline=None)
    @given(
        history=lives,
        script=scripts,
        when=st.tuples(st.integers(0, 3), st.integers(0, 6)),
        identity=st.sampled_from(["id", "content"]),
    )
    def test_every_answer_is_the_same_after_compaction(
        self,
        history: list[list[Action]],
        script: dict[str, list[str]],
        when: tuple[int, int],
        identity: str,
    ) -> None:
        life_at, step_at = min(when[0], len(history) - 1), when[1]
        with tempfile.TemporaryDirectory() as tmp:
            plain, compact = Path(tmp) / "plain.journal", Path(tmp) / "compact.journal"
            faults = {op: [FAILURES[b] for b in s] for op, s in script.items()}
            tools = {plain: FakeTool(faults), compact: FakeTool(faults)}
            compacted = False
            for n, life in enumerate(history):
                answers: dict[Path, list[Any]] = {}
                for path in (plain, compact):
                    tool = tools[path]
                    got = answers[path] = []
                    with Runtime.open(
                        path, table=TABLE, identity=identity, compaction=Compaction.never()
                    ) as rt:
                        got.append(_answer(functools.partial(rt.recover, tool)))
                        for i, action in enumerate([*life, None]):
                            if path == compact and (n, min(step_at, len(life))) == (life_at, i):
                                rt.compact()
                                compacted = True
                            if action is not None:
                                got += _act(rt, action, tool)
                        got.append(tool.counts())
                assert answers[plain] == answers[compact], f"life {n}"
            assert compacted
            finals = []
            for path in (plain, compact):
                with Runtime.open(
                    path, table=TABLE, identity=identity, compaction=Compaction.never()
                ) as rt:
                    # The compacted journal's settled ops stay in the file: every op the
                    # final answers name is looked up in it, one at a time.
                    assert (rt.journal.scan.settled is not None) == (path == compact)
                    finals.append(_final(rt))
            assert finals[0] == finals[1]
            records = scan_journal(compact).records
            settled = sum(isinstance(s.record, SettledRecord) for s in records)
            event(f"settled ops folded: {min(settled, 5)}{'+' if settled >= 5 else ''}")
