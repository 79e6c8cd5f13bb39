"""`serve` (the collector: receivers, pipeline, store) and `health` (ask a running one's
`GET /healthz`)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from typing import Any

from mast_otel.collector import __version__
from mast_otel.collector.cli.common import config_from_args
from mast_otel.collector.config import ConfigError, load_config

log = logging.getLogger("mast-otel")


def cmd_serve(args: argparse.Namespace) -> int:
    from mast_otel.collector.service import Service

    config = config_from_args(args)
    stop = threading.Event()
    running: list[Service] = []

    def _on_signal(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if not stop.is_set():
            # One line, whatever sent it (the process, its whole group, Ctrl-C): worker
            # processes do not act on stop signals, this process tells them to drain.
            log.info(
                "received %s: stopping, storing everything accepted (send it again to stop "
                "now, leaving what is not stored in the spool)",
                name,
            )
            stop.set()
            return
        # A second signal: stop now. Nothing acknowledged is lost: it is in the spool.
        left = running[0].abort() if running else "nothing was open yet"
        log.warning("received %s again: stopping now; %s", name, left)
        logging.shutdown()
        os._exit(128 + signum)

    # Before the store and the spool are opened: a stop asked for at any moment from here on
    # still replays the spool and stores what it holds.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    service = Service(config, verbose=args.verbose)
    running.append(service)
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


def cmd_health(args: argparse.Namespace) -> int:
    """Ask a running collector's `GET /healthz`: exit 0 when it answers 200, 1 otherwise.
    Container health checks run this (the slim image has no curl)."""
    import urllib.error
    import urllib.request

    from mast_otel.collector.config import parse_endpoint

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
