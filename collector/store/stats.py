"""What the exporter counts: rows and batches written, errors, retries, duplicates and rows
dropped, and a histogram of write latency (read by /healthz and the self-metrics)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Upper bounds (seconds) of the write-latency histogram: an embedded insert takes milliseconds,
# a remote server under load seconds; past 10 s a batch is in trouble whatever the cause.
WRITE_SECONDS_BUCKETS: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


@dataclass
class LatencyHistogram:
    """Cumulative-bucket histogram of durations, read by self-metrics as a snapshot."""

    bounds: tuple[float, ...] = WRITE_SECONDS_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * (len(WRITE_SECONDS_BUCKETS) + 1))
    total_seconds: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        index = next((i for i, bound in enumerate(self.bounds) if seconds <= bound), -1)
        self.counts[index] += 1
        self.total_seconds += seconds
        self.count += 1

    def snapshot(self) -> dict[str, Any]:
        """Cumulative counts per upper bound as Prometheus writes it ("0.005", ..., "+Inf"),
        the sum and the count: plain JSON, so /healthz can carry it too."""
        cumulative: list[tuple[str, int]] = []
        running = 0
        labels = [repr(bound) for bound in self.bounds] + ["+Inf"]
        for label, n in zip(labels, self.counts, strict=True):
            running += n
            cumulative.append((label, running))
        return {"buckets": cumulative, "sum": self.total_seconds, "count": self.count}


@dataclass
class ExporterStats:
    rows_written: dict[str, int] = field(default_factory=dict)
    batches_written: int = 0
    write_errors: int = 0
    retries: int = 0
    # Outcomes that arrived for a run with no stored signature (dropped, with a warning).
    outcomes_without_run: int = 0
    last_write_seconds: float = 0.0
    # Failed writes by table, and how long each write took (failed ones included).
    write_errors_by_table: dict[str, int] = field(default_factory=dict)
    write_seconds: LatencyHistogram = field(default_factory=LatencyHistogram)
    # Spans and log records not written because the store (or the same batch) had them.
    duplicates_dropped: int = 0
    # Rows that could not be encoded for the store (each logged with its ids), dropped so
    # one bad row cannot block every row behind it.
    rows_unwritable: int = 0
    store_checks: int = 0
