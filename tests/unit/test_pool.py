"""The campaign's worker pool: results in order, without a slow task holding the workers.

A trial of a long scenario takes seconds where the others take milliseconds. Handed
over in order, its result holds back the later ones; it must not hold back the workers,
or one idles behind it.
"""

from __future__ import annotations

import time
from pathlib import Path

from harness.chaos.pool import WorkerPool

OTHERS = 12


def _nothing() -> None:
    pass


def _task(job: tuple[Path, int, float]) -> bool | int:
    """Task 0 waits for every other task to have run (up to ``wait`` seconds, so a pool that
    cannot run them beside it still ends); the others leave a mark and return their number."""
    folder, n, wait = job
    if n > 0:
        (folder / str(n)).touch()
        return n
    deadline = time.monotonic() + wait
    while len(list(folder.iterdir())) < OTHERS and time.monotonic() < deadline:
        time.sleep(0.01)
    return len(list(folder.iterdir())) == OTHERS


def test_a_slow_task_holds_back_its_result_not_the_workers(tmp_path: Path) -> None:
    pool = WorkerPool(2, _nothing)
    try:
        results = list(pool.map(_task, [(tmp_path, n, 30.0) for n in range(OTHERS + 1)]))
    finally:
        pool.close()
    assert pool.window < OTHERS  # more tasks than the window: they ran past the slow one
    assert results == [True, *range(1, OTHERS + 1)]


def test_with_a_stop_no_more_than_the_window_runs_past_the_oldest(tmp_path: Path) -> None:
    """With a stop, what runs after it is the same however long each task took: the window
    of tasks from the oldest result not yet handed over."""
    pool = WorkerPool(2, _nothing)
    try:
        jobs = [(tmp_path, n, 1.0) for n in range(OTHERS + 1)]
        results = list(pool.map(_task, jobs, stop=lambda result: result is False))
    finally:
        pool.close()
    assert results == [False, *range(1, pool.window)]
