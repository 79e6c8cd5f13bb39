"""How per-span cost and memory grow with the number of open runs and with run length, all
detectors on, steps fed straight into the run windows (no network, no store), so a detector
whose work grows with the run instead of the window shows up.

    .venv/bin/python -m tests.benchmarks.scale [--open 1000 10000 50000] [--length 10 100 1000]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from pathlib import Path

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors import build_detectors, detector_factory
from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.model import Step, StepKind, StepStatus, ToolCallRequest
from mast_otel.processors.window import RunWindows, WindowConfig

COMMANDS = (
    "kubectl get pods -n shop",
    "kubectl describe deployment checkout -n shop",
    "kubectl logs deployment/checkout -n shop",
    "kubectl get events -n shop",
    "kubectl top pods -n shop",
)


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def step(run: int, index: int, length: int) -> Step:
    """The index-th step of a run: model calls and tool calls in turn, results that change."""
    trace = f"{run:032x}"
    start = 1_700_000_000_000_000_000 + index * 1_000_000_000
    if index % 2 == 0:
        return Step(
            trace_id=trace,
            span_id=f"{index + 1:016x}",
            parent_span_id="f" * 16,
            name="chat",
            kind=StepKind.LLM,
            start_ns=start,
            end_ns=start + 500_000_000,
            dialect="genai",
            agent="sre-agent",
            model="gpt-4o",
            input_tokens=1000 + 40 * index,
            output_tokens=40,
            input_messages=2 + index,
            input_text="HighErrorRate is firing for checkout in namespace shop.",
            output_text=f"Next I will run {COMMANDS[index // 2 % len(COMMANDS)]}.",
            tool_calls=(ToolCallRequest("kubectl"),),
            finish_reason="tool_calls",
        )
    command = COMMANDS[index // 2 % len(COMMANDS)]
    return Step(
        trace_id=trace,
        span_id=f"{index + 1:016x}",
        parent_span_id="f" * 16,
        name="execute_tool kubectl",
        kind=StepKind.TOOL,
        start_ns=start,
        end_ns=start + 300_000_000,
        dialect="genai",
        status=StepStatus.OK,
        agent="sre-agent",
        tool_name="kubectl",
        tool_arguments=f'{{"command": "{command} --since={index}m"}}',
        tool_result=f"checkout-7d9 0/1 CrashLoopBackOff {index} restarts, event {run}-{index}",
    )


def measure(open_runs: int, length: int) -> dict[str, float]:
    detectors = build_detectors(DetectorsConfig(), ActionClassifier())
    windows = RunWindows(
        WindowConfig(grace_s=0.0, max_active_runs=max(open_runs, 1) * 2),
        detector_factory(detectors),
    )
    gc.collect()
    base_rss = rss_bytes()
    started = time.process_time()
    spans = 0
    now = 0.0
    # Every run is open at once: step i of every run before step i + 1 of any.
    for index in range(length):
        for run in range(open_runs):
            windows.add(step(run, index, length), now)
            spans += 1
        now += 1.0
        windows.tick(now)
    cpu = time.process_time() - started
    gc.collect()
    open_rss = rss_bytes() - base_rss
    closed = windows.close_all()
    return {
        "open_runs": open_runs,
        "run_length": length,
        "spans": spans,
        "us_per_span": 1e6 * cpu / spans,
        "rss_mib_with_runs_open": open_rss / 2**20,
        "kib_per_open_run": open_rss / 1024 / open_runs,
        "signatures": len(closed.signatures),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--open", type=int, nargs="*", default=[1_000, 10_000, 50_000])
    parser.add_argument("--length", type=int, nargs="*", default=[10, 100, 1_000])
    parser.add_argument("--open-for-length", type=int, default=1_000)
    parser.add_argument("--length-for-open", type=int, default=10)
    parser.add_argument("--one", type=int, nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(*args.one)))
        return 0
    # Each shape in a fresh process, so one's memory does not hide in the next one's figure.
    shapes = [(n, args.length_for_open) for n in args.open]
    shapes += [(args.open_for_length, length) for length in args.length]
    rows = []
    for open_runs, length in shapes:
        done = subprocess.run(
            [sys.executable, "-m", "tests.benchmarks.scale", "--one", str(open_runs), str(length)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(done.stdout))
    print(
        "| open runs | steps per run | µs per span | RSS with runs open (MiB) | KiB per open run |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['open_runs']:,} | {r['run_length']:,} | {r['us_per_span']:.1f} | "
            f"{r['rss_mib_with_runs_open']:.0f} | {r['kib_per_open_run']:.1f} |"
        )
    print(json.dumps(rows), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
