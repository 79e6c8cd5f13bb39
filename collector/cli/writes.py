"""The commands that change the store: `migrate` (its schema), `backfill` (findings and
signatures of spans already stored), `outcome` (a closed run's outcome)."""

from __future__ import annotations

import argparse
import sys
import time

from mast_otel.collector.cli.common import config_from_args, open_for_reading, parse_since
from mast_otel.collector.config import ConfigError


def cmd_migrate(args: argparse.Namespace) -> int:
    from mast_otel.collector.store import migrate, schema_status
    from mast_otel.schemas import migrations

    config = config_from_args(args)
    storage = config.storage
    if args.print_sql:
        for migration in migrations(storage.database, storage.cluster):
            print(f"-- {migration.name}")
            for statement in migration.statements:
                print(statement + ";\n")
        return 0
    store = open_for_reading(config)
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
    from mast_otel.collector.reanalysis.backfill import ProgressBar, backfill
    from mast_otel.collector.service import prepare_store

    config = config_from_args(args)
    since = parse_since(args.since)
    until = parse_since(args.until, "--until") or time.time_ns()
    assert since is not None
    if until <= since:
        raise ConfigError(f"--until ({args.until}) must be later than --since ({args.since})")
    store = open_for_reading(config)
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
    from mast_otel.collector.store.signatures import UnknownRun, record_outcome

    config = config_from_args(args)
    store = open_for_reading(config)
    try:
        record_outcome(store, args.trace, args.outcome, args.score)
    except (UnknownRun, ValueError) as exc:
        raise ConfigError(str(exc)) from exc
    finally:
        store.close()
    print(f"recorded {args.outcome} for {args.trace}")
    return 0
