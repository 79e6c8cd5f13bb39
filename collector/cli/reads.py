"""The commands that read the store: `findings`, `signatures`, `failing`, `run`, `summary`."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from mast_otel.collector.cli.common import config_from_args, parse_since, read_store
from mast_otel.collector.cli.output import print_findings, shown
from mast_otel.collector.config import ConfigError
from mast_otel.collector.store import queries
from mast_otel.processors.scoring import GroupSummary


def cmd_findings(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    flt = queries.FindingFilter(
        trace_id=args.trace, mode=args.mode, since_ns=parse_since(args.since), limit=args.limit
    )
    rows: list[dict[str, Any]] = read_store(config, lambda store: queries.findings(store, flt), [])
    print_findings(rows, args.output)
    return 0


def cmd_signatures(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    rows: list[dict[str, Any]] = read_store(
        config, lambda store: queries.signatures(store, trace_id=args.trace, limit=args.limit), []
    )
    if args.output == "json":
        for row in rows:
            print(json.dumps(row))
        return 0
    print(f"{'trace id':<32}  {'service':<12} {'model':<14} {'steps':>5} {'outcome':<8} modes")
    for row in rows:
        print(
            f"{shown(row['trace_id']):<32}  {shown(row['service'])[:12]:<12} "
            f"{shown(row['model'])[:14]:<14} {row['steps']:>5} "
            f"{shown(row['outcome']) or '-':<8} {shown(', '.join(row['modes'])) or '-'}"
        )
    return 0


def cmd_failing(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    since = parse_since(args.since)
    assert since is not None
    scope = queries.Scope(since, None, args.service, args.model)
    rows: list[dict[str, Any]] = read_store(
        config, lambda store: queries.failing_now(store, scope, fatal_only=args.fatal), []
    )
    if args.output == "json":
        for row in rows:
            print(json.dumps(row))
        return 0
    if not rows:
        print("nothing failing")
        return 0
    print(
        f"{'mode':<7} {'fatal':<5} {'model':<16} {'service':<14} {'findings':>8} {'runs':>5}  since"
    )
    for row in rows:
        first = datetime.fromtimestamp(row["first_minute_unix"]).strftime("%Y-%m-%d %H:%M")
        print(
            f"{shown(row['mode']):<7} {'yes' if row['fatal'] else 'no':<5} "
            f"{shown(row['model'])[:16]:<16} {shown(row['service'])[:14]:<14} "
            f"{row['findings']:>8} {row['runs']:>5}  {first}"
        )
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from mast_otel.collector import run_steps

    config = config_from_args(args)
    timeline = read_store(config, lambda store: run_steps.run_steps(store, args.trace), None)
    if timeline is None:
        raise ConfigError(f"no spans stored for trace {args.trace}")
    if args.output == "json":
        print(json.dumps(timeline))
        return 0
    for line in run_steps.render(timeline):
        # One printed line per rendered line, whatever a stored value holds.
        print(shown(line))
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    since_ns = parse_since(args.since)
    groups: list[GroupSummary] = read_store(
        config,
        lambda store: queries.summary(store, config.scoring, by=args.by, since_ns=since_ns),
        [],
    )
    if args.output == "json":
        for g in groups:
            print(
                json.dumps(
                    {
                        args.by: g.group,
                        "runs": g.runs,
                        "failed_runs": g.failed_runs,
                        "success_runs": g.success_runs,
                        "unknown_outcome_runs": g.unknown_runs,
                        "success_rate": g.success_rate,
                        "mean_score": g.mean_score,
                        "modes_per_failed_run": g.modes_per_failed_run,
                        "fatal_modes": g.fatal_modes,
                        "modes": [
                            {
                                "mode": m.mode,
                                "rate_failed": m.rate_failed,
                                "rate_success": m.rate_success,
                                "lift": m.lift,
                                "fatal": m.fatal,
                                "basis": m.basis,
                            }
                            for m in g.modes
                        ],
                    }
                )
            )
        return 0
    if not groups:
        print("no runs")
    for g in groups:
        rate = "-" if g.success_rate is None else f"{g.success_rate:.0%}"
        score = "-" if g.mean_score is None else f"{g.mean_score:.2f}"
        print(
            f"{args.by} {shown(g.group) or '(unknown)'}: {g.runs} runs, success {rate}, "
            f"mean score {score}, {g.modes_per_failed_run:.1f} modes per failed run"
        )
        print(f"  {'mode':<7} {'failed':>7} {'success':>7} {'lift':>6}  call")
        for m in g.modes:
            if not (m.failed_with or m.success_with):
                continue
            call = ("fatal" if m.fatal else "benign") + f" ({m.basis})"
            print(
                f"  {shown(m.mode):<7} {m.rate_failed:>7.0%} {m.rate_success:>7.0%} "
                f"{m.lift:>+6.0%}  {call}"
            )
    return 0
