"""Worker processes, measured: `mast-otel serve --workers N` for several N in one invocation,
on the same fleet and load generator, through `tests.benchmarks.run`'s loop (warm-up, load,
wait until stored). First as fast as acknowledged for each N of `--workers`, then offered
`--rate` spans/s (below capacity) for each N of `--rated-workers`. For each: stored spans/s end
to end and its ratio to the first of its table, CPU seconds per 1,000 spans of the whole process
tree (receiving process, fork server, workers) and of the receiving process alone, p50/p99 from
a run's last span acknowledged to its signature stored, the peak RSS of the whole tree (sampled
sum), and how many worker inserts the store owner wrote in how many statements.

    .venv/bin/python -m tests.benchmarks.workers --spans 20000 --workers 1 2 3 \\
        --rated-workers 1 2 --rate 800 [--markdown F]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from tests.benchmarks.fleet import build_fleet
from tests.benchmarks.run import Load, parse_ceiling, percentile, serve_under_load


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


class TreeMeter:
    """CPU of the whole process tree and of the receiving process alone; peak RSS of the tree."""

    def __init__(self) -> None:
        self.cpu = self.receiving_cpu = 0.0
        self.sampler: TreeSampler | None = None

    def begin(self, pid: int) -> None:
        self.sampler = TreeSampler(pid)
        self.sampler.start()
        self.cpu = cpu_seconds(tree(pid))
        self.receiving_cpu = cpu_seconds([pid])

    def end(self, pid: int) -> None:
        self.cpu = cpu_seconds(tree(pid)) - self.cpu
        self.receiving_cpu = cpu_seconds([pid]) - self.receiving_cpu
        if self.sampler is not None:
            self.sampler.stop_event.set()


def run_once(
    args: argparse.Namespace, workers: int, ceiling: float, rate: float, spans: int
) -> dict[str, Any]:
    load = Load(args.transport, spans, args.threads, args.concurrent_runs, args.timeout, rate)
    meter = TreeMeter()
    load_before = os.getloadavg()[0]
    serve_args = ["--workers", str(workers)] + (["--config", args.config] if args.config else [])
    served = serve_under_load(serve_args, load, meter)
    sent, sampler = served.sent, meter.sampler
    acked = sent["acked_spans"]
    owner = served.final_health.get("workers", {}).get("store_owner", {})
    return {
        "workers": workers,
        "offered_rate": rate or "max",
        "spans": acked,
        "acked_rate": acked / sent["send_seconds"],
        "e2e_rate": served.e2e_rate,
        "parse_ceiling": ceiling,
        "latency_p50_s": percentile(served.latencies, 0.50),
        "latency_p99_s": percentile(served.latencies, 0.99),
        "peak_rss_mib": (sampler.peak if sampler else 0) / 2**20,
        "processes": sampler.processes if sampler else 0,
        "cpu_per_1000_spans": 1000 * meter.cpu / max(1, acked),
        "receiving_cpu_per_1000_spans": 1000 * meter.receiving_cpu / max(1, acked),
        "refusals": sent["refusals"],
        "owner_inserts": f"{owner.get('inserts', 0)} in {owner.get('insert_statements', 0)}",
        "load_average": f"{load_before:.1f}-{os.getloadavg()[0]:.1f}",
        "stages": served.final_health.get("stages", {}),
    }


def table(results: list[dict[str, Any]]) -> str:
    base = results[0]["e2e_rate"]
    lines = [
        "| workers | offered spans/s | spans | acked/s | stored end to end/s | ratio to first | "
        "CPU s per 1,000 spans: tree (receiving process) | p50 / p99 last span → signature | "
        "peak RSS of the tree MiB (processes) | refusals | worker inserts in statements | "
        "load average (1 min, before-after) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['workers']} | {r['offered_rate']} | {r['spans']:,} | {r['acked_rate']:,.0f} | "
            f"{r['e2e_rate']:,.0f} | {r['e2e_rate'] / base:.2f} | "
            f"{r['cpu_per_1000_spans']:.3f} ({r['receiving_cpu_per_1000_spans']:.3f}) | "
            f"{r['latency_p50_s']:.2f} / {r['latency_p99_s']:.2f} s | "
            f"{r['peak_rss_mib']:,.0f} ({r['processes']}) | {r['refusals']} | "
            f"{r['owner_inserts']} | {r['load_average']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, os.cpu_count() or 1])
    parser.add_argument("--transport", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--concurrent-runs", type=int, default=500)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--rated-workers", type=int, nargs="*", default=[1, 2], help="also run these below capacity"
    )
    parser.add_argument("--rate", type=float, default=800.0, help="spans/s of the rated runs")
    parser.add_argument("--rated-spans", type=int, default=12_000)
    parser.add_argument("--config", help="collector config file (YAML) for every run")
    parser.add_argument("--markdown", help="append the result tables to this file")
    args = parser.parse_args()
    fleet = build_fleet(args.spans, concurrent_runs=args.concurrent_runs)
    ceiling = parse_ceiling(fleet)
    del fleet
    print(f"parse ceiling (one core): {ceiling:,.0f} spans/s", file=sys.stderr)
    tables = []
    for rate, spans, counts in (
        (0.0, args.spans, args.workers),
        (args.rate, args.rated_spans, args.rated_workers),
    ):
        results = []
        for workers in dict.fromkeys(counts):
            print(f"{workers} worker(s), offered {rate or 'max'}...", file=sys.stderr)
            results.append(run_once(args, workers, ceiling, rate, spans))
            print(json.dumps(results[-1]), file=sys.stderr)
        if results:
            tables.append(table(results))
    text = "\n".join(tables)
    print(text)
    if args.markdown:
        with open(args.markdown, "a") as md:
            md.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
