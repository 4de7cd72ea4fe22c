"""Scenarios: a task for the simulated agent, as a TOML file, validated and compiled.

A scenario is data: a ``name`` (identifier-like), a ``description`` and 1 to
``MAX_STEPS`` steps. Each step calls one tool of ``harness.world.catalog.CATALOG``
with its arguments and, where a read-only tool can reveal the step's effect,
says how to check it after a VERIFY hint::

    name = "phone_task"
    description = "Install a to-do app and add an item"

    [[steps]]
    tool = "input_text"
    args = { field = "title", text = { faker = "sentence", nb_words = 4 } }
    [steps.verify]
    tool = "ui_dump"          # read-only; args = {} when left out
    path = "fields.title"     # dotted path into the tool's result
    contains = "{text}"       # or equals = ...; exactly one of the two

The full note: docs/reference/modules.md (``harness/chaos/scenario.py``).
"""

from __future__ import annotations

import copy
import difflib
import functools
import inspect
import json
import math
import os
import re
import shlex
import string
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Self

from faker import Faker
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StrictBool,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from harness.agent.model import MODELS
from harness.agent.plan import Plan, PlanStep, Verification, plan_to_json
from harness.blackbox import resolve_command
from harness.chaos.declarations import (
    Declared,
    ToolDeclaration,
    declared_tools,
    read_text_file,
)
from harness.chaos.services import ServiceSpec, named_port_env
from harness.errors import ScenarioError
from harness.runtime.classes import IdempotencyClass, ToolTable, parse_window
from harness.runtime.errors import ToolTableError
from harness.runtime.identity import Identity
from harness.world.catalog import ARG_TYPES, CATALOG, ToolSpec
from harness.world.declared import DeclaredTool, WorldRecord

if TYPE_CHECKING:
    from harness.chaos.generated import Generate

__all__ = [
    "BATCH_DRIVERS",
    "FAKER_PROVIDERS",
    "MAX_BATCH",
    "MAX_SCENARIO_BYTES",
    "MAX_STEPS",
    "BatchStep",
    "FakerRecipe",
    "GenerateSpec",
    "Scenario",
    "ScenarioStep",
    "SeedRecord",
    "Step",
    "StepCall",
    "VerifySpec",
    "WorldSeed",
    "compile_plan",
    "did_you_mean",
    "generated_scenario",
    "generation",
    "load_scenario",
    "load_scenarios",
    "parse_scenario",
    "scenario_from_data",
    "write_plan",
]

MAX_STEPS = 200
"""More steps than this is a mistake (a generated file), not a task."""
MAX_BATCH = 8
"""The most calls a batch holds: as many as a model issues in one turn."""

MAX_SCENARIO_BYTES = 1 << 20
"""A scenario file larger than this is refused before it is parsed."""

FAKER_PROVIDERS: Mapping[str, str] = MappingProxyType(
    {
        "sentence": "str",
        "word": "str",
        "words": "list",
        "name": "str",
        "first_name": "str",
        "last_name": "str",
        "email": "str",
        "url": "str",
        "uri_path": "str",
        "file_path": "str",
        "file_name": "str",
        "uuid4": "str",
        "date": "str",
        "time": "str",
        "company": "str",
        "catch_phrase": "str",
        "job": "str",
        "city": "str",
        "phone_number": "str",
        "pyint": "int",
        "pybool": "bool",
        "text": "str",
        "paragraph": "str",
        "slug": "str",
        "user_name": "str",
        "domain_name": "str",
        "hex_color": "str",
        "color_name": "str",
    }
)
"""The Faker providers a recipe may name, with the catalog type each produces.

Only providers that make harmless strings or numbers from a seeded random
source; anything that reads the environment or the real clock stays out.
"""

# `date` and `time` draw up to "now" by default, so the same seed would give a
# different plan tomorrow; pin the end of their range (UTC-aware: no local TZ).
_CLOCK_PIN = datetime(2030, 1, 1, tzinfo=UTC)
_PINNED_KWARGS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "date": MappingProxyType({"end_datetime": _CLOCK_PIN}),
        "time": MappingProxyType({"end_datetime": _CLOCK_PIN}),
    }
)

_FAKER_LOCALE = "en_US"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TABLE = ToolTable.shipped()
_VERIFY_TOOLS = tuple(
    name
    for name in CATALOG
    if _TABLE.classify(name).idempotency is IdempotencyClass.READ_ONLY
    and not _TABLE.classify(name).ask_user
)

# The result shape of each read-only tool (mirrors harness/world/read_tools.py):
# a verify path must start at one of these keys, and only a table can be
# walked into. Catching "submitted" vs "submissions" here beats a check that
# silently never holds in the middle of a trial.
_RESULT_KEYS: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "read_file": {"path": "str", "exists": "bool", "content": "str"},
        "list_files": {"path": "str", "entries": "list"},
        "web_search": {"query": "str", "results": "list"},
        "ui_dump": {"fields": "object", "taps": "list", "submissions": "list"},
        "logcat": {"tag": "str", "lines": "list"},
        "browser_snapshot": {
            "url": "str",
            "history": "list",
            "clicks": "list",
            "submitted": "list",
        },
    }
)

_TOML_NAMES = MappingProxyType(
    {
        "str": "a string",
        "int": "an integer",
        "bool": "a boolean",
        "list": "an array",
        "object": "a table",
    }
)

# A stand-in value of each type, to try a template's format specs at load time.
_SAMPLES: Mapping[str, Any] = MappingProxyType(
    {"str": "sample", "int": 0, "bool": False, "list": [], "object": {}}
)

_KEYS_TOP = (
    "name",
    "description",
    "agent",
    "model",
    "identity",
    "batch_driver",
    "duplicate_delivery",
    "compact_at",
    "clock_step",
    "repeat",
    "sample",
    "generate",
    "tools",
    "tools_file",
    "tool_table",
    "world",
    "steps",
)
_IDENTITIES = tuple(identity.value for identity in Identity)
BATCH_DRIVERS = ("async", "threads")
"""How the agent may run a batch's calls (``Plan.batch_driver``)."""
_KEYS_STEP = ("tool", "args", "verify")
_KEYS_VERIFY = ("tool", "args", "path", "contains", "equals")
_KEYS_TOOL = tuple(ToolDeclaration.model_fields)
_KEYS_AGENT = ("command", "folder", "env", "services")
_KEYS_SERVICE = ("command", "ready", "port_env", "env", "ready_seconds")
_KEYS_WORLD = ("records",)
_KEYS_RECORD = ("collection", "key", "value")


# -- what validation knows besides the data: the declared tools and the tool table -------


def _declared(info: ValidationInfo) -> Mapping[str, DeclaredTool]:
    """The scenario's declared tools (``parse_scenario`` puts them in the context)."""
    context = info.context or {}
    declared: Mapping[str, DeclaredTool] = context.get("declared", {})
    return declared


def _table(info: ValidationInfo) -> ToolTable:
    """The runtime's tool table for this scenario (the shipped one unless it names its own)."""
    table: ToolTable = (info.context or {}).get("table", _TABLE)
    return table


def _spec(tool: str, declared: Mapping[str, DeclaredTool]) -> ToolSpec | None:
    found = declared.get(tool)
    return CATALOG.get(tool) if found is None else found.spec


def _reads(tool: str, declared: Mapping[str, DeclaredTool]) -> bool:
    """Whether ``tool`` changes nothing: a built-in read-only tool or a declared read."""
    found = declared.get(tool)
    return tool in _VERIFY_TOOLS if found is None else found.reads


def _result_keys(tool: str, declared: Mapping[str, DeclaredTool]) -> Mapping[str, str] | None:
    found = declared.get(tool)
    return _RESULT_KEYS.get(tool) if found is None else found.result_shape()


def _reveals(step_tool: str, check_tool: str, declared: Mapping[str, DeclaredTool]) -> str | None:
    """Why a read of ``check_tool`` cannot reveal what ``step_tool`` did, or None.

    A declared tool writes records of a collection or messages of a channel,
    which only a declared read of the same collection or channel can see; no
    built-in tool sees them, and no declared read sees what a built-in did.
    """
    writer, reader = declared.get(step_tool), declared.get(check_tool)
    if writer is None and reader is None:
        return None
    if writer is None:
        assert reader is not None
        return f"{check_tool} reads {_place(reader)}, which {step_tool} (built in) never writes"
    if writer.behaviour == "opaque":
        return f"{step_tool} is opaque: its call is only recorded, and no read reveals it"
    if reader is None:
        return f"{check_tool} (built in) cannot see {_place(writer)}, which {step_tool} writes"
    if reader.place != writer.place:
        return f"{check_tool} reads {_place(reader)}, but {step_tool} writes {_place(writer)}"
    return None


def _place(tool: DeclaredTool) -> str:
    return (tool.place or "nothing").replace(":", " ")


@dataclass(frozen=True, slots=True)
class FakerRecipe:
    """An argument drawn from Faker at compile time: ``{ faker = "<provider>", ...kwargs }``."""

    provider: str
    kwargs: Mapping[str, Any]

    @property
    def produces(self) -> str:
        """The catalog type of the value (``str`` for most providers)."""
        return FAKER_PROVIDERS[self.provider]

    def draw(self, fake: Faker) -> Any:
        """The next value of ``fake``'s seeded stream for this recipe."""
        pinned = _PINNED_KWARGS.get(self.provider, {})
        return getattr(fake, self.provider)(**self.kwargs, **pinned)


def _problem(
    field: str | None, message: str, *, step: int | None = None, call: int | None = None
) -> PydanticCustomError:
    """A validation error that carries its own sub-field (and step, and call of a batch),
    for ``ScenarioError``."""
    context: dict[str, Any] = {"problem": message, "field": field or ""}
    if step is not None:
        context["step"] = step
    if call is not None:
        context["call"] = call
    return PydanticCustomError("scenario", "{problem}", context)


def _command_words(value: str) -> list[str]:
    """A command line's words, or the problem with it (a validator's error)."""
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise _problem(None, f"cannot be read as a command line: {exc}") from None
    if not words:
        raise _problem(None, "is empty")
    return words


_CONFIG = ConfigDict(extra="forbid", frozen=True)


class VerifySpec(BaseModel):
    """How the model checks a step's effect: a read-only call and what its result must hold."""

    model_config = _CONFIG

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    path: str
    contains: Any = None
    equals: Any = None

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Self:
        declared = _declared(info)
        spec = _spec(self.tool, declared)
        if spec is None or not _reads(self.tool, declared):
            readers = (*_VERIFY_TOOLS, *(name for name, t in declared.items() if t.reads))
            if spec is None:
                what = f"unknown tool {self.tool!r}{did_you_mean(self.tool, readers)}"
            elif self.tool in declared:
                what = f"{self.tool} is a declared {declared[self.tool].behaviour} tool"
            else:
                tool_class = _TABLE.classify(self.tool)
                kind = "an ask-user tool" if tool_class.ask_user else tool_class.idempotency.value
                what = f"{self.tool} is {kind}, not a read-only tool"
            allowed = ", ".join(readers)
            raise _problem("tool", f"{what}; a check must not change the world: use {allowed}")
        if "fail_attempts" in self.args:
            raise _problem("args.fail_attempts", "a check cannot be made to fail; remove it")
        _check_args(spec, self.args, where="args", recipes=False)
        self._check_path(_result_keys(self.tool, declared))
        if (self.contains is None) == (self.equals is None):
            given = "both 'contains' and" if self.contains is not None else "neither 'contains' nor"
            raise _problem(None, f"has {given} 'equals'; give exactly one")
        key = "contains" if self.contains is not None else "equals"
        found = _json_problem(getattr(self, key), key)
        if found is not None:
            raise _problem(*found)
        return self

    def _check_path(self, shape: Mapping[str, str] | None) -> None:
        parts = self.path.split(".")
        if not all(parts):
            raise _problem("path", f"{self.path!r} is not a dotted path like 'fields.title'")
        if shape is None:
            return
        head = parts[0]
        if head not in shape:
            hint = did_you_mean(head, tuple(shape))
            keys = ", ".join(shape)
            raise _problem("path", f"{self.tool} results have no {head!r}{hint}; keys: {keys}")
        kind = shape[head]
        if kind == "any":  # a record's value: whatever JSON the world holds
            return
        if len(parts) > 1 and kind != "object":
            raise _problem("path", f"{self.tool}'s {head!r} is {_TOML_NAMES[kind]}, not a table")
        if len(parts) == 1 and self.contains is not None and kind not in ("list", "str"):
            raise _problem(
                "contains", f"{self.tool}'s {head!r} is {_TOML_NAMES[kind]}; use 'equals'"
            )

    def compile(self, args: Mapping[str, Any]) -> Verification:
        """The check for one compiled step, templates filled from its resolved ``args``."""
        return Verification(
            self.tool,
            _render(self.args, args),
            self.path,
            _render(self.contains, args),
            _render(self.equals, args),
        )


class ScenarioStep(BaseModel):
    """One tool call of a scenario, valid against the catalog, with its optional check."""

    model_config = _CONFIG

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    verify: VerifySpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _declared_check(cls, data: Any, info: ValidationInfo) -> Any:
        """A step of a declared tool without a check of its own gets the declaration's."""
        if not isinstance(data, dict) or "verify" in data:
            return data
        checks: Mapping[str, Any] = (info.context or {}).get("checks", {})
        check = checks.get(str(data.get("tool")))
        return data if check is None else {**data, "verify": check}

    @field_validator("args", mode="before")
    @classmethod
    def _read_recipes(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {name: _recipe_or_literal(name, item) for name, item in value.items()}

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Self:
        declared = _declared(info)
        spec = _spec(self.tool, declared)
        if spec is None:
            known = (*CATALOG, *declared)
            raise _problem("tool", f"unknown tool {self.tool!r}{did_you_mean(self.tool, known)}")
        _check_args(spec, self.args, where="args", recipes=True)
        if self.verify is not None:
            tool_class = _TABLE.classify(self.tool)
            changes_nothing = (
                declared[self.tool].reads
                if self.tool in declared
                else tool_class.ask_user or tool_class.idempotency is IdempotencyClass.READ_ONLY
            )
            if changes_nothing:
                raise _problem(
                    "verify", f"{self.tool} changes nothing: there is no effect to check"
                )
            blind = _reveals(self.tool, self.verify.tool, declared)
            if blind is not None:
                raise _problem("verify.tool", blind)
            samples = {
                name: _SAMPLES[value.produces] if isinstance(value, FakerRecipe) else value
                for name, value in self.args.items()
            }
            found = _templates_problem(self.verify, samples)
            if found is not None:
                raise _problem(*found)
        return self

    def _literal_check(self) -> str | None:
        """The compiled check as text when it depends on no Faker value, else None."""
        if self.verify is None:
            return None
        drawn = {n for n, v in self.args.items() if isinstance(v, FakerRecipe)}
        used = {
            name
            for _, template in _templates(
                {"a": self.verify.args, "c": self.verify.contains, "e": self.verify.equals}
            )
            for name in _template_names(template)
        }
        if drawn & used:
            return None
        verification = self.verify.compile(self.args)
        v = verification
        return json.dumps([v.tool, v.args, v.path, v.contains, v.equals], sort_keys=True)


class SeedRecord(BaseModel):
    """A record the world holds before the first life: ``[[world.records]]``."""

    model_config = _CONFIG

    collection: str = Field(min_length=1)
    key: str = Field(min_length=1)
    value: Any

    @model_validator(mode="after")
    def _json(self) -> Self:
        found = _json_problem(self.value, "value")
        if found is not None:
            raise _problem(*found)
        return self


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
HARNESS_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY")
"""What the harness hands a black box itself (with every ``HARNESS_`` variable)."""


_SERVICE_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}\Z")
_PORT_NAME = re.compile(r"[a-z][a-z0-9_]{0,29}\Z")


class ServiceDeclaration(BaseModel):
    """A server the agent needs (``[agent.services.NAME]``), run by the harness beside it
    (``harness.chaos.services``): its ``command`` (``{port}`` and ``{data}`` filled in),
    its readiness check ``ready`` (``tcp``, or ``http:/PATH`` answering 2xx within
    ``ready_seconds``), ``port_env``, the variable the agent finds its port in (default
    ``NAME_PORT``), ``env``, variables added to its own environment (placeholders filled
    in too), and ``ports``, the names of further ports (``{port.NAME}``, handed to the
    agent in ``SERVICE_NAME_PORT``)."""

    model_config = _CONFIG

    command: str = Field(min_length=1)
    ready: str = "tcp"
    port_env: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    ready_seconds: float = Field(default=30.0, gt=0, le=600)
    ports: list[str] = Field(default_factory=list, max_length=8)

    @field_validator("ports")
    @classmethod
    def _port_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _PORT_NAME.match(name):
                raise _problem(None, f"{name!r}: a port's name is lower-case letters, digits, '_'")
        if len(set(value)) != len(value):
            twice = next(n for n in value if value.count(n) > 1)
            raise _problem(None, f"{twice!r} is named twice")
        return value

    @model_validator(mode="after")
    def _placeholders(self) -> Self:
        known = {"port", "data", *(f"port.{name}" for name in self.ports)}
        texts = [("command", w) for w in _command_words(self.command)]
        texts += [(f"env.{k}", v) for k, v in self.env.items()]
        for where, text in texts:
            try:
                names = {n for _, n, _, _ in string.Formatter().parse(text) if n is not None}
            except ValueError as exc:
                raise _problem(where, f"{text!r}: {exc} (write {{{{ and }}}} for braces)") from None
            unknown = sorted(names - known)
            if unknown:
                listed = ", ".join(f"{{{k}}}" for k in sorted(known, key=len))
                raise _problem(where, f"unknown placeholder {{{unknown[0]}}}; known: {listed}")
        return self

    @field_validator("command")
    @classmethod
    def _a_command_line(cls, value: str) -> str:
        _command_words(value)
        return value

    @field_validator("ready")
    @classmethod
    def _a_check(cls, value: str) -> str:
        if value != "tcp" and not (value.startswith("http:/") and " " not in value):
            raise _problem(None, f"{value!r} is neither tcp nor http:/PATH (http:/health)")
        return value

    @field_validator("port_env")
    @classmethod
    def _a_variable(cls, value: str | None) -> str | None:
        if value is not None:
            _check_agent_variable(value, None)
        return value

    @field_validator("env")
    @classmethod
    def _variables(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            _check_agent_variable(name, name)
        return value


def _check_agent_variable(name: str, field: str | None) -> None:
    if not _ENV_NAME.match(name):
        raise _problem(field, f"{name!r} is not an environment variable's name")
    if name in HARNESS_ENV or name.startswith("HARNESS_"):
        raise _problem(field, f"{name!r} is the harness's to set (the model and tools it serves)")


class AgentProgram(BaseModel):
    """The agent program a scenario is written for (``[agent]``), run as a black box as
    ``--runtime cmd:"..."`` runs one: its ``command``, the ``folder`` its relative paths
    are found from (relative to the scenario's own folder), and ``env``, variables added
    to its environment."""

    model_config = _CONFIG

    command: str = Field(min_length=1)
    folder: str = "."
    env: dict[str, str] = Field(default_factory=dict)
    services: dict[str, ServiceDeclaration] = Field(default_factory=dict)

    @field_validator("services")
    @classmethod
    def _named_apart(cls, value: dict[str, ServiceDeclaration]) -> dict[str, ServiceDeclaration]:
        taken: dict[str, str] = {}
        for name, service in value.items():
            if not _SERVICE_NAME.match(name):
                raise _problem(name, "a service's name is lower-case letters, digits, '_' and '-'")
            for field, variable in _port_variables(name, service):
                if variable in taken:
                    raise _problem(
                        f"{name}.{field}", f"{variable} is also the port of {taken[variable]}"
                    )
                taken[variable] = name
        return value

    @model_validator(mode="after")
    def _ports_not_in_env(self) -> Self:
        for name, service in self.services.items():
            for field, variable in _port_variables(name, service):
                if variable in self.env:
                    raise _problem(f"services.{name}.{field}", f"{variable} is also set in env")
        return self

    @field_validator("command")
    @classmethod
    def _a_command_line(cls, value: str) -> str:
        _command_words(value)
        return value

    @field_validator("env")
    @classmethod
    def _not_the_harness_s(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not _ENV_NAME.match(name):
                raise _problem(name, "is not an environment variable's name")
            if name in HARNESS_ENV or name.startswith("HARNESS_"):
                raise _problem(name, "is the harness's to set (the model and tools it serves)")
        return value


def service_port_env(name: str, service: ServiceDeclaration) -> str:
    """The variable a service's port is handed in: its ``port_env``, else ``NAME_PORT``."""
    return service.port_env or re.sub(r"[^A-Z0-9_]", "_", name.upper()) + "_PORT"


def _port_variables(name: str, service: ServiceDeclaration) -> list[tuple[str, str]]:
    """(field, variable) of each port a service hands the agent: its own, then its named."""
    named = [("ports", named_port_env(name, port)) for port in service.ports]
    return [("port_env", service_port_env(name, service)), *named]


class WorldSeed(BaseModel):
    """How the world begins: ``[world]`` with its ``records``, one per collection and key."""

    model_config = _CONFIG

    records: list[SeedRecord] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> Self:
        seen: set[tuple[str, str]] = set()
        for index, record in enumerate(self.records):
            where = (record.collection, record.key)
            if where in seen:
                problem = f"a second record {record.key!r} in collection {record.collection!r}"
                raise _problem(f"records.{index}", problem)
            seen.add(where)
        return self


class BatchStep(BaseModel):
    """Calls a model issues together in one turn: the agent runs them at once, each its
    own op (``s004a``, ``s004b``, ...), and goes on when every one has come back."""

    model_config = _CONFIG

    batch: list[ScenarioStep]

    @field_validator("batch", mode="before")
    @classmethod
    def _call_count(cls, value: Any) -> Any:
        if isinstance(value, list) and not 2 <= len(value) <= MAX_BATCH:
            raise _problem(
                None,
                f"{len(value)} call{'' if len(value) == 1 else 's'}; a batch has 2 to "
                f"{MAX_BATCH} (one call is a step)",
            )
        return value


def _step_kind(value: Any) -> str:
    is_batch = isinstance(value, Mapping | BaseModel) and "batch" in (
        value if isinstance(value, Mapping) else type(value).model_fields
    )
    return "batch" if is_batch else "call"


Step = Annotated[
    Annotated[ScenarioStep, Tag("call")] | Annotated[BatchStep, Tag("batch")],
    Discriminator(_step_kind),
]
"""A scenario's step: one call, or a batch of calls issued together."""


@dataclass(frozen=True, slots=True)
class StepCall:
    """One call of a scenario, where it stands: its step (from 1) and, in a batch, its
    place there (from 1; None for a step that is one call)."""

    step: int
    call: int | None
    spec: ScenarioStep

    @property
    def op_id(self) -> str:
        """``s004`` for a step of one call, ``s004a``, ``s004b``, ... in a batch."""
        letter = "" if self.call is None else string.ascii_lowercase[self.call - 1]
        return f"s{self.step:03d}{letter}"


class GenerateSpec(BaseModel):
    """``[generate]``: the scenario's task is drawn anew from every seed
    (``harness.chaos.generated``), of ``min_calls`` to ``max_calls`` calls; its ``steps``
    are the calls of its own tools the task may make."""

    model_config = _CONFIG

    min_calls: int = Field(default=5, ge=1, le=MAX_STEPS, strict=True)
    max_calls: int = Field(default=12, ge=1, le=MAX_STEPS, strict=True)

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.min_calls > self.max_calls:
            raise _problem("min_calls", f"{self.min_calls} is more than max_calls {self.max_calls}")
        return self


class Scenario(BaseModel):
    """A validated scenario: a name, a description, its own tools and world, its steps."""

    model_config = _CONFIG

    name: str
    description: str = Field(min_length=1)
    agent: AgentProgram | None = None
    model: str = "scripted"
    identity: str = "id"
    batch_driver: str = "async"
    duplicate_delivery: StrictBool = False
    compact_at: int | None = Field(default=None, ge=0, strict=True)
    clock_step: str | int | None = None
    """How far the trial's clock moves at each restart (``"1h"``, seconds): life N's
    clock reads N times it, so an idempotency key can outlive its window in a trial."""
    repeat: int = Field(default=1, ge=1, le=10_000, strict=True)
    sample: int | None = Field(default=None, ge=1, strict=True)
    generate: GenerateSpec | None = None
    tools: dict[str, ToolDeclaration] = Field(default_factory=dict)
    """Declared inline; ``parse_scenario`` validates them (and the tools file's) first."""
    tools_file: str | None = None
    tool_table: str | None = None
    world: WorldSeed = Field(default_factory=WorldSeed)
    steps: list[Step]

    _source: str = PrivateAttr(default="<memory>")
    _declared: Mapping[str, DeclaredTool] = PrivateAttr(default_factory=dict)
    _table_path: Path | None = PrivateAttr(default=None)
    _base: Path = PrivateAttr(default_factory=Path)
    _data: Mapping[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def source(self) -> str:
        """The file this scenario was read from (``<memory>`` when built in code)."""
        return self._source

    @property
    def declared_tools(self) -> Mapping[str, DeclaredTool]:
        """Its declared tools, inline and from its tools file, by name."""
        return MappingProxyType(dict(self._declared))

    @property
    def agent_runtime(self) -> str | None:
        """The ``cmd:`` runtime of its ``[agent]`` (None without one): the command, its
        relative paths made absolute from the agent's folder, after ``env`` with its
        variables when it has any, so that the runtime names everything that runs."""
        if self.agent is None:
            return None
        home = (self._base / self.agent.folder).resolve()
        words = resolve_command(self.agent.command, str(home))
        if self.agent.env:
            words = ["env", *(f"{name}={value}" for name, value in self.agent.env.items()), *words]
        return "cmd:" + shlex.join(words)

    @property
    def services(self) -> tuple[ServiceSpec, ...]:
        """The services its ``[agent]`` declares, as the supervisor starts them (each runs
        in the agent's folder, its relative paths found from there)."""
        if self.agent is None:
            return ()
        home = str((self._base / self.agent.folder).resolve())
        return tuple(
            ServiceSpec(
                name,
                service.command,
                home,
                service.ready,
                service_port_env(name, service),
                dict(service.env),
                service.ready_seconds,
                tuple(service.ports),
            )
            for name, service in self.agent.services.items()
        )

    @property
    def table_path(self) -> Path | None:
        """The tool table file it names for the runtime (None: the shipped table)."""
        return self._table_path

    @property
    def calls(self) -> tuple[StepCall, ...]:
        """Every call of its steps in order, a batch's calls in their order, round after
        round (``repeat``)."""
        per_round = len(self.steps)
        return tuple(
            StepCall(done * per_round + index, number, call)
            for done in range(self.repeat)
            for index, step in enumerate(self.steps, start=1)
            for number, call in (
                enumerate(step.batch, start=1) if isinstance(step, BatchStep) else ((None, step),)
            )
        )

    @property
    def world_records(self) -> tuple[WorldRecord, ...]:
        return tuple(
            WorldRecord(r.collection, r.key, copy.deepcopy(r.value)) for r in self.world.records
        )

    @field_validator("name")
    @classmethod
    def _identifier_like(cls, value: str) -> str:
        if not _NAME.match(value):
            rule = "letters, digits and _, not starting with a digit"
            raise _problem(None, f"{value!r} is not identifier-like ({rule})")
        return value

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in MODELS:
            hint = did_you_mean(value, tuple(MODELS))
            raise _problem(None, f"unknown model {value!r}{hint}; known: {', '.join(MODELS)}")
        return value

    @field_validator("identity")
    @classmethod
    def _known_identity(cls, value: str) -> str:
        if value not in _IDENTITIES:
            hint = did_you_mean(value, _IDENTITIES)
            known = ", ".join(_IDENTITIES)
            raise _problem(None, f"unknown identity {value!r}{hint}; known: {known}")
        return value

    @field_validator("clock_step")
    @classmethod
    def _a_window(cls, value: str | int | None) -> str | int | None:
        if value is not None:
            try:
                parse_window(value)
            except ValueError as exc:
                raise _problem(None, str(exc).replace("window", "clock step")) from None
        return value

    @field_validator("batch_driver")
    @classmethod
    def _known_driver(cls, value: str) -> str:
        if value not in BATCH_DRIVERS:
            hint = did_you_mean(value, BATCH_DRIVERS)
            known = ", ".join(BATCH_DRIVERS)
            raise _problem(None, f"unknown batch driver {value!r}{hint}; known: {known}")
        return value

    @model_validator(mode="after")
    def _duplicates_need_threads(self) -> Self:
        # Two deliveries of one op at once is what a service's threads meet; on the
        # event loop the same op's second call is another test (AsyncRuntime's own).
        if self.duplicate_delivery and self.batch_driver != "threads":
            raise _problem(
                "duplicate_delivery",
                f'needs batch_driver = "threads" (this scenario\'s is {self.batch_driver!r}): '
                "a call is delivered twice at once by two threads",
            )
        return self

    @field_validator("steps", mode="before")
    @classmethod
    def _step_count(cls, value: Any) -> Any:
        # Before item validation: a 10,000-step file is refused for its size,
        # not after validating every step of it.
        if isinstance(value, list):
            if not value:
                raise _problem(None, "a scenario needs at least one step")
            if len(value) > MAX_STEPS:
                raise _problem(None, f"{len(value)} steps; a scenario has at most {MAX_STEPS}")
        return value

    @model_validator(mode="after")
    def _distinct_checks(self, info: ValidationInfo) -> Self:
        # A step whose crash leads to VERIFY must be checkable on its own: if
        # an earlier step leaves the very same evidence, the model would take
        # that for this step's effect and wrongly skip the redo.
        table = _table(info)
        seen: dict[str, StepCall] = {}
        for call in self.calls:
            if table.classify(call.spec.tool).retry_safe:
                continue
            check = call.spec._literal_check()
            if check is None:
                continue
            if check in seen:
                earlier = seen[check]
                per_round = len(self.steps)
                if call.step > per_round:  # a later round of a repeated step
                    problem = (
                        f"checks in round {(call.step - 1) // per_round + 1} exactly what it "
                        f"checked in an earlier round, so it cannot tell their effects apart; "
                        "draw a value from Faker for it (repeat gives each round its own)"
                    )
                    at = (call.step - 1) % per_round + 1
                    raise _problem("verify", problem, step=at, call=call.call)
                what = f"step {earlier.step}" + (
                    "" if earlier.call is None else f", call {earlier.call}"
                )
                problem = (
                    f"checks exactly what {what} checks, so it cannot tell "
                    "their effects apart; use a value unique to this step"
                )
                raise _problem("verify", problem, step=call.step, call=call.call)
            seen[check] = call
        return self


def _templates_problem(verify: VerifySpec, samples: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first template of a check that the arguments cannot fill: (field, problem)."""
    for where, template in _templates(
        {"args": verify.args, "contains": verify.contains, "equals": verify.equals}
    ):
        problem = _template_problem(template, samples)
        if problem is not None:
            return f"verify.{where}", problem
    return None


def parse_scenario(text: str, *, source: str) -> Scenario:
    """Validate a scenario from TOML text; ``source`` names it in errors.

    Its declared tools (inline and from its tools file) and its tool table are
    read and validated first; the steps are then validated against them.
    Relative paths are taken from the folder of ``source``.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(source, None, None, f"not valid TOML: {exc}") from None
    return scenario_from_data(data, source=source)


def scenario_from_data(data: dict[str, Any], *, source: str) -> Scenario:
    """Validate a scenario from the data a scenario file holds (``parse_scenario``)."""
    base = Path(source).parent
    found = declared_tools(
        data.get("tools"),
        _named_file(data, "tools_file", base, source),
        source=source,
        to_error=_scenario_error,
    )
    declared = {name: d.tool for name, d in found.items()}
    checks = {name: _declared_check(name, d, declared) for name, d in found.items() if d.verify}
    table_path = _named_file(data, "tool_table", base, source)
    table = _TABLE
    if table_path is not None:
        try:
            table = ToolTable.load(table_path)
            # A content rule names arguments: those its tool takes, declared or catalogued.
            known = {name: spec.args for name, spec in CATALOG.items()}
            known.update({name: tool.args for name, tool in declared.items()})
            table.check_arguments(
                {name: [arg.name for arg in args] for name, args in known.items()}
            )
        except ToolTableError as exc:
            raise ScenarioError(source, None, "tool_table", str(exc)) from None
    context = {"declared": declared, "checks": checks, "table": table}
    try:
        scenario = Scenario.model_validate(data, context=context)
    except ValidationError as exc:
        raise _named_step_tool(_scenario_error(source, exc), data) from None
    scenario._source = source
    scenario._declared = declared
    scenario._table_path = table_path
    scenario._base = base
    scenario._data = data
    if scenario.agent is not None and not (base / scenario.agent.folder).is_dir():
        folder = base / scenario.agent.folder
        raise ScenarioError(source, None, "agent.folder", f"no such folder: {folder}")
    return scenario


def _named_file(data: Mapping[str, Any], key: str, base: Path, source: str) -> Path | None:
    """The file a scenario names under ``key``, relative to its folder; it must exist."""
    name = data.get(key)
    if name is None:
        return None
    if not isinstance(name, str) or not name:
        raise ScenarioError(source, None, key, f"must be a file path, got {_describe(name)}")
    path = base / name
    if not path.is_file():
        raise ScenarioError(source, None, key, f"no such file: {path}")
    return path


def _declared_check(
    name: str, declared: Declared, tools: Mapping[str, DeclaredTool]
) -> Mapping[str, Any]:
    """A declared tool's check, valid against every declared tool and its own arguments."""
    raw = declared.verify
    assert raw is not None
    try:
        check = VerifySpec.model_validate(raw, context={"declared": tools})
    except ValidationError as exc:
        raise _scenario_error(declared.source, exc, prefix=("tools", name, "verify")) from None
    blind = _reveals(name, check.tool, tools)
    if blind is not None:
        raise ScenarioError(declared.source, None, "verify.tool", blind, tool=name)
    samples = {arg.name: _SAMPLES[arg.type] for arg in declared.tool.args}
    found = _templates_problem(check, samples)
    if found is not None:
        raise ScenarioError(declared.source, None, *found, tool=name)
    return raw


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate one scenario file; refuse it whole with a ``ScenarioError``."""
    text = read_text_file(path, MAX_SCENARIO_BYTES)
    return _parsed(text, str(path))


@functools.lru_cache(maxsize=64)
def _parsed(text: str, source: str) -> Scenario:
    """A scenario file's text parsed, once a process: trials and golden runs load the same
    files again and again (a scenario is frozen, so one parse is shared)."""
    return parse_scenario(text, source=source)


def load_scenarios(directory: Path | str) -> list[Scenario]:
    """Every ``*.toml`` scenario of a directory, sorted by name; names must be unique."""
    root = Path(directory)
    if not root.is_dir():
        raise ScenarioError(root, None, None, "not a directory of scenarios")
    by_name: dict[str, Scenario] = {}
    for path in sorted(root.glob("*.toml")):
        scenario = load_scenario(path)
        other = by_name.get(scenario.name)
        if other is not None:
            raise ScenarioError(
                path, None, "name", f"{scenario.name!r} is also the name of {other.source}"
            )
        by_name[scenario.name] = scenario
    return [by_name[name] for name in sorted(by_name)]


def compile_plan(scenario: Scenario, *, seed: int, source: str) -> Plan:
    """The plan the agent runs: Faker drawn from ``seed``, templates filled, op ids s001...

    Same scenario and seed, identical plan. Within a step, recipes are drawn in
    argument-name order, so reordering keys in the file changes nothing.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r}")
    if scenario.generate is not None:
        scenario = generated_scenario(scenario, seed)
    fake = _faker()
    fake.seed_instance(seed)  # a new random state: a plan depends on its seed alone
    table = _TABLE if scenario.table_path is None else ToolTable.load(scenario.table_path)
    steps = []
    for call in scenario.calls:
        step = call.spec
        drawn = {
            name: step.args[name].draw(fake)
            for name in sorted(step.args)
            if isinstance(step.args[name], FakerRecipe)
        }
        args = {
            name: drawn[name] if name in drawn else copy.deepcopy(value)
            for name, value in step.args.items()
        }
        verify = None if step.verify is None else step.verify.compile(args)
        batch = None if call.call is None else call.step
        # Delivered twice: a batch's call that changes something (a read delivered twice
        # is two reads); decided here, from the scenario's table, so every life agrees.
        twice = (
            scenario.duplicate_delivery
            and batch is not None
            and not _reads(step.tool, scenario.declared_tools)
            and table.classify(step.tool).idempotency is not IdempotencyClass.READ_ONLY
        )
        steps.append(PlanStep(call.step, call.op_id, step.tool, args, verify, batch, twice))
    tools = MappingProxyType(dict(scenario.declared_tools))
    return Plan(
        scenario.name,
        seed,
        source,
        tuple(steps),
        tools,
        scenario.world_records,
        scenario.model,
        scenario.identity,
        scenario.batch_driver,
        scenario.duplicate_delivery,
        scenario.compact_at,
        None if scenario.clock_step is None else parse_window(scenario.clock_step),
        MappingProxyType(
            {
                tool: {field: tuple(names) for field, names in rule.to_json().items()}
                for tool, rule in table.content.items()
            }
        ),
    )


def generated_scenario(scenario: Scenario, seed: int) -> Scenario:
    """The task a scenario with ``[generate]`` draws from ``seed``, validated as a scenario
    file is (the same in every process); its files named by absolute paths, so that it
    can be written anywhere (``harness.strategies.scenario_toml``)."""
    from harness.chaos.generated import draw_scenario

    data, generate = generation(scenario)
    return scenario_from_data(draw_scenario(data, generate, seed), source=scenario.source)


def generation(scenario: Scenario) -> tuple[dict[str, Any], Generate]:
    """What a scenario with ``[generate]`` draws its tasks from: its file's data (its files
    named by absolute paths) and its ``[generate]`` table."""
    from harness.chaos.generated import Generate

    spec = scenario.generate
    if spec is None:
        raise ValueError(f"{scenario.source}: not a generated scenario (no [generate])")
    data = dict(scenario._data)
    for key in ("tools_file", "tool_table"):
        if isinstance(data.get(key), str):
            data[key] = str((scenario._base / data[key]).resolve())
    return data, Generate(spec.min_calls, spec.max_calls, MAX_BATCH)


def write_plan(plan: Plan, path: Path | str) -> None:
    """Write the plan file whole or not at all (temporary file, fsync, rename)."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.tmp")
    with temporary.open("w", encoding="utf-8") as file:
        file.write(plan_to_json(plan) + "\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, target)


# --- argument checks -------------------------------------------------------


def _recipe_or_literal(name: str, value: Any) -> Any:
    if not (isinstance(value, dict) and "faker" in value):
        return value
    provider = value["faker"]
    if not isinstance(provider, str):
        raise _problem(f"{name}.faker", f"must name a provider, got {_describe(provider)}")
    return FakerRecipe(provider, {k: v for k, v in value.items() if k != "faker"})


def _check_args(spec: ToolSpec, args: Mapping[str, Any], *, where: str, recipes: bool) -> None:
    for name in args:
        if name not in spec.arg_names:
            accepted = ", ".join(sorted(spec.arg_names))
            hint = did_you_mean(name, spec.arg_names)
            problem = f"{spec.name} has no argument {name!r}{hint}; it accepts {accepted}"
            raise _problem(f"{where}.{name}", problem)
    for arg in spec.args:
        if not arg.optional and arg.name not in args:
            raise _problem(f"{where}.{arg.name}", f"required argument of {spec.name} is missing")
    types = {arg.name: arg.type for arg in spec.args} | {"fail_attempts": "int"}
    for name, value in args.items():
        field = f"{where}.{name}"
        expected = types[name]
        if isinstance(value, FakerRecipe):
            if not recipes or name == "fail_attempts":
                raise _problem(field, "must be a literal value, not a Faker recipe")
            _check_recipe(value, field)
            if value.produces != expected:
                produces = _TOML_NAMES[value.produces]
                problem = f"expected {_TOML_NAMES[expected]}, but Faker {value.provider!r} "
                raise _problem(field, f"{problem}produces {produces}")
            continue
        if not _has_type(value, expected):
            raise _problem(field, f"expected {_TOML_NAMES[expected]}, got {_describe(value)}")
        found = _json_problem(value, field)
        if found is not None:
            raise _problem(*found)
        if name == "fail_attempts" and value < 0:
            raise _problem(field, f"must be 0 or more, got {value}")


def _has_type(value: Any, expected: str) -> bool:
    if isinstance(value, bool):
        return expected == "bool"
    return isinstance(value, ARG_TYPES[expected])


def _check_recipe(recipe: FakerRecipe, field: str) -> None:
    provider = recipe.provider
    if provider not in FAKER_PROVIDERS:
        hint = did_you_mean(provider, FAKER_PROVIDERS)
        allowed = ", ".join(sorted(FAKER_PROVIDERS))
        problem = f"Faker provider {provider!r} is not allowed{hint}; allowed: {allowed}"
        raise _problem(f"{field}.faker", problem)
    fake = _probe_faker()
    parameters = inspect.signature(getattr(fake, provider)).parameters
    pinned = _PINNED_KWARGS.get(provider, {})
    for key in recipe.kwargs:
        if key in pinned:
            why = "so that a seed replays the same plan on any day"
            raise _problem(f"{field}.{key}", f"is pinned for {provider!r} {why}; remove it")
        if key not in parameters:
            accepted = ", ".join(p for p in parameters if p not in pinned) or "no keywords"
            hint = did_you_mean(key, tuple(parameters))
            problem = f"Faker {provider!r} has no keyword {key!r}{hint}; it accepts {accepted}"
            raise _problem(f"{field}.{key}", problem)
    # Draw once now, so that a bad keyword value fails at load, not mid-campaign.
    fake.seed_instance(0)
    try:
        sample = recipe.draw(fake)
    except Exception as exc:  # Faker's own errors are of any type
        raise _problem(field, f"Faker {provider!r} fails: {type(exc).__name__}: {exc}") from None
    if not _has_type(sample, recipe.produces) or _json_problem(sample, field) is not None:
        wanted = _TOML_NAMES[recipe.produces]
        problem = f"Faker {provider!r} with these keywords produced {_describe(sample)}"
        raise _problem(field, f"{problem}, not {wanted}")


@functools.cache
def _faker() -> Faker:
    """One Faker a process, seeded again for each plan (making one loads every provider)."""
    return Faker(_FAKER_LOCALE)


@functools.cache
def _probe_faker() -> Faker:
    return Faker(_FAKER_LOCALE)


def _json_problem(value: Any, field: str) -> tuple[str, str] | None:
    """Where and why ``value`` is not a plain JSON value (TOML has dates and nan)."""
    if isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (field, f"{value} is not a JSON number")
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _json_problem(item, f"{field}.{index}")
            if found is not None:
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _json_problem(item, f"{field}.{key}")
            if found is not None:
                return found
        return None
    return (field, f"{_describe(value)} is not a JSON value; quote it to make a string")


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, FakerRecipe):
        return f"a Faker recipe ({value.provider!r})"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a Faker recipe (allowed in step args only)" if "faker" in value else "a table"
    if isinstance(value, datetime | date | time):
        return f"a TOML date/time ({value.isoformat()})"
    return f"a {type(value).__name__}"


def did_you_mean(
    word: str, choices: Mapping[str, Any] | tuple[str, ...] | frozenset[str] | set[str]
) -> str:
    """`` (did you mean 'a' or 'b'?)`` for the choices close to ``word``, or nothing."""
    close = difflib.get_close_matches(word, sorted(choices), n=3, cutoff=0.6)
    if not close:
        return ""
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)"


# --- templates -------------------------------------------------------------


def _templates(value: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every string inside ``value``, with its dotted place."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _templates(item, f"{where}.{index}" if where else str(index))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _templates(item, f"{where}.{key}" if where else str(key))


def _template_names(template: str) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError:
        return []


def _template_problem(template: str, samples: Mapping[str, Any]) -> str | None:
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        return f"bad template {template!r}: {exc} (write {{{{ and }}}} for literal braces)"
    available = ", ".join(samples) or "none"
    for _, name, _, _ in parsed:
        if name is None:
            continue
        if not name.isidentifier():
            return f"template {template!r}: {{{name}}} must be a plain argument name"
        if name not in samples:
            return (
                f"template {template!r} uses {{{name}}}, which is not an argument of this "
                f"step{did_you_mean(name, tuple(samples))}; arguments: {available}"
            )
    try:
        template.format(**samples)
    except (KeyError, ValueError, IndexError, TypeError, AttributeError) as exc:
        return f"template {template!r} cannot be filled: {type(exc).__name__}: {exc}"
    return None


_ALONE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}\Z")
"""A template that is one placeholder and nothing else: it takes the argument's own value."""


def _render(value: Any, args: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        alone = _ALONE.match(value)
        if alone is not None and alone.group(1) in args:
            # "{amount}" is the amount, an int, not its text: a check that compares a
            # stored record with the call's arguments needs their types.
            return copy.deepcopy(args[alone.group(1)])
        return value.format(**args)
    if isinstance(value, list):
        return [_render(item, args) for item in value]
    if isinstance(value, dict):
        return {key: _render(item, args) for key, item in value.items()}
    return value


# --- errors ----------------------------------------------------------------


def _named_step_tool(error: ScenarioError, data: Mapping[str, Any]) -> ScenarioError:
    """``error`` naming the tool its step calls too, when the step names one."""
    steps = data.get("steps")
    if error.step is None or error.tool is not None or not isinstance(steps, list):
        return error
    step = steps[error.step - 1] if error.step <= len(steps) else None
    calls = step.get("batch") if isinstance(step, dict) and error.call is not None else None
    if isinstance(calls, list) and error.call is not None and error.call <= len(calls):
        step = calls[error.call - 1]
    tool = step.get("tool") if isinstance(step, dict) else None
    if not isinstance(tool, str) or error.field == "tool":
        return error
    return ScenarioError(
        error.path, error.step, error.field, error.problem, tool=tool, call=error.call
    )


def _scenario_error(
    source: str, exc: ValidationError, *, prefix: tuple[str, ...] = ()
) -> ScenarioError:
    """The first of pydantic's errors, as file, 1-based step (or declared tool) and dotted
    field; ``prefix`` is where the validated data sits in its file."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    location = [*prefix, *first["loc"]]
    step: int | None = None
    call: int | None = None
    tool: str | None = None
    batch_step = False
    if len(location) >= 2 and location[0] == "steps" and isinstance(location[1], int):
        step = location[1] + 1
        location = location[2:]
        if location[:1] in (["call"], ["batch"]):  # the tag of the step's kind
            batch_step = location[0] == "batch"
            location = location[1:]
        if len(location) >= 2 and location[0] == "batch" and isinstance(location[1], int):
            call = location[1] + 1
            location = location[2:]
    elif len(location) >= 2 and location[0] == "tools":
        tool = str(location[1])
        location = location[2:]
    context = first.get("ctx") or {}
    if first["type"] == "scenario":
        if context.get("field"):
            location.append(context["field"])
        step = context.get("step", step)
        call = context.get("call", call)
        problem = str(context["problem"])
    else:
        problem = _pydantic_problem(first, step, tool, location, batch_step and call is None)
    if len(errors) > 1:
        more = len(errors) - 1
        problem += f" (and {more} more problem{'s' if more > 1 else ''} after this one)"
    field = ".".join(str(part) for part in location) or None
    return ScenarioError(source, step, field, problem, tool=tool, call=call)


def _pydantic_problem(
    error: ErrorDetails,
    step: int | None,
    tool: str | None,
    location: list[Any],
    batch_step: bool = False,
) -> str:
    kind = error["type"]
    if kind == "missing":
        return "required, but missing"
    if kind == "extra_forbidden" and batch_step:
        return (
            "a step is one call (tool, args, verify) or a batch of calls ([[steps.batch]]), "
            "not both"
        )
    if kind == "extra_forbidden":
        allowed: tuple[str, ...]
        if location[:1] == ["verify"]:
            allowed = _KEYS_VERIFY
        elif tool is not None:
            allowed = _KEYS_TOOL
        elif step is not None:
            allowed = _KEYS_STEP
        elif location[:1] == ["world"]:
            allowed = _KEYS_WORLD if len(location) == 2 else _KEYS_RECORD
        elif location[:2] == ["agent", "services"] and len(location) == 4:
            allowed = _KEYS_SERVICE
        elif location[:1] == ["agent"]:
            allowed = _KEYS_AGENT
        else:
            allowed = _KEYS_TOP
        key = str(location[-1])
        return f"unknown key{did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}"
    return f"{error['msg']}, got {_describe(error['input'])}"
