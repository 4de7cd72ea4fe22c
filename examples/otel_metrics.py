"""Feeding the runtime's journal events to OpenTelemetry metrics.

``journal_metrics(meter)`` makes a listener for ``Runtime.open(..., listener=...)``:
a counter of records appended (by kind), a counter of bytes written, and a
histogram of fsync durations. Run it as a script to see the metrics of a few
calls printed by the console exporter::

    pip install 'agent-crash-harness[otel]'
    python examples/otel_metrics.py
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opentelemetry.metrics import Meter

from harness.runtime import CallContext, Runtime, ToolTable
from harness.runtime.journal import Appended, JournalEvent, JournalListener, Synced


def journal_metrics(meter: Meter) -> JournalListener:
    """A journal listener that records appends, bytes and fsync durations on ``meter``."""
    records = meter.create_counter(
        "journal.records", unit="{record}", description="Records appended to the journal"
    )
    written = meter.create_counter(
        "journal.bytes", unit="By", description="Bytes written to the journal"
    )
    fsyncs = meter.create_histogram(
        "journal.fsync.duration", unit="s", description="How long each journal fsync took"
    )

    def listener(event: JournalEvent) -> None:
        if isinstance(event, Appended):
            for record in event.records:
                records.add(1, {"kind": record.kind})
            written.add(event.end - event.offset)
        elif isinstance(event, Synced):
            fsyncs.record(event.seconds)

    return listener


def send(tool: str, args: Mapping[str, Any], ctx: CallContext) -> dict[str, str]:
    return {"sent": args["to"], "key": ctx.idempotency_key}


def main() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        PeriodicExportingMetricReader,
    )

    reader = PeriodicExportingMetricReader(ConsoleMetricExporter())
    provider = MeterProvider(metric_readers=[reader])
    listener = journal_metrics(provider.get_meter("agent"))
    table = ToolTable.shipped()
    with (
        tempfile.TemporaryDirectory() as folder,
        Runtime.open(Path(folder) / "journal", table=table, listener=listener) as runtime,
    ):
        runtime.recover(send)
        for n in range(3):
            runtime.call(f"step-{n}", "send_email", {"to": f"user{n}@example.com"}, send)
    provider.shutdown()  # exports what was recorded


if __name__ == "__main__":
    main()
