"""The world: ground truth outside the agent, an SQLite database per trial.

Simulated tools (the catalog's, and a scenario's declared tools, whose
behaviours ``declared`` implements) act only on it; every real execution of a
tool is ledgered in the same transaction as its effect. Checkers read it with
``read_ledger``, ``effect_rows`` and ``world_digest``, which never write.
"""

from harness.world.catalog import CATALOG, ArgSpec, ToolSpec
from harness.world.declared import BEHAVIOURS, DeclaredTool, WorldRecord
from harness.world.store import (
    EFFECT_TABLES,
    SEED_OP,
    EffectRow,
    EffectTable,
    LedgerEntry,
    WorldStore,
    effect_rows,
    read_ledger,
    step_of,
    world_digest,
)
from harness.world.tools import SIMULATED_TOOLS, SimulatedTool, check_arguments, make_tool_function

__all__ = [
    "BEHAVIOURS",
    "CATALOG",
    "EFFECT_TABLES",
    "SEED_OP",
    "SIMULATED_TOOLS",
    "ArgSpec",
    "DeclaredTool",
    "EffectRow",
    "EffectTable",
    "LedgerEntry",
    "SimulatedTool",
    "ToolSpec",
    "WorldRecord",
    "WorldStore",
    "check_arguments",
    "effect_rows",
    "make_tool_function",
    "read_ledger",
    "step_of",
    "world_digest",
]
