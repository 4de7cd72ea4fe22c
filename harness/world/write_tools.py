"""The writing simulated tools: IDEMPOTENT_WRITE and NON_IDEMPOTENT.

An idempotent tool run again, even after a crash between its steps, leaves
the world exactly as one run does. A non-idempotent tool adds a new effect on
every run (a second tap is a second tap), which is what VERIFY protects.

Multi-step tools (``create_directory``, ``app_install``, ``github_write_file``)
commit each step as its own transaction and call ``ctx.mid_effect()`` between
steps: a kill there leaves the first steps committed and the rest undone. The
ledger row goes with the first step. A failure that depends on the world (an
app that is not installed) is ledgered, leaves no effect, and raises
``ToolError`` after the commit.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Mapping
from typing import Any

from harness.runtime.errors import ToolError
from harness.runtime.executor import CallContext
from harness.world.read_tools import normalize_path
from harness.world.store import WorldStore

__all__ = [
    "alarm",
    "app_install",
    "app_uninstall",
    "browser_click",
    "browser_navigate",
    "create_directory",
    "github_write_file",
    "input_text",
    "terminal_send",
    "ui_tap",
    "write_file",
]


def _log(db: sqlite3.Connection, ctx: CallContext, tag: str, line: str) -> None:
    db.execute("INSERT INTO log (tag, line, op_id) VALUES (?, ?, ?)", (tag, line, ctx.op_id))


# IDEMPOTENT_WRITE


def write_file(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    path = normalize_path(args["path"])
    content: str = args["content"]
    with world.execution(ctx) as db:
        is_dir = db.execute("SELECT 1 FROM directories WHERE path = ?", (path,)).fetchone()
        if not is_dir:
            db.execute(
                "INSERT INTO files (path, content, op_id) VALUES (?, ?, ?) ON CONFLICT (path) "
                "DO UPDATE SET content = excluded.content, op_id = excluded.op_id",
                (path, content, ctx.op_id),
            )
            return world.answer(db, ctx, {"path": path, "bytes": len(content.encode())})
        error = world.refuse(db, ctx, f"write_file: {path} is a directory")
    raise ToolError(error)


def create_directory(
    world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    """``mkdir -p``: one component per transaction; an existing directory is a no-op."""
    path = normalize_path(args["path"])
    components = _components(path)
    created: list[str] = []
    first, rest = components[:1], components[1:]
    with world.execution(ctx) as db:
        blocked = next((c for c in components if _is_file(db, c)), None)
        if blocked is not None:
            error = world.refuse(db, ctx, f"create_directory: {blocked} exists and is a file")
        else:
            for component in first:
                _mkdir(db, ctx, component, created)
            if not rest:
                return world.answer(db, ctx, {"path": path, "created": created})
    if blocked is not None:
        raise ToolError(error)
    for component in rest:
        ctx.mid_effect()
        with world.transaction() as db:
            _mkdir(db, ctx, component, created)
            if component is rest[-1]:  # the last step says what the call did
                world.answer(db, ctx, {"path": path, "created": created})
    return {"path": path, "created": created}


def _components(path: str) -> list[str]:
    """``/a/b`` -> ``['/a', '/a/b']``; the root has none."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    lead = "/" if path.startswith("/") else ""
    return [lead + "/".join(parts[: i + 1]) for i in range(len(parts))]


def _is_file(db: sqlite3.Connection, path: str) -> bool:
    return db.execute("SELECT 1 FROM files WHERE path = ?", (path,)).fetchone() is not None


def _mkdir(db: sqlite3.Connection, ctx: CallContext, path: str, created: list[str]) -> None:
    cursor = db.execute(
        "INSERT OR IGNORE INTO directories (path, op_id) VALUES (?, ?)", (path, ctx.op_id)
    )
    if cursor.rowcount:
        created.append(path)


def app_install(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Download, then install; the log line is written only by the install that adds the app."""
    package: str = args["package"]
    with world.execution(ctx) as db:
        db.execute(
            "INSERT OR IGNORE INTO downloads (package, op_id) VALUES (?, ?)", (package, ctx.op_id)
        )
    ctx.mid_effect()
    with world.transaction() as db:
        added = db.execute(
            "INSERT OR IGNORE INTO installed_apps (package, op_id) VALUES (?, ?)",
            (package, ctx.op_id),
        ).rowcount
        if added:
            _log(db, ctx, "PackageManager", f"installed {package}")
        return world.answer(db, ctx, {"package": package, "already_installed": not added})


def browser_navigate(
    world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    """Go to ``url``; history grows only when the url differs from the current one."""
    url: str = args["url"]
    with world.execution(ctx) as db:
        current = db.execute("SELECT url FROM browser WHERE id = 1").fetchone()
        moved = current is None or current[0] != url
        if moved:
            db.execute(
                "INSERT INTO browser (id, url, op_id) VALUES (1, ?, ?) ON CONFLICT (id) "
                "DO UPDATE SET url = excluded.url, op_id = excluded.op_id",
                (url, ctx.op_id),
            )
            db.execute("INSERT INTO browser_history (url, op_id) VALUES (?, ?)", (url, ctx.op_id))
        return world.answer(db, ctx, {"url": url, "navigated": moved})


def github_write_file(
    world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    """Store the blob (content-addressed, as git does), then point the path at it."""
    repo: str = args["repo"]
    path = normalize_path(args["path"]).lstrip("/")
    content: str = args["content"]
    sha = hashlib.sha1(b"blob %d\0" % len(content.encode()) + content.encode()).hexdigest()
    with world.execution(ctx) as db:
        db.execute(
            "INSERT OR IGNORE INTO repo_blobs (repo, sha, content, op_id) VALUES (?, ?, ?, ?)",
            (repo, sha, content, ctx.op_id),
        )
    ctx.mid_effect()
    with world.transaction() as db:
        db.execute(
            "INSERT INTO repo_files (repo, path, content, op_id) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (repo, path) DO UPDATE SET content = excluded.content, "
            "op_id = excluded.op_id",
            (repo, path, content, ctx.op_id),
        )
        return world.answer(db, ctx, {"repo": repo, "path": path, "sha": sha})


# NON_IDEMPOTENT


def app_uninstall(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    package: str = args["package"]
    with world.execution(ctx) as db:
        removed = db.execute("DELETE FROM installed_apps WHERE package = ?", (package,)).rowcount
        if removed:
            _log(db, ctx, "PackageManager", f"uninstalled {package}")
            return world.answer(db, ctx, {"package": package, "uninstalled": True})
        error = world.refuse(db, ctx, f"app_uninstall: {package} is not installed")
    raise ToolError(error)


def ui_tap(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    element: str = args["element"]
    form: str | None = args.get("form")
    with world.execution(ctx) as db:
        db.execute("INSERT INTO ui_taps (element, op_id) VALUES (?, ?)", (element, ctx.op_id))
        if form is not None:
            _submit(db, ctx, "ui", form)
        return world.answer(db, ctx, {"element": element, "submitted": form})


def input_text(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Append to the field, as typing does: typing twice doubles the text."""
    field: str = args["field"]
    text: str = args["text"]
    with world.execution(ctx) as db:
        db.execute(
            "INSERT INTO ui_fields (field, text, op_id) VALUES (?, ?, ?) ON CONFLICT (field) "
            "DO UPDATE SET text = ui_fields.text || excluded.text, op_id = excluded.op_id",
            (field, text, ctx.op_id),
        )
        (now,) = db.execute("SELECT text FROM ui_fields WHERE field = ?", (field,)).fetchone()
        return world.answer(db, ctx, {"field": field, "text": now})


def browser_click(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    selector: str = args["selector"]
    form: str | None = args.get("form")
    with world.execution(ctx) as db:
        db.execute(
            "INSERT INTO browser_clicks (selector, op_id) VALUES (?, ?)", (selector, ctx.op_id)
        )
        if form is not None:
            _submit(db, ctx, "browser", form)
        return world.answer(db, ctx, {"selector": selector, "submitted": form})


def _submit(db: sqlite3.Connection, ctx: CallContext, channel: str, form: str) -> None:
    db.execute(
        "INSERT INTO submissions (channel, form, op_id) VALUES (?, ?, ?)",
        (channel, form, ctx.op_id),
    )


def terminal_send(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    text: str = args["text"]
    with world.execution(ctx) as db:
        db.execute("INSERT INTO terminal_input (text, op_id) VALUES (?, ?)", (text, ctx.op_id))
        _log(db, ctx, "Terminal", f"$ {text}")
        return world.answer(db, ctx, {"sent": text})


def alarm(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    time: str = args["time"]
    label: str = args["label"]
    with world.execution(ctx) as db:
        db.execute(
            "INSERT INTO alarms (time, label, op_id) VALUES (?, ?, ?)", (time, label, ctx.op_id)
        )
        _log(db, ctx, "AlarmManager", f"alarm {time} {label}")
        return world.answer(db, ctx, {"time": time, "label": label})
