"""Declared tools: a scenario's own tools, whose true behaviour the world implements generically.

A scenario (``harness.chaos.declarations`` validates it) declares a tool by
its arguments and one behaviour of ``BEHAVIOURS``; this module is the world's
side: the ``DeclaredTool`` the plan carries to the agent process (plain JSON,
no pydantic) and the generic SQL each behaviour runs over four tables of the
world store:

- ``records(collection, key, value)``: a record is a JSON value under a key;
- ``outbox(channel, message)``: what was sent outside (an external effect);
- ``opaque_calls(tool, payload)``: calls recorded only, revealed by no read;
- ``prepared(tool, call)``: the first step of a multi-step tool, once per
  distinct call (a cost, like a second download: a retry adds nothing).

What each behaviour does, and what running it twice does:

A tool declared with ``dedupe = "key"`` and a ``window`` stands for a provider
that deduplicates by the idempotency key, on the trial's clock (docs/keys.md); one
declared with ``lookup = "key"`` records the key with its effect and drops nothing.

The full note: docs/reference/modules.md (``harness/world/declared.py``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from harness.world.catalog import ArgSpec, ToolSpec
from harness.world.store import WorldStore

if TYPE_CHECKING:  # a plan's reader (the checkers) loads no runtime
    from harness.runtime.executor import CallContext

__all__ = [
    "BEHAVIOURS",
    "MISSING",
    "READ_BEHAVIOUR",
    "DeclaredTool",
    "WorldRecord",
    "canonical_json",
    "run_declared",
]

READ_BEHAVIOUR = "read"
BEHAVIOURS = ("read", "put", "create", "increment", "delete", "send", "opaque")
"""The vocabulary of true behaviours, in the order the table above gives them."""

DEDUPE = ("key",)
"""What a provider may deduplicate by: the idempotency key."""

MISSING = ("fail", "ignore")
"""What ``delete`` does when the record is not there: fail the call, or do nothing."""


def canonical_json(value: Any) -> str:
    """One spelling per JSON value: keys sorted, no spaces (two equal values, one text)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class WorldRecord:
    """A record the world holds before the first life (a scenario's ``[[world.records]]``)."""

    collection: str
    key: str
    value: Any

    def to_json(self) -> dict[str, Any]:
        return {"collection": self.collection, "key": self.key, "value": self.value}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorldRecord:
        return cls(data["collection"], data["key"], data["value"])


@dataclass(frozen=True, slots=True)
class DeclaredTool:
    """A validated declaration: what the tool takes and what it truly does.

    ``collection`` is where records live (every behaviour but ``send`` and
    ``opaque``; a ``read`` names it or a ``channel``), ``key`` the argument
    naming the record, ``value`` the arguments that make up the stored value
    (an object of them), ``by`` the argument (or the number) ``increment``
    adds, ``missing`` what a ``delete`` of nothing does.
    """

    name: str
    behaviour: str
    args: tuple[ArgSpec, ...] = ()
    summary: str = ""
    collection: str | None = None
    channel: str | None = None
    key: str | None = None
    value: tuple[str, ...] = ()
    by: str | int | None = None
    missing: str | None = None
    multi_step: bool = False
    dedupe: str | None = None
    """``"key"``: its provider drops a repeat of an idempotency key within ``window``."""
    window: float | None = None
    """Seconds a deduplicating provider remembers a key (on the trial's clock)."""
    lookup: str | None = None
    """``"key"``: its provider records the key a call carried with its effect (and drops
    no repeat), so a look-up by key tells whether the effect is there."""

    @property
    def by_key(self) -> bool:
        """Whether its effect can be looked up by the idempotency key (the agent gives it
        a reconciler): a deduplicating provider, or one that records the key."""
        return self.dedupe is not None or self.lookup is not None

    @property
    def spec(self) -> ToolSpec:
        """The tool's arguments in the catalog's terms (the gate checks calls against it)."""
        summary = self.summary or f"declared: {self.behaviour}"
        return ToolSpec(self.name, self.args, summary, self.multi_step)

    @property
    def reads(self) -> bool:
        return self.behaviour == READ_BEHAVIOUR

    @property
    def place(self) -> str | None:
        """What it reads or writes: ``collection:NAME``, ``channel:NAME``, or None (opaque)."""
        if self.collection is not None:
            return f"collection:{self.collection}"
        if self.channel is not None:
            return f"channel:{self.channel}"
        return None

    def result_shape(self) -> Mapping[str, str]:
        """A read's result keys and their types (what a verify path may start with)."""
        if self.channel is not None:
            return {"channel": "str", "messages": "list", "count": "int"}
        if self.key is not None:
            return {"collection": "str", "key": "str", "found": "bool", "value": "any"}
        return {
            "collection": "str",
            "keys": "list",
            "values": "list",
            "records": "object",
            "count": "int",
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "behaviour": self.behaviour,
            "args": [[a.name, a.type, a.optional] for a in self.args],
            "summary": self.summary,
            "collection": self.collection,
            "channel": self.channel,
            "key": self.key,
            "value": list(self.value),
            "by": self.by,
            "missing": self.missing,
            "multi_step": self.multi_step,
            **({"dedupe": self.dedupe, "window": self.window} if self.dedupe else {}),
            **({"lookup": self.lookup} if self.lookup else {}),
        }

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> DeclaredTool:
        return cls(
            name,
            data["behaviour"],
            tuple(ArgSpec(n, t, o) for n, t, o in data["args"]),
            data["summary"],
            data["collection"],
            data["channel"],
            data["key"],
            tuple(data["value"]),
            data["by"],
            data["missing"],
            data["multi_step"],
            data.get("dedupe"),
            data.get("window"),
            data.get("lookup"),
        )


def run_declared(
    tool: DeclaredTool, world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    """Execute ``tool`` once against ``world`` with arguments the gate already checked."""
    if tool.dedupe is not None:
        replayed = _replayed(tool, world, args, ctx)
        if replayed is not None:
            return replayed
    return _BEHAVIOURS[tool.behaviour](tool, world, args, ctx)


def _replayed(
    tool: DeclaredTool, world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any] | None:
    """The first call's result when the provider drops this call as a repeat of its key
    (recorded in ``key_replays``, no effect); None when the call is new to it."""
    key, call = ctx.idempotency_key, canonical_json(_call(args))
    with world.transaction() as db:
        row = db.execute(
            "SELECT call, result, at, op_id FROM idempotency_keys WHERE tool = ? AND key = ?",
            (tool.name, key),
        ).fetchone()
        if row is None or tool.window is None or world.clock() - row[2] >= tool.window:
            return None
        if row[0] == call:
            db.execute(
                "INSERT INTO key_replays (tool, key, op_id, attempt, pid, first_op) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (tool.name, key, ctx.op_id, ctx.attempt, world._pid(), row[3]),
            )
            result: dict[str, Any] = json.loads(row[1])
            return result
    from harness.runtime.errors import ToolError  # here: a plan's reader loads no runtime

    raise ToolError(
        f"{tool.name}: idempotency key {key} was first used with other arguments; "
        "a provider refuses to reuse it"
    )


def _keep_key(
    tool: DeclaredTool,
    world: WorldStore,
    db: sqlite3.Connection,
    args: Mapping[str, Any],
    ctx: CallContext,
    result: dict[str, Any],
) -> dict[str, Any]:
    """Remember the key of a call the provider made, in the transaction of its effect (a
    provider that only records keys keeps the last call's: it never answers from it)."""
    if tool.by_key:
        db.execute(
            "INSERT OR REPLACE INTO idempotency_keys (tool, key, call, result, at, op_id) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                tool.name,
                ctx.idempotency_key,
                canonical_json(_call(args)),
                canonical_json(result),
                world.clock(),
                ctx.op_id,
            ),
        )
    return result


# -- the behaviours -----------------------------------------------------------------------

Check = Callable[[sqlite3.Connection], str | None]
"""What a call must find in the world before its effect: None, or why it fails."""
Apply = Callable[[sqlite3.Connection], dict[str, Any]]
"""The effect, applied in a transaction; returns the result."""


def _steps(
    tool: DeclaredTool,
    world: WorldStore,
    args: Mapping[str, Any],
    ctx: CallContext,
    apply: Apply,
    check: Check | None = None,
) -> dict[str, Any]:
    """Check, then apply: in the ledgered transaction for a single-step tool; for a
    multi-step one, check and prepare there, hit ``op.mid_effect``, apply in a second."""
    with world.execution(ctx) as db:
        problem = None if check is None else check(db)
        if problem is None and not tool.multi_step:
            return world.answer(db, ctx, _keep_key(tool, world, db, args, ctx, apply(db)))
        if problem is None:
            db.execute(
                "INSERT OR IGNORE INTO prepared (tool, call, op_id) VALUES (?, ?, ?)",
                (tool.name, canonical_json(_call(args)), ctx.op_id),
            )
        else:  # ledgered, no effect, and the call fails
            error = world.refuse(db, ctx, f"{tool.name}: {problem}")
    if problem is not None:
        from harness.runtime.errors import ToolError  # here: a plan's reader loads no runtime

        raise ToolError(error)
    ctx.mid_effect()
    with world.transaction() as db:
        return world.answer(db, ctx, _keep_key(tool, world, db, args, ctx, apply(db)))


def _read(
    tool: DeclaredTool, world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    with world.execution(ctx) as db:
        if tool.channel is not None:
            rows = db.execute(
                "SELECT message FROM outbox WHERE channel = ? ORDER BY id", (tool.channel,)
            ).fetchall()
            messages = [json.loads(m) for (m,) in rows]
            return world.answer(
                db, ctx, {"channel": tool.channel, "messages": messages, "count": len(messages)}
            )
        if tool.key is not None:
            key = args[tool.key]
            found = _record(db, tool, key)
            one = {
                "collection": tool.collection,
                "key": key,
                "found": found is not None,
                "value": None if found is None else json.loads(found),
            }
            return world.answer(db, ctx, one)
        rows = db.execute(
            "SELECT key, value FROM records WHERE collection = ? ORDER BY key", (tool.collection,)
        ).fetchall()
        records = {key: json.loads(value) for key, value in rows}
        every = {
            "collection": tool.collection,
            "keys": list(records),
            "values": list(records.values()),
            "records": records,
            "count": len(records),
        }
        return world.answer(db, ctx, every)


def _put(
    tool: DeclaredTool, world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    """Merge the value's fields into the record under the key: the same call, the same record."""
    key, fields = args[_key(tool)], _value(tool, args)

    def apply(db: sqlite3.Connection) -> dict[str, Any]:
        old = _record(db, tool, key)
        before = None if old is None else json.loads(old)
        merged = {**before, **fields} if isinstance(before, dict) else fields
        _set(db, tool, key, merged, ctx)
        return {"collection": tool.collection, "key": key, "value": merged}

    return _steps(tool, world, args, ctx, apply)


def _create(
    tool: DeclaredTool, world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    """A new record each call. Its key comes from its content and the number of equal
    records before it, not from a counter: the world a correct runtime leaves then equals
    the golden run's whichever steps were verified and redone in between."""
    value = _value(tool, args)
    stem = hashlib.sha256(canonical_json(value).encode()).hexdigest()[:8]

    def apply(db: sqlite3.Connection) -> dict[str, Any]:
        (equal,) = db.execute(
            "SELECT count(*) FROM records WHERE collection = ? AND substr(key, 1, 9) = ?",
            (tool.collection, f"{stem}-"),
        ).fetchone()
        key = f"{stem}-{equal + 1}"
        _set(db, tool, key, value, ctx)
        return {"collection": tool.collection, "key": key, "value": value}

    return _steps(tool, world, args, ctx, apply)


def _increment(
    tool: DeclaredTool, world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    key = args[_key(tool)]
    by = tool.by if isinstance(tool.by, int) else args[str(tool.by)]

    def not_a_number(db: sqlite3.Connection) -> str | None:
        old = _record(db, tool, key)
        value = 0 if old is None else json.loads(old)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"the record {key!r} of {tool.collection!r} holds {old}, not a number"
        return None

    def apply(db: sqlite3.Connection) -> dict[str, Any]:
        old = _record(db, tool, key)
        total = (0 if old is None else json.loads(old)) + by
        _set(db, tool, key, total, ctx)
        return {"collection": tool.collection, "key": key, "value": total}

    return _steps(tool, world, args, ctx, apply, not_a_number)


def _delete(
    tool: DeclaredTool, world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    key = args[_key(tool)]

    def absent(db: sqlite3.Connection) -> str | None:
        if tool.missing == "ignore" or _record(db, tool, key) is not None:
            return None
        return f"no record {key!r} in {tool.collection!r}"

    def apply(db: sqlite3.Connection) -> dict[str, Any]:
        deleted = db.execute(
            "DELETE FROM records WHERE collection = ? AND key = ?", (tool.collection, key)
        ).rowcount
        return {"collection": tool.collection, "key": key, "deleted": bool(deleted)}

    return _steps(tool, world, args, ctx, apply, absent)


def _send(
    tool: DeclaredTool, world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    message = _value(tool, args)

    def apply(db: sqlite3.Connection) -> dict[str, Any]:
        db.execute(
            "INSERT INTO outbox (channel, message, op_id) VALUES (?, ?, ?)",
            (tool.channel, canonical_json(message), ctx.op_id),
        )
        return {"channel": tool.channel, "message": message}

    return _steps(tool, world, args, ctx, apply)


def _opaque(
    tool: DeclaredTool, world: WorldStore, args: Mapping[str, Any], ctx: CallContext
) -> dict[str, Any]:
    payload = canonical_json(_call(args))
    ref = hashlib.sha256(f"{tool.name}:{payload}".encode()).hexdigest()[:12]

    def apply(db: sqlite3.Connection) -> dict[str, Any]:
        db.execute(
            "INSERT INTO opaque_calls (tool, payload, op_id) VALUES (?, ?, ?)",
            (tool.name, payload, ctx.op_id),
        )
        return {"tool": tool.name, "recorded": True, "ref": ref}

    return _steps(tool, world, args, ctx, apply)


Behaviour = Callable[[DeclaredTool, WorldStore, Mapping[str, Any], "CallContext"], dict[str, Any]]

_BEHAVIOURS: Mapping[str, Behaviour] = MappingProxyType(
    {
        "read": _read,
        "put": _put,
        "create": _create,
        "increment": _increment,
        "delete": _delete,
        "send": _send,
        "opaque": _opaque,
    }
)


# -- helpers ------------------------------------------------------------------------------


def _key(tool: DeclaredTool) -> str:
    assert tool.key is not None, f"{tool.name}: a {tool.behaviour} names its key argument"
    return tool.key


def _value(tool: DeclaredTool, args: Mapping[str, Any]) -> dict[str, Any]:
    """The stored value: an object of the value arguments the call gave."""
    return {name: args[name] for name in tool.value if name in args}


def _call(args: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k != "fail_attempts"}


def _record(db: sqlite3.Connection, tool: DeclaredTool, key: str) -> str | None:
    row = db.execute(
        "SELECT value FROM records WHERE collection = ? AND key = ?", (tool.collection, key)
    ).fetchone()
    return None if row is None else str(row[0])


def _set(
    db: sqlite3.Connection, tool: DeclaredTool, key: str, value: Any, ctx: CallContext
) -> None:
    db.execute(
        "INSERT INTO records (collection, key, value, op_id) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (collection, key) DO UPDATE SET value = excluded.value, "
        "op_id = excluded.op_id",
        (tool.collection, key, canonical_json(value), ctx.op_id),
    )
