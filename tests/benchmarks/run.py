"""End-to-end benchmark: `mast-otel serve` on the embedded store, fed by the load generator
in another process over OTLP on loopback. Prints, from one run: the acknowledged rate, the
end-to-end stored rate (spans and their runs' signatures queryable in ClickHouse), latency
from a run's last span acknowledged to its signature stored (p50, p99), the collector's peak
RSS and CPU, CPU per 1,000 spans by stage where the collector reports it, and the parse
ceiling (the same payloads decoded and normalized with nothing else) with the ratio. A few runs
are sent and stored first (warm-up), so what the collector does once is not counted per span.

    .venv/bin/python -m tests.benchmarks.run --spans 100000 --transport grpc
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mast_otel.collector.otlp.decode import decode_spans, parse_trace_request
from mast_otel.collector.store import ChdbStore
from mast_otel.processors.normalize import normalize_span
from tests.benchmarks.fleet import Fleet, build_fleet

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse_ceiling(fleet: Fleet) -> float:
    """Spans per second this machine decodes and normalizes, one core, nothing else."""
    started = time.process_time()
    count = 0
    for body in fleet.requests:
        for record in decode_spans(parse_trace_request(body)).records:
            normalize_span(record)
            count += 1
    return count / (time.process_time() - started)


def health(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
        return json.loads(response.read())


def proc_stats(pid: int) -> tuple[float, int]:
    """(CPU seconds, peak RSS bytes) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    peak = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) * 1024
    return cpu, peak


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Meter(Protocol):
    """What a benchmark measures of the collector around the load (after the warm-up)."""

    def begin(self, pid: int) -> None: ...

    def end(self, pid: int) -> None: ...


@dataclass
class Load:
    transport: str = "grpc"
    spans: int = 100_000
    threads: int = 2
    concurrent_runs: int = 500
    timeout: float = 600.0
    rate: float = 0.0


@dataclass
class Served:
    """What one `serve` under the load showed."""

    sent: dict[str, Any]
    e2e_rate: float
    latencies: list[float]
    final_health: dict[str, Any]
    work: Path


def warm_up(http_port: int, deadline: float) -> dict[str, int]:
    """A few complete runs over OTLP/HTTP, waited for until stored: what a collector does once
    (the store's first insert, lazy imports) is not counted as work per span. Returns the rows
    written so far, the baseline for the load that follows."""
    fleet = build_fleet(300, batch_spans=300, concurrent_runs=5, seed=99)
    for body in fleet.requests:
        request = urllib.request.Request(
            f"http://127.0.0.1:{http_port}/v1/traces",
            data=body,
            headers={"Content-Type": "application/x-protobuf"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
    while time.monotonic() < deadline:
        written = health(http_port)["store"]["rows_written"]
        if written.get("otel_traces", 0) >= fleet.spans and written.get("mast_signatures", 0):
            return dict(written)
        time.sleep(0.1)
    raise SystemExit("the warm-up runs were not stored in time")


def serve_under_load(serve_args: list[str], load: Load, meter: Meter) -> Served:
    """`mast-otel serve` on a fresh embedded store, warmed up, fed by the load generator in
    another process over loopback, until every acknowledged span and every run's signature is
    stored; then stopped (SIGTERM) and its store read for latencies."""
    work = Path(tempfile.mkdtemp(prefix="mast-bench-"))
    grpc_port, http_port = free_port(), free_port()
    command = [
        sys.executable,
        "-m",
        "mast_otel.collector.cli",
        "serve",
        "--data-dir",
        str(work / "store"),
        "--grpc-endpoint",
        f"127.0.0.1:{grpc_port}",
        "--http-endpoint",
        f"127.0.0.1:{http_port}",
        *serve_args,
    ]
    serve_log = (work / "serve.log").open("w")
    serve = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=serve_log)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                health(http_port)
                break
            except OSError as exc:
                if time.monotonic() > deadline or serve.poll() is not None:
                    log = (work / "serve.log").read_text()
                    raise SystemExit(f"serve did not start: {log}") from exc
                time.sleep(0.2)
        baseline = warm_up(http_port, time.monotonic() + 120)
        meter.begin(serve.pid)
        endpoint = f"127.0.0.1:{grpc_port if load.transport == 'grpc' else http_port}"
        out = work / "loadgen.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.benchmarks.loadgen",
                "--transport",
                load.transport,
                "--endpoint",
                endpoint,
                "--spans",
                str(load.spans),
                "--threads",
                str(load.threads),
                "--concurrent-runs",
                str(load.concurrent_runs),
                "--duration",
                str(load.timeout),
                "--rate",
                str(load.rate),
                "--out",
                str(out),
            ],
            cwd=ROOT,
            check=True,
        )
        sent = json.loads(out.read_text())
        # Until every acknowledged span and every run's signature is in the store.
        spans_due = baseline.get("otel_traces", 0) + sent["acked_spans"]
        signatures_due = baseline.get("mast_signatures", 0) + len(sent["run_acked_at"])
        deadline = time.monotonic() + load.timeout
        while True:
            written = health(http_port)["store"]["rows_written"]
            if (
                written.get("otel_traces", 0) >= spans_due
                and written.get("mast_signatures", 0) >= signatures_due
            ):
                break
            if time.monotonic() > deadline:
                print("timed out waiting for the store", file=sys.stderr)
                break
            time.sleep(0.05)
        stored_wall = time.time()
        meter.end(serve.pid)
        final_health = health(http_port)
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=180)
        serve_log.close()
    store = ChdbStore(work / "store")
    try:
        rows = store.query(
            "SELECT TraceId AS t, toUnixTimestamp64Milli(ClosedAt) AS closed "
            "FROM otel.mast_signatures"
        )
    finally:
        store.close()
    closed = {r["t"]: int(r["closed"]) / 1000 for r in rows}
    latencies = [closed[t] - acked for t, acked in sent["run_acked_at"].items() if t in closed]
    e2e_rate = sent["acked_spans"] / (stored_wall - sent["started_wall"])
    return Served(sent, e2e_rate, latencies, final_health, work)


class ProcessMeter:
    """CPU seconds and peak RSS of one process."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.peak_rss = 0

    def begin(self, pid: int) -> None:
        self.cpu, _ = proc_stats(pid)

    def end(self, pid: int) -> None:
        cpu, self.peak_rss = proc_stats(pid)
        self.cpu = cpu - self.cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--transport", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--concurrent-runs", type=int, default=500)
    parser.add_argument("--config", help="collector config file (YAML) to benchmark")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--rate", type=float, default=0.0, help="offered load in spans/s (0: as fast as taken)"
    )
    parser.add_argument("--markdown", help="append the result table to this file")
    args = parser.parse_args()

    print("building the fleet...", file=sys.stderr)
    fleet = build_fleet(args.spans, concurrent_runs=args.concurrent_runs)
    ceiling = parse_ceiling(fleet)
    print(f"parse ceiling: {ceiling:,.0f} spans/s", file=sys.stderr)
    load = Load(
        args.transport, args.spans, args.threads, args.concurrent_runs, args.timeout, args.rate
    )
    meter = ProcessMeter()
    served = serve_under_load(["--config", args.config] if args.config else [], load, meter)
    sent = served.sent
    spans = sent["acked_spans"]
    result = {
        "transport": args.transport,
        "offered_rate": args.rate or "max",
        "spans": spans,
        "runs": len(sent["run_acked_at"]),
        "mean_span_bytes": round(sent["request_bytes"] / max(1, sent["fleet_spans"])),
        "acked_rate": spans / sent["send_seconds"],
        "e2e_rate": served.e2e_rate,
        "parse_ceiling": ceiling,
        "fraction_of_ceiling": served.e2e_rate / ceiling,
        "latency_p50_s": percentile(served.latencies, 0.50),
        "latency_p99_s": percentile(served.latencies, 0.99),
        "peak_rss_mib": meter.peak_rss / 2**20,
        "cpu_seconds": meter.cpu,
        "cpu_per_1000_spans": 1000 * meter.cpu / max(1, spans),
        "refusals": sent["refusals"],
        "stages": served.final_health.get("stages", {}),
    }
    print(json.dumps(result, indent=2))
    if args.markdown:
        with open(args.markdown, "a") as md:
            md.write(markdown(result))
    return 0


def markdown(r: dict) -> str:
    stages = ", ".join(
        f"{name} {1000 * seconds / max(1, r['spans']):.3f}"
        for name, seconds in sorted(r["stages"].items())
    )
    return (
        f"| {r['transport']} | {r['offered_rate']} | {r['spans']:,} | {r['acked_rate']:,.0f} | "
        f"{r['e2e_rate']:,.0f} | "
        f"{r['parse_ceiling']:,.0f} ({r['fraction_of_ceiling']:.2f}) | "
        f"{r['latency_p50_s']:.2f} / {r['latency_p99_s']:.2f} | {r['peak_rss_mib']:.0f} | "
        f"{r['cpu_per_1000_spans']:.3f} | {stages or '-'} |\n"
    )


if __name__ == "__main__":
    sys.exit(main())
