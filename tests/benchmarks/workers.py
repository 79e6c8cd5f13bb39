"""Worker processes, measured: `mast-otel serve --workers N` for several N in one run, on the
same fleet and load generator (`tests.benchmarks.run`'s method). For each N: stored spans/s end
to end and its ratio to one worker, the parse ceiling (one core), CPU seconds per 1,000 spans of
the whole process tree (receiving process, fork server, workers), p50/p99 from a run's last span
acknowledged to its signature stored, and the peak RSS of the whole tree (sampled sum).

    .venv/bin/python -m tests.benchmarks.workers --spans 30000 --workers 1 2 4 [--markdown F]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from mast_otel.collector.store import ChdbStore
from tests.benchmarks.fleet import build_fleet
from tests.benchmarks.run import ROOT, free_port, health, parse_ceiling, percentile


def tree(pid: int) -> list[int]:
    """`pid` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def cpu_seconds(pids: list[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def rss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


class TreeSampler(threading.Thread):
    """The largest sum of RSS over the process tree, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.processes = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(0.2):
            pids = tree(self.pid)
            self.processes = max(self.processes, len(pids))
            self.peak = max(self.peak, rss_bytes(pids))


def run_once(args: argparse.Namespace, workers: int, ceiling: float) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"mast-bench-w{workers}-"))
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
        "--workers",
        str(workers),
    ]
    if args.config:
        command += ["--config", args.config]
    serve_log = (work / "serve.log").open("w")
    serve = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=serve_log)
    sampler = TreeSampler(serve.pid)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                health(http_port)
                break
            except OSError as exc:
                if time.monotonic() > deadline or serve.poll() is not None:
                    raise SystemExit(
                        f"serve did not start: {(work / 'serve.log').read_text()}"
                    ) from exc
                time.sleep(0.2)
        time.sleep(1.0)  # every worker up
        sampler.start()
        cpu_before = cpu_seconds(tree(serve.pid))
        receiving_before = cpu_seconds([serve.pid])
        out = work / "loadgen.json"
        endpoint = f"127.0.0.1:{grpc_port if args.transport == 'grpc' else http_port}"
        subprocess.run(
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
        sent = json.loads(out.read_text())
        deadline = time.monotonic() + args.timeout
        while True:
            written = health(http_port)["store"]["rows_written"]
            if written.get("otel_traces", 0) >= sent["acked_spans"] and written.get(
                "mast_signatures", 0
            ) >= len(sent["run_acked_at"]):
                break
            if time.monotonic() > deadline:
                print("timed out waiting for the store", file=sys.stderr)
                break
            time.sleep(0.25)
        stored_wall = time.time()
        cpu_after = cpu_seconds(tree(serve.pid))
        receiving_cpu = cpu_seconds([serve.pid]) - receiving_before
        final = health(http_port)
    finally:
        sampler.stop_event.set()
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
    spans = sent["acked_spans"]
    e2e = spans / (stored_wall - sent["started_wall"])
    cpu = cpu_after - cpu_before
    return {
        "workers": workers,
        "spans": spans,
        "acked_rate": spans / sent["send_seconds"],
        "e2e_rate": e2e,
        "parse_ceiling": ceiling,
        "latency_p50_s": percentile(latencies, 0.50),
        "latency_p99_s": percentile(latencies, 0.99),
        "peak_rss_mib": sampler.peak / 2**20,
        "processes": sampler.processes,
        "cpu_per_1000_spans": 1000 * cpu / max(1, spans),
        "receiving_cpu_per_1000_spans": 1000 * receiving_cpu / max(1, spans),
        "refusals": sent["refusals"],
        "stages": final.get("stages", {}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=30_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, os.cpu_count() or 1])
    parser.add_argument("--transport", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--concurrent-runs", type=int, default=500)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--config", help="collector config file (YAML) for every run")
    parser.add_argument("--markdown", help="append the result table to this file")
    args = parser.parse_args()
    fleet = build_fleet(args.spans, concurrent_runs=args.concurrent_runs)
    ceiling = parse_ceiling(fleet)
    del fleet
    results = []
    for workers in dict.fromkeys(args.workers):
        print(f"{workers} worker(s)...", file=sys.stderr)
        results.append(run_once(args, workers, ceiling))
        print(json.dumps(results[-1]), file=sys.stderr)
    base = results[0]["e2e_rate"]
    lines = [
        "| workers | spans | acked/s | stored end to end/s | ratio to 1 | parse ceiling/s "
        "(1 core) | CPU s per 1,000 spans: tree (receiving process) | "
        "p50 / p99 last span → signature | "
        "peak RSS of the tree MiB (processes) | refusals |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['workers']} | {r['spans']:,} | {r['acked_rate']:,.0f} | {r['e2e_rate']:,.0f} | "
            f"{r['e2e_rate'] / base:.2f} | {r['parse_ceiling']:,.0f} | "
            f"{r['cpu_per_1000_spans']:.3f} ({r['receiving_cpu_per_1000_spans']:.3f}) | "
            f"{r['latency_p50_s']:.2f} / "
            f"{r['latency_p99_s']:.2f} s | {r['peak_rss_mib']:,.0f} ({r['processes']}) | "
            f"{r['refusals']} |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    if args.markdown:
        with open(args.markdown, "a") as md:
            md.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
