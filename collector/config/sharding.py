"""`sharding`: one replica among several behind a load balancer that routes by trace id."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ShardingConfig:
    """One replica among several behind a load balancer that routes by trace id
    (deploy/scale-out.md)."""

    # When a run closes, look in the shared store for spans of its trace that other replicas
    # received (the balancer moved the trace id when replicas came or went); if there are
    # any, analyse the whole trace from the store and write its findings and signature over
    # the partial ones. Needs a store every replica writes to (a ClickHouse server or cluster).
    merge_split_runs: bool = False
    # Spans of a closed run's trace are looked for this long before and after the ones this
    # replica saw, which keeps the look-up to a few daily partitions.
    trace_time_window_s: float = 86_400.0
    # Closed runs waiting for that look (one look per storage flush); past this the oldest
    # are not looked at, counted in /healthz as sharding.checks_dropped.
    max_pending_checks: int = 100_000
