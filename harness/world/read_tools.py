"""The READ_ONLY simulated tools: they look at the world and change nothing in it.

Each call is still a real execution: it is ledgered, with the digest of what it
returned, in a transaction of its own, so that a checker can count how many
times a read ran and what each one saw. Results are plain
JSON dicts, deterministic for a given world state (``web_search`` for a given
query); they are what the model uses to verify an effect after a VERIFY hint.
"""

from __future__ import annotations

import hashlib
import posixpath
import sqlite3
from collections.abc import Mapping
from typing import Any

from harness.runtime.executor import CallContext
from harness.world.store import WorldStore

__all__ = [
    "browser_snapshot",
    "list_files",
    "logcat",
    "normalize_path",
    "read_file",
    "ui_dump",
    "web_search",
]


def normalize_path(path: str) -> str:
    """One spelling per path: ``/a//b/`` and ``/a/./b`` are both ``/a/b``."""
    normal = posixpath.normpath(path)
    # POSIX keeps a leading "//" apart; the simulated file system does not.
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def read_file(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    path = normalize_path(args["path"])
    with world.execution(ctx) as db:
        row = db.execute("SELECT content FROM files WHERE path = ?", (path,)).fetchone()
        content = None if row is None else row[0]
        found = {"path": path, "exists": row is not None, "content": content}
        return world.answer(db, ctx, found)


def list_files(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Names directly under ``path``, counting directories implied by deeper paths."""
    path = normalize_path(args["path"])
    prefix = path if path.endswith("/") else f"{path}/"
    with world.execution(ctx) as db:
        paths = [p for (p,) in db.execute(_UNDER, (len(prefix), prefix, len(prefix), prefix))]
        entries = {p[len(prefix) :].split("/", 1)[0] for p in paths}
        return world.answer(db, ctx, {"path": path, "entries": sorted(entries - {""})})


# substr, not LIKE: a path may hold '%' or '_'.
_UNDER = (
    "SELECT path FROM files WHERE substr(path, 1, ?) = ? "
    "UNION SELECT path FROM directories WHERE substr(path, 1, ?) = ?"
)


def web_search(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Three fake results derived from the query's hash: no network, same query same results."""
    query: str = args["query"]
    h = hashlib.sha256(query.encode()).hexdigest()
    results = [
        {
            "title": f"Result {i + 1} for {query}",
            "url": f"https://search.example/{h[8 * i : 8 * i + 8]}",
            "snippet": f"Simulated page {h[8 * i : 8 * i + 8]} about {query}.",
        }
        for i in range(3)
    ]
    with world.execution(ctx) as db:
        return world.answer(db, ctx, {"query": query, "results": results})


def ui_dump(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    with world.execution(ctx) as db:
        fields = dict(db.execute("SELECT field, text FROM ui_fields ORDER BY field").fetchall())
        taps = _column(db, "SELECT element FROM ui_taps ORDER BY id")
        submissions = _column(db, "SELECT form FROM submissions WHERE channel = 'ui' ORDER BY id")
        return world.answer(db, ctx, {"fields": fields, "taps": taps, "submissions": submissions})


def logcat(world: WorldStore, args: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
    tag: str | None = args.get("tag")
    with world.execution(ctx) as db:
        if tag is None:
            lines = _column(db, "SELECT line FROM log ORDER BY id")
        else:
            lines = _column(db, "SELECT line FROM log WHERE tag = ? ORDER BY id", (tag,))
        return world.answer(db, ctx, {"tag": tag, "lines": lines})


def browser_snapshot(
    world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    with world.execution(ctx) as db:
        current = db.execute("SELECT url FROM browser WHERE id = 1").fetchone()
        history = _column(db, "SELECT url FROM browser_history ORDER BY id")
        clicks = _column(db, "SELECT selector FROM browser_clicks ORDER BY id")
        submitted = _column(
            db, "SELECT form FROM submissions WHERE channel = 'browser' ORDER BY id"
        )
        seen = {
            "url": None if current is None else current[0],
            "history": history,
            "clicks": clicks,
            "submitted": submitted,
        }
        return world.answer(db, ctx, seen)


def _column(db: sqlite3.Connection, sql: str, params: tuple[str, ...] = ()) -> list[Any]:
    return [row[0] for row in db.execute(sql, params)]
