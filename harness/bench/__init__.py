"""Benchmarks: every figure a ratio against a baseline measured in the same run.

``python -m harness.bench`` (``make bench``) measures, prints a table of each
figure beside its target with "holds" or "misses", and writes
``reports/bench/<run-id>.json`` and a PNG plot of the scaling figures beside
it (``harness.bench.plot``). A missed target is a finding, not a failure:
the command exits 0 whatever the figures say, and 2 on bad arguments.
Subjects and baselines are interleaved (A B A B ...) and each figure is a
ratio of medians, timed with ``time.perf_counter_ns``.

1. Cycle rate, crash-restart cycles per second. One harness cycle: the real
   supervisor starts an incarnation (``fork`` launcher: forked by the fork
   server; or ``exec``), it
   recovers from its journal, runs one journaled call, is SIGKILLed at the
   ``op.after_finish`` hand-shake and reaped. Baselines: the exec loop
   (spawn ``python -I -S``, SIGKILL once started, reap) and the fork loop (a
   warm parent forks a child doing one raw journaled call, SIGKILL, reap).
   Targets: harness-fork / exec-loop ≥ 1x; harness-fork / fork-loop ≥ 0.5x
   (moonshot); harness-exec / exec-loop is reported for information.
2. Journaled call cost: ``Runtime.call`` of a tool making one SQLite
   ``synchronous=FULL`` commit, against two fsync'd appends and the same commit
   by hand. Target ≤ 1.25x. A batch of 8 calls issued together on the
   ``AsyncRuntime`` (one write and fsync for their intents, one for their
   finishes) against the same 8 calls one after another on the ``Runtime``, of
   a tool that does nothing (the journal's cost alone). Target ≤ 0.5x: group
   commit must at least halve a call's journal cost when a model issues 8 at once.
3. Failpoint cost: an unarmed ``failpoint`` against an empty two-argument
   call. Target ≤ 1.5x.
4. Agent start-up: ``python -I -m harness.agent`` on a finished trial (import,
   recover, nothing to do, exit) against ``python -I -S -c "import sqlite3"``.
   Target ≤ 1.5x; a miss adds the agent's heaviest ``-X importtime`` entries.
5. Scaling. Recovery planning (scan, fold, plan) time per record at 100,000
   records against 10: linear is ≈ 1, target ≤ 1.5x (the issue gives no
   number; 1.5 tells linear from n log n over four decades). Campaign trials
   per second at 100, 1,000 and 5,000 trials, biggest against smallest: flat,
   0.85-1.15x, in RAM as ``chaos`` runs them. Two workers against one:
   ≥ 1.8x (a note gives how busy the CPUs were: a campaign that waits on
   fsyncs is bound by the disk, not the cores). The default campaign's
   exhaustive trials in RAM (the default ``--workdir ram``) against the same
   trials on disk, twice each, interleaved: ≥ 2x (the smallest campaign both
   ways is shown for information). The
   supervisor's (pool worker's) RSS, big against small: ≤ 1.15x.
6. A start-up that stays flat (``harness.bench.compaction``). A long-lived
   agent's history of 100,000 settled ops, compacted (``Runtime.compact``):
   open plus recovery in a fresh process against a 1,000-op journal, ≤ 2x, the
   history kept whole and with a retention of its last 1,000 ops; the peak RSS
   of that start, kept whole, against the 1,000-op journal's, ≤ 2x;
   compaction's time per settled op at 100,000 ops against 1,000, ≤ 1.5x
   (linear is ≈ 1); a journaled call (figure 2's) on the compacted history
   against one on a fresh journal, ≤ 1.25x. The history uncompacted is given
   in a note.
7. The power-loss observer's cost (``harness.bench.observed``): a journaled
   call in a process under the observer against the same call not observed,
   ≤ 2x; a crash-restart cycle (fork launcher) cut after every kill, its
   folder rebuilt from the trace, against a plain cycle, ≥ 0.5x; the mean
   time of the default campaign's exhaustive trials that are not power
   losses with the observer on against off (``HARNESS_FS_OBSERVER=off``),
   ≤ 1.1x: only power-loss trials may pay for it (their mean against the
   rest's is given for information).

``--only STEP`` measures only the named steps.
"""

from harness.bench.figures import (
    BenchError,
    BenchReport,
    Figure,
    Target,
    figures_table,
    interleave,
    machine_info,
    median_of,
)
from harness.bench.run import FULL, QUICK, BenchSettings, Measurements, run_bench

__all__ = [
    "FULL",
    "QUICK",
    "BenchError",
    "BenchReport",
    "BenchSettings",
    "Figure",
    "Measurements",
    "Target",
    "figures_table",
    "interleave",
    "machine_info",
    "median_of",
    "run_bench",
]
