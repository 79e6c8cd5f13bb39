"""Helpers for the load, crash and outage tests: a collector as a subprocess, senders built on
the real OpenTelemetry SDK that remember which spans the collector acknowledged, and agent runs
whose expected findings are known."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

REPO = Path(__file__).resolve().parent.parent
# Child processes import the tests from the checkout, and mast_otel as this process does (the
# installed package, or a source tree named by PYTHONPATH; see scripts/dev-links.sh).
PYTHONPATH = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
ENV = {**os.environ, "PYTHONPATH": PYTHONPATH}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AckRecorder(SpanExporter):
    """Wraps an exporter and remembers the (trace, span) ids of every batch whose export
    returned SUCCESS: what the collector acknowledged."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self.acked: set[tuple[str, str]] = set()
        self.roots: set[str] = set()
        self.failed_batches = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                for span in spans:
                    ctx = span.get_span_context()
                    trace_id = format(ctx.trace_id, "032x")
                    self.acked.add((trace_id, format(ctx.span_id, "016x")))
                    if span.parent is None:
                        self.roots.add(trace_id)
            else:
                self.failed_batches += 1
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def sender_provider(exporter: SpanExporter, service: str = "load-agent") -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(
        BatchSpanProcessor(
            exporter, schedule_delay_millis=100, max_export_batch_size=256, max_queue_size=50_000
        )
    )
    return provider


TOOL_RESULT = "NAME READY STATUS\ncheckout-7d9f 1/1 Running"


def agent_run(tracer: Any, number: int, looping: bool) -> str:
    """One run: a root agent span and six tool calls. A looping run lists the same pods three
    times in a row with the same result (FM-1.3 expected); the other reads six different
    things (nothing expected). Returns the trace id."""
    with tracer.start_as_current_span(
        "invoke_agent sre", attributes={"gen_ai.operation.name": "invoke_agent"}
    ) as root:
        for step in range(6):
            command = (
                "kubectl get pods -n shop"
                if looping and step in (1, 2, 3)
                else f"kubectl describe pod p-{number}-{step} -n shop"
            )
            with tracer.start_as_current_span(
                "execute_tool kubectl",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "kubectl",
                    "gen_ai.tool.call.arguments": json.dumps({"command": command}),
                    "gen_ai.tool.call.result": TOOL_RESULT if looping else f"pod {step} ok",
                },
            ):
                pass
        return format(root.get_span_context().trace_id, "032x")


class Sender(threading.Thread):
    """Sends agent runs at a steady pace until stopped; remembers which runs loop."""

    def __init__(self, tracer: Any, runs_per_second: float, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.tracer = tracer
        self.interval = 1.0 / runs_per_second
        self.stop_event = threading.Event()
        self.looping: dict[str, bool] = {}

    def run(self) -> None:
        number = 0
        while not self.stop_event.is_set():
            looping = number % 2 == 0
            trace_id = agent_run(self.tracer, number, looping)
            self.looping[trace_id] = looping
            number += 1
            self.stop_event.wait(self.interval)


class CollectorProcess:
    """`mast-otel serve` as a subprocess on fixed loopback ports over one data directory."""

    def __init__(self, config_path: Path, data_dir: Path, grpc_port: int, http_port: int) -> None:
        self.config_path = config_path
        self.data_dir = data_dir
        self.grpc_port = grpc_port
        self.http_port = http_port
        self.proc: subprocess.Popen[bytes] | None = None
        self.logs: list[Path] = []
        self.token: str | None = None
        # Start it as the leader of a process group of its own (its fork server and workers
        # in it), as a supervisor or a terminal does, so the group can be signalled.
        self.new_group = False

    def start(self, wait: bool = True) -> None:
        log_path = self.data_dir.parent / f"collector-{len(self.logs)}.log"
        self.logs.append(log_path)
        with log_path.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "mast_otel.collector.cli",
                    "serve",
                    "--config",
                    str(self.config_path),
                    "--data-dir",
                    str(self.data_dir),
                    "--grpc-endpoint",
                    f"127.0.0.1:{self.grpc_port}",
                    "--http-endpoint",
                    f"127.0.0.1:{self.http_port}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=ENV,
                start_new_session=self.new_group,
            )
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"collector exited: {self.logs[-1].read_text()[-3000:]}")
            try:
                self.health()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"collector did not come up: {self.logs[-1].read_text()[-3000:]}")

    def health(self) -> dict[str, Any]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.http_port}/healthz")
        with urllib.request.urlopen(request, timeout=2) as response:
            data: dict[str, Any] = json.loads(response.read())
            return data

    def kill(self) -> None:
        """kill -9: no flush, no cleanup."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self, timeout_s: float = 60.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout_s)

    def rss_bytes(self) -> int:
        assert self.proc is not None
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def output(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.logs if p.exists())

    def ensure_stopped(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def wait_until_idle(collector: CollectorProcess, timeout_s: float = 60.0) -> dict[str, Any]:
    """Until nothing is queued, buffered or replaying (open runs may remain)."""
    deadline = time.monotonic() + timeout_s
    health: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            health = collector.health()
        except TimeoutError:
            continue  # a machine busier than the collector's threads: ask again, to the deadline
        durability = health.get("durability", {})
        if (
            health["queue_items"] == 0
            and health["store"]["buffered_rows"] == 0
            and not durability.get("replaying", False)
        ):
            return health
        time.sleep(0.2)
    raise AssertionError(f"collector did not settle: {health}")
