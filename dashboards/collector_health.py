"""Dashboard 4, collector health: is the collector taking spans in, keeping up, and writing
them? From its self-metrics (Prometheus), so it works while ClickHouse is the thing failing."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import dashboard as model

from mast_otel.dashboards import panels as p
from mast_otel.dashboards.variables import prometheus_datasource
from mast_otel.schemas import metrics as m

UID = "mast-collector"
TITLE = "mast-otel · Collector health"

_I = 'instance=~"$instance"'
_RANGE = "$__rate_interval"

# Every PromQL this dashboard (and the overview's at-a-glance row) runs, in one place.
PROMQL: dict[str, str] = {
    "spans_in": f"sum by (transport) (rate({m.total(m.RECEIVER_ITEMS_ACCEPTED)}"
    f'{{signal="traces", {_I}}}[{_RANGE}]))',
    "logs_in": f"sum by (transport) (rate({m.total(m.RECEIVER_ITEMS_ACCEPTED)}"
    f'{{signal="logs", {_I}}}[{_RANGE}]))',
    "refused": f"sum by (transport, signal) (rate({m.total(m.RECEIVER_ITEMS_REFUSED)}"
    f"{{{_I}}}[{_RANGE}]))",
    "rejected": f"sum by (transport, signal) (rate({m.total(m.RECEIVER_ITEMS_REJECTED)}"
    f"{{{_I}}}[{_RANGE}]))",
    "receiver_errors": f"sum by (transport, kind) (rate({m.total(m.RECEIVER_ERRORS)}"
    f"{{{_I}}}[{_RANGE}]))",
    "queue_items": f"sum by (instance) ({m.QUEUE_ITEMS}{{{_I}}})",
    "queue_capacity": f"sum by (instance) ({m.QUEUE_CAPACITY}{{{_I}}})",
    "queue_fill": f"max({m.QUEUE_ITEMS}{{{_I}}} / {m.QUEUE_CAPACITY}{{{_I}}})",
    "runs_open": f"sum({m.RUNS_OPEN}{{{_I}}})",
    "runs_opened": f"sum(rate({m.total(m.RUNS_OPENED)}{{{_I}}}[{_RANGE}]))",
    "runs_closed": f"sum by (reason) (rate({m.total(m.RUNS_CLOSED)}{{{_I}}}[{_RANGE}]))",
    "runs_evicted": f"sum(rate({m.total(m.RUNS_EVICTED)}{{{_I}}}[{_RANGE}]))",
    "write_p50": f"histogram_quantile(0.5, sum by (le) (rate({m.STORE_WRITE_SECONDS}_bucket"
    f"{{{_I}}}[{_RANGE}])))",
    "write_p99": f"histogram_quantile(0.99, sum by (le) (rate({m.STORE_WRITE_SECONDS}_bucket"
    f"{{{_I}}}[{_RANGE}])))",
    "write_errors": f"sum by (table) (rate({m.total(m.STORE_WRITE_ERRORS)}{{{_I}}}[{_RANGE}]))",
    "export_errors": f"sum(rate({m.total(m.PIPELINE_EXPORT_ERRORS)}{{{_I}}}[{_RANGE}]))",
    "rows_written": f"sum by (table) (rate({m.total(m.STORE_ROWS_WRITTEN)}{{{_I}}}[{_RANGE}]))",
    "buffered_rows": f"sum({m.STORE_BUFFERED_ROWS}{{{_I}}})",
    "findings": f"sum by (mode, fatal) (rate({m.total(m.FINDINGS)}{{{_I}}}[{_RANGE}]))",
    "stage_cpu": f"sum by (stage) (rate({m.total(m.STAGE_CPU_SECONDS)}{{{_I}}}[{_RANGE}]))",
    # At a glance (stat panels, instant): last 5 minutes.
    "glance_spans_in": f"sum(rate({m.total(m.RECEIVER_ITEMS_ACCEPTED)}{{{_I}}}[5m]))",
    "glance_refused": f"sum(rate({m.total(m.RECEIVER_ITEMS_REFUSED)}{{{_I}}}[5m]))",
    "glance_write_errors": f"sum(increase({m.total(m.STORE_WRITE_ERRORS)}{{{_I}}}[15m]))",
    "glance_evictions": f"sum(increase({m.total(m.RUNS_EVICTED)}{{{_I}}}[15m]))",
}


def instance_variable() -> db.QueryVariable:
    return (
        db.QueryVariable("instance")
        .label("Collector")
        .datasource(model.DataSourceRef(type_val="prometheus", uid="${prometheus}"))
        .query(f"label_values({m.BUILD_INFO}, instance)")
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(model.VariableOption(selected=True, text=["All"], value=["$__all"]))
    )


def glance_panels(width: int = 4) -> list[p.Panel]:
    """Collector health at a glance (also the overview's last row)."""
    return [
        p.prom_stat(
            "Spans and logs in /s",
            PROMQL["glance_spans_in"],
            description="Items accepted by the receivers over the last 5 minutes. Zero while "
            "agents are running means nothing reaches the collector.",
            unit="reqps",
            width=width,
            thresholds=[(None, "red"), (0.001, "green")],
        ),
        p.prom_stat(
            "Refused /s",
            PROMQL["glance_refused"],
            description="Items refused with a retryable status (pipeline queue full). Senders "
            "retry, but sustained refusals mean the collector cannot keep up.",
            width=width,
            thresholds=[(None, "green"), (0.001, "red")],
        ),
        p.prom_stat(
            "Queue fill",
            PROMQL["queue_fill"],
            description="Pipeline queue depth over pipeline.queue_max_items. Past 100% "
            "receivers refuse.",
            unit="percentunit",
            width=width,
            thresholds=[(None, "green"), (0.5, "orange"), (0.8, "red")],
        ),
        p.prom_stat(
            "Runs open",
            PROMQL["runs_open"],
            description="Runs held in memory, waiting for their end.",
            width=width,
        ),
        p.prom_stat(
            "Store write errors (15m)",
            PROMQL["glance_write_errors"],
            description="Failed batch writes to ClickHouse in the last 15 minutes (rows stay "
            "buffered and are retried).",
            width=width,
            thresholds=[(None, "green"), (1, "red")],
        ),
        p.prom_stat(
            "Evictions (15m)",
            PROMQL["glance_evictions"],
            description="Runs closed early because windows.max_active_runs was reached: "
            "their findings may be incomplete.",
            width=width,
            thresholds=[(None, "green"), (1, "orange")],
        ),
    ]


def build() -> db.Dashboard:
    panels: list[p.Panel] = [
        *glance_panels(),
        p.prom_timeseries(
            "Spans in",
            [
                (PROMQL["spans_in"], "spans {{transport}}"),
                (PROMQL["logs_in"], "logs {{transport}}"),
            ],
            description="Spans and log records accepted per second, by transport.",
            unit="reqps",
        ),
        p.prom_timeseries(
            "Refused, rejected, failed",
            [
                (PROMQL["refused"], "refused {{signal}} {{transport}}"),
                (PROMQL["rejected"], "rejected {{signal}} {{transport}}"),
                (PROMQL["receiver_errors"], "{{kind}} errors {{transport}}"),
            ],
            description="Refused: retryable back-pressure (queue full). Rejected: malformed "
            "items, dropped with OTLP partial success. Errors: undecodable requests.",
            unit="reqps",
        ),
        p.prom_timeseries(
            "Queue depth",
            [
                (PROMQL["queue_items"], "queued {{instance}}"),
                (PROMQL["queue_capacity"], "limit {{instance}}"),
            ],
            description="Items decoded but not yet processed, against the queue limit.",
        ),
        p.prom_timeseries(
            "Runs open and closed",
            [
                (PROMQL["runs_open"], "open"),
                (PROMQL["runs_opened"], "opened /s"),
                (PROMQL["runs_closed"], "closed /s ({{reason}})"),
                (PROMQL["runs_evicted"], "evicted /s"),
            ],
            description="Runs in memory, and how runs end: root span ended, explicit end, "
            "idle, evicted (memory bound reached), shutdown.",
        ),
        p.prom_timeseries(
            "ClickHouse write latency",
            [(PROMQL["write_p50"], "p50"), (PROMQL["write_p99"], "p99")],
            description="Time to write one batch (one table) to the store.",
            unit="s",
        ),
        p.prom_timeseries(
            "ClickHouse write errors",
            [(PROMQL["write_errors"], "{{table}}"), (PROMQL["export_errors"], "failed flushes")],
            description="Failed writes per table; the rows stay buffered and are retried.",
            unit="reqps",
        ),
        p.prom_timeseries(
            "Rows written and buffered",
            [(PROMQL["rows_written"], "{{table}} /s"), (PROMQL["buffered_rows"], "buffered")],
            description="Rows written per second by table, and rows waiting for the next flush.",
        ),
        p.prom_timeseries(
            "CPU by stage",
            [(PROMQL["stage_cpu"], "{{stage}}")],
            description="CPU seconds per second each stage takes: receive (parse, decode, "
            "write-ahead), redact, normalize, detect (windows and detectors), store (on a "
            "thread of its own). Redact, normalize and detect share one thread: their sum near "
            "1 means the collector is at its ceiling. Divide by spans in for the cost per span.",
            unit="percentunit",
        ),
        p.prom_timeseries(
            "Findings by mode",
            [(PROMQL["findings"], "{{mode}} (fatal={{fatal}})")],
            description="Findings per second by failure mode; fatal by the study's prior.",
            unit="reqps",
        ),
    ]
    dashboard = (
        db.Dashboard(TITLE)
        .uid(UID)
        .description("Self-metrics of the mast-otel collector (Prometheus).")
        .tags(["mast-otel", "collector"])
        .time("now-1h", "now")
        .refresh("30s")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .with_variable(prometheus_datasource())
        .with_variable(instance_variable())
    )
    for panel in p.with_ids(panels):
        dashboard = dashboard.with_panel(panel)
    return dashboard
