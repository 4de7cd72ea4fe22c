"""The tracer for statically linked programs against the library, on one C program.

The same program (it creates, writes, fsyncs a file and its folder, renames, truncates,
unlinks and makes a folder, then does it all again in a forked child, and once more in
the child after it execs the program again) is built dynamically linked and ``-static``.
The dynamic build runs with the library preloaded, the static one under the tracer: their
traces must be equal line for line, but for what differs between any two runs (pids,
modification times, the trial folder's path), their images must hold the same bytes, and a
power cut must rebuild the same files from each; also when the program ends by a SIGKILL
of its own process group, the tracer in it. A tracer built from a copy of its source that
drops its fsync lines is caught by the same comparison. Four threads, each with its own
file, give the same lines by file. The tracer alone: bad input, its exit status, a group
stopped and continued. A static black box (it makes one file durable, leaves another
unsynced, then execs the example agent) loses power under the tracer. Last, a power-loss
trial of the Temporal agent, whose dev server is a static Go program, runs and is judged
(where ``make agent-temporal`` built its environment). Without a C compiler (or a static
C library) nothing here can be built: skipped, saying so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.adapters import black_box
from harness.chaos import observer
from harness.chaos.observer import TRACE_FOLDER, power_cut, read_trace, start_trace
from harness.chaos.schedule import not_applicable
from tests.conftest import subprocess_env
from tests.integration.test_blackbox import AGENT, PHONE, ROOT, harness

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the tracer is Linux's ptrace and seccomp"
)

PROGRAM = r"""
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int files(const char *root, const char *tag) {
    char tmp[512], name[512], gone[512], folder[512];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", root, tag);
    snprintf(name, sizeof name, "%s/%s", root, tag);
    snprintf(gone, sizeof gone, "%s/%s-gone", root, tag);
    snprintf(folder, sizeof folder, "%s/sub-%s", root, tag);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, "durable", 7) != 7 || fsync(fd) != 0) return 1;
    if (write(fd, " appended", 9) != 9 || fdatasync(fd) != 0) return 1;
    if (pwrite(fd, "D", 1, 0) != 1 || close(fd) != 0) return 1;  /* never synced */
    int dir = open(root, O_RDONLY | O_DIRECTORY);
    if (dir < 0 || rename(tmp, name) != 0 || fsync(dir) != 0 || close(dir) != 0) return 1;
    fd = open(gone, O_WRONLY | O_CREAT, 0600);
    if (fd < 0 || write(fd, "lost", 4) != 4 || ftruncate(fd, 2) != 0) return 1;
    if (close(fd) != 0 || unlink(gone) != 0 || mkdir(folder, 0700) != 0) return 1;
    dir = openat(AT_FDCWD, folder, O_RDONLY | O_DIRECTORY);
    int inner = openat(dir, "inner", O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (inner < 0 || write(inner, "unsynced", 8) != 8) return 1;
    return close(inner) != 0 || close(dir) != 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[2], "again") == 0) return files(argv[1], "again");
    if (argc < 2 || files(argv[1], "parent")) return 1;
    pid_t pid = fork();
    if (pid == 0) { /* the child, then the program again in the child's process */
        if (files(argv[1], "child")) _exit(1);
        execl(argv[0], argv[0], argv[1], "again", (char *)NULL);
        _exit(1);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) return 1;
    if (argc == 3) kill(0, SIGKILL); /* "kill": the whole process group, a tracer in it too */
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
"""

THREADS = r"""
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static const char *root;

static void *work(void *tag) {
    char path[512];
    snprintf(path, sizeof path, "%s/thread-%s", root, (const char *)tag);
    for (int round = 0; round < 20; round++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd < 0 || write(fd, "0123456789", 10) != 10 || fsync(fd) != 0 || close(fd) != 0)
            return (void *)1;
    }
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t threads[4];
    static const char *tags[4] = {"a", "b", "c", "d"};
    if (argc != 2) return 1;
    root = argv[1];
    for (int i = 0; i < 4; i++) pthread_create(&threads[i], NULL, work, (void *)tags[i]);
    int failed = 0;
    for (int i = 0; i < 4; i++) {
        void *got;
        pthread_join(threads[i], &got);
        failed |= got != NULL;
    }
    int dir = open(root, O_RDONLY | O_DIRECTORY);
    return failed || dir < 0 || fsync(dir) != 0;
}
"""

PAUSER = r"""
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    char path[512];
    snprintf(path, sizeof path, "%s/paused", argv[1]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (argc != 2 || fd < 0 || write(fd, "a", 1) != 1) return 1;
    kill(0, SIGSTOP); /* the whole group, the tracer too */
    return write(fd, "b", 1) != 1 || fsync(fd) != 0;
}
"""

_SYNCED_LINE = "    case SYNCED:\n        if (failed) break;\n"
"""The tracer's fsync line, which the broken copy drops."""


def _compiler() -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc or gcc) to build the test's program and the tracer")
    return cc


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The program, built dynamically linked and statically linked."""
    return _built_both(tmp_path_factory.mktemp("programs"), "files.c", PROGRAM, "-O2")


def _built_both(folder: Path, name: str, source: str, *flags: str) -> dict[str, Path]:
    """``source`` (written to ``folder / name``) built statically and dynamically linked,
    by how; the test is skipped where either cannot be built."""
    cc = _compiler()
    (folder / name).write_text(source)
    built = {}
    for how, linking in (("static", ["-static"]), ("dynamic", [])):
        done = subprocess.run(
            [cc, *linking, *flags, "-o", str(folder / how), str(folder / name)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot build a {how} C program here: {done.stderr.strip()[-200:]}")
        built[how] = folder / how
    return built


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The library and the tracer built afresh from their sources, and a broken tracer."""
    _compiler()
    folder = tmp_path_factory.mktemp("observer")
    source = observer.TRACER_SOURCE.read_text()
    assert source.count(_SYNCED_LINE) == 1, "the tracer's fsync line moved: update the test"
    broken = folder / "fstrace-broken.c"
    broken.write_text(source.replace(_SYNCED_LINE, "    case SYNCED:\n        break;\n"))
    return {
        "library": observer.build_library(folder),
        "tracer": observer.build_tracer(folder),
        "broken": observer.build_tracer(folder, source=broken),
    }


def _observed(root: Path, program: Path, tool: Path, ending: str) -> None:
    """Run ``program`` on ``root`` observed: under the tracer, or with the library preloaded;
    ``ending`` ``kill``: it ends by SIGKILL to its own process group."""
    root.mkdir()
    start_trace(root)
    env = observer.observer_env(root, tool)
    words = [str(program), str(root), *([ending] if ending == "kill" else [])]
    if tool.suffix != ".so":
        del env["LD_PRELOAD"]
        words = [str(tool), "--", *words]
    done = subprocess.run(words, env=subprocess_env(**env), start_new_session=True, timeout=60)
    assert done.returncode == (-9 if ending == "kill" else 0)


def _told(root: Path) -> list[str]:
    """The trace's lines with what varies between runs named alike: each pid by its order
    of first appearance, no modification time, the trial folder as ROOT; each image line
    with its bytes' length and first bytes."""
    real = os.path.realpath(root)
    pids: dict[int, str] = {}
    told = []
    for line in read_trace(root / TRACE_FOLDER):
        if line.kind == "baseline":
            continue
        pid = pids.setdefault(line.pid, f"P{len(pids) + 1}")
        numbers = list(line.numbers)
        if line.left() is not None:
            numbers = numbers[:-1]  # the modification time
        if line.kind == "fsync":
            name = numbers[0]
            data = (root / TRACE_FOLDER / name).read_bytes()[: int(numbers[1])]
            numbers[0] = re.sub(r"^img-\d+-", f"img-{pid}-", name) + f"={data!r}"
        paths = [p.replace(real, "ROOT") for p in line.paths]
        told.append(" ".join([line.kind, pid, *numbers]) + "\t" + "\t".join(paths))
    return told


def _files(root: Path) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(root)): None if path.is_dir() else path.read_bytes()
        for path in sorted(root.rglob("*"))
        if TRACE_FOLDER not in path.relative_to(root).parts
    }


def _differences(
    tmp_path: Path,
    programs: dict[str, Path],
    tools: dict[str, Path],
    tracer: str,
    ending: str = "exit",
) -> list[str]:
    """The library's trace of the dynamic build against ``tracer``'s of the static build:
    every line that differs, then the power cuts' files if they differ."""
    by_library, by_tracer = tmp_path / "library", tmp_path / tracer
    _observed(by_library, programs["dynamic"], tools["library"], ending)
    _observed(by_tracer, programs["static"], tools[tracer], ending)
    library_lines, tracer_lines = _told(by_library), _told(by_tracer)
    assert library_lines, "the library saw nothing: the comparison would prove nothing"
    differ = [
        f"line {n}: library {a!r}, tracer {b!r}"
        for n, (a, b) in enumerate(zip(library_lines, tracer_lines, strict=False), 1)
        if a != b
    ]
    if len(library_lines) != len(tracer_lines):
        differ.append(f"{len(library_lines)} lines by the library, {len(tracer_lines)} traced")
    cuts: dict[str, object] = {}
    for root in (by_library, by_tracer):
        done = power_cut(root, ["drop"], "fstrace", trial_seed=7)
        cuts[root.name] = (done["landed"], done["files"], done["removed"], _files(root))
    if cuts[by_library.name] != cuts[by_tracer.name]:
        differ.append(f"the cuts differ: {cuts}")
    return differ


class TestSameTraceAsTheLibrary:
    """The tracer writes the library's lines, so a power cut rebuilds the same files."""

    @pytest.mark.parametrize("ending", ["exit", "kill"])
    def test_a_static_build_under_the_tracer_is_traced_as_the_dynamic_one_preloaded(
        self, tmp_path: Path, programs: dict[str, Path], tools: dict[str, Path], ending: str
    ) -> None:
        """Line for line the same trace (pids and times aside), the same images, the same
        cut; also when the program ends by a SIGKILL of its group, which kills the tracer."""
        assert _differences(tmp_path, programs, tools, "tracer", ending) == []
        # The pwrite never synced is undone; the names no folder fsync made durable are gone
        # (a folder is named before the next program fsyncs the root, its file not).
        assert _files(tmp_path / "tracer") == {
            "again": b"durable appended",
            "child": b"durable appended",
            "parent": b"durable appended",
            "sub-child": None,
            "sub-parent": None,
        }

    def test_a_tracer_that_drops_its_fsync_lines_is_caught(
        self, tmp_path: Path, programs: dict[str, Path], tools: dict[str, Path]
    ) -> None:
        """A copy of the tracer without its fsync lines: the comparison names them."""
        differ = _differences(tmp_path, programs, tools, "broken")
        assert differ and any("fsync" in line for line in differ), differ


class TestThreads:
    """Threads of one process, each with its own file."""

    def test_a_static_program_s_threads_are_traced_as_the_library_sees_them(
        self, tmp_path: Path, tools: dict[str, Path]
    ) -> None:
        """Four threads append and fsync their own file: by file, the same lines and images
        (the threads' lines interleave as they ran), and the same cut."""
        built = _built_both(tmp_path, "threads.c", THREADS, "-pthread")
        by_library, by_tracer = tmp_path / "library", tmp_path / "tracer"
        _observed(by_library, built["dynamic"], tools["library"], "exit")
        _observed(by_tracer, built["static"], tools["tracer"], "exit")
        told = {root.name: _by_file(root) for root in (by_library, by_tracer)}
        assert len(told["library"]) == 5  # four files and the folder
        assert told["tracer"] == told["library"]
        assert {line.split(" ")[1] for lines in told["tracer"].values() for line in lines} == {"P1"}
        for root in (by_library, by_tracer):
            assert power_cut(root, ["drop"], "fstrace", trial_seed=7)["landed"]
        assert _files(by_tracer) == _files(by_library)
        assert _files(by_tracer)["thread-a"] == b"0123456789" * 20


def _by_file(root: Path) -> dict[str, list[str]]:
    """``_told``'s lines by the path they name, in order, without the image's number (a
    process numbers its images in the order its threads fsynced); the pid is kept (each
    thread's lines name its process, not the thread)."""
    by_path: dict[str, list[str]] = {}
    for line in _told(root):
        head, _, path = line.partition("\t")
        by_path.setdefault(path, []).append(re.sub(r" img-P\d+-\d+=", " img=", head))
    return by_path


class TestTheTracerAlone:
    """Its command line, its exit status, and where it is used."""

    def test_bad_input_is_one_line_and_exit_2(self, tools: dict[str, Path], tmp_path: Path) -> None:
        """No command after ``--``, or a trace folder that is not there: one line, exit 2."""
        done = subprocess.run([str(tools["tracer"])], capture_output=True, text=True, check=False)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
        env = observer.observer_env(tmp_path, tools["tracer"])  # no trace folder made
        del env["LD_PRELOAD"]
        done = subprocess.run(
            [str(tools["tracer"]), "--", "true"],
            env=subprocess_env(**env),
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        (said,) = done.stderr.strip().splitlines()
        assert said.startswith("fstrace: cannot open the trace ")

    def test_it_exits_with_the_command_s_status(
        self, tmp_path: Path, tools: dict[str, Path]
    ) -> None:
        """The command's exit status, and its death by a signal as that signal."""
        start_trace(tmp_path)
        env = observer.observer_env(tmp_path, tools["tracer"])
        del env["LD_PRELOAD"]
        for script, status in (("exit 3", 3), ("kill -TERM $$", -15)):
            done = subprocess.run(
                [str(tools["tracer"]), "--", "sh", "-c", script],
                env=subprocess_env(**env),
                check=False,
                timeout=60,
            )
            assert done.returncode == status

    def test_a_paused_group_resumes_under_the_tracer(
        self, tmp_path: Path, tools: dict[str, Path]
    ) -> None:
        """SIGSTOP to the group (the tracer in it) then SIGCONT, as the pause fault does: the
        command goes on, and its writes after the pause are traced."""
        cc = _compiler()
        (tmp_path / "pauser.c").write_text(PAUSER)
        program = tmp_path / "pauser"
        subprocess.run([cc, "-static", "-o", str(program), str(tmp_path / "pauser.c")], check=True)
        root = tmp_path / "root"
        root.mkdir()
        start_trace(root)
        env = observer.observer_env(root, tools["tracer"])
        del env["LD_PRELOAD"]
        started = subprocess.Popen(
            [str(tools["tracer"]), "--", str(program), str(root)],
            env=subprocess_env(**env),
            start_new_session=True,
        )
        try:
            tracer = psutil.Process(started.pid)
            for _ in range(6000):  # it stops its own group, the tracer with it
                if tracer.status() == psutil.STATUS_STOPPED or started.poll() is not None:
                    break
                time.sleep(0.01)
            assert tracer.status() == psutil.STATUS_STOPPED
            os.killpg(started.pid, signal.SIGCONT)
            assert started.wait(timeout=60) == 0
        finally:
            if started.poll() is None:
                os.killpg(started.pid, signal.SIGKILL)
                started.wait()
        assert (root / "paused").read_bytes() == b"ab"
        kinds = [line.kind for line in read_trace(root / TRACE_FOLDER) if line.kind != "baseline"]
        assert kinds == ["create", "write", "write", "fsync"]

    def test_a_static_program_is_observed_under_the_tracer_or_refused_saying_why(
        self, programs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """Where the tracer runs, a static agent gets power loss and its command runs under
        the tracer without the library; turned off, it is refused in one line."""
        static, dynamic = programs["static"], programs["dynamic"]
        assert observer.tracer() is not None, observer.tracer_unavailable()
        assert not_applicable("power-loss", black_box(f"cmd:{static}")) is None
        env = {**observer.observer_env(tmp_path, Path("/lib/fsobserve-x.so")), "A": "1"}
        words, traced = observer.observed_command([str(static), "--flag"], env)
        assert words == [str(observer.tracer()), "--", str(static), "--flag"]
        assert "LD_PRELOAD" not in traced and traced["A"] == "1"
        assert observer.observed_command([str(dynamic)], env) == ([str(dynamic)], env)
        monkeypatch.setenv(observer.ENV_TRACER_SWITCH, "off")
        assert not_applicable("power-loss", black_box(f"cmd:{static}")) == (
            f"cmd:{static} cannot be observed: {static} is statically linked: no loader "
            f"preloads the observer's library into it; the tracer is turned off "
            f"({observer.ENV_TRACER_SWITCH}=off)"
        )


WRAPPER = r"""
#include <fcntl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int fd = open("durable.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "kept", 4) != 4 || fsync(fd) != 0 || close(fd) != 0) return 1;
    int dir = open(".", O_RDONLY);
    if (dir < 0 || fsync(dir) != 0 || close(dir) != 0) return 1;
    fd = open("notes.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "lost", 4) != 4 || close(fd) != 0 || argc < 2) return 1;
    execv(argv[1], argv + 1);
    return 127;
}
"""


def test_a_static_black_box_loses_power_under_the_tracer(tmp_path: Path) -> None:
    """Its files and those of the agent it execs are traced: the cut lands, keeps the
    synced file and drops the unsynced ones (the library would see none of them)."""
    cc = _compiler()
    (tmp_path / "wrapper.c").write_text(WRAPPER)
    wrapper = tmp_path / "wrapper"
    done = subprocess.run(
        [cc, "-static", "-O2", "-o", str(wrapper), str(tmp_path / "wrapper.c")],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot build a static C program here: {done.stderr.strip()[-200:]}")
    ran = harness(
        "trial",
        PHONE,
        "--seed",
        "7",
        "--runtime",
        f"cmd:{wrapper} {sys.executable} {ROOT / AGENT}",
        "--schedule",
        '[{"failpoints":"model.received@2=kill","after_death":"power-loss:drop"}]',
        "--reports",
        str(tmp_path / "reports"),
    )
    assert ran.returncode in (0, 1), ran.stderr
    (folder,) = (tmp_path / "reports").glob("*-trial/trial")
    verdicts = {v["invariant"]: v for v in json.loads((folder / "verdicts.json").read_text())}
    assert verdicts["F"]["status"] == "pass", verdicts["F"]
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    (cut,) = [e for e in events if e["event"] == "fault" and e["fault"] == "power-loss:drop"]
    assert cut["landed"], cut
    assert cut["files"]["durable.txt"]["kept"] == 4
    assert {"notes.txt", "progress.jsonl"} <= set(cut["removed"])


TEMPORAL = "examples/agents/temporal"
TEMPORAL_CUT = '[{"failpoints":"op.reply@3=kill","after_death":"power-loss:drop"}]'


@pytest.mark.long
def test_a_power_loss_trial_of_the_temporal_agent_runs_and_is_judged(tmp_path: Path) -> None:
    """The dev server runs under the tracer: the cut lands on its SQLite file, the server is
    started again on what the cut rebuilt, and every invariant is judged on the ledger."""
    if not (ROOT / TEMPORAL / ".venv" / "bin" / "temporal").exists():
        pytest.skip("the Temporal agent's environment is not built (make agent-temporal)")
    ran = harness(
        "trial",
        f"{TEMPORAL}/phone_task.toml",
        "--seed",
        "507990045",
        "--runtime",
        f"cmd:{TEMPORAL}/.venv/bin/python {TEMPORAL}/agent.py",
        "--schedule",
        TEMPORAL_CUT,
        "--reports",
        str(tmp_path),
    )
    assert ran.returncode in (0, 1), ran.stderr
    (folder,) = tmp_path.glob("*-trial/trial")
    verdicts = {v["invariant"]: v for v in json.loads((folder / "verdicts.json").read_text())}
    assert verdicts["F"]["status"] == "pass", verdicts["F"]
    for key in ("I1", "I2", "I7", "I8"):
        assert verdicts[key]["status"] in ("pass", "fail") and verdicts[key]["applied"]
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    (cut,) = [e for e in events if e["event"] == "fault" and e["fault"] == "power-loss:drop"]
    assert cut["landed"] and "service-temporal/temporal.db" in cut["files"], cut
    started = [e for e in events if e["event"] == "service" and e["action"] == "start"]
    assert len(started) == 2  # before the first life, and on the rebuilt file
