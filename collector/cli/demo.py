"""`demo`: the scripted agent's runs through a collector of its own, or sent to a running one
(`--endpoint`)."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
import time
from typing import Any

from mast_otel.collector.cli.common import config_from_args
from mast_otel.collector.config import ConfigError

log = logging.getLogger("mast-otel")


def cmd_demo(args: argparse.Namespace) -> int:
    from mast_otel.collector.demo.dialects import DIALECTS
    from mast_otel.collector.demo.runner import run_demo

    dialects = list(DIALECTS) if args.dialect == "all" else [args.dialect]
    if args.endpoint:
        return _demo_sender(args, dialects)
    if args.loop:
        raise ConfigError("--loop sends to a running collector: give it with --endpoint")
    config = config_from_args(args)
    started = time.monotonic()
    result = run_demo(config, transport=args.transport, dialects=dialects)
    elapsed = time.monotonic() - started
    if args.output == "json":
        for run in result.runs:
            sig = result.signatures.get(run.trace_id, {})
            print(
                json.dumps(
                    {
                        "scenario": run.scenario.name,
                        "trace_id": run.trace_id,
                        "expected_modes": list(run.scenario.expected_modes),
                        "modes": sig.get("modes", []),
                        "signature": sig,
                    }
                )
            )
        return 0
    print(
        f"Sent {len(result.runs)} agent runs over OTLP/{args.transport} "
        f"({', '.join(dialects)}); stored {result.spans_stored} spans in "
        f"{config.storage.data_dir} in {elapsed:.1f}s.\n"
    )
    header = f"{'run':<20} {'dialect':<14} {'trace id':<32}  {'steps':>5}  modes found (expected)"
    print(header)
    print("-" * len(header))
    mismatches = 0
    for run in result.runs:
        sig = result.signatures.get(run.trace_id, {})
        found = list(sig.get("modes", []))
        expected = list(run.scenario.expected_modes)
        mark = "" if sorted(found) == sorted(expected) else "  <- differs"
        mismatches += bool(mark)
        print(
            f"{run.scenario.name:<20} {run.dialect:<14} "
            f"{run.trace_id}  {sig.get('steps', 0):>5}  {', '.join(found) or '-'} "
            f"({', '.join(expected) or 'none'}){mark}"
        )
    print()
    for row in result.findings:
        print(f"{row['mode']} at span {row['span_id']} of {row['trace_id'][:8]}…: {row['message']}")
    print(
        f"\nQuery them again with: mast-otel findings --data-dir {config.storage.data_dir}"
        + ("" if not mismatches else f"\n{mismatches} run(s) differ from the scenario's labels.")
    )
    return 0


def _demo_sender(args: argparse.Namespace, dialects: list[str]) -> int:
    """`demo --endpoint`: the demo agent alone, sending its runs to a running collector."""
    from mast_otel.collector.config import parse_endpoint
    from mast_otel.collector.demo.agent import AgentRun
    from mast_otel.collector.demo.runner import send_runs

    if not args.endpoint.startswith(("http://", "https://")):
        parse_endpoint(args.endpoint, "--endpoint")
    if args.interval <= 0:
        raise ConfigError(f"--interval must be greater than 0, got {args.interval}")
    stop = threading.Event()

    def _on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s: stopping after this round", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    def _report(round_no: int, runs: list[AgentRun]) -> None:
        if args.output == "json":
            for run in runs:
                print(
                    json.dumps(
                        {
                            "round": round_no,
                            "scenario": run.scenario.name,
                            "dialect": run.dialect,
                            "trace_id": run.trace_id,
                            "expected_modes": list(run.scenario.expected_modes),
                        }
                    ),
                    flush=True,
                )
        else:
            print(
                f"round {round_no}: sent {len(runs)} agent runs ({', '.join(dialects)}) to "
                f"{args.endpoint} over OTLP/{args.transport}",
                flush=True,
            )

    send_runs(
        args.endpoint,
        args.transport,
        dialects,
        stop,
        loop=args.loop,
        interval_s=args.interval,
        service_name=args.service_name,
        on_round=_report,
    )
    return 0
