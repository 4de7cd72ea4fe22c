"""The world: ground truth outside the agent, an SQLite database per trial.

Simulated tools (the catalog's, and a scenario's declared tools, whose
behaviours ``declared`` implements) act only on it; every real execution of a
tool is ledgered in the same transaction as its effect. Checkers read it with
``read_ledger``, ``effect_rows`` and ``world_digest``, which never write.

Each name below is loaded from its module on first use, so that importing
``harness.world.store`` (the readers) loads neither the tools nor the runtime
they run under: the checkers stay independent of the runtime.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
    from harness.world.tools import (
        SIMULATED_TOOLS,
        SimulatedTool,
        check_arguments,
        make_tool_function,
    )

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

_HOMES = {
    "CATALOG": "catalog",
    "ArgSpec": "catalog",
    "ToolSpec": "catalog",
    "BEHAVIOURS": "declared",
    "DeclaredTool": "declared",
    "WorldRecord": "declared",
    "EFFECT_TABLES": "store",
    "SEED_OP": "store",
    "EffectRow": "store",
    "EffectTable": "store",
    "LedgerEntry": "store",
    "WorldStore": "store",
    "effect_rows": "store",
    "read_ledger": "store",
    "step_of": "store",
    "world_digest": "store",
    "SIMULATED_TOOLS": "tools",
    "SimulatedTool": "tools",
    "check_arguments": "tools",
    "make_tool_function": "tools",
}
"""The module of ``harness.world`` each name comes from."""


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'harness.world' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"harness.world.{home}"), name)
    globals()[name] = value
    return value
