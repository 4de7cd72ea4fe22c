"""Hypothesis strategies for single tool calls of the catalog, with the checks that read them.

Each catalog tool has a ``Recipe``: how its arguments are drawn (from small pools of
realistic values, so that equal calls come up), which arguments name its evidence,
and the read-only check that shows its effect. ``drafts()`` draws a ``Draft``, a
call before a scenario decides whether it carries its step number. Pure: nothing
here runs a process. ``harness.strategies`` builds scenarios from them, and
``harness.chaos.generated`` the plans every campaign draws.
"""

from __future__ import annotations

import posixpath
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from harness.world.catalog import CATALOG

__all__ = [
    "RECIPES",
    "WORLD_PARTS",
    "Check",
    "Draft",
    "Recipe",
    "drafts",
    "drafts_of",
    "evidence",
]

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
class Recipe:
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
RECIPES: Mapping[str, Recipe] = {
    # READ_ONLY
    "read_file": Recipe(_args({"path": _files})),
    "list_files": Recipe(_args({"path": _dirs})),
    "web_search": Recipe(_args({"query": _text})),
    "ui_dump": Recipe(_args()),
    "logcat": Recipe(
        _args(optional={"tag": st.sampled_from(("PackageManager", "Terminal", "AlarmManager"))})
    ),
    "browser_snapshot": Recipe(_args()),
    # IDEMPOTENT_WRITE
    "write_file": Recipe(_args({"path": _files, "content": _content}), ("path",), _file_read_back),
    "app_install": Recipe(
        _args({"package": _packages}),
        ("package",),
        _log_line("PackageManager", "installed {package}"),
    ),
    "create_directory": Recipe(_args({"path": _subdirs}), ("path",), _directory_listed),
    "browser_navigate": Recipe(_args({"url": _urls}), ("url",), _visited),
    "github_write_file": Recipe(
        _args(
            {
                "repo": st.sampled_from(("agent/notes-app", "agent/budget")),
                "path": st.sampled_from(("README.md", "src/app.py", "docs/index.md")),
                "content": _content,
            }
        )
    ),
    # NON_IDEMPOTENT
    "app_uninstall": Recipe(
        _args({"package": _packages}),
        ("package",),
        _log_line("PackageManager", "uninstalled {package}"),
    ),
    "ui_tap": Recipe(
        _args({"element": _elements}, optional={"form": _forms}), ("element", "form"), _tapped
    ),
    "input_text": Recipe(_args({"field": _fields, "text": _text}), ("field",), _typed),
    "browser_click": Recipe(
        _args({"selector": _selectors}, optional={"form": _forms}),
        ("selector", "form"),
        _clicked,
    ),
    "terminal_send": Recipe(_args({"text": _text}), ("text",), _log_line("Terminal", "$ {text}")),
    "alarm": Recipe(
        _args({"time": _times, "label": _text}),
        ("label",),
        _log_line("AlarmManager", "alarm {time} {label}"),
    ),
    # UNKNOWN
    "shell_execute": Recipe(_args({"command": _commands})),
    "http_request": Recipe(
        _args(
            {"method": st.sampled_from(("GET", "POST", "PUT", "DELETE")), "url": _urls},
            optional={"body": _text},
        )
    ),
    "mcp_call": Recipe(
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
    "terminal_exec": Recipe(_args({"command": _commands})),
    "code_runner": Recipe(st.builds(_program_args, _programs, _fail_attempts)),
    # the ask-user family
    "ask_user": Recipe(_args({"question": _questions})),
    "ask_user_confirm": Recipe(_args({"question": _questions})),
    "ask_user_choice": Recipe(
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
assert set(RECIPES) == set(CATALOG), "every catalog tool needs a recipe"


def _tag(name: str, value: str, step: int) -> str:
    """``value`` marked with its step number, unlike any untagged or differently tagged value."""
    if name == "path":
        stem, extension = posixpath.splitext(value)
        return f"{stem}-{step}{extension}"
    if name in ("text", "label"):
        return f"{value} #{step}"
    return f"{value}-{step}"


@dataclass(frozen=True, slots=True)
class Draft:
    """A drawn tool call before the scenario decides whether it carries its step number."""

    tool: str
    args: Mapping[str, Any]

    def build(self, step: int | None, *, transient_failures: bool = True) -> dict[str, Any]:
        """The step as scenario data (what a ``[[steps]]`` table holds)."""
        recipe = RECIPES[self.tool]
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


def evidence(step: Mapping[str, Any]) -> frozenset[tuple[str, str, Any]]:
    """What a step's check reads, as (tool, argument, value): equal ones would be confused."""
    args = step["args"]
    return frozenset(
        (step["tool"], name, args[name]) for name in RECIPES[step["tool"]].tagged if name in args
    )


def drafts_of(tool: str) -> st.SearchStrategy[Draft]:
    return RECIPES[tool].args.map(lambda args: Draft(tool, args))


def drafts() -> st.SearchStrategy[Draft]:
    return st.one_of([drafts_of(tool) for tool in RECIPES])


WORLD_PARTS: Mapping[str, str] = {
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
