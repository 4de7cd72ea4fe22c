"""A small process pool that can be stopped at any moment without leaking.

``multiprocess.Pool`` respawns workers that die and can hang in ``terminate``
when an idle worker holds its task queue's lock, which is exactly the state an
interrupt finds it in. This pool is built from ``multiprocess`` processes and
queues instead, and its parent alone decides every worker's life:

- workers ignore SIGINT (Ctrl-C reaches the whole foreground group; only the
  parent acts on it) and, on SIGTERM, SIGKILL their agents and exit at once;
- a worker is sent that SIGTERM by the kernel when its parent dies, however it
  dies (``PR_SET_PDEATHSIG``): a harness killed with SIGKILL leaves no worker
  waiting on its queue, nor any agent of one;
- at most ``window`` tasks are in flight, so stopping early only drains them;
- ``abort`` SIGTERMs every worker, waits, SIGKILLs stragglers, and never
  starts another.

Results come back in submission order. Tasks and results cross the queues pickled by the
standard library's C pickler where it can (a trial's result is thousands of objects, which
dill, in pure Python, took milliseconds to walk); dill only for what it alone can pickle.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import multiprocess
from multiprocess.reduction import ForkingPickler

from harness.chaos.supervisor import kill_all
from harness.exits import EXIT_INTERRUPTED
from harness.runtime.errors import HarnessError

__all__ = ["WorkerError", "WorkerPool", "WorkerRefusal"]

_ABORT_GRACE_S = 5.0


class WorkerError(HarnessError):
    """A task raised inside a pool worker: a bug in the harness, not a verdict.

    Remedy: read the worker's traceback in the message.
    """


class WorkerRefusal(HarnessError):
    """A task inside a pool worker refused its input (a ``HarnessError`` such as a
    scenario whose checks do not hold): its one-line message, without a traceback.

    Remedy: the message names the file and what to fix.
    """


class _Refused:
    """What a worker sends back for a task that refused its input."""

    def __init__(self, message: str) -> None:
        self.message = message


def _pack(value: Any) -> bytes:
    """``value`` pickled: by the C pickler, or by dill where that one cannot (a closure)."""
    try:
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError):
        return bytes(ForkingPickler.dumps(value, pickle.HIGHEST_PROTOCOL))  # dill's


def _die_with_agents(signum: int, frame: object) -> None:
    kill_all()
    os._exit(EXIT_INTERRUPTED + signum)


_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """Have the kernel send SIGTERM when the parent dies (Linux), and die now if it
    already has: the queues' pipes never close for a worker, which holds both ends."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(EXIT_INTERRUPTED + signal.SIGTERM)


def _worker_main(
    tasks: Any,
    results: Any,
    initializer: Callable[..., None],
    initargs: tuple[Any, ...],
    parent: int,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _die_with_agents)
    _die_with_parent(parent)
    initializer(*initargs)
    while (item := tasks.get()) is not None:
        index, function, argument = pickle.loads(item)
        try:
            results.put(_pack((index, True, function(argument))))
        except HarnessError as exc:  # bad input found in the worker: one line, as at home
            results.put(_pack((index, False, _Refused(str(exc)))))
        except BaseException:
            results.put(_pack((index, False, traceback.format_exc())))
        finally:
            kill_all()


class WorkerPool:
    def __init__(
        self,
        workers: int,
        initializer: Callable[..., None],
        initargs: tuple[Any, ...] = (),
        *,
        window: int | None = None,
    ) -> None:
        self.window = window or 2 * workers
        self._submitted = 0
        self._tasks = multiprocess.SimpleQueue()
        self._results = multiprocess.SimpleQueue()
        self._workers = [
            multiprocess.Process(
                target=_worker_main,
                args=(self._tasks, self._results, initializer, initargs, os.getpid()),
                daemon=True,
            )
            for _ in range(workers)
        ]
        for worker in self._workers:
            worker.start()

    def map(
        self,
        function: Callable[[Any], Any],
        arguments: Iterable[Any],
        *,
        stop: Callable[[Any], bool] | None = None,
    ) -> Iterator[Any]:
        """``function(argument)`` for each argument, in order; ``stop`` ends the submitting.

        Without ``stop``, ``window`` tasks are in flight at all times: one slow task (a
        long scenario's trial, seconds where others take milliseconds) holds back only its
        own result, which the later ones wait behind, not the workers. With ``stop``, at
        most ``window`` tasks run past the oldest result not yet handed over, so a stop
        ends after the same tasks however long each took."""
        pending = iter(arguments)
        order: list[int] = []  # the pool's number of each submitted argument
        next_out = 0
        done: dict[int, Any] = {}
        stopping = False
        in_flight = 0
        while True:
            ahead = in_flight if stop is None else len(order) - next_out
            while not stopping and ahead < self.window:
                argument = next(pending, _END)
                if argument is _END:
                    stopping = True
                    break
                order.append(self.submit(function, argument))
                in_flight += 1
                ahead += 1
            if next_out == len(order):
                return
            if order[next_out] not in done:
                index, value = self.next_result()
                done[index] = value
                in_flight -= 1
                continue
            result = done.pop(order[next_out])
            next_out += 1
            if stop is not None and stop(result):
                stopping = True
            yield result

    def submit(self, function: Callable[[Any], Any], argument: Any) -> int:
        """Hand ``function(argument)`` to a worker; its number, which ``next_result`` gives
        back with its value. The caller bounds how many are in flight."""
        index = self._submitted
        self._tasks.put(_pack((index, function, argument)))
        self._submitted += 1
        return index

    def next_result(self) -> tuple[int, Any]:
        """The next task to finish, in any order: its number and its value. A task that
        raised raises here (``WorkerRefusal``, ``WorkerError``)."""
        index, ok, value = pickle.loads(self._results.get())
        if not ok and isinstance(value, _Refused):
            raise WorkerRefusal(value.message)
        if not ok:
            raise WorkerError(f"a pool worker failed:\n{value}")
        return index, value

    def close(self) -> None:
        """Let every worker finish and exit."""
        for _ in self._workers:
            self._tasks.put(None)
        for worker in self._workers:
            worker.join()

    def abort(self) -> None:
        """Stop every worker now; each takes its agents down with it."""
        for worker in self._workers:
            if worker.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGTERM)
        deadline = time.monotonic() + _ABORT_GRACE_S
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive() and worker.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGKILL)
                worker.join()


_END = object()
