"""The collector's self-metrics as Prometheus sees them: the one place that spells their names.

The collector serves them (`collector.metrics`), and the collector-health dashboard and the
Prometheus alert rules (`dashboards`) are built from these constants, so neither side imports
the other to agree on a name.
"""

from __future__ import annotations

PREFIX = "mast_otel"

# Counters are named without `_total`: the exposition adds it (Prometheus sees `..._total`).
RECEIVER_REQUESTS = f"{PREFIX}_receiver_requests"
RECEIVER_ITEMS_ACCEPTED = f"{PREFIX}_receiver_accepted"
RECEIVER_ITEMS_REFUSED = f"{PREFIX}_receiver_refused"
RECEIVER_ITEMS_REJECTED = f"{PREFIX}_receiver_rejected"
RECEIVER_REQUESTS_REFUSED = f"{PREFIX}_receiver_requests_refused"
RECEIVER_ERRORS = f"{PREFIX}_receiver_errors"
RECEIVER_LIMIT_HITS = f"{PREFIX}_receiver_limit_hits"
QUEUE_ITEMS = f"{PREFIX}_pipeline_queue_items"
QUEUE_CAPACITY = f"{PREFIX}_pipeline_queue_capacity_items"
PIPELINE_RECEIVED = f"{PREFIX}_pipeline_received"
PIPELINE_UNRECOGNISED = f"{PREFIX}_pipeline_spans_unrecognised"
PIPELINE_EXPORT_ERRORS = f"{PREFIX}_pipeline_export_errors"
RUNS_OPEN = f"{PREFIX}_runs_open"
RUNS_OPENED = f"{PREFIX}_runs_opened"
RUNS_CLOSED = f"{PREFIX}_runs_closed"
RUNS_EVICTED = f"{PREFIX}_runs_evicted"
STEPS = f"{PREFIX}_steps"
RECOVERED = f"{PREFIX}_conversation_recovered"
FINDINGS = f"{PREFIX}_findings"
SIGNATURES = f"{PREFIX}_signatures"
STORE_ROWS_WRITTEN = f"{PREFIX}_store_rows_written"
STORE_BATCHES_WRITTEN = f"{PREFIX}_store_batches_written"
STORE_WRITE_ERRORS = f"{PREFIX}_store_write_errors"
STORE_WRITE_SECONDS = f"{PREFIX}_store_write_duration_seconds"
STORE_BUFFERED_ROWS = f"{PREFIX}_store_buffered_rows"
BUILD_INFO = f"{PREFIX}_build_info"
STAGE_CPU_SECONDS = f"{PREFIX}_stage_cpu_seconds"

# The names as Prometheus stores them (counters with `_total`), for queries and rules.
COUNTERS = (
    RECEIVER_REQUESTS,
    RECEIVER_ITEMS_ACCEPTED,
    RECEIVER_ITEMS_REFUSED,
    RECEIVER_ITEMS_REJECTED,
    RECEIVER_REQUESTS_REFUSED,
    RECEIVER_ERRORS,
    RECEIVER_LIMIT_HITS,
    PIPELINE_RECEIVED,
    PIPELINE_UNRECOGNISED,
    PIPELINE_EXPORT_ERRORS,
    RUNS_OPENED,
    RUNS_CLOSED,
    RUNS_EVICTED,
    STEPS,
    RECOVERED,
    FINDINGS,
    SIGNATURES,
    STORE_ROWS_WRITTEN,
    STORE_BATCHES_WRITTEN,
    STORE_WRITE_ERRORS,
    STAGE_CPU_SECONDS,
)
GAUGES = (QUEUE_ITEMS, QUEUE_CAPACITY, RUNS_OPEN, STORE_BUFFERED_ROWS, BUILD_INFO)
HISTOGRAMS = (STORE_WRITE_SECONDS,)


def total(name: str) -> str:
    """A counter's series name as scraped (`name_total`)."""
    return f"{name}_total"
