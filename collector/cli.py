"""The `mast-otel` command line: serve, demo, analyze, import, findings, signatures, failing,
run, migrate, backfill, outcome."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from collector import __version__
from collector.config import Config, ConfigError, apply_overrides, load_config
from collector.importers.errors import ImportFormatError
from collector.otlp.decode import OtlpDecodeError
from collector.store import Store, StoreError, open_store, queries
from processors.scoring import GroupSummary

log = logging.getLogger("mast-otel")


def _config(args: argparse.Namespace) -> Config:
    config = load_config(getattr(args, "config", None))
    return apply_overrides(
        config,
        {
            "receivers.grpc.endpoint": getattr(args, "grpc_endpoint", None),
            "receivers.http.endpoint": getattr(args, "http_endpoint", None),
            "storage.data_dir": getattr(args, "data_dir", None),
            "telemetry.metrics_endpoint": getattr(args, "metrics_endpoint", None),
            "pipeline.workers": getattr(args, "workers", None),
            **_storage_overrides(args),
        },
    )


def _storage_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Flags that point the command at a ClickHouse server instead of the embedded store."""
    url = getattr(args, "clickhouse_url", None)
    return {
        "storage.backend": "clickhouse" if url else None,
        "storage.clickhouse.url": url,
        "storage.clickhouse.username": getattr(args, "clickhouse_user", None),
        "storage.clickhouse.password_file": getattr(args, "clickhouse_password_file", None),
        "storage.database": getattr(args, "database", None),
        "storage.cluster": getattr(args, "cluster", None),
    }


def _open(config: Config) -> Store:
    """The configured store, for reading (the schema must exist; nothing is created)."""
    return open_store(config.storage)


T = TypeVar("T")


def _read(config: Config, query: Callable[[Store], T], empty: T) -> T:
    """One read against the configured store; a store with no schema yet reads as `empty`."""
    store = _open(config)
    try:
        return query(store) if _has_store(store) else empty
    finally:
        store.close()


def cmd_serve(args: argparse.Namespace) -> int:
    from collector.service import Service

    config = _config(args)
    stop = threading.Event()

    def _on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s: stopping, flushing everything accepted", signal.Signals(signum).name)
        stop.set()

    # Before the store and the spool are opened: a stop asked for at any moment from here on
    # still replays the spool and stores what it holds.
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    service = Service(config, verbose=args.verbose)
    service.start()
    log.info(
        "mast-otel %s: OTLP/gRPC on %s, OTLP/HTTP on %s, store %s (database %s)",
        __version__,
        f"{config.receivers.grpc.endpoint.rsplit(':', 1)[0]}:{service.grpc_port}"
        if service.grpc
        else "off",
        f"{config.receivers.http.endpoint.rsplit(':', 1)[0]}:{service.http_port}"
        if service.http
        else "off",
        config.storage.clickhouse.url
        if config.storage.backend == "clickhouse"
        else config.storage.data_dir,
        config.storage.database,
    )
    while not stop.wait(1.0):
        pass
    report = service.stop()
    if report.complete:
        log.info("stopped; %s", report.describe())
    else:
        log.error("stopped; %s", report.describe())
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from collector.demo.dialects import DIALECTS
    from collector.demo.runner import run_demo

    dialects = list(DIALECTS) if args.dialect == "all" else [args.dialect]
    if args.endpoint:
        return _demo_sender(args, dialects)
    if args.loop:
        raise ConfigError("--loop sends to a running collector: give it with --endpoint")
    config = _config(args)
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
    from collector.config import parse_endpoint
    from collector.demo.agent import AgentRun
    from collector.demo.runner import send_runs

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


def cmd_health(args: argparse.Namespace) -> int:
    """Ask a running collector's `GET /healthz`: exit 0 when it answers 200, 1 otherwise.
    Container health checks run this (the slim image has no curl)."""
    import urllib.error
    import urllib.request

    from collector.config import parse_endpoint

    if args.endpoint:
        host, port = parse_endpoint(args.endpoint, "--endpoint")
    else:
        config = load_config(args.config)
        if not config.receivers.http.enabled:
            raise ConfigError("receivers.http is disabled in the config: there is no /healthz")
        host, port = parse_endpoint(config.receivers.http.endpoint, "receivers.http.endpoint")
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as response:
            body = response.read(1 << 20)
            status = response.status
    except urllib.error.HTTPError as exc:
        print(f"mast-otel: {url} answered {exc.code}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"mast-otel: {url} did not answer: {reason}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"mast-otel: {url} answered {status}", file=sys.stderr)
        return 1
    text = body.decode("utf-8", "replace")
    if args.verbose_body:
        print(text)
        return 0
    print(f"ok: {url} answered 200")
    for line in _health_summary(text):
        print(f"  {line}")
    return 0


def _health_summary(text: str) -> list[str]:
    """What a health answer says, in a few lines: queue, runs, spans, store, refusals."""
    try:
        state = json.loads(text)
    except ValueError:
        return [text.strip()[:200]] if text.strip() else []
    if not isinstance(state, dict):
        return [str(state)[:200]]

    def get(*path: str) -> Any:
        node: Any = state
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return node

    pipeline = get("pipeline") or {}
    windows = get("windows") or {}
    store = get("store") or {}
    lines = [
        f"queue: {get('queue_items')} of {get('queue_max_items')} items, "
        f"{get('queue_bytes')} of {get('queue_max_bytes')} bytes",
        f"runs: {get('active_runs')} open, {windows.get('runs_opened')} opened, "
        f"closed {windows.get('runs_closed') or {}}",
        f"received: {pipeline.get('spans_received')} spans "
        f"({pipeline.get('spans_unrecognised')} of no known dialect), "
        f"{pipeline.get('logs_received')} log records",
        f"store: {store.get('buffered_rows')} rows buffered, "
        f"{store.get('write_errors')} write errors, written {store.get('rows_written') or {}}",
        f"durability: {get('durability', 'mode')}",
    ]
    refused = {k: v for k, v in pipeline.items() if "refused" in k and v}
    if refused:
        lines.append(f"refused: {refused}")
    return [line for line in lines if "None of None" not in line]


def cmd_analyze(args: argparse.Namespace) -> int:
    from collector.analyze import analyze_files

    config = load_config(args.config)
    findings = analyze_files(config, args.files)
    rows = [
        {
            "trace_id": f.trace_id,
            "span_id": f.span_id,
            "mode": f.mode,
            "rule": f.rule,
            "confidence": f.confidence,
            "detector": f.detector,
            "detector_version": f.detector_version,
            "message": f.message,
            "evidence_span_ids": list(f.evidence_span_ids),
            "evidence": f.evidence,
            "service": f.service,
            "agent": f.agent,
            "model": f.model,
            "time_unix_nano": f.time_ns,
        }
        for f in findings
    ]
    _print_findings(rows, args.output)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from collector.analyze import ImportProgress, import_files

    config = _config(args)
    progress = ImportProgress(sys.stderr)
    try:
        summary = import_files(config, args.files, progress=progress)
    finally:
        progress.done()
    storage = config.storage
    where = storage.clickhouse.url if storage.backend == "clickhouse" else storage.data_dir
    modes = ", ".join(f"{m} {n}" for m, n in sorted(summary.findings_by_mode.items()))
    print(
        f"imported {summary.runs} runs ({summary.spans} spans"
        + (f", {summary.logs} log records" if summary.logs else "")
        + f") from {summary.files} file(s) into {where}: {summary.findings} findings"
        + (f" ({modes})" if modes else "")
        + f", {summary.signatures} run signatures"
    )
    return 0


def cmd_findings(args: argparse.Namespace) -> int:
    config = _config(args)
    flt = queries.FindingFilter(
        trace_id=args.trace, mode=args.mode, since_ns=_since(args.since), limit=args.limit
    )
    rows: list[dict[str, Any]] = _read(config, lambda store: queries.findings(store, flt), [])
    _print_findings(rows, args.output)
    return 0


def cmd_signatures(args: argparse.Namespace) -> int:
    config = _config(args)
    rows: list[dict[str, Any]] = _read(
        config, lambda store: queries.signatures(store, trace_id=args.trace, limit=args.limit), []
    )
    if args.output == "json":
        for row in rows:
            print(json.dumps(row))
        return 0
    print(f"{'trace id':<32}  {'service':<12} {'model':<14} {'steps':>5} {'outcome':<8} modes")
    for row in rows:
        print(
            f"{_shown(row['trace_id']):<32}  {_shown(row['service'])[:12]:<12} "
            f"{_shown(row['model'])[:14]:<14} {row['steps']:>5} "
            f"{_shown(row['outcome']) or '-':<8} {_shown(', '.join(row['modes'])) or '-'}"
        )
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from collector.store import migrate, schema_status
    from schemas import migrations

    config = _config(args)
    storage = config.storage
    if args.print_sql:
        for migration in migrations(storage.database, storage.cluster):
            print(f"-- {migration.name}")
            for statement in migration.statements:
                print(statement + ";\n")
        return 0
    store = _open(config)
    try:
        before = schema_status(store)
        applied = migrate(store, storage.cluster, storage.ttl_days)
        after = schema_status(store)
    finally:
        store.close()
    where = storage.clickhouse.url if storage.backend == "clickhouse" else storage.data_dir
    print(
        f"schema of {storage.database} at {where}: version "
        f"{max(before.applied, default=0)} -> {max(after.applied, default=0)}"
        + (f" (applied {', '.join(map(str, applied))})" if applied else " (up to date)")
    )
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    from collector.reanalysis.backfill import ProgressBar, backfill
    from collector.service import prepare_store

    config = _config(args)
    since = _since(args.since)
    until = _since(args.until, "--until") or time.time_ns()
    assert since is not None
    if until <= since:
        raise ConfigError(f"--until ({args.until}) must be later than --since ({args.since})")
    store = _open(config)
    try:
        prepare_store(store, config)
        summary = backfill(store, config, since, until, progress=ProgressBar(sys.stderr))
    finally:
        store.close()
    print(
        f"analysed {summary.traces} traces in {summary.seconds:.1f}s: "
        f"{summary.findings_found} findings ({summary.findings_written} new, "
        f"{summary.findings_already_stored} already stored); signatures: "
        f"{summary.signatures_written} written, {summary.signatures_unchanged} unchanged"
    )
    return 0


def cmd_outcome(args: argparse.Namespace) -> int:
    from collector.store.signatures import UnknownRun, record_outcome

    config = _config(args)
    store = _open(config)
    try:
        record_outcome(store, args.trace, args.outcome, args.score)
    except (UnknownRun, ValueError) as exc:
        raise ConfigError(str(exc)) from exc
    finally:
        store.close()
    print(f"recorded {args.outcome} for {args.trace}")
    return 0


def cmd_failing(args: argparse.Namespace) -> int:
    config = _config(args)
    since = _since(args.since)
    assert since is not None
    scope = queries.Scope(since, None, args.service, args.model)
    rows: list[dict[str, Any]] = _read(
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
            f"{_shown(row['mode']):<7} {'yes' if row['fatal'] else 'no':<5} "
            f"{_shown(row['model'])[:16]:<16} {_shown(row['service'])[:14]:<14} "
            f"{row['findings']:>8} {row['runs']:>5}  {first}"
        )
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from collector import run_steps

    config = _config(args)
    timeline = _read(config, lambda store: run_steps.run_steps(store, args.trace), None)
    if timeline is None:
        raise ConfigError(f"no spans stored for trace {args.trace}")
    if args.output == "json":
        print(json.dumps(timeline))
        return 0
    for line in run_steps.render(timeline):
        # One printed line per rendered line, whatever a stored value holds.
        print(_shown(line))
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    config = _config(args)
    since_ns = _since(args.since)
    groups: list[GroupSummary] = _read(
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
            f"{args.by} {_shown(g.group) or '(unknown)'}: {g.runs} runs, success {rate}, "
            f"mean score {score}, {g.modes_per_failed_run:.1f} modes per failed run"
        )
        print(f"  {'mode':<7} {'failed':>7} {'success':>7} {'lift':>6}  call")
        for m in g.modes:
            if not (m.failed_with or m.success_with):
                continue
            call = ("fatal" if m.fatal else "benign") + f" ({m.basis})"
            print(
                f"  {_shown(m.mode):<7} {m.rate_failed:>7.0%} {m.rate_success:>7.0%} "
                f"{m.lift:>+6.0%}  {call}"
            )
    return 0


def _has_store(store: Store) -> bool:
    rows = store.query(
        f"SELECT count() AS n FROM system.tables WHERE database = '{store.database}' "
        f"AND name = 'mast_findings'"
    )
    return bool(rows and int(rows[0]["n"]))


def _print_findings(rows: list[dict[str, Any]], output: str) -> None:
    if output == "json":
        for row in rows:
            print(_json_line(row, ensure_ascii=False))
        return
    if not rows:
        print("no findings")
        return
    print(f"{'mode':<7} {'trace id':<32} {'span id':<16} {'conf':>4}  message")
    for row in rows:
        print(
            f"{_shown(row['mode']):<7} {_shown(row['trace_id']):<32} "
            f"{_shown(row['span_id']):<16} {float(row['confidence']):>4.2f}  "
            f"{_shown(row['message'])}"
        )


_DURATION = re.compile(r"^(\d{1,12})([smhd])$")
# What the store's times can hold: DateTime (seconds, unsigned 32-bit) is the narrowest column
# a time filter is compared with; a moment outside is refused before any query runs.
_EARLIEST_NS = 0
_LATEST_NS = (2**32 - 1) * 1_000_000_000


def _since(value: str | None, flag: str = "--since") -> int | None:
    """`15m`, `2h`, `1d` ago, or an ISO-8601 time, as Unix nanoseconds; a moment before 1970
    or past 2106 (what the store's times hold) is a ConfigError naming the flag."""
    if value is None:
        return None
    expected = f"{flag} expects a duration like 15m, 2h, 1d or an ISO time"
    match = _DURATION.match(value.strip())
    if match:
        seconds = int(match[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match[2]]
        moment_ns = time.time_ns() - seconds * 1_000_000_000
    else:
        try:
            moment = datetime.fromisoformat(value.strip())
            moment_ns = int(moment.timestamp() * 1e9)
        except (ValueError, OverflowError, OSError) as exc:
            raise ConfigError(f"{expected}, got {_shown(value)!r}") from exc
    if not _EARLIEST_NS <= moment_ns <= _LATEST_NS:
        raise ConfigError(
            f"{flag} {_shown(value)!r} is outside what the store's times hold (1970 to 2106)"
        )
    return moment_ns


# Terminal control characters: C0 (but newline and tab, which the caller handles), DEL and
# C1. Printed raw, a stored name could move the cursor, retitle the window, hide text or, on
# some terminals, answer back; they are shown as escapes instead.
# Bidirectional overrides and isolates reorder what follows them on screen: escaped too.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_BREAK = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _shown(value: Any) -> str:
    """A stored value as one line of harmless text: every control character (newlines and
    tabs included) as an escape such as \\x1b."""
    return _CONTROL_OR_BREAK.sub(_escape, str(value))


def _json_line(row: Any, ensure_ascii: bool = True) -> str:
    """`row` as JSON; JSON escapes C0 itself, C1 (kept raw without ensure_ascii) is escaped."""
    return re.sub(
        r"[\x7f-\x9f]", lambda m: f"\\u{ord(m[0]):04x}", json.dumps(row, ensure_ascii=ensure_ascii)
    )


class _SafeOutput:
    """A text stream that writes every terminal control character but newline and tab as an
    escape: the last guard for whatever a command prints from the store."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(_CONTROL.sub(_escape, text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def cmd_dashboards_generate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dashboards import generate

    root = Path(args.root)
    if args.check:
        stale = generate.stale(root)
        for path in stale:
            print(f"out of date: {path}")
        if stale:
            print("run `mast-otel dashboards generate` and commit the result", file=sys.stderr)
        return 1 if stale else 0
    for written in generate.write(root):
        print(written)
    return 0


def cmd_dashboards_push(args: argparse.Namespace) -> int:
    from dashboards import provisioning
    from dashboards.push import PushError, connect, push

    settings = provisioning.ClickHouseSettings(
        host=args.clickhouse_host,
        port=args.clickhouse_port,
        protocol=args.clickhouse_protocol,
        secure=args.clickhouse_secure,
        username=args.clickhouse_user,
        password=args.clickhouse_password or "",
        database=args.database,
    )
    try:
        api = connect(args.grafana_url, args.token, args.user, args.password)
        report = push(api, settings, prometheus_url=args.prometheus_url)
    except PushError as exc:
        print(f"mast-otel: {exc}", file=sys.stderr)
        return 2
    print(f"Grafana at {args.grafana_url}: {report}")
    return 0


def _dashboards_parser(sub: Any) -> None:
    dashboards = sub.add_parser("dashboards", help="Grafana dashboards and alert rules")
    commands = dashboards.add_subparsers(dest="dashboards_command", required=True)
    gen = commands.add_parser("generate", help="write dashboards JSON, provisioning, rules")
    gen.add_argument("--root", default=".", help="repository root to write under (default .)")
    gen.add_argument("--check", action="store_true", help="only check the files are current")
    gen.set_defaults(func=cmd_dashboards_generate)
    push = commands.add_parser(
        "push", help="install dashboards, data sources and alert rules into a running Grafana"
    )
    push.add_argument("--grafana-url", required=True, help="e.g. http://127.0.0.1:3000")
    push.add_argument("--token", help="service account token")
    push.add_argument("--user", help="basic-auth user (with --password)")
    push.add_argument("--password", help="basic-auth password")
    push.add_argument("--clickhouse-host", default="clickhouse")
    push.add_argument("--clickhouse-port", type=int, default=9000)
    push.add_argument("--clickhouse-protocol", choices=["native", "http"], default="native")
    push.add_argument("--clickhouse-secure", action="store_true", help="TLS to ClickHouse")
    push.add_argument("--clickhouse-user", default="default")
    push.add_argument("--clickhouse-password")
    push.add_argument("--database", default="otel", help="the collector's storage.database")
    push.add_argument("--prometheus-url", help="Prometheus scraping the collector's /metrics")
    push.set_defaults(func=cmd_dashboards_push)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mast-otel",
        description="Names MAST failure modes in LLM agent runs received over OTLP.",
    )
    parser.add_argument("--version", action="version", version=f"mast-otel {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, endpoints: bool = False) -> None:
        p.add_argument("--config", help="YAML config file (flags override it)")
        p.add_argument("--data-dir", help="embedded store directory (default ./mast-data)")
        p.add_argument(
            "--clickhouse-url",
            help="use a ClickHouse server, e.g. https://ch.example:8443 (password from "
            "$MAST_CLICKHOUSE_PASSWORD or --clickhouse-password-file)",
        )
        p.add_argument("--clickhouse-user", help="ClickHouse user (default: default)")
        p.add_argument("--clickhouse-password-file", help="file holding the ClickHouse password")
        p.add_argument("--database", help="database (default otel, as the OTel exporter's)")
        p.add_argument("--cluster", help="ClickHouse cluster name for ON CLUSTER DDL")
        if endpoints:
            p.add_argument("--grpc-endpoint", help="OTLP/gRPC HOST:PORT (default 127.0.0.1:4317)")
            p.add_argument("--http-endpoint", help="OTLP/HTTP HOST:PORT (default 127.0.0.1:4318)")
            p.add_argument(
                "--metrics-endpoint",
                help="also serve /metrics on HOST:PORT (always on the OTLP/HTTP port too)",
            )

    serve = sub.add_parser("serve", help="run the collector (OTLP gRPC and HTTP)")
    common(serve, endpoints=True)
    serve.add_argument(
        "--workers",
        type=int,
        help="worker processes that analyse runs, sharded by trace id (pipeline.workers; "
        "0: one per core, 1: all in one process)",
    )
    serve.set_defaults(func=cmd_serve)

    demo = sub.add_parser("demo", help="run example agent runs through a collector")
    common(demo)
    demo.add_argument("--transport", choices=["grpc", "http"], default="grpc")
    demo.add_argument(
        "--dialect",
        default="genai",
        choices=["genai", "genai-legacy", "openinference", "openllmetry", "all"],
    )
    demo.add_argument("--output", choices=["table", "json"], default="table")
    demo.add_argument(
        "--endpoint",
        help="send the runs to a running collector at HOST:PORT (or an OTLP/HTTP URL) "
        "instead of starting one",
    )
    demo.add_argument(
        "--loop", action="store_true", help="with --endpoint: send rounds until stopped"
    )
    demo.add_argument(
        "--interval", type=float, default=5.0, help="seconds between rounds (default 5)"
    )
    demo.add_argument(
        "--service-name", default="sre-agent", help="service.name of the demo agent's spans"
    )
    demo.set_defaults(func=cmd_demo)

    health = sub.add_parser("health", help="check a running collector's GET /healthz")
    health.add_argument("--config", help="YAML config file (its receivers.http.endpoint)")
    health.add_argument("--endpoint", help="HOST:PORT of the OTLP/HTTP receiver")
    health.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")
    health.add_argument(
        "--print",
        dest="verbose_body",
        action="store_true",
        help="print the whole health answer (JSON)",
    )
    health.set_defaults(func=cmd_health)

    analyze = sub.add_parser(
        "analyze", help="run the detectors over files (OTLP, Codex sessions, chat transcripts)"
    )
    analyze.add_argument(
        "files",
        nargs="+",
        help="OTLP JSON/protobuf files, Codex CLI session files (rollout-*.jsonl) or "
        "OpenAI-style chat transcripts (JSON/JSONL), recognised by content",
    )
    analyze.add_argument("--config", help="YAML config file")
    analyze.add_argument("--output", choices=["table", "json"], default="table")
    analyze.set_defaults(func=cmd_analyze)

    imp = sub.add_parser(
        "import", help="store files' runs as if sent: spans, findings, signatures, outcomes"
    )
    common(imp)
    imp.add_argument(
        "files", nargs="+", help="the files analyze reads (any mix of formats, by content)"
    )
    imp.set_defaults(func=cmd_import)

    summary = sub.add_parser(
        "summary", help="per model: success rate, modes per failed run, fatal vs benign modes"
    )
    common(summary)
    summary.add_argument("--by", choices=["model", "agent", "service"], default="model")
    summary.add_argument("--since", help="only runs since: 15m, 2h, 1d or an ISO time")
    summary.add_argument("--output", choices=["table", "json"], default="table")
    summary.set_defaults(func=cmd_summary)

    for name, func, what in (
        ("findings", cmd_findings, "list stored findings"),
        ("signatures", cmd_signatures, "list stored run signatures"),
    ):
        p = sub.add_parser(name, help=what)
        common(p)
        p.add_argument("--trace", help="only this trace id (32 hex)")
        if name == "findings":
            p.add_argument("--mode", help="only this mode, e.g. FM-1.3")
            p.add_argument("--since", help="only findings since: 15m, 2h, 1d or an ISO time")
        p.add_argument("--limit", type=int, default=1000)
        p.add_argument("--output", choices=["table", "json"], default="table")
        p.set_defaults(func=func)

    failing = sub.add_parser("failing", help="what is failing now: modes by model and service")
    common(failing)
    failing.add_argument("--since", default="15m", help="15m, 2h, 1d or an ISO time")
    failing.add_argument("--service")
    failing.add_argument("--model")
    failing.add_argument("--fatal", action="store_true", help="only fatal modes")
    failing.add_argument("--output", choices=["table", "json"], default="table")
    failing.set_defaults(func=cmd_failing)

    run = sub.add_parser(
        "run",
        help="one run step by step: kind, agent, tool or model, arguments, result, status, "
        "and the findings at each span",
    )
    common(run)
    run.add_argument("trace", help="trace id (32 hex)")
    run.add_argument("--output", choices=["table", "json"], default="table")
    run.set_defaults(func=cmd_run)

    migrate = sub.add_parser("migrate", help="bring the store's schema to the latest version")
    common(migrate)
    migrate.add_argument(
        "--print-sql", action="store_true", help="print the DDL for this layout, run nothing"
    )
    migrate.set_defaults(func=cmd_migrate)

    backfill = sub.add_parser("backfill", help="analyse spans already in otel_traces")
    common(backfill)
    backfill.add_argument("--since", required=True, help="15m, 2h, 1d ago or an ISO time")
    backfill.add_argument("--until", help="ISO time or duration ago (default: now)")
    backfill.set_defaults(func=cmd_backfill)

    outcome = sub.add_parser("outcome", help="post a closed run's outcome")
    common(outcome)
    outcome.add_argument("trace", help="trace id (32 hex)")
    outcome.add_argument("outcome", choices=["success", "failure"])
    outcome.add_argument("--score", type=float, help="task score in [0, 1]")
    outcome.set_defaults(func=cmd_outcome)
    _dashboards_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    stdout = sys.stdout
    sys.stdout = _SafeOutput(stdout)
    try:
        return int(args.func(args))
    except (
        ConfigError,
        StoreError,
        queries.QueryError,
        OtlpDecodeError,
        ImportFormatError,
    ) as exc:
        print(f"mast-otel: {_CONTROL.sub(_escape, str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`mast-otel findings | head`): stop quietly, and keep Python
        # from complaining when it flushes stdout at exit.
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())
        return 0
    except OSError as exc:
        message = f"{exc.filename or ''}: {exc.strerror or exc}"
        print(f"mast-otel: {_CONTROL.sub(_escape, message)}", file=sys.stderr)
        return 2
    finally:
        sys.stdout = stdout


if __name__ == "__main__":
    sys.exit(main())
