"""The shapes of a plan that real runs have (``harness.chaos.shapes``), on plans by hand."""

from __future__ import annotations

from pathlib import Path

from harness.agent.plan import Plan, PlanStep
from harness.chaos.scenario import compile_plan, load_scenario
from harness.chaos.shapes import compacted_repeats, keyed_twice, plan_shapes, write_repeated
from harness.runtime.classes import ToolTable

ROOT = Path(__file__).parent.parent.parent
SHIPPED = ToolTable.shipped()


def plan(
    *calls: tuple[str, dict[str, str]], identity: str = "id", compact_at: int | None = None
) -> Plan:
    steps = tuple(PlanStep(n, f"s{n:03d}", tool, args) for n, (tool, args) in enumerate(calls, 1))
    return Plan("p", 1, "p.toml", steps, identity=identity, compact_at=compact_at)


NOTE_X = ("write_file", {"path": "/n.txt", "content": "x"})
NOTE_Y = ("write_file", {"path": "/n.txt", "content": "y"})
TAP = ("ui_tap", {"element": "add"})


class TestWriteRepeated:
    def test_a_write_again_after_another_of_its_tool_under_content(self) -> None:
        """Write x, write y, write x under identity by content has the shape."""
        assert write_repeated(plan(NOTE_X, NOTE_Y, NOTE_X, identity="content"), SHIPPED)

    def test_not_without_a_write_between_nor_under_id(self) -> None:
        """The same write twice in a row, or under identity by id, does not."""
        assert not write_repeated(plan(NOTE_X, NOTE_X, NOTE_Y, identity="content"), SHIPPED)
        assert not write_repeated(plan(NOTE_X, NOTE_Y, NOTE_X), SHIPPED)

    def test_not_for_a_tool_that_is_not_an_idempotent_write(self) -> None:
        """Two equal taps with another tap between are not an idempotent write repeated."""
        other = ("ui_tap", {"element": "pay"})
        assert not write_repeated(plan(TAP, other, TAP, identity="content"), SHIPPED)


class TestCompactedRepeats:
    def test_equal_calls_in_a_compacted_journal_under_content(self) -> None:
        """Two equal calls, identity by content and compaction: all three are needed."""
        assert compacted_repeats(plan(TAP, TAP, identity="content", compact_at=100))
        assert not compacted_repeats(plan(TAP, TAP, identity="content"))
        assert not compacted_repeats(plan(TAP, TAP, compact_at=100))
        assert not compacted_repeats(plan(TAP, NOTE_X, identity="content", compact_at=100))


class TestKeyedTwice:
    def test_the_shipped_payment_flow_charges_twice_alike(self) -> None:
        """payment_flow has two equal charges, to a provider that drops a repeated key."""
        path = ROOT / "scenarios" / "payment_flow.toml"
        compiled = compile_plan(load_scenario(path), seed=1, source=str(path))
        assert keyed_twice(compiled)
        assert not keyed_twice(plan(TAP, TAP))  # no keyed tool

    def test_the_old_payment_flow_did_not(self) -> None:
        """Before equal calls were shipped, its calls all differed."""
        path = ROOT / "tests" / "data" / "scenarios_before_shapes" / "payment_flow.toml"
        compiled = compile_plan(load_scenario(path), seed=1, source=str(path))
        assert not keyed_twice(compiled)


def test_plan_shapes_names_each_shape_found() -> None:
    """``plan_shapes`` lists the shapes a plan has, by name, in the module's order."""
    both = plan(NOTE_X, NOTE_Y, NOTE_X, identity="content", compact_at=100)
    assert plan_shapes(both, SHIPPED) == ("content-write-repeated", "compacts-repeats")
    assert plan_shapes(plan(NOTE_X), SHIPPED) == ()
