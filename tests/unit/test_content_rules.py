"""Declared business keys: what makes two calls of a tool the same action."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.agent.model import drifted
from harness.agent.plan import Plan, compared_args
from harness.chaos.scenario import load_scenario
from harness.errors import ScenarioError
from harness.runtime import Runtime, ToolTable
from harness.runtime.classes import MCP_CONTENT_META, content_rule_from_mcp
from harness.runtime.errors import ToolTableError
from harness.runtime.identity import ContentRule
from tests.conftest import FakeTool

TABLE = """format = 1
[classes]
non_idempotent = ["pay"]
read_only = ["list_payments"]

[content.pay]
identity = ["to", "amount", "invoice"]
volatile = ["request_id"]
"""

PAY = {"to": "ACME", "amount": 100, "invoice": "INV-1", "request_id": "r-1"}


def _table(text: str = TABLE) -> ToolTable:
    return ToolTable.parse(text, source="tools.toml")


class TestContentRule:
    def test_identity_compares_only_its_arguments(self) -> None:
        """With an identity, only its arguments are compared; a missing one stays missing."""
        rule = ContentRule(("to", "amount"), ("request_id",))
        assert rule.compared(PAY) == {"to": "ACME", "amount": 100}
        assert rule.compared({"to": "ACME"}) == {"to": "ACME"}

    def test_volatile_alone_drops_only_those(self) -> None:
        """With volatile arguments only, every other argument is compared."""
        rule = ContentRule(None, ("request_id",))
        assert rule.compared(PAY) == {"to": "ACME", "amount": 100, "invoice": "INV-1"}


class TestTableContent:
    def test_a_table_reads_its_content_rules(self) -> None:
        """``[content.pay]`` gives the tool its rule; a tool without one has none."""
        table = _table()
        assert table.content_rule("pay") == ContentRule(
            ("to", "amount", "invoice"), ("request_id",)
        )
        assert table.content_rule("list_payments") is None

    def test_written_and_read_back_equal(self) -> None:
        """``to_toml`` writes the rules in the format ``parse`` reads back."""
        table = _table()
        again = ToolTable.parse(table.to_toml(), source="again")
        assert again.content == table.content

    @pytest.mark.parametrize(
        ("body", "place", "problem"),
        [
            (
                'identity = ["to"]\nvolatile = ["to"]',
                "content.pay",
                "'to' is in both identity and volatile",
            ),
            ('idenity = ["to"]', "content.pay.idenity", "unknown field"),
            ("identity = []", "content.pay.identity", "is empty"),
            ('identity = ["to", "to"]', "content.pay.identity", "names 'to' twice"),
            ("identity = 3", "content.pay.identity", "must be a list of argument names"),
            ("", "content.pay", "declares neither identity nor volatile"),
        ],
    )
    def test_a_bad_rule_is_one_line_naming_file_place_and_problem(
        self, body: str, place: str, problem: str
    ) -> None:
        """A bad rule is refused whole, with the file, the entry and the problem."""
        with pytest.raises(ToolTableError) as caught:
            _table(f"format = 1\n[content.pay]\n{body}\n")
        message = str(caught.value)
        assert "\n" not in message
        assert message.startswith(f"tools.toml: entry '{place}'") and problem in message

    def test_an_argument_the_tool_does_not_take_is_refused(self) -> None:
        """A rule naming an argument its tool does not take is refused, naming it."""
        with pytest.raises(ToolTableError, match=r"content.pay.volatile.*'request_id'.*takes"):
            _table().check_arguments({"pay": ["to", "amount", "invoice"]})
        _table().check_arguments({"pay": list(PAY), "other": []})

    def test_an_mcp_tool_declares_its_rule_in_meta(self) -> None:
        """A server's ``_meta`` declaration is read and checked against the tool's schema."""
        schema = {"type": "object", "properties": {name: {} for name in PAY}}
        meta = {MCP_CONTENT_META: {"identity": ["invoice"], "volatile": ["request_id"]}}
        rule = content_rule_from_mcp("pay", meta, schema, source="mcp: server")
        assert rule == ContentRule(("invoice",), ("request_id",))
        assert content_rule_from_mcp("pay", {}, schema, source="mcp: server") is None
        bad = {MCP_CONTENT_META: {"identity": ["invoce"]}}
        with pytest.raises(ToolTableError, match="unknown argument 'invoce'"):
            content_rule_from_mcp("pay", bad, schema, source="mcp: server")

    def test_a_scenario_table_naming_an_unknown_argument_is_refused(self, tmp_path: Path) -> None:
        """A scenario whose table's rule names an argument its tool does not take is refused
        before anything runs, with the table's file and entry in one line."""
        (tmp_path / "tools.toml").write_text(
            TABLE.replace('"invoice"]', '"invoce"]').replace("pay", "ui_tap"), "utf-8"
        )
        (tmp_path / "s.toml").write_text(
            'name = "s"\ndescription = "d"\ntool_table = "tools.toml"\n'
            '[[steps]]\ntool = "ui_tap"\nargs = { element = "x" }\n',
            "utf-8",
        )
        with pytest.raises(ScenarioError) as caught:
            load_scenario(tmp_path / "s.toml")
        message = str(caught.value)
        assert "\n" not in message and "content.ui_tap.identity" in message
        assert "unknown argument 'to'" in message


class TestRuntimeRule:
    def _life(self, path: Path, op_id: str, args: dict[str, object], tool: FakeTool) -> str:
        """One life that makes one call; the op that answered it."""
        with Runtime.open(path, table=_table(), identity="content") as rt:
            rt.recover(tool)
            outcome = rt.call(op_id, "pay", args, tool)
            assert outcome.ok
            return outcome.matched or op_id

    def test_a_drifted_reissue_is_the_op_it_stands_for(self, tmp_path: Path) -> None:
        """A payment re-issued with a new request id is answered from the journaled one."""
        tool = FakeTool()
        self._life(tmp_path / "j", "c1", PAY, tool)
        drifted_pay = {**PAY, "request_id": "r-2"}
        assert self._life(tmp_path / "j", "c2", drifted_pay, tool) == "c1"
        assert [i.op_id for i in tool.invocations] == ["c1"]

    def test_another_invoice_is_another_action(self, tmp_path: Path) -> None:
        """A payment of another invoice is not matched: it runs."""
        tool = FakeTool()
        self._life(tmp_path / "j", "c1", PAY, tool)
        assert self._life(tmp_path / "j", "c2", {**PAY, "invoice": "INV-2"}, tool) == "c2"
        assert [i.op_id for i in tool.invocations] == ["c1", "c2"]

    def test_without_a_rule_the_whole_content_is_compared(self, tmp_path: Path) -> None:
        """Without a declaration a drifted call is a new call, as before."""
        tool = FakeTool()
        plain = ToolTable.parse(TABLE.split("[content")[0], source="plain")
        for op_id, request in (("c1", "r-1"), ("c2", "r-2")):
            with Runtime.open(tmp_path / "j", table=plain, identity="content") as rt:
                rt.recover(tool)
                rt.call(op_id, "pay", {**PAY, "request_id": request}, tool)
        assert [i.op_id for i in tool.invocations] == ["c1", "c2"]


class TestDrift:
    def test_values_drift_by_life(self) -> None:
        """Text gets the life appended, a number the life added, the first life nothing."""
        assert drifted("r-1", 1) == "r-1"
        assert drifted("r-1", 3) == "r-1~3"
        assert drifted(7, 2) == 9
        assert drifted(None, 2) is None

    def test_the_checkers_compare_as_the_plan_declares(self) -> None:
        """``compared_args`` applies the plan's rule: identity, or all but the volatile."""
        plan = Plan("s", 1, "s.toml", (), content={"pay": {"volatile": ("request_id",)}})
        assert compared_args(plan, "pay", PAY) == {"to": "ACME", "amount": 100, "invoice": "INV-1"}
        assert compared_args(plan, "other", PAY) == PAY
