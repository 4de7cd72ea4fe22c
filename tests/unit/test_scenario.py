"""Scenario loading, validation and compilation, and the harness's error module.

The shipped scenarios are checked as a set (every catalog tool used, every
revealable effect checked); the malformed corpus in ``tests/data/bad_scenarios``
is checked file by file for the step and field its ``ScenarioError`` names.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import harness.errors
import harness.runtime.errors
from harness.agent.plan import load_plan, plan_to_json
from harness.chaos.scenario import (
    MAX_STEPS,
    BatchStep,
    FakerRecipe,
    Scenario,
    compile_plan,
    generated_scenario,
    load_scenario,
    load_scenarios,
    parse_scenario,
    write_plan,
)
from harness.commands.options import scenario_runtime
from harness.errors import HarnessError, ScenarioError
from harness.runtime.classes import IdempotencyClass, ToolTable
from harness.world.catalog import CATALOG

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
BAD = ROOT / "tests" / "data" / "bad_scenarios"
SHIPPED = sorted(SCENARIOS.glob("*.toml"))
TABLE = ToolTable.shipped()

# Effects that no read-only tool can see: GitHub is outside the simulated
# device, and UNKNOWN-class tools only record their call.
UNREVEALABLE = frozenset({"github_write_file"}) | {
    t for t in CATALOG if TABLE.classify(t).idempotency is IdempotencyClass.UNKNOWN
}


def scenario_text(*steps: str, name: str = "inline") -> str:
    """A scenario file's text with a name, a description and the given step tables."""
    body = "\n".join(f"[[steps]]\n{step}\n" for step in steps)
    return f'name = "{name}"\ndescription = "built in a test"\n\n{body}'


def refusal(text: str) -> ScenarioError:
    """The error that refusing ``text`` raises."""
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, source="inline.toml")
    return caught.value


def uses_faker(scenario: Scenario) -> bool:
    return any(isinstance(v, FakerRecipe) for c in scenario.calls for v in c.spec.args.values())


class TestShippedScenarios:
    @pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
    def test_loads_and_compiles(self, path: Path) -> None:
        """Every shipped scenario loads, compiles, and has 5 to 12 steps (a round of them,
        for one that repeats them: its plan has them that many times; the task drawn from
        its seed, for one that generates its task)."""
        scenario = load_scenario(path)
        plan = compile_plan(scenario, seed=1, source=str(path))
        assert scenario.name == path.stem
        assert 5 <= len(plan.steps) // scenario.repeat <= 12
        task = scenario if scenario.generate is None else generated_scenario(scenario, 1)
        assert len(plan.steps) == len(task.calls)

    def test_at_least_six(self) -> None:
        """At least six scenarios ship, including the phone task and the browser form."""
        names = {p.stem for p in SHIPPED}
        assert len(names) >= 6
        assert {"phone_task", "browser_form"} <= names

    def test_every_catalog_tool_is_used(self) -> None:
        """Between them, the shipped scenarios call every tool of the catalog (besides the
        tools some of them declare)."""
        scenarios = load_scenarios(SCENARIOS)
        used = {call.spec.tool for s in scenarios for call in s.calls}
        declared = {name for s in scenarios for name in s.declared_tools}
        assert used - declared == set(CATALOG)

    def test_revealable_effects_are_checked(self) -> None:
        """Every step that changes what a read-only tool can see carries a verify."""
        for scenario in load_scenarios(SCENARIOS):
            for call in scenario.calls:
                step, index = call.spec, call.op_id
                tool_class = TABLE.classify(step.tool)
                changes = not tool_class.ask_user and tool_class.idempotency in (
                    IdempotencyClass.IDEMPOTENT_WRITE,
                    IdempotencyClass.NON_IDEMPOTENT,
                )
                if changes and step.tool not in UNREVEALABLE:
                    assert step.verify is not None, f"{scenario.name} {index}"
                if step.tool in UNREVEALABLE:
                    assert step.verify is None, f"{scenario.name} {index}"

    def test_non_idempotent_steps_in_the_middle(self) -> None:
        """The phone task and the browser form have non-idempotent steps between others."""
        for name in ("phone_task", "browser_form"):
            steps = [c.spec for c in load_scenario(SCENARIOS / f"{name}.toml").calls]
            middle = steps[1:-1]
            assert any(
                TABLE.classify(s.tool).idempotency is IdempotencyClass.NON_IDEMPOTENT
                for s in middle
            )

    def test_transient_failure_on_a_retry_safe_tool(self) -> None:
        """Some step asks for a transient failure on a read-only or idempotent tool."""
        steps = [c.spec for sc in load_scenarios(SCENARIOS) for c in sc.calls]
        assert any(
            s.args.get("fail_attempts", 0) >= 1 and TABLE.classify(s.tool).retry_safe for s in steps
        )

    def test_a_step_fails_deterministically(self) -> None:
        """Some scenario uninstalls a package that no earlier step installed."""
        found = []
        for scenario in load_scenarios(SCENARIOS):
            installed: set[str] = set()
            for step in (call.spec for call in scenario.calls):
                if step.tool == "app_install":
                    installed.add(step.args["package"])
                if step.tool == "app_uninstall" and step.args["package"] not in installed:
                    found.append(scenario.name)
        assert found

    def test_containment_examples(self) -> None:
        """One scenario asks for ``rm -rf /`` and a write to ``/etc/passwd``."""
        calls = [
            (c.spec.tool, dict(c.spec.args)) for sc in load_scenarios(SCENARIOS) for c in sc.calls
        ]
        assert ("shell_execute", {"command": "rm -rf /"}) in calls
        assert any(tool == "write_file" and a["path"] == "/etc/passwd" for tool, a in calls)

    def test_load_scenarios_sorted_by_name(self) -> None:
        """A directory loads into scenarios sorted by name, each knowing its file."""
        scenarios = load_scenarios(SCENARIOS)
        assert [s.name for s in scenarios] == sorted(p.stem for p in SHIPPED)
        assert all(Path(s.source).name == f"{s.name}.toml" for s in scenarios)


class TestCompile:
    @pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
    def test_same_seed_same_plan(self, path: Path) -> None:
        """Compiling twice with one seed gives byte-identical plans."""
        scenario = load_scenario(path)
        first = compile_plan(scenario, seed=42, source=str(path))
        again = compile_plan(load_scenario(path), seed=42, source=str(path))
        assert plan_to_json(first) == plan_to_json(again)

    @pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
    def test_seeds_differ_where_faker_is_used(self, path: Path) -> None:
        """Two seeds give different plans exactly when the scenario uses Faker or draws its
        task from its seed."""
        scenario = load_scenario(path)
        one = compile_plan(scenario, seed=1, source="s")
        two = compile_plan(scenario, seed=2, source="s")
        drawn = scenario.generate is not None
        assert (one.steps != two.steps) == (uses_faker(scenario) or drawn)

    def test_faker_is_used_somewhere(self) -> None:
        """At least one shipped scenario draws values from Faker."""
        assert any(uses_faker(s) for s in load_scenarios(SCENARIOS))

    def test_plan_shape(self) -> None:
        """Op ids count s001 upward, and the plan carries scenario, seed and source."""
        scenario = load_scenario(SCENARIOS / "phone_task.toml")
        plan = compile_plan(scenario, seed=7, source="scenarios/phone_task.toml")
        assert (plan.scenario, plan.seed, plan.source) == (
            "phone_task",
            7,
            "scenarios/phone_task.toml",
        )
        assert [s.op_id for s in plan.steps] == [f"s{i:03d}" for i in range(1, len(plan.steps) + 1)]
        assert [s.index for s in plan.steps] == list(range(1, len(plan.steps) + 1))

    def test_templates_filled_from_resolved_args(self) -> None:
        """A check's templates take the step's drawn values, in args and expectations."""
        text = scenario_text(
            'tool = "write_file"\n'
            'args = { path = "/tmp/a.txt", content = { faker = "sentence" } }\n'
            '[steps.verify]\ntool = "read_file"\nargs = { path = "{path}" }\n'
            'path = "content"\nequals = "{content}"'
        )
        step = compile_plan(parse_scenario(text, source="t"), seed=3, source="t").steps[0]
        assert step.verify is not None
        assert isinstance(step.args["content"], str)
        assert step.verify.args == {"path": "/tmp/a.txt"}
        assert step.verify.equals == step.args["content"]
        assert step.verify.holds({"path": "/tmp/a.txt", "exists": True, **step.args})

    def test_doubled_braces_are_literal(self) -> None:
        """``{{`` and ``}}`` in a check stand for literal braces."""
        text = scenario_text(
            'tool = "terminal_send"\nargs = { text = "echo hi" }\n[steps.verify]\n'
            'tool = "logcat"\nargs = { tag = "Terminal" }\npath = "lines"\n'
            'contains = "{{$}} {text}"'
        )
        plan = compile_plan(parse_scenario(text, source="t"), seed=0, source="t")
        assert plan.steps[0].verify is not None
        assert plan.steps[0].verify.contains == "{$} echo hi"

    def test_argument_order_does_not_change_draws(self) -> None:
        """Reordering a step's keys in the file leaves the drawn values unchanged."""
        ab = 'tool = "alarm"\nargs = { time = { faker = "time" }, label = { faker = "word" } }'
        ba = 'tool = "alarm"\nargs = { label = { faker = "word" }, time = { faker = "time" } }'
        one = compile_plan(parse_scenario(scenario_text(ab), source="t"), seed=5, source="t")
        two = compile_plan(parse_scenario(scenario_text(ba), source="t"), seed=5, source="t")
        assert dict(one.steps[0].args) == dict(two.steps[0].args)

    def test_list_provider_fills_a_list_argument(self) -> None:
        """``words`` produces an array, so it may fill a list argument."""
        text = scenario_text(
            'tool = "ask_user_choice"\n'
            'args = { question = "Pick one", options = { faker = "words", nb = 3 } }'
        )
        plan = compile_plan(parse_scenario(text, source="t"), seed=1, source="t")
        options = plan.steps[0].args["options"]
        assert isinstance(options, list)
        assert len(options) == 3

    def test_plan_independent_of_process(self, tmp_path: Path) -> None:
        """A plan depends on its seed alone, not on the hash seed or the time zone."""
        code = (
            "import sys\n"
            "from harness.chaos.scenario import compile_plan, load_scenario\n"
            "from harness.agent.plan import plan_to_json\n"
            "s = load_scenario(sys.argv[1])\n"
            "sys.stdout.write(plan_to_json(compile_plan(s, seed=11, source='x')))\n"
        )
        outputs = set()
        for hash_seed, zone in (("1", "UTC"), ("2", "Asia/Tokyo"), ("3", "America/New_York")):
            env = {**os.environ, "PYTHONHASHSEED": hash_seed, "TZ": zone}
            done = subprocess.run(
                [sys.executable, "-c", code, str(SCENARIOS / "phone_task.toml")],
                env=env,
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            )
            outputs.add(done.stdout)
        assert len(outputs) == 1

    def test_write_plan_round_trips(self, tmp_path: Path) -> None:
        """A written plan reads back equal, and no temporary file is left behind."""
        scenario = load_scenario(SCENARIOS / "browser_form.toml")
        plan = compile_plan(scenario, seed=9, source=scenario.source)
        write_plan(plan, tmp_path / "plan.json")
        assert load_plan(tmp_path / "plan.json") == plan
        assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]

    def test_seed_must_be_an_int(self) -> None:
        """A seed that is not an int is refused before anything is drawn."""
        scenario = load_scenario(SCENARIOS / "phone_task.toml")
        with pytest.raises(TypeError):
            compile_plan(scenario, seed=True, source="x")


# file name -> (step, field, a fragment of the problem)
BAD_CASES: dict[str, tuple[int | None, str | None, str]] = {
    "agent_bad_command.toml": (None, "agent.command", "No closing quotation"),
    "agent_harness_env.toml": (None, "agent.env.OPENAI_BASE_URL", "the harness's to set"),
    "agent_no_folder.toml": (None, "agent.folder", "no such folder"),
    "agent_unknown_key.toml": (None, "agent.cwd", "allowed: command, folder, env"),
    "agent_service_bad_ready.toml": (None, "agent.services.kv.ready", "neither tcp nor http"),
    "agent_service_harness_port.toml": (
        None,
        "agent.services.kv.port_env",
        "'HARNESS_KV' is the harness's to set",
    ),
    "agent_service_placeholder.toml": (
        None,
        "agent.services.kv.command",
        "unknown placeholder {prt}",
    ),
    "agent_service_same_port.toml": (
        None,
        "agent.services.db.port_env",
        "KV_PORT is also the port of kv",
    ),
    "agent_service_unknown_key.toml": (
        None,
        "agent.services.kv.redy",
        "did you mean 'ready'",
    ),
    "ambiguous_checks.toml": (3, "verify", "step 1"),
    "batch_ambiguous_checks.toml": (1, "verify", "what step 1, call 1 checks"),
    "batch_and_call.toml": (1, "tool", "one call (tool, args, verify) or a batch"),
    "batch_of_one.toml": (1, "batch", "1 call; a batch has 2 to 8"),
    "batch_unknown_key.toml": (1, "verfy", "did you mean 'verify'"),
    "batch_unknown_tool.toml": (2, "tool", "did you mean 'input_text'"),
    "bad_faker_keyword.toml": (1, "args.text.nb_word", "did you mean 'nb_words'"),
    "bad_name.toml": (None, "name", "identifier-like"),
    "bad_toml_syntax.toml": (None, None, "line 5, column 7"),
    "declared_builtin_name.toml": (None, None, "tool 'read_file': read_file is a built-in tool"),
    "declared_delete_without_missing.toml": (None, "missing", "tool 'cancel_subscription'"),
    "declared_duplicate_tool.toml": (None, None, "tool 'charge_card': declared twice"),
    "declared_unknown_arg_type.toml": (None, "args.amount", "tool 'refund'"),
    "declared_unknown_behaviour.toml": (None, "behaviour", "tool 'charge_card'"),
    "declared_verify_no_read.toml": (None, "verify.tool", "a check must not change the world"),
    "declared_verify_wrong_collection.toml": (None, "verify.tool", "tool 'create_ticket'"),
    "declared_wrong_arg_type.toml": (1, "args.amount", "tool 'charge_card', field 'args.amount'"),
    "empty_steps.toml": (None, "steps", "at least one step"),
    "faker_wrong_type.toml": (1, "args.text", "'pyint' produces an integer"),
    "missing_name.toml": (None, "name", "missing"),
    "missing_required_arg.toml": (3, "args.content", "missing"),
    "not_utf8.toml": (None, None, "not UTF-8"),
    "toml_time_arg.toml": (1, "args.time", "TOML date/time"),
    "too_many_steps.toml": (None, "steps", f"at most {MAX_STEPS}"),
    "unknown_arg.toml": (1, "args.version", "no argument 'version'"),
    "unknown_faker_provider.toml": (2, "args.text.faker", "'credit_card_number' is not allowed"),
    "unknown_identity.toml": (None, "identity", "did you mean 'content'"),
    "unknown_model.toml": (None, "model", "did you mean 'reissue'"),
    "unknown_step_key.toml": (2, "verfy", "did you mean 'verify'"),
    "unknown_tool.toml": (2, "tool", "did you mean 'app_install'"),
    "verify_ask_user.toml": (1, "verify.tool", "not a read-only tool"),
    "verify_bad_args.toml": (1, "verify.args.path", "missing"),
    "verify_bad_path.toml": (1, "verify.path", "no 'submissions'"),
    "verify_contains_and_equals.toml": (1, "verify", "both 'contains' and 'equals'"),
    "verify_neither.toml": (1, "verify", "neither 'contains' nor 'equals'"),
    "verify_not_read_only.toml": (2, "verify.tool", "write_file is idempotent_write"),
    "verify_unknown_template.toml": (1, "verify.contains", "{form}"),
    "wrong_arg_type.toml": (2, "args.text", "expected a string, got a number (42)"),
}


BAD_CALLS = {
    "batch_ambiguous_checks.toml": 2,
    "batch_unknown_key.toml": 1,
    "batch_unknown_tool.toml": 2,
}
"""The call of a batch each malformed file's error names (the others name none)."""


class TestMalformedCorpus:
    def test_every_bad_file_has_an_expectation(self) -> None:
        """Each file of the malformed corpus is listed with the error it must raise."""
        assert sorted(p.name for p in BAD.glob("*.toml")) == sorted(BAD_CASES)

    @pytest.mark.parametrize("name", sorted(BAD_CASES))
    def test_refused_with_step_and_field(self, name: str) -> None:
        """A malformed file is refused with an error naming it, its step and its field."""
        step, field, fragment = BAD_CASES[name]
        path = BAD / name
        with pytest.raises(ScenarioError) as caught:
            load_scenario(path)
        error = caught.value
        message = str(error)
        assert (error.path, error.step, error.field) == (str(path), step, field)
        assert error.call == BAD_CALLS.get(name)
        if error.call is not None:
            assert f"step {step}, call {error.call}" in message
        assert message.startswith(f"{path}: ")
        assert fragment in message
        if step is not None:
            assert f"step {step}" in message
        if field is not None:
            assert f"field {field!r}" in message


def with_agent(table: str) -> str:
    """A scenario of one step, carrying ``table`` (an ``[agent]`` table's text)."""
    return f'name = "mine"\ndescription = "d"\n\n{table}\n[[steps]]\ntool = "ui_dump"\n'


class TestAgentTable:
    def test_names_the_black_box_runtime_with_everything_that_runs(self, tmp_path: Path) -> None:
        """The command's relative paths from the agent's folder (the scenario's own, by
        default), its variables after ``env``: the runtime says all that runs."""
        (tmp_path / "bot").mkdir()
        (tmp_path / "bot" / "agent.py").touch()
        table = '[agent]\ncommand = "python agent.py --fast"\nfolder = "bot"\n'
        text = with_agent(table + 'env = { MODE = "a b" }\n')
        source = str(tmp_path / "s.toml")
        runtime = parse_scenario(text, source=source).agent_runtime
        assert runtime == f"cmd:env 'MODE=a b' python {tmp_path}/bot/agent.py --fast"
        plain = parse_scenario(scenario_text('tool = "ui_dump"'), source=source)
        assert plain.agent_runtime is None

    def test_without_a_folder_paths_are_the_scenario_s(self, tmp_path: Path) -> None:
        (tmp_path / "agent.py").touch()
        text = with_agent('[agent]\ncommand = "python3 agent.py"\n')
        scenario = parse_scenario(text, source=str(tmp_path / "s.toml"))
        assert scenario.agent_runtime == f"cmd:python3 {tmp_path}/agent.py"

    def test_the_runtime_of_a_command_is_the_scenarios_agent_or_real(self, tmp_path: Path) -> None:
        """No --runtime: the scenarios' one agent, else real; --runtime agent needs one;
        scenarios naming different agents, or one and none, are run apart."""
        files = {}
        for name, table in (
            ("a", 'command = "a"'),
            ("a2", 'command = "a"'),
            ("b", 'command = "b"'),
        ):
            files[name] = tmp_path / f"{name}.toml"
            files[name].write_text(with_agent(f"[agent]\n{table}\n"))
        files["none"] = tmp_path / "none.toml"
        files["none"].write_text(scenario_text('tool = "ui_dump"'))
        a, a2, b, none = (str(files[n]) for n in ("a", "a2", "b", "none"))
        assert scenario_runtime(None, [a, a2]) == scenario_runtime("agent", [a]) == "cmd:a"
        assert scenario_runtime(None, [none]) == "real"
        assert scenario_runtime("dbos", [a]) == "dbos"
        with pytest.raises(HarnessError, match=f"--runtime agent: {none} has no \\[agent\\]"):
            scenario_runtime("agent", [none])
        with pytest.raises(HarnessError, match=f"{a} and {b} name different agents"):
            scenario_runtime(None, [a, b])
        with pytest.raises(HarnessError, match=f"{none} has no \\[agent\\] table and {a} has"):
            scenario_runtime(None, [a, none])


class TestModelAndIdentity:
    def test_scripted_by_id_unless_the_scenario_says(self) -> None:
        """A scenario without ``model`` or ``identity`` compiles to the scripted model by id."""
        plan = compile_plan(
            parse_scenario(scenario_text('tool = "ui_dump"'), source="s"), seed=1, source="s"
        )
        assert (plan.model, plan.identity) == ("scripted", "id")

    def test_the_plan_carries_the_scenarios_model_and_identity(self) -> None:
        """``model = "reissue"`` and ``identity = "content"`` reach the plan and its file."""
        text = 'model = "reissue"\nidentity = "content"\n' + scenario_text('tool = "ui_dump"')
        plan = compile_plan(parse_scenario(text, source="s"), seed=1, source="s")
        assert (plan.model, plan.identity) == ("reissue", "content")
        data = json.loads(plan_to_json(plan))
        assert (data["model"], data["identity"]) == ("reissue", "content")

    def test_a_plan_file_without_them_reads_as_scripted_by_id(self, tmp_path: Path) -> None:
        """A plan written before the keys existed loads as the scripted model by id."""
        plan = compile_plan(load_scenario(SCENARIOS / "phone_task.toml"), seed=1, source="s")
        data = json.loads(plan_to_json(plan))
        del data["model"], data["identity"]
        (tmp_path / "plan.json").write_text(json.dumps(data))
        loaded = load_plan(tmp_path / "plan.json")
        assert (loaded.model, loaded.identity) == ("scripted", "id")
        assert loaded.steps == plan.steps

    def test_the_shipped_reissue_scenario_opts_in_to_both(self) -> None:
        """``reissue_calls`` and ``long_task`` run the re-issuing model on identity by content,
        two identical taps in a row among their steps, ``replan_calls`` the re-planning
        model on it and ``drift_payments`` the drifting one; no other shipped scenario
        changes the default."""
        chosen = {s.name: (s.model, s.identity) for s in load_scenarios(SCENARIOS)}
        assert chosen.pop("reissue_calls") == ("reissue", "content")
        assert chosen.pop("long_task") == ("reissue", "content")
        assert chosen.pop("replan_calls") == ("replan", "content")
        assert chosen.pop("drift_payments") == ("drift", "content")
        assert set(chosen.values()) == {("scripted", "id")}
        for name in ("reissue_calls", "long_task"):
            steps = [c.spec for c in load_scenario(SCENARIOS / f"{name}.toml").calls]
            assert any(a.tool == b.tool and a.args == b.args for a, b in itertools.pairwise(steps))

    @pytest.mark.parametrize(
        ("line", "field", "fragment"),
        [
            ('model = "gpt"', "model", "unknown model 'gpt'; known: scripted, reissue, replan"),
            ("model = 3", "model", "got a number (3)"),
            ('identity = "name"', "identity", "unknown identity 'name'; known: id, content"),
            ("identity = true", "identity", "got a boolean (true)"),
        ],
    )
    def test_a_bad_model_or_identity_is_refused(self, line: str, field: str, fragment: str) -> None:
        """An unknown or mistyped ``model`` or ``identity`` is refused, naming the field."""
        error = refusal(f"{line}\n" + scenario_text('tool = "ui_dump"'))
        assert (error.step, error.field) == (None, field)
        assert fragment in str(error)


class TestBatchDriver:
    """``batch_driver`` and ``duplicate_delivery``: validated, and carried in the plan."""

    BATCH = (
        '[[steps.batch]]\ntool = "ui_dump"\n'
        '[[steps.batch]]\ntool = "app_install"\nargs = { package = "p" }'
    )

    def test_async_without_duplicates_by_default(self) -> None:
        """A scenario without the keys runs its batches on the event loop, each call once,
        and its plan file leaves both out."""
        plan = compile_plan(
            parse_scenario(scenario_text(self.BATCH), source="s"), seed=1, source="s"
        )
        assert (plan.batch_driver, plan.duplicate_delivery) == ("async", False)
        assert not any(step.duplicate for step in plan.steps)
        data = json.loads(plan_to_json(plan))
        assert "batch_driver" not in data and "duplicate_delivery" not in data

    def test_threads_with_duplicates_mark_the_writing_calls(self, tmp_path: Path) -> None:
        """Under ``duplicate_delivery`` each batch call that is not read-only is marked to be
        delivered twice, and the plan file carries the driver and the marks."""
        text = 'batch_driver = "threads"\nduplicate_delivery = true\n' + scenario_text(
            self.BATCH, 'tool = "ui_tap"\nargs = { element = "e" }'
        )
        plan = compile_plan(parse_scenario(text, source="s"), seed=1, source="s")
        assert [(s.op_id, s.duplicate) for s in plan.steps] == [
            ("s001a", False),
            ("s001b", True),
            ("s002", False),  # a step of one call is never delivered twice
        ]
        (tmp_path / "plan.json").write_text(plan_to_json(plan))
        loaded = load_plan(tmp_path / "plan.json")
        assert (loaded.batch_driver, loaded.duplicate_delivery) == ("threads", True)
        assert loaded.steps == plan.steps

    def test_the_shipped_threaded_scenario_uses_both(self) -> None:
        """``threaded_service`` runs on threads with duplicates, and each of its batches has
        an unsafe call, an idempotent write and a read."""
        scenario = load_scenario(SCENARIOS / "threaded_service.toml")
        assert (scenario.batch_driver, scenario.duplicate_delivery) == ("threads", True)
        for step in scenario.steps:
            if isinstance(step, BatchStep):
                kinds = {TABLE.classify(call.tool).idempotency for call in step.batch}
                assert {
                    IdempotencyClass.NON_IDEMPOTENT,
                    IdempotencyClass.IDEMPOTENT_WRITE,
                    IdempotencyClass.READ_ONLY,
                } <= kinds

    @pytest.mark.parametrize(
        ("lines", "field", "fragment"),
        [
            (
                'batch_driver = "trio"',
                "batch_driver",
                "unknown batch driver 'trio'; known: async, threads",
            ),
            ("batch_driver = 1", "batch_driver", "got a number (1)"),
            ("duplicate_delivery = true", "duplicate_delivery", 'needs batch_driver = "threads"'),
            (
                'batch_driver = "async"\nduplicate_delivery = true',
                "duplicate_delivery",
                "this scenario's is 'async'",
            ),
            (
                'batch_driver = "threads"\nduplicate_delivery = "yes"',
                "duplicate_delivery",
                "valid boolean",
            ),
        ],
    )
    def test_a_bad_driver_or_duplicate_delivery_is_refused(
        self, lines: str, field: str, fragment: str
    ) -> None:
        """An unknown driver, or duplicates without threads, is refused naming the file and
        the field."""
        error = refusal(f"{lines}\n" + scenario_text(self.BATCH))
        assert (error.path, error.step, error.field) == ("inline.toml", None, field)
        assert fragment in str(error)
        assert str(error).startswith("inline.toml")


class TestRefusals:
    def test_missing_file(self, tmp_path: Path) -> None:
        """A file that does not exist is a ScenarioError naming it."""
        with pytest.raises(ScenarioError, match=r"nope\.toml: cannot read"):
            load_scenario(tmp_path / "nope.toml")

    def test_missing_directory(self, tmp_path: Path) -> None:
        """Loading scenarios from a missing directory is a ScenarioError."""
        with pytest.raises(ScenarioError, match="not a directory"):
            load_scenarios(tmp_path / "absent")

    def test_duplicate_names_in_a_directory(self, tmp_path: Path) -> None:
        """Two files of one directory may not share a scenario name."""
        text = scenario_text('tool = "ui_dump"', name="twin")
        (tmp_path / "a.toml").write_text(text)
        (tmp_path / "b.toml").write_text(text)
        with pytest.raises(ScenarioError, match="also the name of") as caught:
            load_scenarios(tmp_path)
        assert caught.value.field == "name"

    def test_oversized_file(self, tmp_path: Path) -> None:
        """A file over the size limit is refused before it is parsed."""
        path = tmp_path / "big.toml"
        path.write_text("# " + "x" * (1 << 20) + "\n")
        with pytest.raises(ScenarioError, match="larger than"):
            load_scenario(path)

    def test_pinned_faker_keyword(self) -> None:
        """A recipe may not move the clock pin of ``date``, which keeps plans replayable."""
        error = refusal(
            scenario_text(
                'tool = "input_text"\n'
                'args = { field = "d", text = { faker = "date", end_datetime = "now" } }'
            )
        )
        assert (error.step, error.field) == (1, "args.text.end_datetime")

    def test_negative_fail_attempts(self) -> None:
        """``fail_attempts`` must be zero or more."""
        error = refusal(scenario_text('tool = "ui_dump"\nargs = { fail_attempts = -1 }'))
        assert (error.step, error.field) == (1, "args.fail_attempts")

    def test_fail_attempts_from_faker(self) -> None:
        """``fail_attempts`` must be a literal, never drawn."""
        error = refusal(
            scenario_text('tool = "ui_dump"\nargs = { fail_attempts = { faker = "pyint" } }')
        )
        assert (error.step, error.field) == (1, "args.fail_attempts")

    def test_verify_on_a_read_only_step(self) -> None:
        """A read-only step has no effect, so a verify on it is refused."""
        error = refusal(
            scenario_text(
                'tool = "web_search"\nargs = { query = "x" }\n[steps.verify]\n'
                'tool = "logcat"\npath = "lines"\ncontains = "x"'
            )
        )
        assert (error.step, error.field) == (1, "verify")

    def test_not_a_json_number(self) -> None:
        """A TOML ``nan`` is not a JSON value and is refused where it appears."""
        error = refusal(
            scenario_text(
                'tool = "mcp_call"\nargs = { server = "s", tool = "t", arguments = { x = nan } }'
            )
        )
        assert (error.step, error.field) == (1, "args.arguments.x")

    def test_path_into_a_list(self) -> None:
        """A verify path cannot walk into an array of the result."""
        error = refusal(
            scenario_text(
                'tool = "alarm"\nargs = { time = "07:00", label = "a" }\n[steps.verify]\n'
                'tool = "logcat"\npath = "lines.first"\ncontains = "x"'
            )
        )
        assert (error.step, error.field) == (1, "verify.path")

    def test_template_format_spec_mismatch(self) -> None:
        """A template whose format spec does not fit the argument's type is refused at load."""
        error = refusal(
            scenario_text(
                'tool = "terminal_send"\nargs = { text = { faker = "word" } }\n'
                '[steps.verify]\ntool = "logcat"\npath = "lines"\ncontains = "{text:d}"'
            )
        )
        assert (error.step, error.field) == (1, "verify.contains")

    def test_checks_drawn_from_faker_are_not_ambiguous(self) -> None:
        """Two checks that differ only by drawn values are accepted as distinct."""
        step = (
            'tool = "input_text"\nargs = { field = "f", text = { faker = "uuid4" } }\n'
            '[steps.verify]\ntool = "ui_dump"\npath = "fields.f"\ncontains = "{text}"'
        )
        assert len(parse_scenario(scenario_text(step, step), source="t").steps) == 2

    def test_count_of_further_problems(self) -> None:
        """The message reports the first problem and how many more pydantic found."""
        text = 'description = "d"\n\n[[steps]]\ntool = 5\n'
        error = refusal(text)
        assert (error.step, error.field) == (None, "name")
        assert "1 more problem" in str(error)


class TestScenarioError:
    def test_message_names_file_step_and_field(self) -> None:
        """The message reads ``file: step N, field 'x': problem``."""
        error = ScenarioError("scenarios/x.toml", 3, "args.text", "expected a string")
        assert str(error) == "scenarios/x.toml: step 3, field 'args.text': expected a string"

    def test_message_without_step_or_field(self) -> None:
        """Parts that do not apply are left out of the message."""
        assert str(ScenarioError("x.toml", None, None, "boom")) == "x.toml: boom"
        assert str(ScenarioError("x.toml", None, "name", "bad")) == "x.toml: field 'name': bad"

    def test_harness_errors_share_the_root(self) -> None:
        """Every error of ``harness.errors`` is a HarnessError, runtime leaves included."""
        for name in harness.errors.__all__:
            error_class = getattr(harness.errors, name)
            assert issubclass(error_class, HarnessError), name
            assert error_class.__doc__, name

    def test_all_exports_runtime_and_harness_leaves(self) -> None:
        """``__all__`` is sorted: every runtime error plus the harness's own leaves."""
        runtime = {
            name
            for name, value in vars(harness.runtime.errors).items()
            if isinstance(value, type) and issubclass(value, HarnessError)
        }
        exported = harness.errors.__all__
        assert exported == sorted(exported)
        harness_leaves = {"FailpointSpecError", "ScenarioError", "SupervisorError", "TrialError"}
        assert set(exported) == runtime | harness_leaves

    def test_docstring_draws_every_error(self) -> None:
        """The module docstring's tree names every exported error."""
        doc = harness.errors.__doc__ or ""
        for name in harness.errors.__all__:
            assert name in doc, name

    def test_no_pydantic_outside_scenarios(self) -> None:
        """The errors module and the agent's plan reader load neither pydantic nor Faker."""
        code = (
            "import sys, harness.errors, harness.agent.plan\n"
            "assert not {'pydantic', 'faker'} & set(sys.modules), sorted(sys.modules)\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


class TestRepeat:
    TEXT = """
name = "rounds"
description = "Two steps, three rounds"
repeat = 3

[[steps]]
tool = "ui_tap"
args = { element = { faker = "uuid4" } }
verify = { tool = "ui_dump", path = "taps", contains = "{element}" }

[[steps]]
tool = "ui_dump"
args = {}
"""

    def test_rounds_number_on_and_draw_afresh(self) -> None:
        scenario = parse_scenario(self.TEXT, source="rounds.toml")
        plan = compile_plan(scenario, seed=3, source="rounds.toml")
        assert [s.op_id for s in plan.steps] == ["s001", "s002", "s003", "s004", "s005", "s006"]
        taps = [s.args["element"] for s in plan.steps if s.tool == "ui_tap"]
        assert len(set(taps)) == 3

    def test_a_literal_check_repeated_is_refused_naming_the_round(self) -> None:
        text = self.TEXT.replace('{ faker = "uuid4" }', '"submit"')
        with pytest.raises(ScenarioError, match=r"step 1.*round 2.*Faker"):
            parse_scenario(text, source="rounds.toml")


def test_a_sample_is_drawn_from_the_seed_in_order() -> None:
    from harness.chaos.campaign import sampled

    specs = list(range(100))
    first = sampled(specs, 12, 7)
    assert first == sorted(first) and len(first) == 12
    assert sampled(specs, 12, 7) == first
    assert sampled(specs, 12, 8) != first
    assert sampled(specs, None, 7) == specs == sampled(specs, 100, 7)
