"""I8's comparison of worlds where a step is left out (unverifiable, its outcome unknown):
a row written in place holds its last writer only."""

from __future__ import annotations

from harness.check.invariants import _world_counter, rows_left_out
from harness.world.store import EFFECT_TABLES, EffectRow


def _differences(trial: list[EffectRow], golden: list[EffectRow], skip: set[str]) -> set[str]:
    places = rows_left_out((trial, golden), skip)
    mine, theirs = _world_counter(trial, skip, places), _world_counter(golden, skip, places)
    return {f"extra {k}" for k in mine - theirs} | {f"missing {k}" for k in theirs - mine}


class TestRowsWrittenInPlace:
    def test_an_earlier_value_left_where_a_left_out_step_did_not_write_is_no_effect(
        self,
    ) -> None:
        """s1 writes /a, then s2 (left out) rewrites it in the golden run; in the trial s2
        never ran, so /a holds s1's value, under s1's id: not an extra effect of s1."""
        golden = [EffectRow("files", "s002", ("/a", "second"))]
        trial = [EffectRow("files", "s001", ("/a", "first"))]
        assert _differences(trial, golden, {"s002"}) == set()
        # Counted as before, the row was taken for an extra effect of s1:
        assert _world_counter(trial, {"s002"}) - _world_counter(golden, {"s002"})

    def test_a_wrong_value_where_no_left_out_step_wrote_still_fails(self) -> None:
        golden = [
            EffectRow("files", "s001", ("/a", "first")),
            EffectRow("files", "s002", ("/b", "x")),
        ]
        trial = [
            EffectRow("files", "s001", ("/a", "wrong")),
            EffectRow("files", "s002", ("/b", "y")),
        ]
        assert _differences(trial, golden, {"s002"}) == {
            "extra ('files', '/a', 'wrong')",
            "missing ('files', '/a', 'first')",
        }

    def test_rows_added_not_replaced_are_never_left_out_by_place(self) -> None:
        """A tap adds a row: an extra tap by s1 fails even if s2 (left out) tapped too."""
        golden = [EffectRow("ui_taps", "s001", ("save",)), EffectRow("ui_taps", "s002", ("save",))]
        trial = [EffectRow("ui_taps", "s001", ("save",)), EffectRow("ui_taps", "s001", ("save",))]
        assert _differences(trial, golden, {"s002"}) == {"extra ('ui_taps', 'save')"}

    def test_every_table_with_a_key_keys_on_its_content(self) -> None:
        for table in EFFECT_TABLES:
            if table.key is not None:
                assert set(table.key) <= set(table.content), table.name
