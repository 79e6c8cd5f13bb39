"""The `mast-otel` command line: serve, demo, analyze, import, findings, signatures, failing,
run, migrate, backfill, outcome.

The parser and `main` are here; each group of commands is a module of its own: `serve`
(serve, health), `demo`, `analyze` (analyze, import), `reads` (findings, signatures, failing,
run, summary), `writes` (migrate, backfill, outcome), `dashboards`; `common` holds what they
share and `output` what makes their output harmless."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Sequence

from mast_otel.collector import __version__
from mast_otel.collector.cli.analyze import cmd_analyze, cmd_import
from mast_otel.collector.cli.dashboards import add_dashboards_parser
from mast_otel.collector.cli.demo import cmd_demo
from mast_otel.collector.cli.output import CONTROL, SafeOutput, escape_control
from mast_otel.collector.cli.reads import (
    cmd_failing,
    cmd_findings,
    cmd_run,
    cmd_signatures,
    cmd_summary,
)
from mast_otel.collector.cli.serve import cmd_health, cmd_serve
from mast_otel.collector.cli.writes import cmd_backfill, cmd_migrate, cmd_outcome
from mast_otel.collector.config import ConfigError
from mast_otel.collector.importers.errors import ImportFormatError
from mast_otel.collector.otlp.decode import OtlpDecodeError
from mast_otel.collector.store import StoreError, queries


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
        "0, the default: one per core this process may use; 1: all in one process)",
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
    add_dashboards_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    stdout = sys.stdout
    sys.stdout = SafeOutput(stdout)
    try:
        return int(args.func(args))
    except (
        ConfigError,
        StoreError,
        queries.QueryError,
        OtlpDecodeError,
        ImportFormatError,
    ) as exc:
        print(f"mast-otel: {CONTROL.sub(escape_control, str(exc))}", file=sys.stderr)
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
        print(f"mast-otel: {CONTROL.sub(escape_control, message)}", file=sys.stderr)
        return 2
    finally:
        sys.stdout = stdout
