"""The exhaustive campaign's cancels: each batch call once after its intent, a few after
their effect, and none of a call that is not in a batch."""

from __future__ import annotations

from harness.chaos.schedule import CrashSchedule, exhaustive_schedules

# A golden run: s001, then a batch s002a-c (s002b's read retried once), then s003.
AFTER_INTENT = ["s001", "s002a", "s002b", "s002c", "s002b", "s003"]
AFTER_EFFECT = ["s001", "s002a", "s002b", "s002c", "s003"]
OPS = {"op.after_intent": AFTER_INTENT, "op.after_effect": AFTER_EFFECT}
HITS = {name: len(ops) for name, ops in OPS.items()}


def _batch_call(failpoint: str, hit: int) -> str | None:
    op = OPS.get(failpoint, [])[hit - 1]
    return op if op.startswith("s002") else None


def _cancels(*, batches: bool = True) -> dict[str, CrashSchedule]:
    every = exhaustive_schedules(HITS, None, _batch_call if batches else None)
    return {label: schedule for label, schedule in every if "cancel" in schedule.fault_kinds}


class TestCancelSchedules:
    def test_each_batch_call_is_cancelled_once_after_its_intent(self) -> None:
        """One cancel per batch call at its first op.after_intent (not its retry's), and the
        first batch call's op.after_effect (every third), each a life of its own."""
        assert {label: s.to_json() for label, s in _cancels().items()} == {
            "op.after_intent@2+cancel": '[{"failpoints":"op.after_intent@2=cancel"}]',
            "op.after_intent@3+cancel": '[{"failpoints":"op.after_intent@3=cancel"}]',
            "op.after_intent@4+cancel": '[{"failpoints":"op.after_intent@4=cancel"}]',
            "op.after_effect@2+cancel": '[{"failpoints":"op.after_effect@2=cancel"}]',
        }

    def test_a_cancel_is_its_own_fault_kind(self) -> None:
        """A schedule with a cancel says so, and acts on no journal."""
        schedule = CrashSchedule.from_json('[{"failpoints":"op.after_intent@2=cancel"}]')
        assert schedule.fault_kinds == {"cancel"} and not schedule.needs_journal

    def test_without_batches_nothing_is_cancelled(self) -> None:
        """A campaign that does not say which hits serve batch calls cancels none."""
        assert _cancels(batches=False) == {}
