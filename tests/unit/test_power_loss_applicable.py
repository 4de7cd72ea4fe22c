"""Which runtimes a power loss applies to: any that keeps files in the trial folder.

A power cut is rebuilt from what the agent asked the kernel, whoever's files they are
(this project's journal, DBOS's or LangGraph's SQLite database, a user's agent program's
own), so it needs files and the observer, not our journal; damage at rest still needs
our journal. A user's agent program (``cmd:``, ``module:``) runs in the trial folder and
may keep anything there: it gets power loss, a black box at each of its model requests
and after its exit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.adapters import get_adapter
from harness.chaos import observer
from harness.chaos.campaign import applicable
from harness.chaos.schedule import (
    BLACK_BOX_CUTS,
    CrashSchedule,
    Life,
    black_box_schedules,
    not_applicable,
)

CUT = CrashSchedule((Life("op.after_effect@3=kill", after_death="power-loss:drop"),))
CORRUPT = CrashSchedule((Life("op.after_finish@2=kill", after_death="corrupt:0.5"),))
TORN = CrashSchedule((Life("journal.before_fsync@4=kill", after_death="power-loss:tear-sector"),))
FRAMEWORKS = ("dbos", "langgraph", "langgraph-async", "langgraph-exit", "pydantic-ai")
GUARDED = ("langgraph-guarded", "pydantic-ai-guarded")


@pytest.fixture
def observer_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A library folder holding the library as ``build_library`` names it: found, not built."""
    digest = hashlib.sha256(observer.SOURCE.read_bytes()).hexdigest()[:16]
    (tmp_path / f"fsobserve-{digest}.so").write_bytes(b"")
    monkeypatch.setenv(observer.ENV_LIBRARY_DIR, str(tmp_path))
    observer._located.cache_clear()
    yield
    observer._located.cache_clear()


@pytest.fixture
def observer_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No library and no compiler to build one."""
    monkeypatch.setenv(observer.ENV_LIBRARY_DIR, str(tmp_path / "lib"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CC", raising=False)
    observer._located.cache_clear()
    yield
    observer._located.cache_clear()


@pytest.mark.parametrize("runtime", FRAMEWORKS)
def test_a_power_cut_applies_to_a_framework_without_our_journal(
    observer_here: None, runtime: str
) -> None:
    adapter = get_adapter(runtime)
    assert not adapter.journal and adapter.keeps_files
    assert applicable(CUT, adapter)
    assert not_applicable("power-loss", adapter) is None


@pytest.mark.parametrize("runtime", FRAMEWORKS)
def test_without_the_observer_it_is_not_applicable_and_says_why(
    observer_missing: None, runtime: str
) -> None:
    adapter = get_adapter(runtime)
    assert not applicable(CUT, adapter)
    assert "compiler" in (not_applicable("power-loss", adapter) or "")


@pytest.mark.parametrize("runtime", FRAMEWORKS)
def test_damage_at_rest_and_our_journal_s_points_stay_ours(
    observer_here: None, runtime: str
) -> None:
    """Corruption needs our journal; a kill between our journal's write and its fsync needs
    our journal's failpoint, which no framework hits."""
    adapter = get_adapter(runtime)
    assert not applicable(CORRUPT, adapter)
    assert not_applicable("corrupt", adapter) == f"{runtime} keeps no journal"
    assert not applicable(TORN, adapter)


@pytest.mark.parametrize("runtime", GUARDED)
def test_a_guard_keeps_both_and_meets_every_file_fault(observer_here: None, runtime: str) -> None:
    adapter = get_adapter(runtime)
    assert adapter.journal and adapter.files
    assert applicable(CUT, adapter) and applicable(CORRUPT, adapter) and applicable(TORN, adapter)


def test_a_runtime_that_keeps_no_files_has_nothing_to_cut(observer_here: None) -> None:
    adapter = get_adapter("naive")
    assert not applicable(CUT, adapter)
    assert not_applicable("power-loss", adapter) == "naive keeps no files in the trial folder"


def test_the_files_named_are_those_the_agent_programs_open() -> None:
    """``Adapter.files`` names the database each agent program opens in the trial folder."""
    from harness.adapters import dbos_agent, langgraph_agent, pydantic_ai_agent

    assert get_adapter("dbos").files == (dbos_agent.SYSTEM_DB,)
    assert get_adapter("pydantic-ai").files == (pydantic_ai_agent.SYSTEM_DB,)
    assert get_adapter("langgraph-exit").files == (langgraph_agent.CHECKPOINTS,)


USER_PROGRAMS = ("cmd:python3 examples/agents/plain_python/agent.py", "module:my_agent.main")


@pytest.mark.parametrize("runtime", USER_PROGRAMS)
def test_a_user_s_agent_program_loses_power(observer_here: None, runtime: str) -> None:
    """It names no files, and keeps some (a black box's conversation, a framework's store)."""
    adapter = get_adapter(runtime)
    assert not adapter.journal and not adapter.files and adapter.keeps_files
    assert not_applicable("power-loss", adapter) is None
    assert not_applicable("corrupt", adapter) == f"{runtime} keeps no journal"


def test_a_black_box_is_cut_at_each_model_request_and_after_its_exit(observer_here: None) -> None:
    hits = {"model.received": 3, "agent.before_exit": 1, "tool.received": 2, "op.reply": 2}
    adapter = get_adapter(USER_PROGRAMS[0])
    cuts = {
        label: schedule
        for label, schedule in black_box_schedules(hits)
        if "power-loss" in schedule.fault_kinds
    }
    assert BLACK_BOX_CUTS == ("model.received", "agent.before_exit")
    assert sorted(cuts) == sorted(
        [f"model.received@{n}+power-loss" for n in (1, 2, 3)] + ["agent.before_exit@1+power-loss"]
    )
    assert cuts["model.received@2+power-loss"] == CrashSchedule(
        (Life("model.received@2=kill", after_death="power-loss:drop"),)
    )
    assert all(applicable(schedule, adapter) for schedule in cuts.values())


def test_without_the_observer_a_black_box_gets_no_power_loss(observer_missing: None) -> None:
    adapter = get_adapter(USER_PROGRAMS[0])
    cut = CrashSchedule((Life("model.received@2=kill", after_death="power-loss:drop"),))
    assert not applicable(cut, adapter)
    assert "compiler" in (not_applicable("power-loss", adapter) or "")
