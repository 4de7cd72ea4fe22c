"""Prints, as one JSON line, what a Python program sees of how it was started; exits argv[1]."""

import json
import os
import signal
import sys
import threading

import helper  # type: ignore[import-not-found]  # a module of the program's own folder

seen = {
    "argv": sys.argv,
    "path0": sys.path[0],
    "file": __file__,
    "name": __name__,
    "spec": None if __spec__ is None else __spec__.name,
    "main_is_me": sys.modules["__main__"].__dict__ is globals(),
    "cwd": os.getcwd(),
    "marker": os.environ.get("WARM_PROBE"),
    "tmpdir": os.environ.get("TMPDIR"),
    "stdin": sys.stdin.read(),
    "tty": [os.isatty(fd) for fd in (0, 1, 2)],
    "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
    "threads": threading.active_count(),
    "sigint": str(signal.getsignal(signal.SIGINT)),
    "helper": helper.NAME,
    "group_leader": os.getpgrp() != os.getpid(),
}
print(json.dumps(seen))
print("to stderr", file=sys.stderr)
if sys.argv[1:2] == ["raise"]:
    raise RuntimeError("the probe raised")
sys.exit(int(sys.argv[1]) if sys.argv[1:] else 0)
