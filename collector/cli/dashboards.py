"""`dashboards generate` (dashboards JSON, provisioning and alert rules written to files) and
`dashboards push` (installed into a running Grafana)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def cmd_dashboards_generate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mast_otel.dashboards import generate

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
    from mast_otel.dashboards import provisioning
    from mast_otel.dashboards.push import PushError, connect, push

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


def add_dashboards_parser(sub: Any) -> None:
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
