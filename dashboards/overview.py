"""Dashboard 1, on-call overview: which agents are failing, how, since when, and what to look
at first."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import dashboard as model

from mast_otel.dashboards import collector_health
from mast_otel.dashboards import panels as p
from mast_otel.dashboards.sources import FATAL, FINDINGS, RUN_FAILING, SIGNATURES, run_filters
from mast_otel.dashboards.variables import prometheus_datasource
from mast_otel.dashboards.variables import run_filters as filter_variables

UID = "mast-overview"
TITLE = "mast-otel · On-call overview"

# A run counts as failing "now" when it closed in the last 15 minutes of the time range.
RECENT_MINUTES = 15

# Every SQL this dashboard runs, in one place.
SQL: dict[str, str] = {
    "summary": f"""SELECT count() AS runs,
  countIf({RUN_FAILING}) AS failing_runs,
  if(count() = 0, 0, countIf({RUN_FAILING}) / count()) AS failing_share
FROM {SIGNATURES}
WHERE {run_filters("Start")}""",
    "fatal_count": f"""SELECT count() AS fatal_findings
FROM {FINDINGS}
WHERE {run_filters("Timestamp")}
  AND {FATAL}""",
    "failing_now": f"""SELECT countIf({RUN_FAILING}) AS failing_now
FROM {SIGNATURES}
WHERE End >= $__toTime - INTERVAL {RECENT_MINUTES} MINUTE AND End <= $__toTime
  AND {run_filters()}""",
    "fatal_per_minute": f"""SELECT $__timeInterval(Timestamp) AS time,
  concat(Mode, ' · ', Model) AS series,
  count() AS findings
FROM {FINDINGS}
WHERE {run_filters("Timestamp")}
  AND {FATAL}
GROUP BY time, series
ORDER BY time, series""",
    "runs_failing": f"""SELECT $__timeInterval(End) AS time,
  countIf({RUN_FAILING}) AS failing,
  count() AS closed
FROM {SIGNATURES}
WHERE {run_filters("End")}
GROUP BY time
ORDER BY time""",
    "top_agents": f"""SELECT AgentName AS agent, Model AS model, ServiceName AS service,
  countIf({RUN_FAILING}) AS failing_runs,
  count() AS runs,
  countIf({RUN_FAILING}) / count() AS failure_rate,
  minIf(Start, {RUN_FAILING}) AS failing_since,
  maxIf(End, {RUN_FAILING}) AS last_failure,
  arrayStringConcat(arraySlice(arrayReverseSort((k, v) -> v,
    mapKeys(sumMapIf(ModeCounts, {RUN_FAILING})),
    mapValues(sumMapIf(ModeCounts, {RUN_FAILING}))), 1, 3), ', ') AS top_modes
FROM {SIGNATURES}
WHERE {run_filters("Start")}
GROUP BY agent, model, service
HAVING failing_runs > 0
ORDER BY failing_runs DESC, failure_rate DESC
LIMIT 20""",
    "latest_fatal": f"""SELECT Timestamp AS time, Mode AS mode, ModeName AS mode_name,
  Model AS model, AgentName AS agent, ServiceName AS service, Message AS message,
  Intervention AS intervention, TraceId, SpanId
FROM {FINDINGS}
WHERE {run_filters("Timestamp")}
  AND {FATAL}
ORDER BY Timestamp DESC
LIMIT 50""",
    "fixes": f"""SELECT Intervention AS fix,
  countIf({FATAL}) AS fatal_findings,
  uniqExactIf(TraceId, {FATAL}) AS runs_with_fatal,
  uniqExact(TraceId) AS runs,
  count() AS findings,
  arrayStringConcat(arraySort(groupUniqArray(Mode)), ', ') AS modes
FROM {FINDINGS}
WHERE {run_filters("Timestamp")}
  AND Intervention != ''
GROUP BY fix
ORDER BY runs_with_fatal DESC, runs DESC""",
}


def build() -> db.Dashboard:
    panels: list[p.Panel] = [
        p.ch_stat(
            "Runs failing now",
            SQL["failing_now"],
            description=f"Runs that closed in the last {RECENT_MINUTES} minutes of the time "
            "range and failed (outcome failure, or a fatal mode).",
            thresholds=[(None, "green"), (1, "red")],
        ),
        p.ch_stat(
            "Runs, failing, failing share",
            SQL["summary"],
            description="Runs closed in the time range, how many failed, and the share.",
            width=12,
            thresholds=[(None, "blue")],
        ),
        p.ch_stat(
            "Fatal findings",
            SQL["fatal_count"],
            description="Findings of modes that separate failed from successful runs.",
            thresholds=[(None, "green"), (1, "orange"), (10, "red")],
        ),
        p.ch_timeseries(
            "Fatal findings per minute, by mode and model",
            SQL["fatal_per_minute"],
            description="Where a spike starts: which mode, on which model.",
            series_label="series",
            bars=True,
        ),
        p.ch_timeseries(
            "Runs failing",
            SQL["runs_failing"],
            description="Runs closed per interval, and how many of them failed.",
        ),
        p.ch_table(
            "Top failing agents",
            SQL["top_agents"],
            description="Agents by failing runs in the time range: since when they fail "
            "(first failing run) and their most frequent modes.",
            width=24,
            overrides=[("failure_rate", [p.unit("percentunit")])],
        ),
        p.ch_table(
            "Latest fatal findings",
            SQL["latest_fatal"],
            description="Newest first. Click a TraceId to open the run: its steps, where each "
            "finding is, and the evidence.",
            width=24,
            height=10,
            overrides=[("TraceId", [p.link_to_run()]), ("message", [p.width(420)])],
        ),
        p.ch_table(
            "What to fix first",
            SQL["fixes"],
            description="The study's recommended interventions, ranked by the runs with fatal "
            "findings each would address.",
            width=24,
            height=7,
        ),
        *collector_health.glance_panels(),
    ]
    dashboard = (
        db.Dashboard(TITLE)
        .uid(UID)
        .description("Which agents are failing, how, since when, and what to look at first.")
        .tags(["mast-otel", "on-call"])
        .time("now-6h", "now")
        .refresh("1m")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .link(
            db.DashboardLink("mast-otel")
            .type(model.DashboardLinkType.DASHBOARDS)
            .tags(["mast-otel"])
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
    )
    for variable in [
        *filter_variables(),
        prometheus_datasource(),
        collector_health.instance_variable(),
    ]:
        dashboard = dashboard.with_variable(variable)
    for panel in p.with_ids(panels):
        dashboard = dashboard.with_panel(panel)
    return dashboard
