"""Adapters: the system under test is a plug-in behind one small interface.

An adapter is an agent program: a module with ``main(argv: list[str]) -> int``
that the supervisor starts once per incarnation (forked from a warm worker, or
as ``python -I -m <module> TRIAL_DIR``). Its contract, for one incarnation:

The full note: docs/reference/modules.md (``harness/adapters/__init__.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "ADAPTERS",
    "JOURNAL_POINTS",
    "MODEL_POINTS",
    "OP_POINTS",
    "Adapter",
    "UnknownAdapterError",
    "get_adapter",
]


OP_POINTS = frozenset(
    {
        "op.before_intent",
        "op.after_intent",
        "op.request",
        "op.mid_effect",
        "op.reply",
        "op.after_effect",
        "op.after_finish",
        "agent.before_exit",
    }
)
"""The failpoints every adapter offers: around each tool call (``op.request``,
``op.mid_effect`` and ``op.reply`` are hit by the simulated tools themselves), and its
last point."""
JOURNAL_POINTS = frozenset(
    {
        "recovery.after_decision",
        "recovery.before_retry",
        "recovery.after_hint",
        "journal.append",
        "journal.before_fsync",
        "compact.before_write",
        "compact.mid_write",
        "compact.before_rename",
        "compact.before_dir_fsync",
        "compact.after_dir_fsync",
        "recovery.reconcile",
    }
)
"""The failpoints of this project's runtime: its recovery, its journal's appends and its
compaction (hit by an agent program that compacts: a scenario's ``compact_at``)."""
MODEL_POINTS = frozenset({"model.issue", "reconcile.lookup"})
"""The failpoints of ``harness.agent``'s own loop: its scripted model is about to issue a
step's call (where ``reuse-id`` makes it reuse an earlier call's op id), its reconciler
looks a key up in the world (where ``lag`` makes the lookup lag the effects)."""
DBOS_DATABASE = "dbos.sqlite"
"""DBOS's SQLite system database in the trial folder (the dbos and pydantic-ai adapters)."""
LANGGRAPH_CHECKPOINTS = "langgraph.sqlite"
"""LangGraph's SQLite checkpoints in the trial folder (the langgraph adapters)."""


@dataclass(frozen=True, slots=True)
class Adapter:
    name: str
    module: str
    """The agent program: a module with ``main(argv) -> int``."""
    journal: bool
    """Whether it keeps this project's write-ahead journal in ``TRIAL_DIR/journal``."""
    description: str
    env: Mapping[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    """The files of ``TRIAL_DIR`` its framework keeps its durable state in, besides our
    journal (a framework's SQLite database): a power loss has them to act on."""
    points: frozenset[str] | None = None
    """The failpoints its life hits, when not the adapter contract's (a black box's are
    in the harness's servers: ``harness.blackbox.BLACKBOX_POINTS``)."""
    own_files: bool = False
    """A user's agent program (``cmd:``, ``module:``): it runs in ``TRIAL_DIR`` and may keep
    any files there, which it does not name; a power cut acts on those its trace shows."""

    @property
    def keeps_files(self) -> bool:
        """Whether it keeps (or, a user's program, may keep) durable state in files of
        ``TRIAL_DIR`` (our journal, its framework's, its own): a power loss, rebuilt from
        what it asked the kernel, applies."""
        return self.journal or bool(self.files) or self.own_files

    @property
    def failpoints(self) -> frozenset[str]:
        """The failpoints its agent program hits: a schedule that names another is not run."""
        if self.points is not None:
            return self.points
        points = OP_POINTS | JOURNAL_POINTS if self.journal else OP_POINTS
        return points | MODEL_POINTS if self.takes_model else points

    @property
    def black_box(self) -> bool:
        """Whether it is an agent program run as a black box (``cmd:``)."""
        return self.module == BLACKBOX_HOST

    @property
    def takes_model(self) -> bool:
        """Whether its agent program runs ``harness.agent``'s loop (itself, or the mcp
        adapter's, which is that loop with its tools elsewhere), whose scripted model a
        scenario's ``model`` or the command line's ``--model`` picks (another runs its own)."""
        return self.module in ("harness.agent", "harness.adapters.mcp_agent")

    @property
    def evidence(self) -> frozenset[str]:
        """What it leaves to judge: the ledger, the history and the world, our journal, and
        the digest of each result its model acked (``harness.agent``'s model reports it)."""
        kept = {"ledger", "history", "world"}
        kept |= {"journal"} if self.journal else set()
        # A black box's model is the harness's: it reports the digest of each result shown.
        return frozenset(kept | {"results"} if self.takes_model or self.black_box else kept)


class UnknownAdapterError(ValueError):
    """No adapter of that name. Remedy: pick one of ``ADAPTERS`` or use ``module:<name>``."""


def _registry() -> dict[str, Adapter]:
    from harness.agent.broken import BROKEN_RUNTIMES

    adapters = {
        "real": Adapter(
            "real", "harness.agent", True, "this project's runtime", {"HARNESS_RUNTIME": "real"}
        ),
        "real-content": Adapter(
            "real-content",
            "harness.agent",
            True,
            "this project's runtime, knowing a call by its content when its id is new",
            {"HARNESS_RUNTIME": "real", "HARNESS_IDENTITY": "content"},
        ),
        "mcp": Adapter(
            "mcp",
            "harness.adapters.mcp_agent",
            True,
            "this project's runtime, each tool call over MCP to a server child process",
            {"HARNESS_RUNTIME": "real"},
        ),
        "dbos": Adapter(
            "dbos",
            "harness.adapters.dbos_agent",
            False,
            "DBOS Transact 3.4: each tool call one step of a workflow",
            files=(DBOS_DATABASE,),
        ),
        # Pydantic AI, bare and guarded (harness/adapters/pydantic_ai_agent.py)
        "pydantic-ai": Adapter(
            "pydantic-ai",
            "harness.adapters.pydantic_ai_agent",
            False,
            "Pydantic AI 2.78 on its DBOS integration: each tool call a DBOS step",
            {"HARNESS_PYDANTIC_AI": "bare"},
            files=(DBOS_DATABASE,),
        ),
        "pydantic-ai-guarded": Adapter(
            "pydantic-ai-guarded",
            "harness.adapters.pydantic_ai_agent",
            True,
            "the pydantic-ai agent with this project's runtime guarding its tools",
            {"HARNESS_PYDANTIC_AI": "guarded"},
            files=(DBOS_DATABASE,),
        ),
        "naive": Adapter(
            "naive",
            "harness.adapters.naive",
            False,
            "no recovery: every start runs the whole plan again",
        ),
    }
    # LangGraph 1.2 (harness/adapters/langgraph_agent.py): one agent program, bare under
    # each of LangGraph's durability modes, and with this project's guard added.
    langgraph = "harness.adapters.langgraph_agent"
    for mode, suffix in (("sync", ""), ("async", "-async"), ("exit", "-exit")):
        adapters[f"langgraph{suffix}"] = Adapter(
            f"langgraph{suffix}",
            langgraph,
            False,
            f"LangGraph 1.2: a StateGraph with ToolNode, SQLite checkpoints, durability={mode}",
            {"HARNESS_LANGGRAPH_DURABILITY": mode},
            files=(LANGGRAPH_CHECKPOINTS,),
        )
    adapters["langgraph-guarded"] = Adapter(
        "langgraph-guarded",
        langgraph,
        True,
        "the langgraph agent with this project's runtime guarding its tools",
        {"HARNESS_LANGGRAPH_DURABILITY": "sync", "HARNESS_LANGGRAPH_GUARD": "1"},
        files=(LANGGRAPH_CHECKPOINTS,),
    )
    for name, runtime in BROKEN_RUNTIMES.items():
        adapters[name] = Adapter(
            name, "harness.agent", True, f"broken: {runtime.mistake}", {"HARNESS_RUNTIME": name}
        )
    return adapters


ADAPTERS: Mapping[str, Adapter] = MappingProxyType(_registry())


BLACKBOX_HOST = "harness.blackbox.host"
"""The program the supervisor starts for a ``cmd:`` runtime: it serves the model and the
tools and starts the agent's command (``harness.blackbox.host``)."""


def black_box(name: str) -> Adapter:
    """The adapter of ``cmd:<command line>``: an agent program run as a black box."""
    import os

    from harness.blackbox import AGENT_COMMAND_ENV, AGENT_HOME_ENV, BLACKBOX_POINTS

    command = name.removeprefix("cmd:").strip()
    if not command:
        raise UnknownAdapterError(f"{name!r}: cmd:<command line> expected, e.g. cmd:'python a.py'")
    env = {AGENT_COMMAND_ENV: command, AGENT_HOME_ENV: os.getcwd()}
    description = f"agent program {command}, as a black box"
    return Adapter(
        name, BLACKBOX_HOST, False, description, env, points=BLACKBOX_POINTS, own_files=True
    )


def get_adapter(name: str) -> Adapter:
    """The adapter called ``name``; ``module:<dotted.module>`` names a user's agent program,
    ``cmd:<command line>`` one run as a black box (``harness.blackbox``)."""
    if name.startswith("cmd:"):
        return black_box(name)
    if name.startswith("module:"):
        module = name.removeprefix("module:")
        if not module or not all(part.isidentifier() for part in module.split(".")):
            raise UnknownAdapterError(f"{name!r}: module:<dotted.module.name> expected")
        return Adapter(name, module, False, f"user agent program {module}", own_files=True)
    try:
        return ADAPTERS[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, list(ADAPTERS), n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        raise UnknownAdapterError(
            f'unknown runtime {name!r}{hint}: give cmd:"<command line>" (any agent program, '
            "as a black box), module:<dotted.module> (an agent program with main(argv)), or a "
            f"registered one: {', '.join(ADAPTERS)}"
        ) from None
