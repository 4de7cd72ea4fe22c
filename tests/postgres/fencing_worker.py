"""A worker process of the fencing test: claims a task in PostgreSQL and runs its calls.

    python -m tests.postgres.fencing_worker URL LEDGER ROLE

Every real run of the tool appends ``<pid> <op id>`` to LEDGER (fsynced): the test's
ground truth, written by the tool, never by the journal. ROLE ``first`` runs s1,
then waits for a line on stdin before s2 (``first-between``), or waits inside s2
after its intent is committed, before its tool (``first-inside``), saying where it
waits on stdout; ``next`` recovers the task and runs s1 to s3. A call refused by
fencing prints ``fenced: <message>`` and exits 3.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from harness.runtime import CallContext, JournalFencedError, Runtime, ToolTable
from harness.runtime.classes import IdempotencyClass
from harness.runtime.hooks import set_crash_hook

FENCED = 3
TABLE = ToolTable({"pay": IdempotencyClass.NON_IDEMPOTENT}, source="<fencing test>")


def main(url: str, ledger: str, role: str) -> int:
    def pay(tool: str, args: Mapping[str, Any], ctx: CallContext) -> Any:
        fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{os.getpid()} {ctx.op_id}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return {"paid": args["amount"]}

    def wait(where: str) -> None:
        print(f"waiting {where}", flush=True)
        sys.stdin.readline()

    def inside(name: str, op_id: str) -> None:
        if (name, op_id) == ("op.after_intent", "s2"):
            wait(name)

    if role == "first-inside":
        set_crash_hook(inside)
    try:
        with Runtime.open(url, table=TABLE) as runtime:
            report = runtime.recover(pay)
            print("hints", " ".join(h.op_id for h in report.hints), flush=True)
            for n in (1, 2, 3):
                if role == "first-between" and n == 2:
                    wait("between")
                outcome = runtime.call(f"s{n}", "pay", {"amount": n}, pay)
                print(f"s{n} {outcome.status}", flush=True)
    except JournalFencedError as exc:
        print(f"fenced: {exc}", flush=True)
        return FENCED
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
