"""``python -m harness.bench [--quick] [--cycles N] [--out DIR]``: the benchmarks (``make bench``).

The same as ``python -m harness bench``: the command is ``harness.commands.bench``.
"""

from __future__ import annotations

from harness.commands.bench import main

if __name__ == "__main__":
    raise SystemExit(main())
