"""Declared tools at the boundary: validation names file, tool and field; nothing else passes.

Also the shipped scenario that declares its tools (``scenarios/support_billing.toml``),
its tools file and its own tool table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.chaos.declarations import FIELDS
from harness.chaos.scenario import compile_plan, load_scenario, parse_scenario
from harness.errors import ScenarioError
from harness.runtime.classes import IdempotencyClass, ToolTable
from harness.world.declared import BEHAVIOURS

ROOT = Path(__file__).resolve().parents[2]
BILLING = ROOT / "scenarios" / "support_billing.toml"

TICKETS = """
[tools.list_tickets]
behaviour = "read"
collection = "tickets"

[tools.create_ticket]
behaviour = "create"
args = { subject = "str" }
collection = "tickets"
[tools.create_ticket.verify]
tool = "list_tickets"
path = "values"
contains = { subject = "{subject}" }
"""

STEP = '[[steps]]\ntool = "create_ticket"\nargs = { subject = "printer on fire" }\n'


def scenario(*parts: str) -> str:
    return 'name = "inline"\ndescription = "built in a test"\n' + "\n".join(parts)


def refusal(text: str, source: str = "inline.toml") -> ScenarioError:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, source=source)
    return caught.value


def declared(body: str) -> str:
    """A scenario declaring one tool ``t`` with ``body`` and calling it once."""
    return scenario(f"[tools.t]\n{body}\n", '[[steps]]\ntool = "t"\n')


class TestDeclarations:
    def test_a_declared_tool_is_a_step_tool(self) -> None:
        """A scenario's steps may call its declared tools; the plan carries the declarations."""
        parsed = parse_scenario(scenario(TICKETS, STEP), source="inline.toml")
        plan = compile_plan(parsed, seed=1, source="inline.toml")
        assert plan.steps[0].tool == "create_ticket"
        assert set(plan.tools) == {"list_tickets", "create_ticket"}
        assert plan.tools["create_ticket"].behaviour == "create"

    def test_the_declared_check_is_each_steps_default(self) -> None:
        """A step without a check gets its tool's; a step's own check wins."""
        own = STEP + '[steps.verify]\ntool = "list_tickets"\npath = "count"\nequals = 1\n'
        parsed = parse_scenario(scenario(TICKETS, STEP, own), source="inline.toml")
        first, second = compile_plan(parsed, seed=1, source="inline.toml").steps
        assert first.verify is not None and first.verify.contains == {"subject": "printer on fire"}
        assert second.verify is not None and second.verify.path == "count"

    def test_a_lone_placeholder_keeps_its_type(self) -> None:
        """``"{amount}"`` in a check is the int argument, not its text."""
        text = scenario(
            """
[tools.list_refunds]
behaviour = "read"
collection = "refunds"

[tools.refund]
behaviour = "create"
args = { amount = "int" }
collection = "refunds"
verify = { tool = "list_refunds", path = "values", contains = { amount = "{amount}" } }
""",
            '[[steps]]\ntool = "refund"\nargs = { amount = 5 }\n',
        )
        [step] = compile_plan(parse_scenario(text, source="x.toml"), seed=1, source="x").steps
        assert step.verify is not None and step.verify.contains == {"amount": 5}

    def test_every_behaviour_has_its_fields(self) -> None:
        """The table of fields covers the vocabulary exactly."""
        assert set(FIELDS) == set(BEHAVIOURS)


class TestRefusedDeclarations:
    @pytest.mark.parametrize(
        ("body", "field", "fragment"),
        [
            ('behaviour = "fetch"\ncollection = "c"', "behaviour", "Input should be 'read'"),
            ('behaviour = "read"', None, "exactly one of 'collection' and 'channel'"),
            ('behaviour = "read"\ncollection = "c"\nchannel = "d"', None, "exactly one of"),
            ('behaviour = "read"\ncollection = "c"\nmissing = "fail"', "missing", "takes no"),
            ('behaviour = "read"\ncollection = "c"\nmulti_step = true', "multi_step", "takes no"),
            ('behaviour = "put"\ncollection = "c"\nargs = { v = "str" }', "key", "needs 'key'"),
            (
                'behaviour = "put"\ncollection = "c"\nkey = "k"\nargs = { v = "str" }',
                "key",
                "not an argument",
            ),
            (
                'behaviour = "put"\ncollection = "c"\nkey = "k"\nargs = { k = "str?", v = "str" }',
                "key",
                "required str",
            ),
            (
                'behaviour = "put"\ncollection = "c"\nkey = "k"\nargs = { k = "str" }',
                "value",
                "besides the key",
            ),
            (
                'behaviour = "put"\ncollection = "c"\nkey = "k"\n'
                'args = { k = "str" }\nvalue = ["k"]',
                "value",
                "is the key",
            ),
            (
                'behaviour = "create"\ncollection = "c"\nvalue = ["nope"]',
                "value",
                "not an argument",
            ),
            (
                'behaviour = "increment"\ncollection = "c"\nkey = "k"\n'
                'args = { k = "str", n = "str" }\nby = "n"',
                "by",
                "required int",
            ),
            (
                'behaviour = "delete"\ncollection = "c"\nkey = "k"\nargs = { k = "str" }',
                "missing",
                '"fail" or "ignore"',
            ),
            (
                'behaviour = "delete"\ncollection = "c"\nkey = "k"\n'
                'args = { k = "str" }\nmissing = "maybe"',
                "missing",
                "Input should be 'fail' or 'ignore'",
            ),
            ('behaviour = "send"\nargs = { m = "str" }', "channel", "needs 'channel'"),
            (
                'behaviour = "opaque"\nverify = { tool = "x", path = "y", equals = 1 }',
                "verify",
                "takes no",
            ),
            ('behaviour = "opaque"\nmulti_step = "yes"', "multi_step", "valid boolean"),
            (
                'behaviour = "opaque"\nargs = { fail_attempts = "int" }',
                "args.fail_attempts",
                "reserved",
            ),
            ('behaviour = "opaque"\nargs = { n = "float" }', "args.n", "unknown type 'float'"),
            ('behaviour = "opaque"\ncolour = "red"', "colour", "unknown key"),
            ('behaviour = "send"\nchannel = " "', "channel", "not be empty"),
        ],
    )
    def test_refused_naming_file_tool_and_field(
        self, body: str, field: str | None, fragment: str
    ) -> None:
        """A bad declaration is refused with the file, the tool and the field it names."""
        error = refusal(declared(body))
        assert (error.path, error.step, error.tool, error.field) == (
            "inline.toml",
            None,
            "t",
            field,
        )
        assert fragment in error.problem
        assert str(error).startswith("inline.toml: tool 't'")

    def test_a_built_in_name_is_refused(self) -> None:
        """A declared tool may not reuse a built-in tool's name."""
        error = refusal(
            scenario(
                '[tools.ui_tap]\nbehaviour = "opaque"\n',
                '[[steps]]\ntool = "ui_tap"\nargs = { element = "x" }\n',
            )
        )
        assert (error.tool, error.field) == ("ui_tap", None)
        assert "built-in tool" in error.problem

    def test_an_undeclared_tool_is_unknown(self) -> None:
        """A step naming a tool nobody declared is refused, with the declared names suggested."""
        error = refusal(scenario(TICKETS, '[[steps]]\ntool = "create_tickets"\n'))
        assert (error.step, error.field) == (1, "tool")
        assert "did you mean 'create_ticket'" in error.problem


class TestRefusedChecks:
    def test_a_check_must_read(self) -> None:
        """A declared tool's check must be a read tool: one that changes nothing."""
        text = scenario(
            TICKETS.replace('tool = "list_tickets"\npath', 'tool = "create_ticket"\npath'),
            STEP,
        )
        error = refusal(text)
        assert (error.tool, error.field) == ("create_ticket", "verify.tool")
        assert "declared create tool" in error.problem

    def test_a_check_must_read_what_the_tool_writes(self) -> None:
        """A built-in read cannot see a declared tool's records, nor a declared read a
        built-in tool's effect."""
        blind = TICKETS[: TICKETS.index("[tools.create_ticket.verify]")]
        own = '[steps.verify]\ntool = "ui_dump"\npath = "taps"\ncontains = "x"\n'
        error = refusal(scenario(blind, STEP + own))
        assert (error.step, error.field) == (1, "verify.tool")
        assert "cannot see collection tickets" in error.problem
        builtin = (
            '[[steps]]\ntool = "ui_tap"\nargs = { element = "x" }\n'
            '[steps.verify]\ntool = "list_tickets"\npath = "count"\nequals = 1\n'
        )
        error = refusal(scenario(blind, builtin))
        assert (error.step, error.field) == (1, "verify.tool")
        assert "never writes" in error.problem

    def test_a_checks_template_must_name_an_argument(self) -> None:
        """A declared check's template may only use the tool's arguments."""
        error = refusal(scenario(TICKETS.replace("{subject}", "{title}"), STEP))
        assert (error.tool, error.field) == ("create_ticket", "verify.contains.subject")
        assert "{title}" in error.problem

    def test_a_check_path_follows_the_reads_result(self) -> None:
        """A check's path must start at a key of the declared read's result."""
        error = refusal(scenario(TICKETS.replace('path = "values"', 'path = "rows"'), STEP))
        assert (error.tool, error.field) == ("create_ticket", "verify.path")
        assert "did you mean" in error.problem or "keys:" in error.problem

    def test_a_read_step_has_nothing_to_check(self) -> None:
        """A step of a declared read may not carry a check."""
        step = (
            '[[steps]]\ntool = "list_tickets"\n'
            '[steps.verify]\ntool = "list_tickets"\npath = "count"\nequals = 0\n'
        )
        error = refusal(scenario(TICKETS, step))
        assert (error.step, error.field) == (1, "verify")


class TestFilesAndTables:
    def write(self, folder: Path, text: str, **files: str) -> Path:
        for name, body in files.items():
            (folder / name).write_text(body)
        path = folder / "s.toml"
        path.write_text(text)
        return path

    def test_a_tools_file_declares_tools(self, tmp_path: Path) -> None:
        """Declarations may live in a tools file the scenario names, relative to it."""
        path = self.write(tmp_path, scenario('tools_file = "t.toml"', STEP), **{"t.toml": TICKETS})
        assert set(load_scenario(path).declared_tools) == {"list_tickets", "create_ticket"}

    def test_errors_in_a_tools_file_name_it(self, tmp_path: Path) -> None:
        """A bad declaration in the tools file is refused naming that file, tool and field."""
        bad = TICKETS.replace('behaviour = "create"', 'behaviour = "make"')
        path = self.write(tmp_path, scenario('tools_file = "t.toml"', STEP), **{"t.toml": bad})
        with pytest.raises(ScenarioError) as caught:
            load_scenario(path)
        error = caught.value
        assert (error.path, error.tool, error.field) == (
            str(tmp_path / "t.toml"),
            "create_ticket",
            "behaviour",
        )

    def test_a_tools_file_holds_tools_only(self, tmp_path: Path) -> None:
        """Anything but [tools.NAME] tables in a tools file is refused."""
        path = self.write(
            tmp_path,
            scenario('tools_file = "t.toml"', STEP),
            **{"t.toml": "format = 1\n" + TICKETS},
        )
        with pytest.raises(ScenarioError, match="tools file holds") as caught:
            load_scenario(path)
        assert caught.value.field == "format"

    def test_a_missing_tools_file(self, tmp_path: Path) -> None:
        """A tools file that is not there is refused at the scenario's field."""
        path = self.write(tmp_path, scenario('tools_file = "nope.toml"', STEP))
        with pytest.raises(ScenarioError, match="no such file") as caught:
            load_scenario(path)
        assert (caught.value.path, caught.value.field) == (str(path), "tools_file")

    def test_a_tool_declared_twice(self, tmp_path: Path) -> None:
        """A tool declared inline and in the tools file is refused."""
        path = self.write(
            tmp_path, scenario('tools_file = "t.toml"', TICKETS, STEP), **{"t.toml": TICKETS}
        )
        with pytest.raises(ScenarioError, match="declared twice") as caught:
            load_scenario(path)
        assert (caught.value.path, caught.value.tool) == (str(path), "list_tickets")
        assert str(tmp_path / "t.toml") in caught.value.problem

    def test_a_tool_table_beside_it(self, tmp_path: Path) -> None:
        """``tool_table`` names the runtime's table, in the project's format."""
        table = 'format = 1\n[classes]\nnon_idempotent = ["create_ticket"]\n'
        path = self.write(
            tmp_path, scenario('tool_table = "tools.toml"', TICKETS, STEP), **{"tools.toml": table}
        )
        loaded = load_scenario(path)
        assert loaded.table_path == tmp_path / "tools.toml"
        assert ToolTable.load(loaded.table_path).classify("create_ticket").idempotency is (
            IdempotencyClass.NON_IDEMPOTENT
        )

    def test_a_bad_tool_table(self, tmp_path: Path) -> None:
        """A malformed table is refused at the scenario's ``tool_table`` field."""
        table = 'format = 1\n[classes]\nmaybe = ["create_ticket"]\n'
        path = self.write(
            tmp_path, scenario('tool_table = "tools.toml"', TICKETS, STEP), **{"tools.toml": table}
        )
        with pytest.raises(ScenarioError, match="unknown class 'maybe'") as caught:
            load_scenario(path)
        assert caught.value.field == "tool_table"

    def test_distinct_checks_follow_the_scenarios_table(self, tmp_path: Path) -> None:
        """Two steps checking the very same thing are refused when the scenario's table makes
        them VERIFY (non-idempotent), allowed when it makes them RETRY."""
        twice = scenario('tool_table = "tools.toml"', TICKETS, STEP, STEP)
        for cls, refused in (("non_idempotent", True), ("idempotent_write", False)):
            table = f'format = 1\n[classes]\n{cls} = ["create_ticket"]\n'
            path = self.write(tmp_path, twice, **{"tools.toml": table})
            if refused:
                with pytest.raises(ScenarioError, match="checks exactly what step 1 checks"):
                    load_scenario(path)
            else:
                load_scenario(path)


class TestWorldSeed:
    def test_records_travel_in_the_plan(self) -> None:
        """``[[world.records]]`` become the plan's world."""
        seed = (
            '[[world.records]]\ncollection = "tickets"\nkey = "T-1"\nvalue = { subject = "old" }\n'
        )
        plan = compile_plan(
            parse_scenario(scenario(TICKETS, seed, STEP), source="x.toml"), seed=1, source="x"
        )
        [record] = plan.world
        assert (record.collection, record.key, record.value) == (
            "tickets",
            "T-1",
            {"subject": "old"},
        )

    @pytest.mark.parametrize(
        ("records", "field", "fragment"),
        [
            (
                '{ collection = "c", key = "k", value = 1 }, '
                '{ collection = "c", key = "k", value = 2 }',
                "world.records.1",
                "a second record",
            ),
            (
                '{ collection = "c", key = "k", value = 1979-05-27 }',
                "world.records.0.value",
                "not a JSON value",
            ),
            (
                '{ collection = "", key = "k", value = 1 }',
                "world.records.0.collection",
                "at least 1",
            ),
            ('{ collection = "c", key = "k" }', "world.records.0.value", "missing"),
            (
                '{ collection = "c", key = "k", value = 1, op = "x" }',
                "world.records.0.op",
                "unknown key",
            ),
        ],
    )
    def test_bad_records_are_refused(self, records: str, field: str, fragment: str) -> None:
        """A bad seed record is refused naming its place in ``world.records``."""
        error = refusal(scenario(f"world = {{ records = [{records}] }}", TICKETS, STEP))
        assert (error.step, error.field) == (None, field)
        assert fragment in error.problem


class TestBillingScenario:
    def test_declares_every_behaviour(self) -> None:
        """The support/billing scenario's tools use every behaviour of the vocabulary, one of
        them multi-step, and its steps call them."""
        loaded = load_scenario(BILLING)
        tools = loaded.declared_tools
        assert {t.behaviour for t in tools.values()} == set(BEHAVIOURS)
        assert any(t.multi_step for t in tools.values())
        called = {call.spec.tool for call in loaded.calls}
        assert {"read_inbox", "lookup_customer", "create_ticket", "send_email"} <= called
        assert {"charge_card", "refund", "update_crm"} <= called

    def test_its_table_classes_what_it_lists(self) -> None:
        """Its own table lists every declared tool but one, which is UNKNOWN: a tool the table
        does not list."""
        loaded = load_scenario(BILLING)
        assert loaded.table_path is not None
        table = ToolTable.load(loaded.table_path)
        unlisted = [name for name in loaded.declared_tools if name not in table]
        assert unlisted == ["notify_finance"]
        middle = [call.spec for call in loaded.calls][1:-1]
        assert any(
            table.classify(s.tool).idempotency is IdempotencyClass.NON_IDEMPOTENT for s in middle
        )

    def test_every_revealable_effect_is_checked(self) -> None:
        """Each step that writes what a read can see carries a check; the opaque one none."""
        loaded = load_scenario(BILLING)
        for index, step in enumerate((call.spec for call in loaded.calls), start=1):
            tool = loaded.declared_tools[step.tool]
            if tool.reads or tool.behaviour == "opaque":
                assert step.verify is None, index
            else:
                assert step.verify is not None, index


class TestDocsExample:
    def test_the_docs_declaration_loads(self, tmp_path: Path) -> None:
        """The example of the docs page "Your own tools" loads and compiles as written."""
        page = (ROOT / "docs" / "guides" / "own-tools.md").read_text()
        section = page[page.index("## An example") :]
        example = section[section.index("```toml\n") + 8 : section.index("```\n", 8)]
        (tmp_path / "refunds").mkdir()
        (tmp_path / "refunds" / "tools.toml").write_text(
            'format = 1\n[classes]\nnon_idempotent = ["refund"]\nread_only = ["list_refunds"]\n'
        )
        (tmp_path / "refunds.toml").write_text(example)
        loaded = load_scenario(tmp_path / "refunds.toml")
        [step] = compile_plan(loaded, seed=1, source="refunds.toml").steps
        assert step.verify is not None
        assert step.verify.contains == {"customer": "C-1", "amount": 4900}
        assert loaded.declared_tools["refund"].multi_step
