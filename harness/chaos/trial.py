"""A trial: one scenario, one seed, one crash schedule, audited against its golden run.

The golden run is the same plan (same scenario, same seed, so the same Faker
arguments) run once without faults; it gives the world the trial must end in
and, with every failpoint armed to ``count``, where the crash points are.

A trial's folder holds everything needed to read or replay it: ``plan.json``,
``journal``, ``world.db``, ``events.jsonl`` (what the supervisor saw),
``lives.json``, ``verdicts.json`` and ``trial.json`` (the spec and the one
command that replays it).
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import re
import shlex
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.adapters import get_adapter
from harness.agent.plan import load_plan, plan_to_json
from harness.blackbox import CALL_POINTS
from harness.blackbox.names import agent_name
from harness.chaos.schedule import Call, CrashSchedule, Life, Window
from harness.chaos.services import SERVICES_FILE, write_services
from harness.chaos.supervisor import LifeResult, Supervisor
from harness.chaos.tables import BASE
from harness.check.evidence import TrialEvidence
from harness.check.invariants import Status, Verdict, check_trial, trial_status
from harness.check.windows import kill_windows
from harness.errors import ScenarioError, TrialError
from harness.failpoints import FAILPOINTS, hit_ops_path
from harness.world.declared import canonical_json
from harness.world.store import WorldStore

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")

__all__ = [
    "Golden",
    "TrialResult",
    "TrialSpec",
    "golden_dir",
    "load_golden",
    "power_cuts",
    "prepare_golden",
    "reached_points",
    "run_trial",
]

_COUNT_ALL = ",".join(f"{name}=count" for name in FAILPOINTS)


def _black_box_name(runtime: str) -> str:
    """``cmd:"CMD"``'s short name: its program's name (``agent_name``) and 6 hex digits of
    the command's SHA-256."""
    command = runtime.removeprefix("cmd:").strip()
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    name = agent_name(words) if words else "agent"
    return f"{name}-{hashlib.sha256(command.encode()).hexdigest()[:6]}"


@dataclass(frozen=True, slots=True)
class TrialSpec:
    scenario: str
    """Path of the scenario file."""
    seed: int
    schedule: CrashSchedule
    runtime: str = "real"
    label: str = ""
    kind: str = "custom"
    model: str | None = None
    """The scripted model that runs it (``harness.agent.model.MODELS``); None: the one the
    scenario names (``scripted`` unless it says ``model = "reissue"``)."""
    generated: bool = False
    """Whether its scenario's task is drawn from its seed (a scenario with ``[generate]``):
    its replay command draws the same task again."""

    @property
    def scenario_name(self) -> str:
        return Path(self.scenario).stem

    @property
    def crash_state(self) -> int | None:
        """The crash state of its power cuts it judges (``power-loss:state:<k>``): in a
        campaign, a sub-trial of the trial labelled as it is without ``+state-<k>``."""
        return self.schedule.crash_state

    @property
    def trial_id(self) -> str:
        """The trial's folder name: only ``[A-Za-z0-9._-]``, so that CI artifact uploads
        (GitHub's refuses ``:`` among others) keep every trial folder. A black box is named
        by its program's name and a short digest of its whole command (two commands of one
        name stay apart), not by the command, whose paths would make the name too long to
        read or show."""
        prefix = "" if self.runtime == "real" else f"{self.runtime}--"
        if self.runtime.startswith("cmd:"):
            prefix = f"cmd_{_black_box_name(self.runtime)}--"
        label = _SAFE.sub("_", self.label or "trial")[:80]
        return _SAFE.sub("_", f"{prefix}{self.scenario_name}-{self.seed}-") + label

    def replay_command(self) -> str:
        """The one command that runs this exact trial again.

        For a user's ``module:`` runtime it starts with the ``PYTHONPATH`` the
        module is found on, so that the line works from a fresh shell.
        """
        where = _import_path(self.runtime.removeprefix("module:"))
        return " ".join(
            [
                *(
                    [f"PYTHONPATH={shlex.quote(where)}"]
                    if where and self.runtime.startswith("module:")
                    else []
                ),
                _python(),
                "-m harness trial",
                shlex.quote(self.scenario),
                f"--seed {self.seed}",
                f"--runtime {shlex.quote(self.runtime)}",
                *([f"--model {self.model}"] if self.model is not None else []),
                f"--schedule {shlex.quote(self.schedule.to_json())}",
            ]
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "seed": self.seed,
            "runtime": self.runtime,
            "label": self.label,
            "kind": self.kind,
            "schedule": json.loads(self.schedule.to_json()),
            **({"model": self.model} if self.model is not None else {}),
            **({"generated": True} if self.generated else {}),
            "replay": self.replay_command(),
        }


@dataclass(frozen=True, slots=True)
class Golden:
    """A crash-free run of one (scenario, seed)."""

    directory: Path
    hits: dict[str, int]
    working_ms: float
    """From the agent's "ready" to its exit: the span random-time kills are drawn from."""
    ops: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Failpoint -> the op id each of its hits served, in hit order."""
    calls: Sequence[Call] = ()
    """Each tool call: its op id, its span and its windows in ms after ready (where
    random-time kills are aimed)."""
    table: Path | None = None
    """The scenario's own tool table it ran with (None: the shipped one)."""
    moments: Mapping[str, Sequence[float]] = field(default_factory=dict)
    """Failpoint -> when each of its hits came, in ms after ready (as ``ops``)."""

    def op_at(self, failpoint: str, hit: int) -> str | None:
        served = self.ops.get(failpoint, ())
        return served[hit - 1] if 0 < hit <= len(served) else None

    def in_flight_at(self, failpoint: str, hit: int) -> tuple[str, ...]:
        """The ops in flight at a hit: its own, and every call whose span (first intent to
        last finish) holds the hit's moment, as beside it in a batch."""
        op = self.op_at(failpoint, hit)
        if op is None:
            return ()
        moments = self.moments.get(failpoint, ())
        if not 0 < hit <= len(moments):
            return (op,)
        moment = moments[hit - 1]
        beside = [c.op for c in self.calls if c.op != op and c.start_ms <= moment <= c.end_ms]
        return (op, *beside)


@dataclass(frozen=True, slots=True)
class TrialResult:
    spec: TrialSpec
    directory: Path
    verdicts: tuple[Verdict, ...]
    lives: int
    kills: int
    windows: tuple[str, ...]
    reached: tuple[str, ...]
    duration_ms: float
    kept: bool = True
    """Whether its folder is kept (``harness.chaos.keep``): when not, ``directory`` is
    where it would be, and the run's ``trials.jsonl`` holds what is left of it."""

    @property
    def status(self) -> Status:
        """``pass`` only when every verdict is pass or not-judged (``trial_status``)."""
        return trial_status(self.verdicts)

    @property
    def failed_invariants(self) -> tuple[str, ...]:
        return tuple(v.invariant for v in self.verdicts if v.status == "fail")

    @property
    def unknown_invariants(self) -> tuple[str, ...]:
        """The invariants that could not be judged (each verdict says why)."""
        return tuple(v.invariant for v in self.verdicts if v.status == "unknown")


def _import_path(module: str) -> str | None:
    """The folder a module's top-level package is imported from, if it can be found."""
    try:
        spec = importlib.util.find_spec(module.split(".", 1)[0])
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin)
    return str(origin.parent.parent if origin.name == "__init__.py" else origin.parent)


def _python() -> str:
    """The interpreter to name in a replay line: the project's venv when it is the one running."""
    path = Path(sys.executable)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return "python"


def write_plan_for(scenario: str, seed: int, directory: Path) -> None:
    from harness.chaos.scenario import compile_plan, load_scenario, write_plan

    loaded = load_scenario(scenario)
    plan = compile_plan(loaded, seed=seed, source=scenario)
    write_plan(plan, directory / "plan.json")
    write_services(directory, loaded.services)
    seed_world(directory)


def seed_world(directory: Path) -> None:
    """Put the records the plan's world begins with into ``world.db``, before any life."""
    plan = load_plan(directory / "plan.json")
    if not plan.world:
        return
    with WorldStore.open(directory / "world.db") as world:
        world.seed((r.collection, r.key, canonical_json(r.value)) for r in plan.world)


def golden_dir(run_dir: Path, scenario: str, seed: int) -> Path:
    """Where a run folder keeps the golden run of ``scenario`` with ``seed``."""
    return run_dir / "golden" / f"{Path(scenario).stem}-{seed}"


def load_golden(directory: Path) -> Golden | None:
    """The crash-free run made in ``directory`` by ``prepare_golden``; None before it is."""
    info = directory / "golden.json"
    if not info.exists():
        return None
    data = json.loads(info.read_text("utf-8"))
    calls = [Call.from_json(item) for item in data.get("calls", ())]
    table = None if data.get("table") is None else Path(data["table"])
    return Golden(
        directory,
        data["hits"],
        data["working_ms"],
        data.get("ops", {}),
        calls,
        table,
        data.get("ms", {}),
    )


def prepare_golden(
    scenario: str,
    seed: int,
    directory: Path,
    supervisor: Supervisor,
    *,
    tables: Mapping[str, Path] | None = None,
    runtime: str = "real",
) -> Golden:
    """Run (or reuse) the crash-free run of a scenario and seed.

    ``tables`` are the trial's (``harness.chaos.tables.scenario_tables``): a
    scenario with a table of its own runs its golden run with it. The golden run is
    this project's runtime's, unless ``runtime`` is a black box (``cmd:``): its
    points are in the harness's servers, so its own crash-free run says where they are.
    """
    black_box = get_adapter(runtime).black_box
    made = load_golden(directory)
    if made is not None:
        return made
    info = directory / "golden.json"
    directory.mkdir(parents=True, exist_ok=True)
    write_plan_for(scenario, seed, directory)
    counts = directory / "failpoint-hits.json"
    base = (tables or {}).get(BASE)
    lives = supervisor.run(
        directory,
        CrashSchedule((Life(_COUNT_ALL),)),
        runtime=runtime if black_box else "real",
        tables={BASE: base} if base is not None else None,
        counts_file=counts,
    )
    _write_lives(directory, lives)
    last = lives[-1]
    if not last.done:
        raise TrialError(
            f"golden run of {scenario} (seed {seed}) did not finish: exit {last.returncode}, "
            f"{last.killed or ''} {last.stderr.strip()[-500:]}"
        )
    prove_checks(scenario, seed, directory / "proof", supervisor, base)
    hits = json.loads(counts.read_text("utf-8"))
    trace = json.loads(Path(hit_ops_path(counts)).read_text("utf-8"))
    points = CALL_POINTS if black_box else _CALL_POINTS
    ops, calls = trace["ops"], golden_calls(trace["ops"], trace["ms"], points)
    working_ms = last.duration_ms - (last.ready_ms or 0.0)
    moments = trace["ms"]
    golden = {"hits": hits, "working_ms": working_ms, "ops": ops, "calls": calls, "ms": moments}
    info.write_text(json.dumps({**golden, "table": None if base is None else str(base)}), "utf-8")
    return Golden(directory, hits, working_ms, ops, calls, base, moments)


def reached_points(
    scenario: str,
    seed: int,
    directory: Path,
    supervisor: Supervisor,
    *,
    tables: Mapping[str, Path] | None = None,
    runtime: str,
) -> dict[str, int]:
    """Run (or reuse) a crash-free run of ``runtime`` itself, every failpoint counted:
    how many times its agent program reached each point.

    The golden run is this project's runtime's; a user's agent program (``module:``)
    may call fewer of the protocol's points, or call them fewer times (no intent
    per attempt), and a kill at a point it never reaches would never fire. Its
    exhaustive trials are the golden run's, less those (``harness.chaos.campaign``)."""
    counts = directory / "failpoint-hits.json"
    if counts.exists():
        return dict(json.loads(counts.read_text("utf-8")))
    directory.mkdir(parents=True, exist_ok=True)
    write_plan_for(scenario, seed, directory)
    base = (tables or {}).get(BASE)
    lives = supervisor.run(
        directory,
        CrashSchedule((Life(_COUNT_ALL),)),
        runtime=runtime,
        tables={BASE: base} if base is not None else None,
        counts_file=counts,
    )
    last = lives[-1]
    if not last.done or not counts.exists():
        counts.unlink(missing_ok=True)
        raise RuntimeError(
            f"crash-free run of {runtime} on {scenario} (seed {seed}) did not finish: exit "
            f"{last.returncode}, {last.killed or ''} {last.stderr.strip()[-500:]}"
        )
    return dict(json.loads(counts.read_text("utf-8")))


def prove_checks(
    scenario: str, seed: int, directory: Path, supervisor: Supervisor, table: Path | None
) -> int:
    """Prove the scenario's checks on a crash-free run of its own; how many were proved.

    The invariants trust a step's ``verify`` check (the model redoes a step whose
    check fails, and I8 leaves out a step no check can tell): a check that does not
    hold right after its step in a crash-free run would make the model redo an
    effect that is there, or leave one out unseen. So before any trial a run with
    no fault proves every step's check right after the step (the model runs it
    against the world, unjournaled: ``harness.agent.model.PROOF_ENV``), apart from
    the golden run, whose failpoint hits it would shift. A step that fails in that
    run has no effect to prove. A check that does not hold refuses the scenario
    (``ScenarioError``), naming the step and the check.
    """
    directory.mkdir(parents=True, exist_ok=True)
    write_plan_for(scenario, seed, directory)
    proofs = directory / "proofs.jsonl"
    lives = supervisor.run(
        directory,
        CrashSchedule((Life(),)),
        tables={BASE: table} if table is not None else None,
        proof_file=proofs,
    )
    if not lives[-1].done:
        last = lives[-1]
        raise TrialError(
            f"the run proving the checks of {scenario} (seed {seed}) did not finish: exit "
            f"{last.returncode}, {last.killed or ''} {last.stderr.strip()[-500:]}"
        )
    lines = proofs.read_text("utf-8").splitlines() if proofs.exists() else []
    found = [json.loads(line) for line in lines]
    plan = load_plan(directory / "plan.json")
    checks = {s.op_id: s for s in plan.steps if s.verify is not None}
    for proof in found:
        if not proof["holds"]:
            step = checks[proof["op_id"]]
            check = step.verify
            assert check is not None
            want = (
                f"equals {check.equals!r}"
                if check.equals is not None
                else (f"contains {check.contains!r}")
            )
            raise ScenarioError(
                scenario,
                step.index,
                "verify",
                f"its check ({check.tool} {dict(check.args)}: {check.path or 'the result'} "
                f"{want}) does not hold right after the step in a crash-free run; the "
                f"check saw {str(proof['seen'])[:200]}",
                tool=step.tool,
            )
    shutil.rmtree(directory, ignore_errors=True)
    return len(found)


_CALL_POINTS = ("op.before_intent", "op.after_intent", "op.reply", "op.after_finish")
"""A call's points in the order it hits them: each opens a window that the next closes."""


def golden_calls(
    ops: Mapping[str, Sequence[str]],
    ms: Mapping[str, Sequence[float]],
    call_points: Sequence[str] = _CALL_POINTS,
) -> list[Call]:
    """Each op of a counted run: from its first intent to its last finish, and the windows
    between its points (the first hit of each, the last finish), in ms after ready.
    ``call_points``: a call's points in order (a black box's: ``harness.blackbox.CALL_POINTS``,
    from the tool server's receipt to the model's being shown the result)."""
    first, last = call_points[0], call_points[-1]
    at: dict[str, dict[str, float]] = {}
    for point in call_points:
        for op_id, moment in zip(ops.get(point, ()), ms.get(point, ()), strict=True):
            seen = at.setdefault(op_id, {})
            if point == last or point not in seen:
                seen[point] = float(moment)
    calls = []
    for op_id, seen in at.items():
        points = [(p, seen[p]) for p in call_points if p in seen]
        if not (first in seen and last in seen):
            continue
        windows = tuple(
            Window(opens, a, b) for (opens, a), (_, b) in itertools.pairwise(points) if b >= a
        )
        start, end = seen[first], seen[last]
        if end >= start:
            calls.append(Call(op_id, start, end, windows))
    return sorted(calls, key=lambda call: (call.start_ms, call.end_ms))


def run_trial(
    spec: TrialSpec,
    directory: Path,
    golden: Path,
    supervisor: Supervisor,
    *,
    tables: dict[str, Path] | None = None,
) -> TrialResult:
    """Run one trial in ``directory`` (made afresh) and check it against ``golden``."""
    started = time.monotonic()
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    shutil.copyfile(golden / "plan.json", directory / "plan.json")
    if (golden / SERVICES_FILE).exists():
        shutil.copyfile(golden / SERVICES_FILE, directory / SERVICES_FILE)
    if spec.model is not None:
        # The golden run has one life, so every model makes it alike: only the trial's
        # plan names the model that its restarted lives run.
        plan = replace(load_plan(directory / "plan.json"), model=spec.model)
        (directory / "plan.json").write_text(plan_to_json(plan) + "\n", "utf-8")
    seed_world(directory)
    (directory / "trial.json").write_text(json.dumps(spec.to_json(), indent=1), "utf-8")
    lives = supervisor.run(directory, spec.schedule, runtime=spec.runtime, tables=tables)
    _write_lives(directory, lives)
    verdicts = check_trial(
        directory,
        golden,
        restart_budget=supervisor.restart_budget,
        offers=get_adapter(spec.runtime).evidence,
    )
    _drop_reader_leftovers(directory / "world.db")
    (directory / "verdicts.json").write_text(
        json.dumps([v.to_json() for v in verdicts], indent=1), "utf-8"
    )
    windows: tuple[str, ...] = ()
    # Only a random-time kill has a window: the others' evidence is not read again.
    if any(life.kill_after_ms is not None for life in spec.schedule.lives):
        try:
            evidence = TrialEvidence(directory, golden, supervisor.restart_budget)
            windows = tuple(kill_windows(evidence))
        except Exception:  # a window is a description, never a reason to crash the campaign
            windows = ()
    _drop_reader_leftovers(directory / "world.db")  # a black box's windows read the ledger
    return TrialResult(
        spec,
        directory,
        verdicts,
        len(lives),
        sum(1 for life in lives if life.killed in ("failpoint", "timed")),
        windows,
        tuple(life.reached for life in lives if life.reached),
        (time.monotonic() - started) * 1000,
    )


def power_cuts(directory: Path) -> list[dict[str, Any]]:
    """The power cuts a trial's events record, in order."""
    path = directory / "events.jsonl"
    if not path.exists():
        return []
    events = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]
    return [
        e
        for e in events
        if e.get("event") == "fault" and str(e.get("fault", "")).startswith("power-loss")
    ]


def _drop_reader_leftovers(db: Path) -> None:
    # The checkers' read-only connections leave an empty WAL and its index
    # behind; with no connection left they hold nothing, and a campaign keeps
    # thousands of trial folders.
    wal = db.with_name(db.name + "-wal")
    if wal.exists() and wal.stat().st_size == 0:
        wal.unlink()
        db.with_name(db.name + "-shm").unlink(missing_ok=True)


def _write_lives(directory: Path, lives: list[LifeResult]) -> None:
    (directory / "lives.json").write_text(
        json.dumps([asdict(life) for life in lives], indent=1), "utf-8"
    )
