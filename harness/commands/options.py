"""What several commands share: the campaign from its options, a run id, a known runtime.

Everything is validated before anything runs: a bad scenario, an unknown
runtime or shard raise ``HarnessError`` (exit 2) while no process has started
and no run folder exists.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.chaos.campaign import CampaignConfig
from harness.chaos.schedule import PAUSE_HOLD_MS
from harness.chaos.shard import Shard
from harness.chaos.trial import TrialResult
from harness.report.model import RunInfo
from harness.runtime.errors import HarnessError

__all__ = [
    "AUDIT_CRASH_STATES",
    "CHAOS_CRASH_STATES",
    "DEFAULT_SCENARIOS",
    "add_crash_states_options",
    "add_fs_model_option",
    "add_keep_option",
    "add_launch_option",
    "add_maxfail_options",
    "add_model_option",
    "add_only_option",
    "add_reports_option",
    "add_scenario_options",
    "add_shard_option",
    "add_timeout_option",
    "add_workdir_option",
    "add_workers_option",
    "campaign_config",
    "campaign_scenarios",
    "check_black_box",
    "check_model",
    "check_reports",
    "check_runtime",
    "count",
    "positive_int",
    "positive_seconds",
    "prog_name",
    "run_id",
    "run_info",
    "scenario_runtime",
    "selected_scenarios",
    "stop_after_failures",
    "workdir",
]

DEFAULT_SCENARIOS = "scenarios"
"""The folder of scenarios a command takes when it is given none."""
DEFAULT_RUNTIME = "real"
AGENT_RUNTIME = "agent"
"""``--runtime agent``: the agent program the scenarios name in their ``[agent]`` table."""
RUNTIME_HELP = (
    "runtime under test: a registered one (real, dbos, langgraph, a broken runtime, ...), "
    'module:your.agent, cmd:"your command", or agent, the [agent] table of the scenario '
    "(default: the scenario's [agent] when it has one, else real)"
)


def add_scenario_options(parser: argparse.ArgumentParser) -> None:
    """``--scenario FILE`` (repeatable) and ``--scenarios DIR``, the same on every command
    that takes scenarios."""
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        dest="scenario_files",
        metavar="FILE",
        help="a scenario file (repeatable; with --scenarios too, both are taken)",
    )
    parser.add_argument(
        "--scenarios",
        default=None,
        metavar="DIR",
        help=f"a folder of scenario files (default: {DEFAULT_SCENARIOS}/, unless --scenario "
        "is given)",
    )


def add_only_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="limit to the scenario of this name (its file's name without .toml; repeatable)",
    )


def add_reports_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reports",
        default="reports",
        metavar="DIR",
        help="the folder run folders are made in (default: reports)",
    )


def add_workers_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=os.cpu_count() or 2,
        metavar="N",
        help="trials run at once (default: the number of CPUs)",
    )


def add_launch_option(parser: argparse.ArgumentParser, *, repeatable: bool = False) -> None:
    """``--launch``; ``repeatable``: given more than once, the campaign runs under each."""
    more = " (repeatable: the same campaign under each, side by side)" if repeatable else ""
    parser.add_argument(
        "--launch",
        choices=("fork", "exec", "warm"),
        action="append" if repeatable else "store",
        default=[] if repeatable else "fork",
        help="start each life of the agent by forking a warm worker (the default), by exec "
        "of a fresh interpreter, or as fork and, for a black box that is a Python program, "
        "by forking its own interpreter once it has imported what a crash-free run imported" + more,
    )


def add_maxfail_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--maxfail",
        type=positive_int,
        default=None,
        metavar="N",
        help="stop the campaign once N trials have failed (those under way finish); the "
        "report holds what ran",
    )
    parser.add_argument(
        "-x",
        "--exitfirst",
        action="store_const",
        const=1,
        dest="maxfail",
        help="stop at the first failed trial (--maxfail 1)",
    )


def stop_after_failures(maxfail: int) -> Callable[[TrialResult], bool]:
    """A campaign's ``stop`` for ``--maxfail``: true once ``maxfail`` trials have failed."""
    failed = 0

    def stop(result: TrialResult) -> bool:
        nonlocal failed
        failed += result.status == "fail"
        return failed >= maxfail

    return stop


def check_reports(reports: str) -> None:
    """A ``--reports`` a run folder can be made in, refused in one line before anything runs:
    not a folder (it, or a parent, is a file) or not writable. Nothing is left behind."""
    path = Path(reports)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is not a folder" if existing == path else f"{existing} is not a folder"
        raise HarnessError(f"--reports {reports}: {what}")
    try:  # os.access answers yes to root, and nothing short of trying sees a read-only mount
        os.rmdir(tempfile.mkdtemp(prefix=".harness-probe-", dir=existing))
    except OSError as exc:
        where = "" if existing == path else f" ({existing})"
        raise HarnessError(
            f"--reports {reports}: not writable{where}: {exc.strerror or exc}"
        ) from None


def scenario_runtime(name: str | None, scenarios: Sequence[str]) -> str:
    """The runtime to run: ``name`` when it names one; for ``agent``, or when none is given,
    the ``cmd:`` runtime of the ``[agent]`` table the scenarios carry (the same in each),
    and with none given and no such table, ``real``."""
    if name is not None and name != AGENT_RUNTIME:
        return name
    from harness.chaos.scenario import load_scenario

    found = {path: load_scenario(path).agent_runtime for path in scenarios}
    named = [path for path, runtime in found.items() if runtime is not None]
    if not named:
        if name == AGENT_RUNTIME:
            raise HarnessError(
                f'--runtime agent: {scenarios[0]} has no [agent] table (command = "...")'
            )
        return DEFAULT_RUNTIME
    without = [path for path, runtime in found.items() if runtime is None]
    if without:
        raise HarnessError(
            f"{without[0]} has no [agent] table and {named[0]} has one: give --runtime, or "
            "run them apart"
        )
    other = next((path for path in named if found[path] != found[named[0]]), None)
    if other is not None:
        raise HarnessError(
            f"{named[0]} and {other} name different agents in [agent]: run them apart"
        )
    runtime = found[named[0]]
    assert runtime is not None
    return runtime


def campaign_scenarios(args: argparse.Namespace) -> tuple[str, ...]:
    """The scenarios of a campaign (``selected_scenarios``). Given no ``--runtime``, a folder
    that mixes scenarios naming an ``[agent]`` with scenarios that name none runs the latter
    (the harness's own campaign, as ``make chaos`` runs it), and the former are left out,
    with one line on stderr saying so: as pytest reports a skipped test, not as an error. A
    scenario named by ``--scenario FILE`` is never left out."""
    from harness.chaos.scenario import load_scenario

    paths = selected_scenarios(args)
    if args.runtime is not None:
        return paths
    named = set(getattr(args, "scenario_files", None) or [])
    agents = [p for p in paths if p not in named and load_scenario(p).agent is not None]
    if not agents or len(agents) == len(paths):
        return paths
    if len(agents) == 1:
        which, how = f"{agents[0]}, which names an [agent]", f"--scenario {agents[0]}"
    else:
        which = f"{len(agents)} scenarios that name an [agent] ({', '.join(agents)})"
        how = "--scenario FILE, one agent at a time"
    print(
        f"harness: left out {which}: a campaign of a folder runs the scenarios that name "
        f"none on {DEFAULT_RUNTIME}; run the agent's with {how}",
        file=sys.stderr,
    )
    return tuple(p for p in paths if p not in agents)


def selected_scenarios(args: argparse.Namespace) -> tuple[str, ...]:
    """The scenario files of ``--scenario`` and ``--scenarios`` (its default when neither
    is given), less those ``--only`` leaves out; each read and checked, so a bad one is
    refused before anything runs. An ``--only`` that names none gets the close names."""
    from harness.chaos.scenario import did_you_mean, load_scenario, load_scenarios

    files: list[str] = list(getattr(args, "scenario_files", None) or [])
    folder = args.scenarios if args.scenarios is not None or files else DEFAULT_SCENARIOS
    scenarios = load_scenarios(Path(folder)) if folder is not None else []
    scenarios += [load_scenario(file) for file in files]
    names = {s.name for s in scenarios}
    for name in args.only:
        if name not in names:
            where = folder if not files else ", ".join([*([folder] if folder else []), *files])
            raise HarnessError(
                f"--only {name}: no scenario of that name in {where}{did_you_mean(name, names)}"
            )
    paths: dict[str, None] = {}
    for s in scenarios:
        if not args.only or s.name in args.only:
            paths.setdefault(str(s.source), None)
    if not paths:
        raise HarnessError(f"{folder}: no scenario files")
    return tuple(paths)


def add_shard_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shard",
        default=None,
        help="run shard K of N of the campaign (K/N; needs --seed; no self-check)",
    )


def add_workdir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workdir",
        default="ram",
        help="run trials in a scratch folder under this folder, then move them to the run "
        "folder: 'ram' (the default) for a RAM folder (/dev/shm), or 'disk' to run them in "
        "the run folder itself, on its disk",
    )


def add_keep_option(parser: argparse.ArgumentParser) -> None:
    from harness.chaos.keep import KEEP_MODES, SAMPLE_ONE_IN, TRIALS_FILE

    parser.add_argument(
        "--keep",
        choices=KEEP_MODES,
        default=KEEP_MODES[0],
        help="which trial folders stay in the run folder: 'sample' (the default: every "
        f"trial that did not pass and one passing trial in {SAMPLE_ONE_IN}) or 'all'; every "
        f"trial has its verdicts, schedule and replay command in {TRIALS_FILE} either way",
    )


CHAOS_CRASH_STATES = 3
"""``chaos``'s default ``--crash-states``: each dropping power cut judged in itself and up
to two more of its crash states (where it has them)."""
AUDIT_CRASH_STATES = 8
"""``audit``'s default ``--crash-states``."""


def add_crash_states_options(parser: argparse.ArgumentParser, default: int) -> None:
    """``--crash-states N`` and ``--fs-model`` of a campaign (``chaos``, ``audit``)."""
    from harness.chaos.crashstates import MODELS

    parser.add_argument(
        "--crash-states",
        type=positive_int,
        default=default,
        metavar="N",
        help="judge each trial whose power cut drops what was not synced over up to N crash "
        f"states of its cut: itself, and a sub-trial for each other one its cut has (default "
        f"{default}; 1: the cut alone)",
    )
    add_fs_model_option(parser, MODELS)


def add_pause_option(parser: argparse.ArgumentParser) -> None:
    """``--pause-ms MS``: how long a campaign's pauses hold a life stopped."""
    parser.add_argument(
        "--pause-ms",
        type=positive_int,
        default=PAUSE_HOLD_MS,
        metavar="MS",
        help="how long each pause holds the agent stopped before the next life starts beside "
        f"it (default {PAUSE_HOLD_MS}); for an engine, past its activity or step timeout",
    )


def add_fs_model_option(parser: argparse.ArgumentParser, models: tuple[str, ...]) -> None:
    parser.add_argument(
        "--fs-model",
        choices=models,
        default=models[0],
        help="the file-system model crash states follow: 'ordered' (the default, as ext4's "
        "data=ordered: unsynced appends kept as in-order prefixes) or 'weak' (the weakest "
        "POSIX one: also any 512-byte sector of an unsynced write lost on its own)",
    )


def add_model_option(parser: argparse.ArgumentParser) -> None:
    from harness.agent.model import MODELS

    parser.add_argument(
        "--model",
        choices=tuple(MODELS),
        default=None,
        help="the scripted model of every trial: 'scripted' (the plan's ids in every life) "
        "or 'reissue' (a new id for every call after each restart, as an LLM re-running "
        "inference) or 'replan' (as 'reissue', each batch's calls also in another order); "
        "default: each scenario's own (its 'model' key, else scripted)",
    )


def check_model(runtime: str, model: str | None) -> None:
    """A ``--model`` the runtime's agent program can run: only ``harness.agent`` has the
    scripted models; another adapter runs its own loop."""
    from harness.adapters import get_adapter

    if model is None or get_adapter(runtime).takes_model:
        return
    raise HarnessError(
        f"--model {model}: runtime {runtime} runs its own agent loop, not the scripted model "
        "of harness.agent (--model is for real, real-content, mcp and the broken runtimes)"
    )


def workdir(args: argparse.Namespace) -> Path | None:
    """The folder trials run under: ``--workdir`` (``ram``, the default: a RAM folder, or
    on disk with a line on stderr when there is none), or None for ``disk``: in the run
    folder. A power loss is rebuilt from the calls the agent made (the file-system
    observer's trace, ``harness.chaos.observer``), so a real fsync in a trial folder only
    costs time; random-time kills are timed by the agent from
    inside the call they aim at, so they land in its windows in RAM as on disk."""
    from harness.chaos.workdir import ram_folder

    chosen = getattr(args, "workdir", "disk")
    if chosen == "disk":
        return None
    if chosen == "ram":
        ram = ram_folder()
        if ram is None:
            print("harness: no RAM folder (tmpfs) found; trials run on disk", file=sys.stderr)
        return ram
    path = Path(chosen).resolve()
    if path.exists() and not path.is_dir():
        raise HarnessError(f"--workdir {chosen}: not a folder")
    return path


def _shard(args: argparse.Namespace) -> Shard | None:
    """``--shard K/N`` of ``chaos``; a shard's self-check is left to an unsharded run."""
    if getattr(args, "shard", None) is None:
        return None
    try:
        shard = Shard.parse(args.shard)
    except ValueError as exc:
        raise HarnessError(f"--shard: {exc}") from None
    if args.seed is None:
        raise HarnessError("--shard needs --seed: every shard must list the same campaign")
    return shard


def run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"


def check_runtime(name: str) -> None:
    """A known runtime; a ``module:`` one must import here and have ``main(argv)``.

    Imported in this process, as the fork server will: a module that cannot be
    is refused now, with its error, before any process starts.
    """
    from harness.adapters import UnknownAdapterError, get_adapter

    try:
        adapter = get_adapter(name)
    except UnknownAdapterError as exc:
        raise HarnessError(f"--runtime: {exc}") from None
    if not name.startswith("module:"):
        return
    try:
        module = importlib.import_module(adapter.module)
    except Exception as exc:  # whatever the user's module raises on import
        raise HarnessError(
            f"--runtime {name}: cannot import {adapter.module}: {type(exc).__name__}: {exc} "
            "(is its folder on PYTHONPATH?)"
        ) from None
    if not callable(getattr(module, "main", None)):
        raise HarnessError(
            f"--runtime {name}: {adapter.module} has no main(argv) -> int (the adapter "
            "contract, harness/adapters/__init__.py)"
        )


DEFAULT_TIMEOUT_S = 60.0
"""A trial's time limit, all its lives together, unless ``--timeout`` says otherwise."""
BLACK_BOX_TIMES = 5
"""A black box's trials may take this many times its crash-free run (a restart pays the
agent's start-up again), and never less than ``DEFAULT_TIMEOUT_S``."""


def add_timeout_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=None,
        metavar="SECONDS",
        help="a trial's time for each life its kills make (with two kills, three times this), "
        f"its lives sharing it (default: {DEFAULT_TIMEOUT_S:g}; for a black box, "
        f"{BLACK_BOX_TIMES} times its crash-free run, at least {DEFAULT_TIMEOUT_S:g})",
    )


def check_black_box(
    runtime: str, scenario: str, launch: str, timeout: float | None = None
) -> float:
    """A trial's time limit: ``timeout`` when given. A black box (``cmd:``) runs once,
    crash-free, before any trial (a command that does not start, exits at once or calls
    neither the model nor a tool is refused here), and its trials get ``BLACK_BOX_TIMES``
    the time that run took."""
    from harness.adapters import get_adapter

    if not get_adapter(runtime).black_box:
        return timeout or DEFAULT_TIMEOUT_S
    from harness.blackbox.preflight import PREFLIGHT_TIMEOUT_S, check_agent

    limit = timeout or PREFLIGHT_TIMEOUT_S
    if launch != "warm":
        took = check_agent(runtime, scenario, launch=launch, timeout_s=limit)
        return timeout or max(DEFAULT_TIMEOUT_S, BLACK_BOX_TIMES * took)
    from harness.adapters import get_adapter
    from harness.blackbox import AGENT_COMMAND_ENV, AGENT_HOME_ENV, resolve_command
    from harness.blackbox.warm import adopt

    env = get_adapter(runtime).env
    with tempfile.TemporaryDirectory(prefix="harness-warm-") as folder:
        record = Path(folder) / "imports.json"
        took = check_agent(runtime, scenario, launch=launch, timeout_s=limit, record=record)
        words = resolve_command(env[AGENT_COMMAND_ENV], env[AGENT_HOME_ENV])
        print(f"harness: {adopt(env[AGENT_COMMAND_ENV], words, record).line}", file=sys.stderr)
    return timeout or max(DEFAULT_TIMEOUT_S, BLACK_BOX_TIMES * took)


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def prog_name(argv0: str | None = None) -> str:
    """The name usage lines give: ``harness`` run as the console script (or whatever name
    it was installed under), ``python -m harness`` run as a module."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    name = Path(argv0).name
    if name in ("__main__.py", "-c", "-m", "") or name.endswith(".py"):
        return "python -m harness"
    return name


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def count(text: str) -> int:
    """An argparse type: a whole number of at least 0."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a count (0 or more)")
    return value


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def campaign_config(args: argparse.Namespace) -> CampaignConfig:
    """The campaign of ``chaos`` or ``compare`` from their options, in a new run folder."""
    paths = campaign_scenarios(args)  # refuses a bad one before anything runs
    args.runtime = scenario_runtime(args.runtime, paths)
    check_runtime(args.runtime)
    check_model(args.runtime, getattr(args, "model", None))
    shard = _shard(args)
    check_reports(args.reports)
    timeout = check_black_box(args.runtime, paths[0], args.launch, args.timeout)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big") >> 1
    run_dir = Path(args.reports).resolve() / run_id()
    run_dir.mkdir(parents=True)
    return CampaignConfig(
        run_dir,
        paths,
        seed,
        args.random_trials,
        args.workers,
        args.runtime,
        launch=args.launch,
        shard=shard,
        workdir=workdir(args),
        keep=args.keep,
        model=getattr(args, "model", None),
        whole=getattr(args, "whole", False),
        timeout_s=timeout,
        crash_states=getattr(args, "crash_states", 1),
        fs_model=getattr(args, "fs_model", "ordered"),
        pause_ms=getattr(args, "pause_ms", PAUSE_HOLD_MS),
    )


def run_info(config: CampaignConfig) -> RunInfo:
    """What the report writers are told of a campaign's run."""
    return RunInfo(config.run_dir, config.seed, config.runtime, config.scenarios, config.shard)
