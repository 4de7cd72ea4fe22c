"""``python -m harness.blackbox.scoreboard``: every example agent under the same campaign.

Each example agent (``examples/agents/NAME/agent.toml``: its framework, version, where it
keeps its state, its command and, where it has one, its guarded command and how the wire
guard stands in front of its tools) is run as a black box by ``harness chaos --runtime
cmd:"..." --only phone_task --random 20 --launch warm`` on one seed, bare, guarded and
proxy-guarded (``NAME-wire``), and ``docs/scoreboard.md`` is written from what those runs
recorded (``summary.json``, ``trials.jsonl``): per agent, the failures per invariant, the
tools that ran twice, the power cuts and how they ended, each failing trial's replay
command, and each run's time and launcher against the last plain run's. What a run found
is kept beside the agent (``measured.json``, committed): ``--only NAME`` runs one agent
again, the page keeps every other's last figures; ``--render`` writes it again without
running. An agent never run is listed as such, never left out.

An agent whose system has servers of its own (an engine's server) declares them in its
agent.toml as ``[services.NAME]`` tables, with the keys of a scenario's
``[agent.services.NAME]`` (``harness.chaos.services``), its relative paths found from the
project's root as its ``command``'s are. Its campaign then runs on
``examples/agents/NAME/phone_task.toml``, written here before each run: the scenario's own
file with an ``[agent]`` table that declares those services. That file is committed, so the
replay commands that name it run on a fresh checkout.

An agent.toml's ``pause_ms`` says how long its pauses hold it stopped (``chaos
--pause-ms``): past its engine's timeout, whose take-over is what a pause is for.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.chaos.scenario import AgentProgram, ServiceDeclaration
from harness.chaos.schedule import PAUSE_HOLD_MS

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "examples" / "agents"
SCENARIO = "phone_task"
REPLAYED = re.compile(
    r"\(([A-Za-z_][\w.-]*), (?:read_only|idempotent_write|non_idempotent|unknown)"
)
"""A tool named in an I1 or I2 failure's evidence: ``s003 (ui_tap, non_idempotent) ran...``."""
FIELDS = ("framework", "package", "version", "state", "command")
WIRES = ("stdio", "http")
"""How an agent's tools may be reached through the wire guard (``wire`` in its agent.toml)."""
WIRE_SUFFIX = "-wire"
"""The label of an agent's proxy-guarded run: ``NAME-wire``."""
WIRED = ".venv/bin/python -m harness.blackbox.wired"
SCENARIOS = ROOT / "scenarios"
SERVICE_KEYS = tuple(ServiceDeclaration.model_fields)
MEASURED = "measured.json"
"""Beside each agent's agent.toml: what its last runs found, by variant (see ``Outcome``)."""
LAUNCH_NOTE = ".launch"
"""Beside a run folder (``RUN.launch``): the line the campaign printed on how its lives
started (``warm start: ...``, or ``warm start refused: WHY; plain start``)."""
WARM_LINE = "warm start"


@dataclass(frozen=True)
class Agent:
    name: str
    framework: str
    package: str
    version: str
    state: str
    command: str
    guarded: str | None
    wire: str | None = None
    """How the wire guard is put in front of its tools (``wire`` in its agent.toml): over
    ``stdio`` (its MCP server's command) or ``http`` (a sidecar at its MCP address); None:
    no proxy-guarded run."""
    finding: str = ""
    """Why it does what it does, read from the framework's source (``finding`` in its
    agent.toml): written by hand, beside the figures the runs give."""
    services: tuple[tuple[str, dict[str, Any]], ...] = ()
    """Its ``[services.NAME]`` tables, in order (see the module docstring)."""
    pause_ms: int = PAUSE_HOLD_MS
    """How long its campaign's pauses hold it stopped (``pause_ms`` in its agent.toml)."""

    @property
    def scenario(self) -> Path | None:
        """The scenario file its campaign runs on when it has services (None: the shipped
        one, with no ``[agent]`` table)."""
        return AGENTS / self.name / f"{SCENARIO}.toml" if self.services else None

    def scenario_text(self) -> str:
        """Its campaign's scenario: the shipped scenario's text, then an ``[agent]`` table
        naming its command and declaring its services."""
        shipped = (SCENARIOS / f"{SCENARIO}.toml").read_text("utf-8")
        lines = [
            shipped.rstrip("\n"),
            "",
            f"# Written by harness.blackbox.scoreboard from examples/agents/{self.name}/"
            "agent.toml:",
            f"# the scenarios/{SCENARIO}.toml campaign, with the servers of this agent's system.",
            "[agent]",
            f"command = {_toml(self.command)}",
            "folder = \"../../..\"  # the project's root, as agent.toml's paths are",
        ]
        for name, table in self.services:
            lines += ["", f"[agent.services.{name}]"]
            lines += [f"{key} = {_toml(table[key])}" for key in SERVICE_KEYS if key in table]
        return "\n".join(lines) + "\n"

    @property
    def built(self) -> bool:
        """Whether its environment is built: each of its Python and Node pins installed (an
        agent with no pins needs none; one with both, a server from npm beside a Python
        agent, needs both)."""
        folder = AGENTS / self.name
        stamps = {
            "requirements.txt": folder / ".venv" / ".installed",
            "package.json": folder / "node_modules" / ".installed",
        }
        return all(stamp.exists() for pins, stamp in stamps.items() if (folder / pins).exists())

    def variants(self) -> list[tuple[str, str]]:
        """(label, command) of each run: bare, then guarded where there is a guard, then
        proxy-guarded (``NAME-wire``) where the wire guard can stand in front of its tools."""
        runs = [(self.name, self.command)]
        runs += [(f"{self.name}-guarded", self.guarded)] if self.guarded else []
        return runs + ([(f"{self.name}{WIRE_SUFFIX}", self.wired)] if self.wired else [])

    @property
    def wired(self) -> str | None:
        """Its command behind the wire guard: unchanged, its MCP address pointed at the
        guard by ``harness.blackbox.wired``, with this project's interpreter (the guard
        needs the ``mcp`` extra)."""
        if self.wire is None:
            return None
        launcher = f"{WIRED} --http --" if self.wire == "http" else f"{WIRED} --"
        return f"{launcher} {self.command}"


def _toml(value: object) -> str:
    """A TOML value for a string, a number, a list or a table of strings (JSON's strings
    are TOML's)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=False)


def read_services(path: Path, data: dict[str, Any]) -> tuple[tuple[str, dict[str, Any]], ...]:
    """An agent.toml's ``[services.NAME]`` tables, each checked as a scenario's
    ``[agent.services.NAME]`` is; a bad one stops here in one line (exit 2)."""
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    tables = data.get("services", {})
    if not isinstance(tables, dict):
        raise SystemExit(f"{where}: services: a table of [services.NAME] tables")
    found = []
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise SystemExit(f"{where}: services.{name}: a table (command, ready, port_env...)")
        try:
            ServiceDeclaration.model_validate(table)
        except ValidationError as exc:
            raise SystemExit(f"{where}: {_service_problem(name, exc)}") from None
        found.append((str(name), dict(table)))
    try:  # their names and port variables, checked as a scenario's are
        AgentProgram.model_validate({"command": "agent", "services": dict(found)})
    except ValidationError as exc:
        raise SystemExit(f"{where}: {_service_problem(None, exc)}") from None
    return tuple(found)


def _service_problem(name: str | None, exc: ValidationError) -> str:
    """The first problem of a service's table: its dotted field, then what is wrong."""
    error = exc.errors(include_url=False)[0]
    context = error.get("ctx") or {}
    location = [str(part) for part in error["loc"]]
    if name is not None:
        location = ["services", name, *location]
    if context.get("field"):
        location.append(str(context["field"]))
    if "problem" in context:
        problem = str(context["problem"])
    elif error["type"] == "extra_forbidden":
        problem = f"unknown key; allowed: {', '.join(SERVICE_KEYS)}"
    elif error["type"] == "missing":
        problem = "required, but missing"
    else:
        problem = str(error["msg"])
    return f"{'.'.join(location)}: {problem}"


def load_agents() -> list[Agent]:
    """Every example agent, by name; an ``agent.toml`` missing a field stops here (exit 2)."""
    agents = []
    for path in sorted(AGENTS.glob("*/agent.toml")):
        data = tomllib.loads(path.read_text("utf-8"))
        missing = [f for f in FIELDS if not isinstance(data.get(f), str)]
        if missing:
            raise SystemExit(f"{path.relative_to(ROOT)}: missing {', '.join(missing)}")
        fields = {f: data[f] for f in FIELDS}
        wire = data.get("wire")
        if wire is not None and wire not in WIRES:
            raise SystemExit(f"{path.relative_to(ROOT)}: wire {wire!r} is not one of {WIRES}")
        pause = data.get("pause_ms", PAUSE_HOLD_MS)
        if isinstance(pause, bool) or not isinstance(pause, int) or pause < 1:
            where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            raise SystemExit(
                f"{where}: pause_ms: {pause!r} is not a whole number of milliseconds of at least 1"
            )
        agents.append(
            Agent(
                name=path.parent.name,
                guarded=data.get("guarded"),
                wire=wire,
                finding=" ".join(str(data.get("finding", "")).split()),
                services=read_services(path, data),
                pause_ms=pause,
                **fields,
            )
        )
    return agents


def write_scenario(agent: Agent) -> list[str]:
    """The scenario options of an agent's campaign: none for the shipped scenario, else
    ``--scenario`` its own file, written again first (see ``Agent.scenario``)."""
    if agent.scenario is None:
        return []
    agent.scenario.write_text(agent.scenario_text(), "utf-8")
    return ["--scenario", str(agent.scenario.relative_to(ROOT))]


def run_campaign(
    label: str,
    command: str,
    args: argparse.Namespace,
    scenario: Sequence[str] = (),
    pause_ms: int = PAUSE_HOLD_MS,
) -> Path | None:
    """Run one agent's campaign into its own reports folder; its run folder."""
    reports = args.reports / label
    reports.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "chaos",
            *scenario,
            "--launch",
            args.launch,
            "--runtime",
            f"cmd:{command}",
            "--only",
            SCENARIO,
            "--random",
            str(args.random),
            "--seed",
            str(args.seed),
            "--workers",
            str(args.workers),
            "--pause-ms",
            str(pause_ms),
            "--reports",
            str(reports),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    run = latest_run(reports)
    if run is not None:
        note = [w for line in ran.stderr.splitlines() if (w := _launch_line(line))]
        note_file = run.parent / f"{run.name}{LAUNCH_NOTE}"
        note_file.write_text((note[-1] if note else "plain start") + "\n", "utf-8")
    said = verdict_line(read_outcome(run)) if run is not None else "no run folder"
    print(f"{label}: {said} ({time.monotonic() - started:.0f} s)", flush=True)
    if ran.returncode == 2:
        print(ran.stderr.strip(), file=sys.stderr)
    return run


def _launch_line(line: str) -> str | None:
    """The campaign's line on its launcher (``harness: warm start...``), without its prefix."""
    said = line.removeprefix("harness: ")
    return said if said.startswith(WARM_LINE) else None


def latest_run(reports: Path) -> Path | None:
    """The latest run that went to its end (an interrupted one's figures are partial)."""
    runs = sorted(p.parent for p in reports.glob("*/summary.json"))
    complete = [r for r in runs if json.loads((r / "summary.json").read_text("utf-8"))["complete"]]
    return complete[-1] if complete else None


@dataclass(frozen=True)
class Outcome:
    """What one campaign recorded."""

    trials: int
    failed: int
    unknown: int
    kills: int
    by_invariant: dict[str, int]
    replayed: Counter[str]
    failures: list[tuple[str, list[str], str]]
    """(trial, failed invariants, replay command) of every failing or unjudged trial."""
    seconds: float | None
    started: str | None = None
    """When the run started (ISO 8601, UTC) and the commit it ran on, when known."""
    commit: str | None = None
    power_loss: PowerLoss | None = None
    """Its trials with a power cut, as a tally; None for a run from before black boxes
    lost power (its figures are of kills and lost replies only)."""
    launch: str | None = None
    """How its lives started, as the campaign said it (``warm start: ...``, ``warm start
    refused: WHY; plain start``, ``plain start``); None: a run from before the scoreboard
    used the warm start (plain)."""
    plain_seconds: float | None = None
    """A warm run's: the time of the plain run whose figures it replaced (None: none kept)."""
    plain_trials: int | None = None
    """How many trials that plain run had (a campaign gains trials as faults are added)."""

    @property
    def warm(self) -> bool:
        return (self.launch or "").startswith(f"{WARM_LINE}:")

    def as_json(self) -> dict[str, object]:
        return {
            "trials": self.trials,
            "failed": self.failed,
            "unknown": self.unknown,
            "kills": self.kills,
            "by_invariant": self.by_invariant,
            "replayed": dict(sorted(self.replayed.items())),
            "failures": [list(f) for f in self.failures],
            "seconds": self.seconds,
            "started": self.started,
            "commit": self.commit,
            "power_loss": None if self.power_loss is None else self.power_loss.as_json(),
            "launch": self.launch,
            "plain_seconds": self.plain_seconds,
            "plain_trials": self.plain_trials,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        return cls(
            data["trials"],
            data["failed"],
            data["unknown"],
            data["kills"],
            dict(data["by_invariant"]),
            Counter(data["replayed"]),
            [(str(t), list(inv), str(replay)) for t, inv, replay in data["failures"]],
            data.get("seconds"),
            data.get("started"),
            data.get("commit"),
            None if data.get("power_loss") is None else PowerLoss.from_json(data["power_loss"]),
            data.get("launch"),
            data.get("plain_seconds"),
            data.get("plain_trials"),
        )


@dataclass(frozen=True)
class PowerLoss:
    """A run's trials whose schedule cut the power after a kill: how many, how they ended,
    and which of its failing or unjudged trials they are."""

    trials: int
    failed: int
    unknown: int
    cut: tuple[str, ...]
    """The failing or unjudged trials that had a power cut (their ids)."""
    not_applicable: str | None = None
    """Why its campaign planned no power cut (a program the observer cannot load into,
    as ``summary.json`` recorded it), or None."""

    def line(self) -> str:
        if self.not_applicable is not None:
            return f"power loss: not applicable: {self.not_applicable}"
        return (
            f"power loss: {self.trials} trials, {self.failed} failed, "
            f"{self.unknown} could not be judged"
        )

    def as_json(self) -> dict[str, object]:
        return {
            "trials": self.trials,
            "failed": self.failed,
            "unknown": self.unknown,
            "cut": list(self.cut),
            "not_applicable": self.not_applicable,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PowerLoss:
        return cls(
            data["trials"],
            data["failed"],
            data["unknown"],
            tuple(data["cut"]),
            data.get("not_applicable"),
        )


def _cuts_power(record: dict[str, Any]) -> bool:
    """Whether a trial's schedule (``trials.jsonl``) follows a life with a power cut."""
    lives = record.get("spec", {}).get("schedule", ())
    return any(str(life.get("after_death", "")).startswith("power-loss") for life in lives)


def _invariant_order(item: tuple[str, object]) -> tuple[int, str]:
    digits = item[0].removeprefix("I")
    return (int(digits), "") if digits.isdigit() else (1000, item[0])


def read_outcome(run: Path) -> Outcome:
    summary = json.loads((run / "summary.json").read_text("utf-8"))
    by_invariant = {
        key: counts.get("fail", 0)
        for key, counts in sorted(summary["invariants"].items(), key=_invariant_order)
        if counts.get("fail", 0)
    }
    replayed: Counter[str] = Counter()
    cut: Counter[str] = Counter()
    cut_ids: list[str] = []
    for line in (run / summary["trials_file"]).read_text("utf-8").splitlines():
        record = json.loads(line)
        if _cuts_power(record):
            cut[str(record.get("status"))] += 1
            if record.get("status") in ("fail", "unknown"):
                cut_ids.append(str(record.get("trial")))
        tools = {
            tool
            for verdict in record.get("verdicts", ())
            if verdict.get("status") == "fail" and verdict.get("invariant") in ("I1", "I2")
            for evidence in verdict.get("evidence", ())
            for tool in REPLAYED.findall(str(evidence))
        }
        replayed.update(tools)
    failures = [
        (entry["trial"], entry["invariants"], entry["replay"])
        for entry in (*summary["failures"], *summary["unjudged"])
    ]
    note = run.parent / f"{run.name}{LAUNCH_NOTE}"
    launch = note.read_text("utf-8").strip() if note.exists() else None
    return Outcome(
        summary["trials"],
        summary["failed"],
        summary["unknown"],
        summary["kills"],
        by_invariant,
        replayed,
        failures,
        summary.get("duration_s"),
        summary.get("started"),
        summary.get("commit"),
        PowerLoss(
            sum(cut.values()),
            cut["fail"],
            cut["unknown"],
            tuple(cut_ids),
            summary.get("not_applicable", {}).get("power-loss"),
        ),
        launch,
    )


def measured(agent: str) -> dict[str, Outcome]:
    """What an agent's last runs found, by variant, as committed beside it."""
    path = AGENTS / agent / MEASURED
    if not path.exists():
        return {}
    data = json.loads(path.read_text("utf-8"))
    return {label: Outcome.from_json(found) for label, found in data.items()}


def keep(agent: str, found: dict[str, Outcome]) -> None:
    """Write what an agent's runs found beside it (``measured.json``)."""
    data = {label: outcome.as_json() for label, outcome in sorted(found.items())}
    (AGENTS / agent / MEASURED).write_text(json.dumps(data, indent=2) + "\n", "utf-8")


def newest(run: Path | None, kept: Outcome | None) -> Outcome | None:
    """A variant's figures: its latest run's, unless what was kept is from a later one."""
    if run is None:
        return kept
    ran = read_outcome(run)
    if kept is not None and (kept.started or "") > (ran.started or ""):
        return kept
    return ran


def with_plain_time(found: Outcome | None, kept: Outcome | None) -> Outcome | None:
    """A warm run's figures, keeping the time of the plain run they replace (or that it had
    kept) as its plain figure: the two times side by side on the page."""
    if found is None or kept is None or found is kept or not found.warm:
        return found
    if kept.warm:
        return dataclasses.replace(
            found, plain_seconds=kept.plain_seconds, plain_trials=kept.plain_trials
        )
    return dataclasses.replace(found, plain_seconds=kept.seconds, plain_trials=kept.trials)


def verdict_line(outcome: Outcome) -> str:
    word = "PASS" if not outcome.failed and not outcome.unknown else "FAIL"
    cut = "" if outcome.power_loss is None else f"; {outcome.power_loss.line()}"
    return (
        f"{word}: {outcome.trials} trials, {outcome.failed} failed, "
        f"{outcome.unknown} could not be judged, {outcome.kills} kills{cut}"
    )


def run_kind(label: str) -> str:
    """What a run's label says it is: bare, guarded or proxy-guarded."""
    if label.endswith("-guarded"):
        return "guarded"
    return "proxy-guarded" if label.endswith(WIRE_SUFFIX) else "bare"


def render(
    agents: list[Agent], outcomes: dict[str, Outcome | None], args: argparse.Namespace
) -> str:
    """The scoreboard page, from what each agent's variants were found to do."""
    lines = [
        "# Scoreboard: real agents, killed",
        "",
        "Each example agent under `examples/agents/` is a plain program of its framework that",
        "knows nothing of this project: it talks to a model at `OPENAI_BASE_URL` (or",
        "`ANTHROPIC_BASE_URL`) and to its tools over MCP, and keeps its state with its",
        "framework's own persistence in its working folder. Each ran as a black box under the",
        "same campaign: "
        f'`chaos --runtime cmd:"..." --only {SCENARIO} --random {args.random} --seed {args.seed} '
        f"--launch {args.launch}`",
        "(every harness failpoint at every hit of the agent's own crash-free run, every reply",
        "lost once, a kill then a power cut at each of its model requests and after its exit,",
        "each fault of the model's answer once, and random-time kills, a third of them followed",
        "by a power cut, a sixth of the random trials a fault of the model instead). A guarded",
        "run is the same agent with this project's guard for its framework around its tools. A",
        "proxy-guarded run is the same agent, unchanged but for its MCP address or command,",
        "behind the [wire guard](guides/wire-guard.md). What holds is a finding too.",
        "",
        "One trial pauses the agent: it is stopped inside its first tool call, the effect made,",
        "and held while the next life starts beside it, then resumed",
        "([pause](reference/faults.md#pause)). The hold is "
        f"{PAUSE_HOLD_MS} ms unless the agent's `agent.toml`",
        "says otherwise (`pause_ms`, passed as `--pause-ms`): an agent run by a durable engine",
        "is held past the engine's timeout, since the engine's take-over of a worker that",
        "stopped answering is what a pause is for. Its section says how long.",
        "",
        "A power cut is rebuilt from what the agent's processes asked the kernel",
        "([power loss](guides/power-loss.md)): what they wrote in the trial folder and did not",
        "fsync is lost. The power-loss columns count those trials; for a run from before black",
        "boxes lost power they say `not run yet` (its figures are of kills and lost replies).",
        "A statically linked server runs under the observer's tracer; where the tracer cannot",
        "run (no `ptrace`), or a program is one the observer cannot load into at all, no cut",
        "could be judged: its campaign plans none, and the columns say `not applicable` with",
        "the reason (a run from before the tracer, too).",
        "",
        "Made by `make scoreboard` (after `make agents`); `SCOREBOARD_ARGS='--only NAME'` runs",
        "one agent again, and every other agent keeps the figures of its last run (in its",
        "`measured.json`), with the day and commit it ran on. Each replay command below runs",
        "one trial again.",
        "",
        "With `--launch warm`, each life of a Python agent forks from a process of its own",
        "interpreter that has already imported what the agent imports",
        "([the warm start](guides/agents.md#the-warm-start-launch-warm)). Where the warm start",
        "refuses (a Node agent, an import that reads a variable that differs in each life), the",
        "run says why and its lives start plain. Runs from before the scoreboard used it started",
        "every life plain, and say so. [Run times](#run-times-warm-against-plain) sets each",
        "run's time beside the last plain run's.",
        "",
        "| agent | framework | state kept in | run | trials | failed | unknown | "
        "failures by invariant | tools run twice | power-loss trials | failed | unknown |",
        "|---|---|---|---|---:|---:|---:|---|---|---:|---:|---:|",
    ]
    for agent in agents:
        for label, _command in agent.variants():
            run = run_kind(label)
            outcome = outcomes.get(label)
            head = f"| `{agent.name}` | {agent.framework} {agent.version} | {agent.state} | {run} |"
            if outcome is None:
                lines.append(f"{head} not run yet | | | | | | | |")
                continue
            invariants = ", ".join(f"{k} {n}" for k, n in outcome.by_invariant.items()) or "none"
            tools = ", ".join(f"`{t}`" for t in sorted(outcome.replayed)) or "none"
            cut = outcome.power_loss
            if cut is None:
                power = "not run yet | | |"
            elif cut.not_applicable is not None:
                power = f"not applicable: {cut.not_applicable} | | |"
            else:
                power = f"{cut.trials} | {cut.failed} | {cut.unknown} |"
            lines.append(
                f"{head} {outcome.trials} | {outcome.failed} | {outcome.unknown} | "
                f"{invariants} | {tools} | {power}"
            )
    for agent in agents:
        lines += ["", f"## {agent.framework} (`examples/agents/{agent.name}`)", ""]
        lines.append(f"`{agent.package}` {agent.version}; state: {agent.state}.")
        if agent.pause_ms != PAUSE_HOLD_MS:
            lines += ["", f"Its pauses hold {agent.pause_ms} ms (`--pause-ms {agent.pause_ms}`)."]
        if agent.finding:
            lines += ["", agent.finding]
        for label, command in agent.variants():
            outcome = outcomes.get(label)
            lines += ["", f"**{label}**: `cmd:{command}`", ""]
            if outcome is None:
                lines.append(
                    f"Not run yet: `make agent-{agent.name}`, then `make scoreboard "
                    f"SCOREBOARD_ARGS='--only {agent.name}'`."
                )
                continue
            seconds = f" in {outcome.seconds:.0f} s" if outcome.seconds else ""
            how = " (warm start)" if outcome.warm else " (plain start)"
            when = f", {outcome.started[:10]}" if outcome.started else ""
            commit = f", commit {outcome.commit[:7]}" if outcome.commit else ""
            lines.append(f"`{verdict_line(outcome)}`{seconds}{how}{when}{commit}.")
            if outcome.launch and not outcome.warm:
                lines += ["", f"Its lives started plain: `{outcome.launch}`."]
            if not outcome.failures:
                continue
            lines += [
                "",
                "<details><summary>Replay commands of the "
                f"{len(outcome.failures)} failing trials</summary>",
                "",
                "```sh",
            ]
            cut_ids = () if outcome.power_loss is None else outcome.power_loss.cut
            lines += [
                f"# {trial}: {' '.join(inv)}{' (power loss)' if trial in cut_ids else ''}\n{replay}"
                for trial, inv, replay in outcome.failures
            ]
            lines += ["```", "", "</details>"]
    lines += run_time_table(agents, outcomes)
    return "\n".join(lines) + "\n"


def run_time_table(agents: list[Agent], outcomes: dict[str, Outcome | None]) -> list[str]:
    """Each run's time, the launcher it used, and the last plain run's time beside it."""
    lines = [
        "",
        "## Run times, warm against plain",
        "",
        "Each run's whole campaign, from its first trial to its last, as `summary.json`",
        "recorded it (2 workers, on whatever else the machine ran then). A warm run's plain",
        "time is that of the last run of the same campaign with every life started plain,",
        "whose figures it replaced. Random-time kills land at moments a shorter start-up",
        "moves, so the two runs' random trials are not the same trials; their exhaustive",
        "trials are. A campaign gains trials as faults are added, so the ratio is taken per",
        "trial.",
        "",
        "| run | started | time | trials | plain time | plain trials | plain / warm, per trial |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for agent in agents:
        for label, _command in agent.variants():
            outcome = outcomes.get(label)
            if outcome is None or not outcome.seconds:
                lines.append(f"| `{label}` | not run yet | | | | | |")
                continue
            if not outcome.warm:
                took = f"{outcome.seconds:.0f} s"
                warm = "warm refused" if outcome.launch else "warm not run yet"
                n = outcome.trials
                lines.append(f"| `{label}` | plain | {took} | {n} | {took} | {n} | {warm} |")
                continue
            plain, count = outcome.plain_seconds, outcome.plain_trials
            per_warm = outcome.seconds / outcome.trials
            ratio = f"{plain / count / per_warm:.1f}x" if plain and count else ""
            was = f"{plain:.0f} s" if plain else "none on record"
            lines.append(
                f"| `{label}` | warm | {outcome.seconds:.0f} s | {outcome.trials} | {was} | "
                f"{count or ''} | {ratio} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.blackbox.scoreboard",
        description="Run every example agent (bare, guarded, proxy-guarded) under the same "
        "campaign and "
        "write the scoreboard page.",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="an agent's folder name (all its runs), or one run: NAME-guarded, NAME-wire",
    )
    parser.add_argument("--seed", type=int, default=7, help="the campaign seed (default 7)")
    parser.add_argument("--random", type=int, default=20, help="random-time trials (20)")
    parser.add_argument("--workers", type=int, default=2, help="trials at once (2)")
    parser.add_argument(
        "--launch",
        choices=("warm", "fork"),
        default="warm",
        help="how each life of an agent starts: the warm start where it is accepted (the "
        "default), or plain (fork)",
    )
    parser.add_argument("--reports", type=Path, default=ROOT / "reports" / "scoreboard")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "scoreboard.md")
    parser.add_argument(
        "--render", action="store_true", help="write the page from the last runs, run nothing"
    )
    args = parser.parse_args(argv)
    agents = load_agents()
    names = {a.name for a in agents} | {label for a in agents for label, _ in a.variants()}
    unknown = sorted(set(args.only) - names)
    if unknown:
        parser.error(f"--only {unknown[0]}: no examples/agents/{unknown[0]}/agent.toml")
    outcomes: dict[str, Outcome | None] = {}
    for agent in agents:
        kept = measured(agent.name)
        for label, command in agent.variants():
            chosen = not args.only or agent.name in args.only or label in args.only
            if args.render or not chosen or not agent.built:
                run = latest_run(args.reports / label)
            else:
                run = run_campaign(label, command, args, write_scenario(agent), agent.pause_ms)
            outcomes[label] = with_plain_time(newest(run, kept.get(label)), kept.get(label))
        found = {label: o for label, _ in agent.variants() if (o := outcomes[label]) is not None}
        if found and found != kept:
            keep(agent.name, found)
    args.out.write_text(render(agents, outcomes, args), "utf-8")
    print(f"wrote {args.out}")
    print(run_times(outcomes))
    return 0


def run_times(outcomes: dict[str, Outcome | None]) -> str:
    """Each run's time as its last run measured it, the longest and the total: what a CI
    job per agent (the nightly workflow's shards) and the whole scoreboard take."""
    timed = {label: o.seconds for label, o in outcomes.items() if o is not None and o.seconds}
    if not timed:
        return "run times: none measured"
    warm = {label for label, o in outcomes.items() if o is not None and o.warm}
    lines = [
        f"  {label}: {seconds:.0f} s{' (warm)' if label in warm else ''}"
        for label, seconds in sorted(timed.items())
    ]
    longest = max(timed, key=lambda label: timed[label])
    total = sum(timed.values())
    return "\n".join(
        [
            f"run times ({len(timed)} runs of {len(outcomes)}):",
            *lines,
            f"in all {total / 60:.1f} min, the longest {longest} {timed[longest] / 60:.1f} min",
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
