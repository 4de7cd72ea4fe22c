"""A pass says whether it judged anything: ``applied`` is False where there was nothing to.

One trial of the mini scenario per case: with no fault no op is in flight at
a restart (I2, I3), no tear or corruption is injected (I9) and no fault was
scheduled (F), so those pass without applying; a kill with an unsafe op in
flight makes I2 apply, one with a safe op in flight I3, a tear or a restart I9. A runtime
without our journal (``naive``) has I2 apply from what the user was told: a
call it began and never reported on before the kill.
"""

from __future__ import annotations

import pytest

from harness.chaos.trial import TrialResult
from tests.integration.conftest import TrialRunner

NO_FAULT = "[{}]"
UNSAFE_IN_FLIGHT = '[{"failpoints":"op.after_intent@2=kill"}]'  # s002 input_text
SAFE_IN_FLIGHT = '[{"failpoints":"op.after_intent@1=kill"}]'  # s001 app_install
TEAR = '[{"failpoints":"journal.before_fsync@6=kill","after_death":"power-loss:tear:0.5:5"}]'


def _applied(result: TrialResult) -> dict[str, bool]:
    """Invariant -> whether it applied, for the passes of the trial."""
    return {v.invariant: v.applied for v in result.verdicts if v.status == "pass"}


@pytest.mark.parametrize(
    ("schedule", "runtime", "applied", "idle"),
    [
        (NO_FAULT, "real", {"I1", "I4", "I5", "I6", "I7", "I8", "I10"}, {"I2", "I3", "I9", "F"}),
        (UNSAFE_IN_FLIGHT, "real", {"I2", "I9", "F"}, {"I3"}),
        (SAFE_IN_FLIGHT, "real", {"I3", "I9", "F"}, {"I2"}),
        (TEAR, "real", {"I9", "F"}, {"I3"}),
        ('[{"failpoints":"op.before_intent@2=kill"}]', "naive", {"I2", "F"}, set()),
        ('[{"failpoints":"op.before_intent@1=kill"}]', "naive", {"F"}, {"I2"}),
    ],
    ids=["no-fault", "unsafe-in-flight", "safe-in-flight", "tear", "naive-unsafe", "naive-safe"],
)
def test_a_pass_applied_exactly_where_it_had_something_to_judge(
    run_mini: TrialRunner, schedule: str, runtime: str, applied: set[str], idle: set[str]
) -> None:
    result = run_mini(schedule, runtime)
    passed = _applied(result)
    assert {key for key in applied if passed.get(key) is True} == applied, result.verdicts
    assert {key for key in idle if passed.get(key) is False} == idle, result.verdicts
    for verdict in result.verdicts:
        assert verdict.applied or verdict.status == "pass"  # only a pass can judge nothing
