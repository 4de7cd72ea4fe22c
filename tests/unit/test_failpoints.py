"""Failpoints (``harness.failpoints``): the spec grammar, when an armed point fires, what
each action does, and that the runtime's crash points are armed through its hook."""

from __future__ import annotations

import asyncio
import errno
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import harness.runtime.hooks as hooks
from harness.errors import FailpointSpecError
from harness.exits import AGENT_FAILPOINT_EXIT
from harness.failpoint_spec import parse_spec
from harness.failpoints import (
    CHANNEL_ENV,
    FAILPOINTS,
    FAILPOINTS_ENV,
    FailpointSpec,
    absorb_hits,
    arm,
    arm_from_environ,
    disarm,
    failpoint,
    hit_counts,
    hit_ops,
    hit_report,
    parse_failpoints,
)
from harness.runtime import CallContext, FailpointTriggered, Runtime
from harness.runtime.hooks import CRASH_POINTS
from tests.conftest import subprocess_env

# A victim: arm from the environment, then hit op.after_effect three times,
# printing where it stands so the test can tell how far it got.
VICTIM = """
from harness.failpoints import arm_from_environ, failpoint
arm_from_environ()
for hit in (1, 2, 3):
    print("before", hit, flush=True)
    failpoint("op.after_effect")
print("done", flush=True)
"""

# The victim, with the failpoints' clock watched: every sleep the failpoint module
# takes is first reported as "waiting" on the file descriptor argv[1], so a test sees
# the victim waiting in the kill hand-shake instead of guessing how long to give it.
WATCHED_CLOCK = """
import os, sys, time
import harness.failpoints as failpoints

class WatchedClock:
    def __getattr__(self, name):
        return getattr(time, name)

    def sleep(self, seconds):
        os.write(int(sys.argv[1]), b"waiting\\n")
        time.sleep(seconds)

failpoints.time = WatchedClock()
"""


def _run_victim(spec: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = subprocess_env(**{FAILPOINTS_ENV: spec}, **extra)
    return subprocess.run(
        [sys.executable, "-c", VICTIM], env=env, capture_output=True, text=True, timeout=60
    )


class TestGrammar:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("op.after_effect=kill", (FailpointSpec("op.after_effect", "kill"),)),
            ("op.after_effect@3=kill", (FailpointSpec("op.after_effect", "kill", 3),)),
            ("op.before_intent=exit(3)", (FailpointSpec("op.before_intent", "exit", None, 3),)),
            ("op.mid_effect@12=sleep(250)", (FailpointSpec("op.mid_effect", "sleep", 12, 250),)),
            ("journal.append=enospc", (FailpointSpec("journal.append", "enospc"),)),
            (
                "recovery.before_retry@1=raise",
                (FailpointSpec("recovery.before_retry", "raise", 1),),
            ),
            ("", ()),
            (
                " op.after_intent=raise , recovery.after_hint@2=exit ,journal.append@4=enospc",
                (
                    FailpointSpec("op.after_intent", "raise"),
                    FailpointSpec("recovery.after_hint", "exit", 2),
                    FailpointSpec("journal.append", "enospc", 4),
                ),
            ),
        ],
    )
    def test_valid_specs_parse(self, text: str, expected: tuple[FailpointSpec, ...]) -> None:
        """Valid specs, one or several comma separated, parse to their entries in order."""
        assert parse_failpoints(text) == expected

    @pytest.mark.parametrize(
        "spec",
        [
            FailpointSpec("op.after_effect", "kill", 3),
            FailpointSpec("op.mid_effect", "sleep", None, 250),
        ],
    )
    def test_spec_prints_in_its_grammar(self, spec: FailpointSpec) -> None:
        """A spec prints as the text that parses back to it."""
        assert parse_failpoints(str(spec)) == (spec,)

    def test_the_checkers_grammar_is_the_agents(self) -> None:
        """The checkers parse a schedule with the grammar the agent arms it with
        (``harness.failpoint_spec``), only without the list of names."""
        text = "op.reply@2=lost-reply,some.point=exit(3)"
        assert parse_spec(text, source="schedule") == (
            FailpointSpec("op.reply", "lost-reply", 2),
            FailpointSpec("some.point", "exit", None, 3),
        )
        with pytest.raises(FailpointSpecError, match=r"unknown failpoint 'some\.point'"):
            parse_failpoints(text)
        with pytest.raises(ValueError, match=r"schedule: entry 'op\.reply@2=lost'"):
            parse_spec("op.reply@2=lost", source="schedule")

    @pytest.mark.parametrize("name", FAILPOINTS)
    def test_every_compiled_point_is_armable(self, name: str) -> None:
        """Every failpoint the runtime declares is accepted by the grammar."""
        assert parse_failpoints(f"{name}=raise") == (FailpointSpec(name, "raise"),)

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("op.after_effect", "is not name[@N]=action[(arg)]"),
            ("op.after_effect=", "is not name[@N]=action[(arg)]"),
            ("=kill", "is not name[@N]=action[(arg)]"),
            ("after_effect=kill", "is not name[@N]=action[(arg)]"),
            ("op.after_effect@x=kill", "is not name[@N]=action[(arg)]"),
            ("op.after_effect@-1=kill", "is not name[@N]=action[(arg)]"),
            ("op.after_effect=sleep(fast)", "is not name[@N]=action[(arg)]"),
            ("op.after_effect=kill;op.after_intent=kill", "is not name[@N]=action[(arg)]"),
            ("op.after_efect=kill", "unknown failpoint 'op.after_efect'"),
            ("op.after_effect=explode", "unknown action 'explode'"),
            ("op.after_effect@0=kill", "hits count from 1"),
            ("op.after_effect=sleep", "sleep needs milliseconds"),
            ("op.after_intent@2=pause", "pause needs the milliseconds it is held stopped"),
        ],
        ids=[
            "no-action",
            "empty-action",
            "no-name",
            "one-part-name",
            "hit-not-number",
            "negative-hit",
            "arg-not-number",
            "semicolon",
            "unknown-name",
            "unknown-action",
            "hit-zero",
            "sleep-no-arg",
            "pause-no-arg",
        ],
    )
    def test_malformed_spec_is_refused(self, text: str, message: str) -> None:
        """A malformed spec raises FailpointSpecError naming its source, entry and problem."""
        with pytest.raises(FailpointSpecError) as info:
            parse_failpoints(f"op.after_intent=raise,{text}", source="MY_SOURCE")
        assert message in str(info.value)
        assert "MY_SOURCE" in str(info.value)
        assert repr(text.strip()) in str(info.value)

    def test_arm_from_environ_refuses_bad_spec(self) -> None:
        """arm_from_environ refuses a bad spec, naming the variable, and arms nothing."""
        with pytest.raises(FailpointSpecError, match=FAILPOINTS_ENV):
            arm_from_environ({FAILPOINTS_ENV: "op.after_intent=raise,op.nowhere=raise"})
        failpoint("op.after_intent")  # the valid first entry was not armed either

    def test_arm_from_environ_refuses_bad_channel(self) -> None:
        """A channel that is not a file descriptor number is refused."""
        with pytest.raises(FailpointSpecError, match=CHANNEL_ENV):
            arm_from_environ({FAILPOINTS_ENV: "op.after_intent=raise", CHANNEL_ENV: "pipe"})

    def test_arm_from_environ_arms(self) -> None:
        """arm_from_environ arms what the variable asks for and returns it."""
        specs = arm_from_environ({FAILPOINTS_ENV: "op.after_intent=raise"})
        assert specs == (FailpointSpec("op.after_intent", "raise"),)
        with pytest.raises(FailpointTriggered):
            failpoint("op.after_intent")


def _hits_that_raise(name: str, total: int) -> list[int]:
    fired = []
    for hit in range(1, total + 1):
        try:
            failpoint(name)
        except FailpointTriggered as exc:
            assert f"hit {hit}" in str(exc)
            fired.append(hit)
    return fired


class TestInProcessActions:
    def test_unarmed_point_does_nothing(self) -> None:
        """An unarmed failpoint is a no-op."""
        for name in FAILPOINTS:
            failpoint(name)

    @pytest.mark.parametrize("n", [1, 2, 5])
    def test_raise_fires_on_exactly_the_nth_hit(self, n: int, armed: Callable[[str], None]) -> None:
        """name@N=raise raises on the N-th hit and on no other."""
        armed(f"op.after_effect@{n}=raise")
        assert _hits_that_raise("op.after_effect", 8) == [n]

    def test_raise_without_hit_fires_every_time(self, armed: Callable[[str], None]) -> None:
        """Without @N the action fires on every hit."""
        armed("op.after_effect=raise")
        assert _hits_that_raise("op.after_effect", 4) == [1, 2, 3, 4]

    def test_points_count_hits_separately(self, armed: Callable[[str], None]) -> None:
        """Each point counts its own hits; hitting another point does not advance it."""
        armed("op.after_effect@2=raise")
        for _ in range(5):
            failpoint("op.after_intent")
        assert _hits_that_raise("op.after_effect", 3) == [2]

    def test_several_specs_on_one_point(self, armed: Callable[[str], None]) -> None:
        """Two specs on the same point fire on their own hits."""
        armed("op.after_effect@2=raise,op.after_effect@4=raise")
        assert _hits_that_raise("op.after_effect", 6) == [2, 4]

    def test_disarm_stops_firing(self, armed: Callable[[str], None]) -> None:
        """After disarm() an armed point no longer fires."""
        armed("op.after_effect=raise")
        disarm()
        failpoint("op.after_effect")

    def test_enospc_raises_oserror(self, armed: Callable[[str], None]) -> None:
        """enospc raises OSError with errno ENOSPC where the point is."""
        armed("journal.append=enospc")
        with pytest.raises(OSError) as info:
            failpoint("journal.append")
        assert info.value.errno == errno.ENOSPC

    def test_count_only_counts(self, armed: Callable[[str], None]) -> None:
        """count never acts; hit_counts reports how often each armed point was hit."""
        armed("op.after_intent=count,op.after_effect=count")
        for _ in range(3):
            failpoint("op.after_intent")
        failpoint("op.after_effect")
        failpoint("op.mid_effect")  # not armed: not counted
        assert hit_counts() == {"op.after_intent": 3, "op.after_effect": 1}

    def test_sleep_waits(
        self, armed: Callable[[str], None], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """sleep(N) asks the clock for a sleep of N milliseconds at the point, then goes on."""
        happened: list[object] = []
        # The seam: the sleep the failpoint module calls, recorded instead of slept.
        monkeypatch.setattr(
            "harness.failpoints.time.sleep", lambda s: happened.append(("sleep", s))
        )
        armed("op.mid_effect=sleep(120)")
        failpoint("op.mid_effect")
        happened.append("went on")
        assert happened == [("sleep", 0.12), "went on"]

    def test_another_processs_hits_are_absorbed_in_order(
        self, armed: Callable[[str], None]
    ) -> None:
        """A helper's hit report (a tool server's) is counted with this process's own hits,
        each point's ops in the order the hits happened on the shared monotonic clock."""
        armed("op.after_intent=count,op.reply=count")
        failpoint("op.after_intent", "s001")
        mine = hit_report()["op.after_intent"]["ns"]
        assert isinstance(mine, list)
        helper: dict[str, dict[str, object]] = {
            "op.reply": {"hits": 2, "ops": ["s002", "s001"], "ns": [mine[0] + 20, mine[0] + 10]},
            "op.mid_effect": {"hits": 1, "ops": None, "ns": []},
        }
        absorb_hits(helper)
        assert hit_counts() == {"op.after_intent": 1, "op.reply": 2, "op.mid_effect": 1}
        assert hit_ops() == {"op.after_intent": ["s001"], "op.reply": ["s001", "s002"]}


class TestProcessActions:
    def test_exit_with_status(self) -> None:
        """exit(3) ends the process at once with status 3 on the armed hit."""
        proc = _run_victim("op.after_effect@2=exit(3)")
        assert proc.returncode == 3, proc.stderr
        assert proc.stdout.split("\n") == ["before 1", "before 2", ""]

    def test_exit_default_status(self) -> None:
        """exit without an argument exits with AGENT_FAILPOINT_EXIT."""
        proc = _run_victim("op.after_effect=exit")
        assert proc.returncode == AGENT_FAILPOINT_EXIT, proc.stderr
        assert proc.stdout == "before 1\n"

    def test_kill_alone_sigkills_itself(self) -> None:
        """kill without a listening supervisor SIGKILLs the process on the armed hit."""
        proc = _run_victim("op.after_effect@3=kill")
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        assert proc.stdout.split("\n") == ["before 1", "before 2", "before 3", ""]

    def test_unarmed_victim_finishes(self) -> None:
        """The same victim without a spec runs to the end (the other tests' control)."""
        proc = _run_victim("")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.endswith("done\n")

    def test_bad_spec_refused_before_anything_runs(self) -> None:
        """A bad spec in the environment stops the process before its first point."""
        proc = _run_victim("op.after_effect=explode")
        assert proc.returncode == 1
        assert "FailpointSpecError" in proc.stderr
        assert "before" not in proc.stdout

    @pytest.mark.parametrize(
        ("victim", "line"),
        [
            (VICTIM, b"reached op.after_effect 2\n"),
            (
                VICTIM.replace('"op.after_effect"', '"op.after_effect", "s007"'),
                b"reached op.after_effect 2 s007\n",
            ),
        ],
        ids=["bare", "with-op-id"],
    )
    def test_kill_handshake(self, victim: str, line: bytes) -> None:
        """With a channel, kill reports 'reached <name> <hit> [op]' and waits for SIGKILL."""
        read_fd, write_fd = os.pipe()
        watch_fd, watched_fd = os.pipe()
        env = subprocess_env(
            **{FAILPOINTS_ENV: "op.after_effect@2=kill", CHANNEL_ENV: str(write_fd)}
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", WATCHED_CLOCK + victim, str(watched_fd)],
            env=env,
            pass_fds=(write_fd, watched_fd),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            os.close(write_fd)
            os.close(watched_fd)
            ready, _, _ = select.select([read_fd], [], [], 30)
            assert ready, "the victim never reported reaching its failpoint"
            message = os.read(read_fd, 4096)
            assert message == line
            # The victim has told where it stands; it must now wait, round after
            # round, rather than go on or exit: its clock shows it doing so.
            waited = b""
            while waited.count(b"waiting\n") < 3:
                ready, _, _ = select.select([watch_fd], [], [], 30)
                assert ready, f"the victim did not wait after reporting (it slept: {waited!r})"
                chunk = os.read(watch_fd, 4096)
                assert chunk, f"the victim ended instead of waiting (it slept: {waited!r})"
                waited += chunk
            assert proc.poll() is None, "the victim must wait for the SIGKILL, not exit"
            os.kill(proc.pid, signal.SIGKILL)
            stdout, _ = proc.communicate(timeout=30)
            assert proc.returncode == -signal.SIGKILL
            assert stdout == b"before 1\nbefore 2\n"
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)
            os.close(read_fd)
            os.close(watch_fd)


AIMED_FROM_A_THREAD = """
import sys, threading, time
from harness.failpoints import arm_from_environ, failpoint
arm_from_environ()
def worker():
    failpoint("op.after_intent", "s001")  # the aim's anchor, hit on a thread of its own
    print("timer started", flush=True)
thread = threading.Thread(target=worker)
thread.start()
thread.join()
time.sleep(10)
print("survived", flush=True)
"""


class TestAimedKills:
    def test_a_kill_timed_from_a_point_hit_on_another_thread_lands(self) -> None:
        """A framework runs its tools on threads of its own (DBOS does): timed from a point
        hit there, the timer still ends the process by its signal's default action."""
        env = subprocess_env(HARNESS_KILL_AIM="op.after_intent s001@0.05")
        proc = subprocess.run(
            [sys.executable, "-c", AIMED_FROM_A_THREAD],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == -signal.SIGALRM, proc.stderr
        assert proc.stdout == "timer started\n"


class TestTheRuntimesHook:
    def test_the_points_are_the_runtimes_and_the_harnesss_own_in_protocol_order(self) -> None:
        """FAILPOINTS: the scripted model's model.issue first, then the runtime's crash points,
        with the harness's op.request before the effect, op.reply after the effect's middle and
        agent.before_exit after the runtime's; then a black box's, hit in the harness's
        servers (harness.blackbox)."""
        assert FAILPOINTS == (
            "model.issue",
            "op.before_intent",
            "op.after_intent",
            "op.request",
            "op.mid_effect",
            "op.reply",
            "op.after_effect",
            "op.after_finish",
            "recovery.after_decision",
            "recovery.before_retry",
            "recovery.after_hint",
            "journal.append",
            "journal.before_fsync",
            "compact.before_write",
            "compact.mid_write",
            "compact.before_rename",
            "compact.before_dir_fsync",
            "compact.after_dir_fsync",
            "recovery.reconcile",
            "reconcile.lookup",
            "agent.before_exit",
            "tool.received",
            "tool.before_reply",
            "model.received",
            "model.before_reply",
        )
        assert [p for p in FAILPOINTS if p in CRASH_POINTS] == list(CRASH_POINTS)

    def test_arming_installs_the_hook_and_disarm_removes_it(self) -> None:
        """Nothing armed, no hook (the runtime's points cost one test); armed, the runtime's
        points and the harness's are counted in one place; disarmed, no hook again."""
        arm_from_environ({})
        assert hooks._hook is None
        arm(parse_failpoints("op.after_intent=count"))
        hooks.failpoint("op.after_intent", "s001")  # as the runtime hits it
        failpoint("op.after_intent", "s002")  # as the harness does
        assert hit_ops() == {"op.after_intent": ["s001", "s002"]}
        disarm()
        assert hooks._hook is None

    def test_a_runtime_call_is_counted_with_the_harnesss_points(self, tmp_path: Path) -> None:
        """A call through the runtime hits its points through the hook, and the tool's op.reply
        through this module: both counted, in the order they were hit."""
        arm(parse_failpoints("op.after_intent=count,op.reply=count,op.after_effect=count"))

        def tool(name: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
            failpoint("op.reply", ctx.op_id)
            return {"ok": True}

        with Runtime.open(tmp_path / "journal") as runtime:
            assert runtime.call("s001", "read_file", {"path": "/a"}, tool).ok
        assert hit_counts() == {"op.after_intent": 1, "op.reply": 1, "op.after_effect": 1}
        assert hit_ops() == {
            "op.after_intent": ["s001"],
            "op.reply": ["s001"],
            "op.after_effect": ["s001"],
        }


class TestCancel:
    def test_cancel_is_in_the_grammar(self) -> None:
        """``cancel`` arms like any action, on a hit or on every hit."""
        assert parse_failpoints("op.after_intent@2=cancel") == (
            FailpointSpec("op.after_intent", "cancel", 2),
        )
        assert str(FailpointSpec("op.after_effect", "cancel")) == "op.after_effect=cancel"

    def test_the_task_at_the_point_is_cancelled_at_its_next_await(
        self, armed: Callable[[str], None], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The task that hit the point (and no other) is cancelled; the cancellation lands at
        its next await, and the supervisor is told the fault landed, with the op id."""
        read, write = os.pipe()
        monkeypatch.setenv(CHANNEL_ENV, str(write))
        armed("op.after_intent@2=cancel")
        went: list[str] = []

        async def call(op_id: str) -> None:
            failpoint("op.after_intent", op_id)
            went.append(f"{op_id} on")  # not yet: a cancellation lands at an await
            await asyncio.sleep(0)
            went.append(f"{op_id} past its await")

        async def batch() -> list[object]:
            return await asyncio.gather(*map(call, ("s1", "s2", "s3")), return_exceptions=True)

        results = asyncio.run(batch())
        os.close(write)
        with os.fdopen(read, "rb") as told:
            assert told.read() == b"fault cancel op.after_intent 2 s2\n"
        assert results[0] is None and results[2] is None
        assert isinstance(results[1], asyncio.CancelledError)
        assert went == ["s1 on", "s2 on", "s3 on", "s1 past its await", "s3 past its await"]

    def test_outside_a_task_it_does_nothing_and_says_so(
        self,
        armed: Callable[[str], None],
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """Hit in sync code there is nothing to cancel: it goes on, says so on stderr and
        tells the supervisor nothing (the fault did not land)."""
        read, write = os.pipe()
        monkeypatch.setenv(CHANNEL_ENV, str(write))
        armed("op.after_intent=cancel")
        failpoint("op.after_intent", "s1")
        os.close(write)
        with os.fdopen(read, "rb") as told:
            assert told.read() == b""
        assert "outside an asyncio task, nothing to cancel" in capsys.readouterr().err


def test_the_checkers_name_the_agents_last_failpoint_alike() -> None:
    """``harness.check.windows`` keeps its own copy of the exit hold point (it may not
    import the failpoints, which load the runtime): the two must be one name."""
    from harness.check import windows
    from harness.failpoints import EXIT_HOLD_POINT, FAILPOINTS

    assert windows.EXIT_HOLD_POINT == EXIT_HOLD_POINT
    assert EXIT_HOLD_POINT in FAILPOINTS
