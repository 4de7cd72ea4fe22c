"""The scoreboard page, written from what campaigns recorded, and the example agents it lists."""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.blackbox.scoreboard import (
    AGENTS,
    Agent,
    Outcome,
    PowerLoss,
    load_agents,
    main,
    newest,
    read_outcome,
    render,
    with_plain_time,
)
from harness.chaos.schedule import PAUSE_HOLD_MS

if TYPE_CHECKING:
    from harness.chaos.scenario import Scenario

SCRIPT_IMPORT = re.compile(r"""(?:\bfrom|\brequire\(|\bimport\(?)\s*['"]([^'"]+)['"]""")
"""What a TypeScript or JavaScript file imports: ``from "x"``, ``require("x")``, ``import("x")``."""
TAP_TWICE = "s003 (ui_tap, non_idempotent) ran 2 times in 2 lives"


def fake_run(folder: Path) -> Path:
    """A run folder as a campaign leaves it: two trials, one failed on I2 and I8."""
    folder.mkdir(parents=True)
    failed = {"trial": "t-kill", "invariants": ["I2", "I8"], "seed": 1, "replay": "replay t-kill"}
    summary = {
        "trials": 2,
        "failed": 1,
        "unknown": 0,
        "kills": 3,
        "duration_s": 12.5,
        "trials_file": "trials.jsonl",
        "invariants": {
            "I10": {"pass": 2, "fail": 0},
            "I2": {"pass": 1, "fail": 1},
            "I8": {"pass": 1, "fail": 1},
        },
        "failures": [failed],
        "unjudged": [],
        "complete": True,
        "started": "2026-12-06T20:00:00Z",
        "commit": "1158e5b0cafe",
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    verdicts = [
        {"invariant": "I2", "status": "fail", "evidence": [TAP_TWICE]},
        {"invariant": "I8", "status": "fail", "evidence": ["taps differ (ui_tap, x)"]},
    ]
    cut = [{"failpoints": "model.received@2=kill", "after_death": "power-loss:drop"}]
    kill = [{"failpoints": "op.reply@3=kill"}]
    lines = [
        {"trial": "t-kill", "status": "fail", "spec": {"schedule": cut}, "verdicts": verdicts},
        {
            "trial": "t-pass",
            "status": "pass",
            "spec": {"schedule": kill},
            "verdicts": [{"invariant": "I2", "status": "pass"}],
        },
    ]
    (folder / "trials.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def main_table(page: str) -> list[str]:
    """The lines of the page above its run times' table."""
    return page.split("## Run times", 1)[0].splitlines()


def test_a_run_is_read_from_its_own_files(tmp_path: Path) -> None:
    outcome = read_outcome(fake_run(tmp_path / "run"))
    assert (outcome.trials, outcome.failed, outcome.kills) == (2, 1, 3)
    assert outcome.by_invariant == {"I2": 1, "I8": 1}
    assert set(outcome.replayed) == {"ui_tap"}  # from I2's evidence, not I8's
    assert outcome.failures == [("t-kill", ["I2", "I8"], "replay t-kill")]
    assert outcome.power_loss == PowerLoss(1, 1, 0, ("t-kill",))  # from each trial's schedule


def test_the_page_lists_each_variant_and_every_replay(tmp_path: Path) -> None:
    bare = Agent("demo", "Demo", "demo", "1.0", "demo.db", "python demo.py", "python g.py")
    args = argparse.Namespace(random=20, seed=7, launch="warm")
    outcomes = {"demo": read_outcome(fake_run(tmp_path / "run")), "demo-guarded": None}
    page = render([bare], outcomes, args)
    rows = [line for line in main_table(page) if line.startswith("| `demo`")]
    assert rows[0].endswith("| bare | 2 | 1 | 0 | I2 1, I8 1 | `ui_tap` | 1 | 1 | 0 |")
    assert "| guarded | not run yet |" in rows[1]
    assert "# t-kill: I2 I8 (power loss)\nreplay t-kill" in page
    assert (
        "`FAIL: 2 trials, 1 failed, 0 could not be judged, 3 kills; power loss: 1 trials, "
        "1 failed, 0 could not be judged` in 12 s (plain start), 2026-12-06, commit 1158e5b."
        in page
    )


def test_a_record_from_before_black_boxes_lost_power_says_so(tmp_path: Path) -> None:
    """A ``measured.json`` written before power loss reached black boxes has no tally: its
    row says power loss was not run, never 0 trials."""
    recorded = read_outcome(fake_run(tmp_path / "run")).as_json()
    del recorded["power_loss"]
    older = Outcome.from_json(recorded)
    assert older.power_loss is None
    bare = Agent("demo", "Demo", "demo", "1.0", "demo.db", "python demo.py", None)
    page = render([bare], {"demo": older}, argparse.Namespace(random=20, seed=7, launch="warm"))
    (row,) = [line for line in main_table(page) if line.startswith("| `demo`")]
    assert row.endswith("| `ui_tap` | not run yet | | |")
    assert "power loss:" not in page.split("**demo**", 1)[1]


def test_what_a_run_found_is_kept_as_it_was_read(tmp_path: Path) -> None:
    """The committed record gives back the same figures, and the later of a record and a
    run stands: a run older than the record does not undo it."""
    run = fake_run(tmp_path / "run")
    outcome = read_outcome(run)
    kept = Outcome.from_json(json.loads(json.dumps(outcome.as_json())))
    assert kept == outcome
    assert newest(run, None) == outcome and newest(None, kept) is kept
    later = Outcome.from_json({**outcome.as_json(), "started": "2026-12-07T08:00:00Z"})
    assert newest(run, later) is later
    earlier = Outcome.from_json({**outcome.as_json(), "started": "2026-12-05T08:00:00Z"})
    assert newest(run, earlier) == outcome


def test_only_names_an_agent_or_one_of_its_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--only NAME`` or ``--only NAME-guarded``; anything else is refused in one line."""
    guarded = next(a for a in load_agents() if a.guarded)
    for only in (guarded.name, f"{guarded.name}-guarded"):
        out = tmp_path / f"{only}.md"
        args = ["--only", only, "--render", "--reports", str(tmp_path), "--out", str(out)]
        assert main(args) == 0
        assert f"**{guarded.name}-guarded**" in out.read_text("utf-8")
    with pytest.raises(SystemExit) as refused:
        main(["--only", f"{guarded.name}-bare", "--render", "--reports", str(tmp_path)])
    assert refused.value.code == 2
    assert f"--only {guarded.name}-bare: no examples/agents/" in capsys.readouterr().err


def test_every_example_agent_declares_what_the_scoreboard_needs() -> None:
    agents = load_agents()
    assert {a.name for a in agents} == {p.parent.name for p in AGENTS.glob("*/agent.toml")}
    assert "plain_python" in {a.name for a in agents}
    for agent in agents:
        for _label, command in agent.variants():
            assert f"examples/agents/{agent.name}/" in command, (agent.name, command)


def imported_modules(source: Path) -> set[str]:
    tree = ast.parse(source.read_text("utf-8"))
    return {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 0
    }


def test_no_example_agent_imports_this_project() -> None:
    """A black box knows nothing of the harness: only its guarded variant may import it."""
    sources = [p for p in AGENTS.glob("*/*.py") if p.name != "guarded.py"]
    sources += [p for p in AGENTS.glob("*/*.[tj]s") if not {"node_modules", "dist"} & set(p.parts)]
    assert any(p.name == "agent.py" for p in sources)
    for source in sources:
        if source.suffix == ".py":
            imported = imported_modules(source)
            assert imported, f"{source}: imports nothing, the check would test nothing"
            assert "harness" not in imported, source
        else:
            specs = SCRIPT_IMPORT.findall(source.read_text("utf-8"))
            assert specs, f"{source}: imports nothing, the check would test nothing"
            assert not [s for s in specs if "harness" in s or s.startswith("../")], source
    plain = imported_modules(AGENTS / "plain_python" / "agent.py")
    assert plain <= set(sys.stdlib_module_names) | {"__future__"}, plain


def test_an_agent_with_a_wire_has_a_proxy_guarded_run(tmp_path: Path) -> None:
    """``wire`` names how the wire guard stands in front of its tools: the third run is the
    same command behind it, labelled NAME-wire and listed as proxy-guarded."""
    stdio = Agent("demo", "Demo", "demo", "1.0", "demo.db", "python demo.py", None, wire="stdio")
    http = Agent("demo", "Demo", "demo", "1.0", "demo.db", "python demo.py", None, wire="http")
    assert stdio.variants()[1] == (
        "demo-wire",
        ".venv/bin/python -m harness.blackbox.wired -- python demo.py",
    )
    assert http.variants()[1][1] == (
        ".venv/bin/python -m harness.blackbox.wired --http -- python demo.py"
    )
    outcomes = {"demo": None, "demo-wire": read_outcome(fake_run(tmp_path / "run"))}
    page = render([stdio], outcomes, argparse.Namespace(random=20, seed=7, launch="warm"))
    rows = [line for line in main_table(page) if line.startswith("| `demo`")]
    assert "| bare | not run yet |" in rows[0]
    assert "| proxy-guarded | 2 | 1 | 0 | I2 1, I8 1 |" in rows[1]
    assert "**demo-wire**" in page
    assert [a.wire for a in load_agents() if a.name == "plain_python"] == ["stdio"]


def test_run_times_name_each_run_the_longest_and_the_total() -> None:
    """What the nightly workflow's last job prints: a shard's time is its agent's runs."""
    from collections import Counter

    from harness.blackbox.scoreboard import Outcome, run_times

    def outcome(seconds: float | None) -> Outcome:
        return Outcome(10, 0, 0, 10, {}, Counter(), [], seconds)

    printed = run_times(
        {"a": outcome(60), "a-guarded": outcome(120), "b": None, "c": outcome(None)}
    )
    assert "run times (2 runs of 4):" in printed
    assert "  a: 60 s" in printed and "  a-guarded: 120 s" in printed
    assert printed.endswith("in all 3.0 min, the longest a-guarded 2.0 min")
    assert run_times({"b": None}) == "run times: none measured"


class TestServices:
    """An agent.toml's ``[services.NAME]`` tables: the servers of the agent's system."""

    def demo(self, tmp_path: Path, services: str) -> Path:
        path = tmp_path / "agent.toml"
        path.write_text('command = "python demo.py"\n' + services, "utf-8")
        return path

    def campaign(self, tmp_path: Path, services: str) -> tuple[Agent, Scenario]:
        """The demo agent of these services, and its campaign's scenario as read back from
        its text, put as deep under tmp_path as examples/agents/NAME is under ROOT."""
        from harness.blackbox.scoreboard import read_services
        from harness.chaos.scenario import load_scenario

        path = self.demo(tmp_path, services)
        declared = read_services(path, tomllib.loads(path.read_text("utf-8")))
        agent = Agent("demo", "Demo", "demo", "1.0", "x", "python demo.py", None, services=declared)
        deep = tmp_path / "a" / "b" / "c"
        deep.mkdir(parents=True)
        (deep / "phone_task.toml").write_text(agent.scenario_text(), "utf-8")
        return agent, load_scenario(str(deep / "phone_task.toml"))

    def test_services_reach_the_campaign_as_the_scenario_s_agent_table(
        self, tmp_path: Path
    ) -> None:
        """Its campaign's scenario is the shipped one with an [agent] table declaring them,
        each run from the project's root."""
        from harness.blackbox.scoreboard import ROOT
        from harness.chaos.scenario import load_scenario

        agent, loaded = self.campaign(
            tmp_path,
            '[services.engine]\ncommand = "bin/engine --port {port} --data {data}"\n'
            'port_env = "ENGINE_PORT"\nready = "http:/health"\nenv = { MODE = "dev" }\n',
        )
        assert agent.scenario == AGENTS / "demo" / "phone_task.toml"
        shipped = load_scenario(str(ROOT / "scenarios" / "phone_task.toml"))
        assert loaded.name == "phone_task" and loaded.calls == shipped.calls
        (service,) = loaded.services
        assert (service.name, service.port_env, service.ready) == (
            "engine",
            "ENGINE_PORT",
            "http:/health",
        )
        assert service.home == str(tmp_path) and dict(service.env) == {"MODE": "dev"}

    def test_an_agent_without_services_runs_the_shipped_scenario(self) -> None:
        from harness.blackbox.scoreboard import write_scenario

        plain = next(a for a in load_agents() if a.name == "plain_python")
        assert plain.scenario is None and write_scenario(plain) == []

    @pytest.mark.parametrize(
        ("table", "said"),
        [
            ('[services.db]\ncommand = "db"\nready = "udp"\n', "services.db.ready: 'udp' is"),
            ('[services.db]\ncommand = "db"\nport = 5\n', "services.db.port: unknown key"),
            ('[services.db]\nready = "tcp"\n', "services.db.command: required, but missing"),
            ('[services.db]\ncommand = "db --at {host}"\n', "unknown placeholder {host}"),
            ('[services.Db]\ncommand = "db"\n', "services.Db: a service's name is lower-case"),
            ('[services.db]\ncommand = "db"\nport_env = "HARNESS_X"\n', "the harness's to set"),
            ('services = "db"\n', "services: a table of [services.NAME] tables"),
        ],
    )
    def test_a_bad_service_is_refused_in_one_line(
        self, tmp_path: Path, table: str, said: str
    ) -> None:
        """The file, the dotted field and the problem, exit 2, as a scenario's are."""
        from harness.blackbox.scoreboard import read_services

        path = self.demo(tmp_path, table)
        with pytest.raises(SystemExit) as refused:
            read_services(path, tomllib.loads(path.read_text("utf-8")))
        message = str(refused.value.code)
        assert message.startswith(f"{path}: ") and said in message, message
        assert "\n" not in message

    def test_the_committed_scenario_of_each_agent_with_services_is_current(self) -> None:
        """Its replay commands name that file: it must say what the campaign ran."""
        with_services = [a for a in load_agents() if a.services]
        assert "temporal" in {a.name for a in with_services}
        for agent in with_services:
            assert agent.scenario is not None
            assert agent.scenario.read_text("utf-8") == agent.scenario_text(), agent.name

    def test_named_ports_reach_the_campaign(self, tmp_path: Path) -> None:
        """A service's ``ports`` (a list) is written as TOML's list and read back."""
        _, loaded = self.campaign(
            tmp_path,
            '[services.engine]\ncommand = "bin/engine {port} {port.ingress}"\n'
            'ports = ["ingress", "endpoint"]\n',
        )
        (service,) = loaded.services
        assert service.ports == ("ingress", "endpoint")

    def test_an_agent_with_python_and_node_pins_is_built_only_with_both(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A Python agent beside a server from npm needs both environments built."""
        import harness.blackbox.scoreboard as scoreboard

        monkeypatch.setattr(scoreboard, "AGENTS", tmp_path)
        folder = tmp_path / "engine"
        (folder / ".venv").mkdir(parents=True)
        (folder / "node_modules").mkdir()
        (folder / "requirements.txt").write_text("x==1\n")
        (folder / "package.json").write_text("{}\n")
        agent = Agent("engine", "E", "e", "1", "x", "python agent.py", None)
        (folder / ".venv" / ".installed").touch()
        assert not agent.built
        (folder / "node_modules" / ".installed").touch()
        assert agent.built


WARM = (
    "warm start: each life forks from a zygote that imported 1985 modules (1.78 s, once per worker)"
)


def test_a_warm_run_keeps_the_plain_time_it_replaced(tmp_path: Path) -> None:
    """A warm run's figures replace a plain run's and keep its time as the plain figure
    (and a later warm run keeps it again); the page sets the two side by side."""
    run = fake_run(tmp_path / "run")
    plain = Outcome.from_json({**read_outcome(run).as_json(), "seconds": 100.0})
    (tmp_path / "run.launch").write_text(WARM + "\n")
    warm = read_outcome(run)
    assert warm.warm and warm.launch == WARM
    found = with_plain_time(warm, plain)
    assert found is not None and (found.plain_seconds, found.plain_trials) == (100.0, 2)
    again = with_plain_time(warm, found)
    assert again is not None and (again.plain_seconds, again.plain_trials) == (100.0, 2)
    assert with_plain_time(plain, found) is plain  # a plain run is its own plain time
    kept = Outcome.from_json(json.loads(json.dumps(found.as_json())))
    assert kept == found
    bare = Agent("demo", "Demo", "demo", "1.0", "demo.db", "python demo.py", None)
    page = render([bare], {"demo": found}, argparse.Namespace(random=20, seed=7, launch="warm"))
    assert "| `demo` | warm | 12 s | 2 | 100 s | 2 | 8.0x |" in page
    assert "in 12 s (warm start), 2026-12-06" in page
    assert "--launch warm`" in page


def test_a_refused_warm_start_is_said_and_its_time_is_plain(tmp_path: Path) -> None:
    """Where the warm start refused, the run's lives started plain: the page says why, and
    its time is a plain time."""
    run = fake_run(tmp_path / "run")
    refused = "warm start refused: node is not a Python interpreter; plain start"
    (tmp_path / "run.launch").write_text(refused + "\n")
    outcome = read_outcome(run)
    assert not outcome.warm
    bare = Agent("demo", "Demo", "demo", "1.0", "demo.db", "node demo.js", None)
    page = render([bare], {"demo": outcome}, argparse.Namespace(random=20, seed=7, launch="warm"))
    assert f"Its lives started plain: `{refused}`." in page
    assert "| `demo` | plain | 12 s | 2 | 12 s | 2 | warm refused |" in page


UNSEEN = (
    "its service engine cannot be observed: bin/engine is statically linked: no loader "
    "preloads the observer's library into it"
)


def test_a_power_loss_not_applicable_is_said_where_its_figures_would_be(tmp_path: Path) -> None:
    """A campaign that planned no cut (``not_applicable`` in its summary) gives its reason in
    the power-loss columns and its verdict line, kept as read, never 0 trials."""
    run = fake_run(tmp_path / "run")
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(
        json.dumps({**summary, "not_applicable": {"power-loss": UNSEEN}})
    )
    (run / "trials.jsonl").write_text(
        (run / "trials.jsonl").read_text().replace('"after_death": "power-loss:drop"', '"x": 1')
    )
    outcome = read_outcome(run)
    assert outcome.power_loss == PowerLoss(0, 0, 0, (), UNSEEN)
    assert Outcome.from_json(json.loads(json.dumps(outcome.as_json()))) == outcome
    bare = Agent("demo", "Demo", "demo", "1.0", "demo.db", "python demo.py", None)
    page = render([bare], {"demo": outcome}, argparse.Namespace(random=20, seed=7, launch="warm"))
    (row,) = [line for line in main_table(page) if line.startswith("| `demo`")]
    assert row.endswith(f"| `ui_tap` | not applicable: {UNSEEN} | | |")
    assert f"3 kills; power loss: not applicable: {UNSEEN}`" in page


class TestPause:
    """An agent.toml's ``pause_ms``: how long its campaign's pauses hold it stopped."""

    def agents(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str) -> list[Agent]:
        import harness.blackbox.scoreboard as scoreboard

        monkeypatch.setattr(scoreboard, "AGENTS", tmp_path)
        folder = tmp_path / "engine"
        folder.mkdir(parents=True)
        fields = "".join(f'{name} = "x"\n' for name in scoreboard.FIELDS)
        (folder / "agent.toml").write_text(fields + extra, "utf-8")
        return load_agents()

    def test_it_reaches_the_campaign_and_the_page(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given as ``--pause-ms``; the agent's section says how long; without it, the default."""
        import subprocess

        import harness.blackbox.scoreboard as scoreboard

        (agent,) = self.agents(tmp_path, monkeypatch, "pause_ms = 15000\n")
        assert agent.pause_ms == 15000
        ran: list[list[str]] = []

        def run(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
            ran.append(argv)
            return subprocess.CompletedProcess(argv, 1, "", "")

        monkeypatch.setattr(subprocess, "run", run)
        args = argparse.Namespace(
            reports=tmp_path / "reports", launch="warm", random=20, seed=7, workers=2
        )
        scoreboard.run_campaign("engine", "x", args, pause_ms=agent.pause_ms)
        (argv,) = ran
        assert argv[argv.index("--pause-ms") + 1] == "15000"
        page = render([agent], {}, args)
        assert "Its pauses hold 15000 ms (`--pause-ms 15000`)." in page
        (plain,) = self.agents(tmp_path / "other", monkeypatch, "")
        assert plain.pause_ms == PAUSE_HOLD_MS
        assert "Its pauses hold" not in render([plain], {}, args)

    @pytest.mark.parametrize("value", ['"15s"', "0", "-5", "true", "1.5"])
    def test_a_bad_one_is_refused_in_one_line(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
    ) -> None:
        with pytest.raises(SystemExit) as refused:
            self.agents(tmp_path, monkeypatch, f"pause_ms = {value}\n")
        message = str(refused.value.code)
        where = tmp_path / "engine" / "agent.toml"
        assert message.startswith(f"{where}: pause_ms: "), message
        assert "is not a whole number of milliseconds" in message and "\n" not in message

    def test_the_engines_hold_past_their_timeouts(self) -> None:
        """Temporal's activities time out after 10 s (start to close); Restate's server asks
        a silent handler to suspend after its inactivity timeout, 1 min by default."""
        holds = {a.name: a.pause_ms for a in load_agents()}
        assert holds["temporal"] > 10_000
        assert holds["restate"] > 60_000
