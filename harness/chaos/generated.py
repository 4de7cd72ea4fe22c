"""Generated scenarios: a task drawn anew from every seed, shaped like real agents' runs.

A scenario file with a ``[generate]`` table describes a world, not a task: its
declared tools and table, and in ``steps`` the calls of its own tools a task may
make. ``draw_scenario`` draws the task from a seed with Hypothesis
(``generated_data``): calls of the catalog's tools (``harness.chaos.draws``) and
of the file's steps, favouring the shapes of real runs (the same call made again
on purpose, a file written with other content and then the first again, a file
read again after it was written), some calls issued together in a batch, and
now and then a model that re-issues its calls (identity by content) with a
journal compacted at every restart.

The same seed draws the same scenario in every process, so a trial's replay
command draws it again. ``drawn_choices`` gives the Hypothesis choices of a
draw: a failing draw is shrunk from them (``harness.strategies.shrink_generated``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from hypothesis.control import BuildContext
from hypothesis.internal.conjecture.data import ConjectureData
from hypothesis.internal.conjecture.providers import HypothesisProvider

from harness.chaos.draws import RECIPES, WORLD_PARTS, Draft, drafts, evidence

__all__ = ["COMPACT_AT", "KINDS", "Generate", "draw_scenario", "drawn_choices", "generated_data"]

COMPACT_AT = 100
"""A drawn task that compacts its journal does so at every restart (as ``long_task``)."""

KINDS = ("own", "again", "rewrite", "restore", "reread", "new")
"""What a drawn call is, in the order shrinking moves toward: a call of the file's own
steps, the same call as an earlier one, an earlier written file written with other
content (a new file when none was written), an earlier write made again after the file
was rewritten, an earlier written file read again, a call of any catalog tool."""

_REFERENCES = 63
"""Which earlier call a repeat names (taken modulo the calls it may name)."""

_KEPT_STATE = frozenset(
    {"write_file", "github_write_file", "app_install", "app_uninstall", "input_text"}
    | {"browser_navigate", "create_directory"}
)
"""Tools whose effect is a state a later call of the same thing overwrites. Made again
without a check, the repeat's VERIFY ends unverifiable, and the end state (I8) leaves
out every place such a step wrote (``rows_left_out``), the earlier call's row with it:
of these only a file write is repeated, with its check (read back), so that the
earlier call's effect stays judged (and drawn tasks stay as they were)."""

_OWN = "own"
"""The part of the world the file's own tools write: never two of them in one batch,
whose counting checks depend on their order."""


@dataclass(frozen=True, slots=True)
class Generate:
    """A ``[generate]`` table: how many calls a drawn task makes, and how many a batch
    may hold (the scenario's ``MAX_BATCH``)."""

    min_calls: int
    max_calls: int
    max_batch: int


@dataclass(frozen=True, slots=True)
class _Pick:
    """One drawn call before it is placed (``KINDS``); ``ref`` names the earlier call or
    the file's step it is made from, ``draft`` the catalog call it is when nothing
    earlier fits, ``joins``: issued together with the call before it, when they may
    run at once."""

    kind: str
    ref: int
    draft: Draft
    joins: bool


class _SameInEveryProcess(HypothesisProvider):
    """Hypothesis's provider without the constants it collects from the modules a process
    has loaded (a campaign's worker and a replay command load different ones)."""

    def _maybe_draw_constant(self, *args: Any, **kwargs: Any) -> None:
        return None


_PICKS = st.builds(
    _Pick, st.sampled_from(KINDS), st.integers(0, _REFERENCES), drafts(), st.booleans()
)


def generated_data(
    base: Mapping[str, Any], generate: Generate
) -> st.SearchStrategy[dict[str, Any]]:
    """Scenario data (as a scenario file holds it) of tasks drawn in the world of ``base``,
    the data of a file with ``[generate]``: its steps drawn, and its model, identity and
    compaction."""
    own = [dict(step) for step in base.get("steps", ())]

    @st.composite
    def tasks(draw: st.DrawFn) -> dict[str, Any]:
        by_content = draw(st.booleans())
        compacts = by_content and draw(st.booleans())
        picks = draw(st.lists(_PICKS, min_size=generate.min_calls, max_size=generate.max_calls))
        data = {k: v for k, v in base.items() if k not in ("generate", "steps", "sample")}
        data["steps"] = _steps(picks, own, generate.max_batch)
        if by_content:
            data["model"], data["identity"] = "reissue", "content"
        if compacts:
            data["compact_at"] = COMPACT_AT
        return data

    return tasks()


def _steps(picks: Sequence[_Pick], own: Sequence[Mapping[str, Any]], max_batch: int) -> list[Any]:
    """The scenario's steps: each pick a call, consecutive ones that join in a batch."""
    placed = _Placed(own)
    for index, pick in enumerate(picks, start=1):
        placed.add(pick, index)
    groups: list[list[int]] = []
    for index, pick in enumerate(picks):
        last = groups[-1] if groups else []
        if pick.joins and 0 < len(last) < max_batch and placed.may_join(index, last):
            last.append(index)
        else:
            groups.append([index])
    calls = placed.calls
    return [calls[g[0]] if len(g) == 1 else {"batch": [calls[i] for i in g]} for g in groups]


class _Placed:
    """The calls placed so far, with what a new one must not repeat by accident: the
    evidence a check reads, and how many effects each of the file's own tools made."""

    def __init__(self, own: Sequence[Mapping[str, Any]]) -> None:
        self.own = own
        self.calls: list[dict[str, Any]] = []
        self.parts: list[str | None] = []
        self.seen: set[tuple[str, str, Any]] = set()
        self.counts: dict[str, int] = {}

    def add(self, pick: _Pick, index: int) -> None:
        call, part = self._call(pick, index)
        self.seen |= _evidence(call)
        self.calls.append(call)
        self.parts.append(part)

    def _call(self, pick: _Pick, index: int) -> tuple[dict[str, Any], str | None]:
        written = [c for c in self.calls if c["tool"] == "write_file"]
        if pick.kind == "own" and self.own:
            return self._counted(self.own[pick.ref % len(self.own)]), _OWN
        repeatable = [c for c in self.calls if c["tool"] not in _KEPT_STATE - {"write_file"}]
        if pick.kind == "again" and repeatable:
            return self._again(repeatable[pick.ref % len(repeatable)])
        if pick.kind == "rewrite":
            if not written:
                return _rewritten(_NEW_FILE, index), "files"
            return _rewritten(written[pick.ref % len(written)], index), "files"
        if pick.kind == "restore":
            overwritten = [
                c for n, c in enumerate(written) if any(_other_write(c, w) for w in written[n:])
            ]
            if overwritten:
                return self._again(overwritten[pick.ref % len(overwritten)])
        if pick.kind == "reread" and written:
            path = written[pick.ref % len(written)]["args"]["path"]
            return {"tool": "read_file", "args": {"path": path}}, None
        call = pick.draft.build(None, transient_failures=False)
        if _evidence(call) & self.seen:
            call = pick.draft.build(index, transient_failures=False)
        if call["tool"] == "github_write_file":  # no check: a path of its own (_KEPT_STATE)
            call["args"]["path"] = f"{index}/{call['args']['path']}"
        return call, WORLD_PARTS.get(call["tool"])

    def _counted(self, template: Mapping[str, Any]) -> dict[str, Any]:
        """A call of the file's own tools; a ``count`` check counts the effects of its tool
        so far (each call of such a tool makes one record)."""
        tool = template["tool"]
        call: dict[str, Any] = {"tool": tool, "args": dict(template.get("args", {}))}
        check = template.get("verify")
        if isinstance(check, Mapping) and check.get("path") == "count":
            self.counts[tool] = self.counts.get(tool, 0) + 1
            call["verify"] = {**check, "equals": self.counts[tool]}
        elif check is not None:
            call["verify"] = dict(check)
        return call

    def _again(self, earlier: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The same call again. A file read back shows what the last write wrote, and a
        count counts this call too; any other check could be met by the earlier call's
        effect, so the repeat has none (a VERIFY of it ends unverifiable, not wrong)."""
        tool = earlier["tool"]
        if tool in self.counts:
            return self._counted(earlier), _OWN
        call: dict[str, Any] = {"tool": tool, "args": dict(earlier["args"])}
        if tool == "write_file" and "verify" in earlier:
            call["verify"] = earlier["verify"]
        return call, WORLD_PARTS.get(tool) if tool in RECIPES else _OWN

    def may_join(self, index: int, batch: list[int]) -> bool:
        """Whether a call may run at once with a batch's: it writes no part of the world a
        call there writes (their order would matter), and no call there has its tool and
        arguments or a check's evidence (a check could read the other's effect)."""
        part = self.parts[index]
        if part is not None and part in {self.parts[i] for i in batch}:
            return False
        call = self.calls[index]
        return all(
            (self.calls[i]["tool"], self.calls[i]["args"]) != (call["tool"], call["args"])
            and not (_evidence(self.calls[i]) & _evidence(call))
            for i in batch
        )


def _evidence(call: Mapping[str, Any]) -> frozenset[tuple[str, str, Any]]:
    return evidence(call) if call["tool"] in RECIPES else frozenset()


_NEW_FILE: Mapping[str, Any] = {"args": {"path": "/home/agent/notes/today.txt", "content": "Notiz"}}
"""What the first rewrite of a task writes over: a file no call wrote yet."""


def _other_write(write: Mapping[str, Any], later: Mapping[str, Any]) -> bool:
    """Whether ``later`` writes ``write``'s file with other content."""
    mine, theirs = write["args"], later["args"]
    return bool(theirs["path"] == mine["path"] and theirs["content"] != mine["content"])


def _rewritten(earlier: Mapping[str, Any], index: int) -> dict[str, Any]:
    """An earlier written file written with other content: the text changed at this step,
    long now and then (some ten thousand characters), never ASCII only."""
    text = f"{earlier['args']['content'][:60]} — Änderung Nr. {index} ✓ 変更"
    content = text * (1 + 300 * (index % 3 == 0))
    args = {"path": earlier["args"]["path"], "content": content}
    check = {"tool": "read_file", "args": {"path": "{path}"}, "path": "content"}
    return {"tool": "write_file", "args": args, "verify": {**check, "equals": "{content}"}}


def _drawn(base: Mapping[str, Any], generate: Generate, seed: int) -> tuple[Any, ConjectureData]:
    data = ConjectureData(random=random.Random(f"generated:{seed}"), provider=_SameInEveryProcess)
    # A draw outside a test: the build context a test would give it, with none to wrap.
    with BuildContext(data, is_final=True, wrapped_test=draw_scenario):
        return data.draw(generated_data(base, generate)), data


def draw_scenario(base: Mapping[str, Any], generate: Generate, seed: int) -> dict[str, Any]:
    """The scenario data drawn from ``seed`` in the world of ``base``, the same in every
    process."""
    drawn: dict[str, Any] = _drawn(base, generate, seed)[0]
    return drawn


def drawn_choices(base: Mapping[str, Any], generate: Generate, seed: int) -> tuple[Any, ...]:
    """The Hypothesis choices ``draw_scenario`` makes for ``seed``: where shrinking starts."""
    return tuple(_drawn(base, generate, seed)[1].choices)
