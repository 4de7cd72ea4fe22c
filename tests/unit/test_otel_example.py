"""``examples/otel_metrics.py``: the journal listener feeds OpenTelemetry (with the otel extra)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harness.runtime import CallContext, Runtime, ToolTable

pytest.importorskip("opentelemetry.sdk.metrics", reason="the otel extra is not installed")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "otel_metrics.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("otel_metrics", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tool(tool: str, args: Mapping[str, Any], ctx: CallContext) -> dict[str, str]:
    return {"ok": ctx.op_id}


def test_records_bytes_and_fsyncs_reach_the_meter(tmp_path: Path) -> None:
    """Three calls: six intent and finish records counted by kind, every byte written
    counted, one fsync duration per write."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    listener = _example().journal_metrics(provider.get_meter("test"))
    journal = tmp_path / "journal"
    with Runtime.open(journal, table=ToolTable.shipped(), listener=listener) as runtime:
        runtime.recover(_tool)
        start = journal.stat().st_size
        for n in range(3):
            runtime.call(f"s{n}", "alarm", {"n": n}, _tool)
        end = journal.stat().st_size
    data = reader.get_metrics_data()
    assert data is not None
    metrics: dict[str, Any] = {
        m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    }
    by_kind = {p.attributes["kind"]: p.value for p in metrics["journal.records"].data.data_points}
    assert by_kind["intent"] == 3 and by_kind["finish"] == 3
    (written,) = metrics["journal.bytes"].data.data_points
    assert written.value >= end - start
    (fsyncs,) = metrics["journal.fsync.duration"].data.data_points
    assert fsyncs.count == 7  # the start's one write, then an intent and a finish per call


def test_the_script_runs_and_prints_the_metrics() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=True
    )
    assert "journal.fsync.duration" in done.stdout
