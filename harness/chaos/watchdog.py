"""A watchdog process: it ends a server's process group and removes its folder once the
harness's pipe to it closes, so that a harness killed outright (SIGKILL) leaves nothing.

    dog = watch(server.pid, folder)   # the server leads a process group of its own
    ...
    release(dog, forget=True)         # the harness ended the group itself

The watchdog reads its pipe to the end. An end with no word (the harness closed it, or
died) ends the group (SIGINT, then SIGKILL after 5 s) and removes the folder; the word
``forget`` first makes it exit and leave both alone (a server the harness brought down
on purpose and keeps the files of, as a power cut does). A harness that ended the group
itself must say ``forget``: once a group is gone its id is free, and the next process to
lead a group of its own may get it (pid_max is often 32,768, and a campaign forks thousands
of lives a minute), so a watchdog that ended "it" then would end another
program's group. A Ctrl-C at the terminal is the harness's to handle: the watchdog ignores
SIGINT and leads a session of its own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["FORGET", "release", "watch"]

FORGET = b"forget"
"""Written before the pipe closes: the watchdog leaves the group and the folder alone."""
STOP_SECONDS = 10.0

_WATCHDOG = """
import os, shutil, signal, sys, time
group, folder = int(sys.argv[1]), sys.argv[2]
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the harness's to handle
said = sys.stdin.buffer.read()  # until the harness closes the pipe, or dies
if said == b"forget":
    sys.exit(0)
try:
    os.killpg(group, signal.SIGINT)
    for _ in range(100):
        time.sleep(0.05)
        os.killpg(group, 0)
    os.killpg(group, signal.SIGKILL)
except (ProcessLookupError, PermissionError):
    pass
shutil.rmtree(folder, ignore_errors=True)
"""


def watch(group: int, folder: Path) -> subprocess.Popen[bytes]:
    """A process that ends the process group ``group`` and removes ``folder`` once this
    one's pipe to it closes: at ``release``, or when the harness dies without one."""
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(group), str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )


def release(dog: subprocess.Popen[bytes], *, forget: bool) -> None:
    """Close the pipe to ``dog`` and wait for it: with ``forget`` it leaves the group and
    the folder alone (say it whenever the harness ended the group itself), else it ends
    the group and removes the folder."""
    assert dog.stdin is not None
    try:
        if forget:
            dog.stdin.write(FORGET)
        dog.stdin.close()
    except BrokenPipeError:
        pass  # it died: nothing to tell it
    try:
        dog.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        dog.kill()
        dog.wait()
