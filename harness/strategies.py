"""Hypothesis strategies for scenarios and crash schedules, and a runner for what they draw.

For property-based regression checks in your own test suite::

    from hypothesis import given
    from harness.strategies import crash_schedules, describe_failure, run_case, scenarios

    @given(scenarios(max_steps=4), crash_schedules())
    def test_survives_crashes(scenario, schedule):
        result = run_case(scenario, schedule, root=CASES)  # a folder kept across examples
        assert result.status == "pass", describe_failure(result)

The full note: docs/reference/modules.md (``harness/strategies.py``).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, reject, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from harness.chaos.scenario import (
    MAX_BATCH,
    MAX_STEPS,
    BatchStep,
    FakerRecipe,
    Scenario,
    ScenarioStep,
)
from harness.chaos.schedule import OP_FAILPOINTS, RECOVERY_FAILPOINTS, CrashSchedule, Life
from harness.chaos.supervisor import Supervisor
from harness.chaos.tables import write_table_variants
from harness.chaos.trial import Golden, TrialResult, TrialSpec, prepare_golden, run_trial
from harness.toml_text import toml_string, toml_value
from harness.world.catalog import CATALOG

__all__ = [
    "AUDIT_PROFILE",
    "KILL_POINTS",
    "crash_schedules",
    "describe_failure",
    "prepare_case",
    "process_settings",
    "replay_line",
    "run_case",
    "scenario_toml",
    "scenarios",
    "tool_calls",
]

AUDIT_PROFILE = "audit"
"""The Hypothesis profile of nightly audits: ``HYPOTHESIS_PROFILE=audit``."""

# derandomize is said outright: on a CI machine Hypothesis loads its own "ci"
# profile (derandomized) as the default, and a profile inherits the default.
settings.register_profile(AUDIT_PROFILE, max_examples=500, deadline=None, derandomize=False)

KILL_POINTS = (*OP_FAILPOINTS, "journal.before_fsync")
"""Where a drawn failpoint kill lands, simplest first; the last one bites with a power loss."""

_DEFAULT_HITS = 8  # hit bound per failpoint when no golden run's counts are given
_DEFAULT_WORKING_MS = 40.0  # a few forked steps; random-time kills fall in here
_GENERATED = "generated"

# --- realistic values -------------------------------------------------------------------
# Identifiers come from fixed lists, none ending in "-<digits>", and free text
# never holds "#": a step number appended as "-N" or " #N" is then unique.

_TEXT_ALPHABET = string.ascii_letters + string.digits + " .,:;!?'-äéñøü"
_text = st.text(alphabet=_TEXT_ALPHABET, min_size=1, max_size=24)
_content = st.text(alphabet=_TEXT_ALPHABET + "\n", min_size=1, max_size=60)
_DIRS = (
    "/home/agent/projects/notes-app",
    "/home/agent/Documents",
    "/home/agent/projects/budget",
    "/tmp/agent",
)
_dirs = st.sampled_from(_DIRS)
_files = st.builds(
    posixpath.join, _dirs, st.sampled_from(("README.md", "notes.txt", "main.py", "config.toml"))
)
_subdirs = st.builds(
    posixpath.join, _dirs, st.sampled_from(("src", "docs", "tests", "build", "cache"))
)
_packages = st.sampled_from(
    tuple(f"com.example.{app}" for app in ("notes", "todo", "weather", "budget", "reader"))
)
_urls = st.builds(
    "https://{}/{}".format,
    st.sampled_from(("forms.example.com", "news.example.org", "shop.example.net")),
    st.sampled_from(("", "signup", "login", "checkout", "articles/idempotency")),
)
_fields = st.sampled_from(("title", "email", "search_query", "note_body", "username"))
_elements = st.sampled_from(
    (
        "com.example.todo:id/new_item_button",
        "com.example.todo:id/save_button",
        "com.android.settings:id/clear_cache",
        "com.example.notes:id/share",
    )
)
_selectors = st.sampled_from(("#accept-terms", "button.primary", "a.next-page", "#newsletter"))
_forms = st.sampled_from(("signup_form", "todo_item_form", "login_form", "feedback_form"))
_times = st.builds("{:02d}:{:02d}".format, st.integers(0, 23), st.integers(0, 59))
_commands = st.sampled_from(
    ("ls -la", "make test", "git pull --rebase", "rm -rf build", "pip install -r requirements.txt")
)
_programs = st.sampled_from(
    (
        ("python", "print(sum(range(10)))\n"),
        ("bash", "echo hello\n"),
        ("javascript", "console.log([1, 2, 3].length)\n"),
    )
)
_questions = st.sampled_from(
    (
        "Which folder should I use?",
        "Send the summary now?",
        "Which format do you want?",
        "Keep the old version?",
    )
)
_fail_attempts = st.sampled_from((0, 0, 0, 1, 2))


def _literal(text: str) -> str:
    """``text`` as a check template that renders to itself."""
    return text.replace("{", "{{").replace("}", "}}")


# --- the checks: what a read-only tool shows of each tool's effect -------------------------

Check = Callable[[Mapping[str, Any]], dict[str, Any] | None]


def _no_check(args: Mapping[str, Any]) -> None:
    return None


def _log_line(tag: str, line: str) -> Check:
    def check(args: Mapping[str, Any]) -> dict[str, Any]:
        return {"tool": "logcat", "args": {"tag": tag}, "path": "lines", "contains": line}

    return check


def _file_read_back(args: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "tool": "read_file",
        "args": {"path": "{path}"},
        "path": "content",
        "equals": "{content}",
    }


def _directory_listed(args: Mapping[str, Any]) -> dict[str, Any]:
    parent, name = posixpath.split(posixpath.normpath(args["path"]))
    return {
        "tool": "list_files",
        "args": {"path": _literal(parent)},
        "path": "entries",
        "contains": _literal(name),
    }


def _visited(args: Mapping[str, Any]) -> dict[str, Any]:
    return {"tool": "browser_snapshot", "path": "history", "contains": "{url}"}


def _typed(args: Mapping[str, Any]) -> dict[str, Any]:
    # A field of its own (the field is a tagged argument): typing appends, so it holds this text.
    return {"tool": "ui_dump", "path": f"fields.{args['field']}", "equals": "{text}"}


def _tapped(args: Mapping[str, Any]) -> dict[str, Any]:
    if "form" in args:
        return {"tool": "ui_dump", "path": "submissions", "contains": "{form}"}
    return {"tool": "ui_dump", "path": "taps", "contains": "{element}"}


def _clicked(args: Mapping[str, Any]) -> dict[str, Any]:
    if "form" in args:
        return {"tool": "browser_snapshot", "path": "submitted", "contains": "{form}"}
    return {"tool": "browser_snapshot", "path": "clicks", "contains": "{selector}"}


@dataclass(frozen=True, slots=True)
class _Recipe:
    """How to draw one tool's arguments, which of them name its evidence, and its check."""

    args: st.SearchStrategy[dict[str, Any]]
    tagged: tuple[str, ...] = ()
    check: Check = _no_check


def _program_args(program: tuple[str, str], fail_attempts: int) -> dict[str, Any]:
    language, code = program
    return {"language": language, "code": code, "fail_attempts": fail_attempts}


def _args(
    required: Mapping[str, st.SearchStrategy[Any]] | None = None,
    optional: Mapping[str, st.SearchStrategy[Any]] | None = None,
) -> st.SearchStrategy[dict[str, Any]]:
    drawn: dict[str, st.SearchStrategy[Any]] = {**(required or {})}
    drawn["fail_attempts"] = _fail_attempts
    return st.fixed_dictionaries(drawn, optional=optional or {})


# In catalog order (read-only first): the order shrinking moves toward.
_RECIPES: Mapping[str, _Recipe] = {
    # READ_ONLY
    "read_file": _Recipe(_args({"path": _files})),
    "list_files": _Recipe(_args({"path": _dirs})),
    "web_search": _Recipe(_args({"query": _text})),
    "ui_dump": _Recipe(_args()),
    "logcat": _Recipe(
        _args(optional={"tag": st.sampled_from(("PackageManager", "Terminal", "AlarmManager"))})
    ),
    "browser_snapshot": _Recipe(_args()),
    # IDEMPOTENT_WRITE
    "write_file": _Recipe(_args({"path": _files, "content": _content}), ("path",), _file_read_back),
    "app_install": _Recipe(
        _args({"package": _packages}),
        ("package",),
        _log_line("PackageManager", "installed {package}"),
    ),
    "create_directory": _Recipe(_args({"path": _subdirs}), ("path",), _directory_listed),
    "browser_navigate": _Recipe(_args({"url": _urls}), ("url",), _visited),
    "github_write_file": _Recipe(
        _args(
            {
                "repo": st.sampled_from(("agent/notes-app", "agent/budget")),
                "path": st.sampled_from(("README.md", "src/app.py", "docs/index.md")),
                "content": _content,
            }
        )
    ),
    # NON_IDEMPOTENT
    "app_uninstall": _Recipe(
        _args({"package": _packages}),
        ("package",),
        _log_line("PackageManager", "uninstalled {package}"),
    ),
    "ui_tap": _Recipe(
        _args({"element": _elements}, optional={"form": _forms}), ("element", "form"), _tapped
    ),
    "input_text": _Recipe(_args({"field": _fields, "text": _text}), ("field",), _typed),
    "browser_click": _Recipe(
        _args({"selector": _selectors}, optional={"form": _forms}),
        ("selector", "form"),
        _clicked,
    ),
    "terminal_send": _Recipe(_args({"text": _text}), ("text",), _log_line("Terminal", "$ {text}")),
    "alarm": _Recipe(
        _args({"time": _times, "label": _text}),
        ("label",),
        _log_line("AlarmManager", "alarm {time} {label}"),
    ),
    # UNKNOWN
    "shell_execute": _Recipe(_args({"command": _commands})),
    "http_request": _Recipe(
        _args(
            {"method": st.sampled_from(("GET", "POST", "PUT", "DELETE")), "url": _urls},
            optional={"body": _text},
        )
    ),
    "mcp_call": _Recipe(
        _args(
            {
                "server": st.sampled_from(("notes", "calendar", "filesystem")),
                "tool": st.sampled_from(("create_note", "list_events", "read_file")),
            },
            optional={
                "arguments": st.dictionaries(
                    st.sampled_from(("title", "path", "query")), _text, max_size=2
                )
            },
        )
    ),
    "terminal_exec": _Recipe(_args({"command": _commands})),
    "code_runner": _Recipe(st.builds(_program_args, _programs, _fail_attempts)),
    # the ask-user family
    "ask_user": _Recipe(_args({"question": _questions})),
    "ask_user_confirm": _Recipe(_args({"question": _questions})),
    "ask_user_choice": _Recipe(
        _args(
            {
                "question": _questions,
                "options": st.lists(
                    st.sampled_from(("markdown", "plain text", "slides", "e-mail")),
                    min_size=1,
                    max_size=3,
                    unique=True,
                ),
            }
        )
    ),
}
assert set(_RECIPES) == set(CATALOG), "every catalog tool needs a recipe"


def _tag(name: str, value: str, step: int) -> str:
    """``value`` marked with its step number, unlike any untagged or differently tagged value."""
    if name == "path":
        stem, extension = posixpath.splitext(value)
        return f"{stem}-{step}{extension}"
    if name in ("text", "label"):
        return f"{value} #{step}"
    return f"{value}-{step}"


@dataclass(frozen=True, slots=True)
class _Draft:
    """A drawn tool call before the scenario decides whether it carries its step number."""

    tool: str
    args: Mapping[str, Any]

    def build(self, step: int | None, *, transient_failures: bool = True) -> dict[str, Any]:
        """The step as scenario data (what a ``[[steps]]`` table holds)."""
        recipe = _RECIPES[self.tool]
        args = dict(self.args)
        if not args.get("fail_attempts") or not transient_failures:
            args.pop("fail_attempts", None)
        if step is not None:
            for name in recipe.tagged:
                if name in args:
                    args[name] = _tag(name, args[name], step)
        data: dict[str, Any] = {"tool": self.tool, "args": args}
        check = recipe.check(args)
        if check is not None:
            data["verify"] = check
        return data


def _evidence(step: Mapping[str, Any]) -> frozenset[tuple[str, str, Any]]:
    """What a step's check reads, as (tool, argument, value): equal ones would be confused."""
    args = step["args"]
    return frozenset(
        (step["tool"], name, args[name]) for name in _RECIPES[step["tool"]].tagged if name in args
    )


def _drafts_of(tool: str) -> st.SearchStrategy[_Draft]:
    return _RECIPES[tool].args.map(lambda args: _Draft(tool, args))


def _drafts() -> st.SearchStrategy[_Draft]:
    return st.one_of([_drafts_of(tool) for tool in _RECIPES])


def tool_calls(
    *, step: int | None = None, transient_failures: bool = True
) -> st.SearchStrategy[ScenarioStep]:
    """One validated scenario step calling any catalog tool, with its check where one exists.

    With ``step``, every name its check reads carries that number, so steps
    drawn with different numbers never satisfy each other's checks (use it to
    grow a plan one call at a time). With ``transient_failures`` some calls
    set ``fail_attempts``: their first attempts fail with a transient error.
    """
    if step is not None and step < 1:
        raise InvalidArgument(f"step={step}: steps are numbered from 1")
    return _drafts().map(
        lambda draft: ScenarioStep.model_validate(
            draft.build(step, transient_failures=transient_failures)
        )
    )


_WORLD_PARTS: Mapping[str, str] = {
    "write_file": "files",
    "create_directory": "files",
    "app_install": "apps",
    "app_uninstall": "apps",
    "ui_tap": "screen",
    "input_text": "screen",
    "browser_navigate": "browser",
    "browser_click": "browser",
}
"""The part of the world each writer whose effect depends on the order of writes acts on:
a drawn batch holds one writer of a part at most, so that its calls commute (a model
issues together calls whose results do not depend on each other)."""


def _assemble(
    drafts: list[tuple[_Draft, bool]], transient_failures: bool, *, batches: bool = False
) -> Scenario:
    calls: list[dict[str, Any]] = []
    seen: set[tuple[str, str, Any]] = set()
    for index, (draft, _) in enumerate(drafts, start=1):
        call = draft.build(None, transient_failures=transient_failures)
        if _evidence(call) & seen:
            call = draft.build(index, transient_failures=transient_failures)
        seen |= _evidence(call)
        calls.append(call)
    groups: list[list[dict[str, Any]]] = []
    for call, (_, with_previous) in zip(calls, drafts, strict=True):
        last = groups[-1] if groups else []
        parts = {_WORLD_PARTS.get(c["tool"]) for c in last} - {None}
        joins = batches and with_previous and 0 < len(last) < MAX_BATCH
        if joins and _WORLD_PARTS.get(call["tool"]) not in parts:
            last.append(call)
        else:
            groups.append([call])
    steps = [group[0] if len(group) == 1 else {"batch": group} for group in groups]
    tools = ", ".join(call["tool"] for call in calls)
    return Scenario.model_validate(
        {"name": _GENERATED, "description": f"Generated by Hypothesis: {tools}", "steps": steps}
    )


def scenarios(
    min_steps: int = 1,
    max_steps: int = 8,
    *,
    transient_failures: bool = True,
    batches: bool = False,
) -> st.SearchStrategy[Scenario]:
    """Validated scenarios of ``min_steps`` to ``max_steps`` tool calls of any class.

    ``transient_failures`` as for ``tool_calls``. With ``batches`` some calls are
    issued together with the one before them (a step of 2 to ``MAX_BATCH`` calls run
    at once), never two that write the same part of the world, whose order would
    matter; calls one at a time shrink first.
    """
    if not 1 <= min_steps <= max_steps <= MAX_STEPS:
        raise InvalidArgument(
            f"min_steps={min_steps}, max_steps={max_steps}: need 1 <= min <= max <= {MAX_STEPS}"
        )
    if not batches:
        return st.lists(_drafts(), min_size=min_steps, max_size=max_steps).map(
            lambda drafts: _assemble([(d, False) for d in drafts], transient_failures)
        )
    joined = st.lists(st.tuples(_drafts(), st.booleans()), min_size=min_steps, max_size=max_steps)
    return joined.map(lambda drafts: _assemble(drafts, transient_failures, batches=True))


# --- crash schedules ---------------------------------------------------------------------


def _failpoint_kills(
    hits: Mapping[str, int] | None, *, end_then_cut: bool = False
) -> st.SearchStrategy[Life]:
    # One choice among every (point, hit), earlier hits first: each kind of
    # kill is a single draw, so shrinking ranks them by the order of one_of
    # (a choice sequence's length would otherwise rank them first). With
    # ``end_then_cut`` the last choice is no kill: the life runs to its end
    # (a power cut may follow it), the last thing shrinking turns to.
    bounds = {point: _DEFAULT_HITS if hits is None else hits.get(point, 0) for point in KILL_POINTS}
    kills = tuple(
        Life(f"{point}@{hit}=kill")
        for hit in range(1, max(bounds.values(), default=0) + 1)
        for point in KILL_POINTS
        if hit <= bounds[point]
    ) + ((Life(),) if end_then_cut else ())
    return st.sampled_from(kills) if kills else st.nothing()


def _recovery_kills() -> st.SearchStrategy[Life]:
    return st.sampled_from(RECOVERY_FAILPOINTS).map(lambda point: Life(f"{point}@1=kill"))


def _timed_kills(working_ms: float) -> st.SearchStrategy[Life]:
    return st.integers(0, round(working_ms * 1000)).map(
        lambda micros: Life(kill_after_ms=micros / 1000)
    )


def _power_losses() -> st.SearchStrategy[str | None]:
    tears = st.builds(
        "power-loss:tear:{:.3f}:{}".format,
        st.integers(0, 1000).map(lambda keep: keep / 1000),
        st.integers(0, 15),
    )
    return st.one_of(st.none(), st.just("power-loss:drop"), tears)


def crash_schedules(
    hits: Mapping[str, int] | None = None,
    *,
    working_ms: float | None = None,
    max_lives: int = 3,
    random_time: bool = True,
) -> st.SearchStrategy[CrashSchedule]:
    """Schedules of 1 to ``max_lives`` lives, each killed, or cut by a power loss, or both.

    A life is killed at a failpoint hit (``<point>@<hit>=kill``, the hit at
    most ``hits[point]``, the counts of a golden run, when given), inside
    recovery (``recovery.*@1=kill``: after an earlier kill, a kill while
    recovering from it), or ``kill_after_ms`` after it is ready (within
    ``working_ms``, a golden run's working time, when given; never when
    ``random_time`` is false, for schedules that must replay exactly). Or a
    life runs to its end and the power is cut after it (then the agent starts
    again, as after a reboot).
    """
    if max_lives < 1:
        raise InvalidArgument(f"max_lives={max_lives}: a crash schedule has at least one life")
    first_kills = [_failpoint_kills(hits, end_then_cut=True)]
    if random_time:
        first_kills.append(_timed_kills(_DEFAULT_WORKING_MS if working_ms is None else working_ms))

    def lives(kills: list[st.SearchStrategy[Life]]) -> st.SearchStrategy[Life]:
        return st.builds(
            lambda life, fault: replace(life, after_death=fault), st.one_of(kills), _power_losses()
        ).filter(lambda life: life != Life())  # a life with no fault at all ends the trial

    # The first life has nothing to recover from: a kill inside recovery could
    # never land there.
    first = lives(first_kills)
    later = lives([*first_kills[:1], _recovery_kills(), *first_kills[1:]])
    return st.tuples(first, st.lists(later, max_size=max_lives - 1)).map(
        lambda drawn: CrashSchedule((drawn[0], *drawn[1]))
    )


# --- scenario files ----------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A faker recipe as the table a scenario writes it as; anything else as it is."""
    if isinstance(value, FakerRecipe):
        return {"faker": value.provider, **value.kwargs}
    return value


def _toml_value(value: Any) -> str:
    return toml_value(value, _plain)


def scenario_toml(scenario: Scenario) -> str:
    """The scenario as a file ``load_scenario`` reads back to an equal scenario."""
    lines = [f"name = {toml_string(scenario.name)}"]
    lines.append(f"description = {toml_string(scenario.description)}")
    # Every plain setting that differs from its default, so a new one is never dropped.
    settings = scenario.model_dump(exclude_defaults=True, exclude={"tools", "world", "steps"})
    lines += [
        f"{key} = {_toml_value(value)}"
        for key, value in settings.items()
        if key not in ("name", "description")
    ]
    for record in scenario.world.records:
        lines += ["", "[[world.records]]", f"collection = {toml_string(record.collection)}"]
        lines += [f"key = {toml_string(record.key)}", f"value = {_toml_value(record.value)}"]
    for name, declaration in scenario.tools.items():
        lines += ["", f"[tools.{name}]"]
        written = declaration.model_dump(exclude_defaults=True)
        lines += [f"{field} = {_toml_value(value)}" for field, value in written.items()]
    for step in scenario.steps:
        if isinstance(step, BatchStep):
            lines += ["", "[[steps]]"]
            for call in step.batch:
                lines += _call_toml(call, "steps.batch")
        else:
            lines += _call_toml(step, "steps")
    return "\n".join(lines) + "\n"


def _call_toml(step: ScenarioStep, table: str) -> list[str]:
    """A call as the lines of an array-of-tables entry ``[[table]]``."""
    lines = ["", f"[[{table}]]", f"tool = {toml_string(step.tool)}"]
    if step.args:
        lines.append(f"args = {_toml_value(step.args)}")
    check = step.verify
    if check is None:
        return lines
    lines += [f"[{table}.verify]", f"tool = {toml_string(check.tool)}"]
    if check.args:
        lines.append(f"args = {_toml_value(check.args)}")
    lines.append(f"path = {toml_string(check.path)}")
    if check.contains is not None:
        lines.append(f"contains = {_toml_value(check.contains)}")
    if check.equals is not None:
        lines.append(f"equals = {_toml_value(check.equals)}")
    return lines


def _scenario_file(scenario: Scenario, root: Path) -> Path:
    """Write the scenario under ``root``, named by its content, so equal scenarios share it."""
    text = scenario_toml(scenario)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = root.resolve() / f"{scenario.name}-{digest}.toml"
    if not path.exists():
        root.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(text, "utf-8")
        os.replace(temporary, path)
    return path


# --- running what was drawn --------------------------------------------------------------


def prepare_case(
    scenario: Scenario, *, seed: int = 0, root: Path, supervisor: Supervisor | None = None
) -> Golden:
    """Write the scenario file under ``root`` and run (or reuse) its golden run for ``seed``.

    Its ``hits`` bound ``crash_schedules`` to the crash points the scenario has.
    """
    path = _scenario_file(scenario, root)
    return prepare_golden(
        str(path), seed, path.with_name(f"golden-{path.stem}-{seed}"), supervisor or Supervisor()
    )


def run_case(
    scenario: Scenario,
    schedule: CrashSchedule,
    *,
    runtime: str = "real",
    seed: int = 0,
    root: Path,
    supervisor: Supervisor | None = None,
    keep_passes: bool = False,
    reject_unlanded: bool = True,
) -> TrialResult:
    """Run one trial of ``scenario`` under ``schedule`` in real agent processes.

    Writes the scenario file under ``root`` (reused across calls: the file and
    the golden run are named by the scenario's content), runs the golden run
    of ``seed`` unless it exists, then the trial in ``root/trials/``, and
    returns its verdicts. A trial that did not pass keeps its folder (named by
    scenario, seed, runtime and schedule); one that passed keeps it only with
    ``keep_passes``. Every process started is reaped before it returns.

    A drawn schedule whose faults did not all land (a kill inside recovery
    that the restart never reached, say) did not test what was drawn: with
    ``reject_unlanded`` (the default, for use inside a Hypothesis test) the
    example is rejected (``hypothesis.reject``) rather than judged; outside
    one, pass False and read the ``F`` verdict.
    """
    supervisor = supervisor or Supervisor()
    golden = prepare_case(scenario, seed=seed, root=root, supervisor=supervisor)
    path = _scenario_file(scenario, root)
    spec = TrialSpec(str(path), seed, schedule, runtime, label="hypothesis")
    tables = None
    if any(life.table for life in schedule.lives):
        tables = write_table_variants(path.with_name("tables"))
    label = hashlib.sha256(schedule.to_json().encode()).hexdigest()[:8]
    directory = path.parent / "trials" / f"{spec.trial_id}-{label}"
    result = run_trial(spec, directory, golden.directory, supervisor, tables=tables)
    if (result.status == "pass" and not keep_passes) or (reject_unlanded and _unlanded(result)):
        shutil.rmtree(directory)
    if reject_unlanded and _unlanded(result):
        reject()
    return result


def _unlanded(result: TrialResult) -> bool:
    return any(v.invariant == "F" and v.status == "unknown" for v in result.verdicts)


def replay_line(result: TrialResult) -> str:
    """The one command that runs this trial again (``python -m harness trial ...``)."""
    return result.spec.replay_command()


def describe_failure(result: TrialResult) -> str:
    """Which invariants did not pass, their evidence, and the replay command, for a message."""
    lines = [
        f"{result.spec.runtime} runtime, {result.spec.scenario} (seed {result.spec.seed}), "
        f"schedule {result.spec.schedule.describe()}: {result.status}"
    ]
    lines += _evidence_lines(result)
    lines.append(f"folder: {result.directory}")
    lines.append(f"replay: {replay_line(result)}")
    return "\n".join(lines)


def _evidence_lines(result: TrialResult) -> Iterable[str]:
    for verdict in result.verdicts:
        if verdict.status != "pass":
            yield f"  {verdict.invariant} {verdict.status}: {'; '.join(verdict.evidence)}"


def process_settings(examples: int, *, steps: int | None = None) -> settings:
    """Settings for a Hypothesis test over real processes.

    ``examples`` examples (and ``steps`` steps per stateful run) in ``make
    test``, the same ones every run (derandomized: a small budget is a fixed
    regression sample, not a lottery); under ``HYPOTHESIS_PROFILE=audit`` the
    audit profile's example budget, five times the steps, and fresh examples
    from the run's seed. No deadline: a trial's duration is the machine's,
    not the code's.
    """
    audit = os.environ.get("HYPOTHESIS_PROFILE") == AUDIT_PROFILE
    small = settings(max_examples=examples, derandomize=True)
    base = settings.get_profile(AUDIT_PROFILE) if audit else small
    extra: dict[str, Any] = {}
    if steps is not None:
        extra["stateful_step_count"] = steps * 5 if audit else steps
    return settings(
        base,
        deadline=None,
        suppress_health_check=(HealthCheck.too_slow, HealthCheck.function_scoped_fixture),
        **extra,
    )
