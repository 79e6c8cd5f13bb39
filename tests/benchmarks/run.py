"""End-to-end benchmark: `mast-otel serve` on the embedded store, fed by the load generator
in another process over OTLP on loopback. Prints, from one run: the acknowledged rate, the
end-to-end stored rate (spans and their runs' signatures queryable in ClickHouse), latency
from a run's last span acknowledged to its signature stored (p50, p99), the collector's peak
RSS and CPU, CPU per 1,000 spans by stage where the collector reports it, and the parse
ceiling (the same payloads decoded and normalized with nothing else) with the ratio.

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
from pathlib import Path

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
    ]
    if args.config:
        command += ["--config", args.config]
    serve_log = (work / "serve.log").open("w")
    serve = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=serve_log)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health(http_port)
                break
            except OSError as exc:
                if time.monotonic() > deadline or serve.poll() is not None:
                    log = (work / "serve.log").read_text()
                    raise SystemExit(f"serve did not start: {log}") from exc
                time.sleep(0.2)
        cpu_before, _ = proc_stats(serve.pid)
        endpoint = f"127.0.0.1:{grpc_port if args.transport == 'grpc' else http_port}"
        out = work / "loadgen.json"
        loadgen = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.benchmarks.loadgen",
                "--transport",
                args.transport,
                "--endpoint",
                endpoint,
                "--spans",
                str(args.spans),
                "--threads",
                str(args.threads),
                "--concurrent-runs",
                str(args.concurrent_runs),
                "--duration",
                str(args.timeout),
                "--rate",
                str(args.rate),
                "--out",
                str(out),
            ],
            cwd=ROOT,
            check=True,
        )
        del loadgen
        sent = json.loads(out.read_text())
        # Wait until every acknowledged span and every run's signature is in the store.
        deadline = time.monotonic() + args.timeout
        while True:
            h = health(http_port)
            written = h["store"]["rows_written"]
            spans_stored = written.get("otel_traces", 0)
            signatures = written.get("mast_signatures", 0)
            if spans_stored >= sent["acked_spans"] and signatures >= len(sent["run_acked_at"]):
                break
            if time.monotonic() > deadline:
                print("timed out waiting for the store", file=sys.stderr)
                break
            time.sleep(0.05)
        stored_wall = time.time()
        cpu_after, peak_rss = proc_stats(serve.pid)
        final_health = health(http_port)
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=120)
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
    spans = sent["acked_spans"]
    e2e_seconds = stored_wall - sent["started_wall"]
    cpu = cpu_after - cpu_before
    result = {
        "transport": args.transport,
        "offered_rate": args.rate or "max",
        "spans": spans,
        "runs": len(sent["run_acked_at"]),
        "mean_span_bytes": round(sent["request_bytes"] / max(1, sent["fleet_spans"])),
        "acked_rate": spans / sent["send_seconds"],
        "e2e_rate": spans / e2e_seconds,
        "parse_ceiling": ceiling,
        "fraction_of_ceiling": (spans / e2e_seconds) / ceiling,
        "latency_p50_s": percentile(latencies, 0.50),
        "latency_p99_s": percentile(latencies, 0.99),
        "peak_rss_mib": peak_rss / 2**20,
        "cpu_seconds": cpu,
        "cpu_per_1000_spans": 1000 * cpu / max(1, spans),
        "refusals": sent["refusals"],
        "stages": final_health.get("stages", {}),
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
