"""Every dashboard query and every ClickHouse alert query, expanded as Grafana and the
ClickHouse plugin expand them, runs on chDB against a store filled through the live path (a
running collector receiving real OTLP from the SDK) and returns the columns its panel needs,
with rows where the seeded runs make rows."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from mast_otel.collector.demo.agent import SCENARIOS_BY_NAME, SreAgent, tracer_provider
from mast_otel.collector.demo.dialects import DIALECTS
from mast_otel.collector.demo.runner import otlp_exporter, run_agents
from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore
from mast_otel.dashboards import alert_rules, alerts, generate, variables
from mast_otel.dashboards.clickhouse import PLUGIN_ID
from mast_otel.dashboards.interpolate import (
    ALL,
    QueryContext,
    Variable,
    alert_query,
    macro_arguments,
    panel_query,
)
from mast_otel.dashboards.sources import DATABASE
from tests.test_end_to_end import loopback_config

OTHER_MODEL = "gpt-oss-120b"
# The second model's runs: enough amnesia (fatal FM-1.4) and loops to trip the alert rules.
OTHER_SCENARIOS = (
    "amnesia",
    "amnesia",
    "amnesia",
    "stuck_loop",
    "stuck_loop",
    "stuck_loop",
    "blind_fix",
    "blind_fix",
    "healthy_fix",
)


class StampScore(SpanProcessor):
    """What an evaluation harness does: put the task score on each run's root span."""

    def __init__(self, score: float) -> None:
        self.score = score

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if span.parent is None:
            span.set_attribute("mast.run.score", self.score)

    def on_end(self, span: ReadableSpan) -> None:
        return None


@dataclass
class Seeded:
    store: ChdbStore
    trace_with_findings: str
    start: datetime
    end: datetime


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    config = loopback_config(tmp_path_factory.mktemp("dashboards-store"))
    start = datetime.now(UTC) - timedelta(seconds=1)
    service = Service(config)
    service.start()
    try:
        with pytest.MonkeyPatch.context() as env:
            # The SDK reads resource attributes from the environment, as in a deployment.
            env.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=production")
            run_agents(service, "grpc", list(DIALECTS))
            env.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging")
            provider = tracer_provider(otlp_exporter("http", service))
            provider.add_span_processor(StampScore(0.4))
            try:
                for dialect in ("genai", "openinference"):
                    agent = SreAgent(
                        provider.get_tracer("test"), dialect=dialect, model=OTHER_MODEL
                    )
                    for index, name in enumerate(OTHER_SCENARIOS):
                        agent.run(SCENARIOS_BY_NAME[name], conversation=f"{name}-{index}")
                assert provider.force_flush(30_000)
            finally:
                provider.shutdown()
    finally:
        service.stop()
    store = ChdbStore(config.storage.data_dir, config.storage.database)
    trace = store.query("SELECT TraceId FROM otel.mast_findings WHERE Mode = 'FM-1.4' LIMIT 1")[0][
        "TraceId"
    ]
    yield Seeded(store, trace, start, datetime.now(UTC) + timedelta(seconds=1))
    store.close()


def _dashboards() -> dict[str, dict[str, Any]]:
    return generate.dashboards()


def clickhouse_targets() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(dashboard uid, panel, target) for every ClickHouse query in the generated JSON."""
    found = []
    for uid, dashboard in _dashboards().items():
        for panel in dashboard.get("panels", []):
            for target in panel.get("targets", []):
                if target.get("datasource", {}).get("type") == PLUGIN_ID:
                    found.append((uid, panel, target))
    return found


TARGETS = clickhouse_targets()


def scenarios(seeded: Seeded) -> dict[str, dict[str, Variable]]:
    """The variables as on-call engineers set them: everything at All, one value each, and
    several values (one of them unknown)."""
    base = {"database": Variable("otel"), "trace_id": Variable(seeded.trace_with_findings)}
    return {
        "all": {
            **base,
            "service": Variable(ALL, ["sre-agent"]),
            "agent": Variable(ALL, ["sre-agent"]),
            "model": Variable(ALL, ["gpt-4o", OTHER_MODEL]),
            "environment": Variable(ALL, ["production", "staging"]),
        },
        "single": {
            **base,
            "service": Variable("sre-agent"),
            "agent": Variable(ALL, ["sre-agent"]),
            "model": Variable(OTHER_MODEL),
            "environment": Variable("staging"),
        },
        "multi": {
            **base,
            "service": Variable(["sre-agent", "billing-agent"]),
            "agent": Variable(["sre-agent"]),
            "model": Variable(["gpt-4o", OTHER_MODEL]),
            "environment": Variable(["production", "staging"]),
        },
    }


def context(
    seeded: Seeded, variables_: dict[str, Variable], interval_s: float = 60
) -> QueryContext:
    return QueryContext(
        seeded.start - timedelta(hours=1),
        seeded.end + timedelta(minutes=1),
        interval_s,
        variables_,
    )


def describe(store: ChdbStore, sql: str) -> list[tuple[str, str]]:
    return [(row["name"], row["type"]) for row in store.query(f"DESCRIBE ({sql})")]


NUMERIC = ("Int", "UInt", "Float", "Decimal", "Nullable(Int", "Nullable(UInt", "Nullable(Float")


def is_numeric(type_name: str) -> bool:
    return type_name.startswith(NUMERIC)


def is_time(type_name: str) -> bool:
    return type_name.startswith(("DateTime", "Nullable(DateTime"))


def check_shape(panel: dict[str, Any], target: dict[str, Any], columns: list[tuple[str, str]]):
    """The columns a panel's visualization and its links need."""
    names = [name for name, _ in columns]
    types = dict(columns)
    assert len(set(names)) == len(names), names
    if target["format"] == 0:  # time series: a time column, numbers, string labels
        assert names[0] == "time" and is_time(types["time"]), columns
        assert any(is_numeric(t) for _, t in columns[1:]), columns
        assert all(
            is_numeric(t) or t.startswith(("String", "LowCardinality")) for _, t in columns[1:]
        ), columns
    elif target["format"] == 3:  # Grafana's trace view
        assert names[:9] == [
            "traceID",
            "spanID",
            "parentSpanID",
            "serviceName",
            "operationName",
            "startTime",
            "duration",
            "tags",
            "serviceTags",
        ], names
    if panel["type"] == "stat":
        assert all(is_numeric(t) for _, t in columns), columns
    # Field overrides and data links must name columns that exist.
    for override in panel.get("fieldConfig", {}).get("overrides", []):
        if override["matcher"]["id"] == "byName":
            assert override["matcher"]["options"] in names, (panel["title"], names)
    for transformation in panel.get("transformations", []):
        if transformation["id"] == "groupingToMatrix":
            options = transformation["options"]
            for key in ("columnField", "rowField", "valueField"):
                assert options[key] in names


def test_every_clickhouse_target_is_checked():
    assert len(TARGETS) >= 15
    assert {uid for uid, _, _ in TARGETS} == {"mast-overview", "mast-run", "mast-models"}


def test_macro_arguments_are_plain_columns():
    """The plugin's older macro parser stops at the first ')': keep arguments plain."""
    for _, _, target in TARGETS:
        for name, args in macro_arguments(target["rawSql"]):
            assert all("(" not in a and ")" not in a for a in args), (name, args)


@pytest.mark.parametrize("scenario", ["all", "single", "multi"])
@pytest.mark.parametrize(
    ("uid", "panel", "target"),
    TARGETS,
    ids=[f"{uid}:{panel['title']}" for uid, panel, _ in TARGETS],
)
def test_panel_query_runs_and_fits_its_panel(seeded, uid, panel, target, scenario):
    sql = panel_query(target["rawSql"], context(seeded, scenarios(seeded)[scenario]))
    assert not re.search(r"\$\{|\$[a-z]", sql), sql
    columns = describe(seeded.store, sql)
    check_shape(panel, target, columns)
    rows = seeded.store.query(sql)
    # The seeded runs make every panel non-empty under every filter setting (each setting
    # keeps some runs), except "runs failing now" style single numbers, which always answer.
    assert rows, (uid, panel["title"], scenario, sql)
    if panel["type"] == "stat":
        assert len(rows) == 1


def test_filters_filter(seeded):
    """A single model or environment narrows the numbers; an unknown value empties them."""
    summary = next(t for u, p, t in TARGETS if p["title"] == "Runs, failing, failing share")
    all_runs = seeded.store.query(
        panel_query(summary["rawSql"], context(seeded, scenarios(seeded)["all"]))
    )[0]
    single = seeded.store.query(
        panel_query(summary["rawSql"], context(seeded, scenarios(seeded)["single"]))
    )[0]
    assert all_runs["runs"] == 4 * 6 + 2 * len(OTHER_SCENARIOS)
    assert single["runs"] == 2 * len(OTHER_SCENARIOS)
    nowhere = {**scenarios(seeded)["single"], "environment": Variable("nowhere")}
    none = seeded.store.query(panel_query(summary["rawSql"], context(seeded, nowhere)))[0]
    assert none["runs"] == 0


def test_run_drilldown_shows_the_finding_at_its_span(seeded):
    steps = next(t for u, p, t in TARGETS if u == "mast-run" and p["title"] == "Steps")
    rows = seeded.store.query(
        panel_query(steps["rawSql"], context(seeded, scenarios(seeded)["all"]))
    )
    flagged = [row for row in rows if row["findings"]]
    expected = seeded.store.query(
        f"SELECT SpanId FROM otel.mast_findings WHERE TraceId = '{seeded.trace_with_findings}'"
    )
    assert {row["SpanId"] for row in flagged} == {row["SpanId"] for row in expected}
    assert all("FM-1.4" in row["findings"] and row["evidence"] for row in flagged)


def test_run_drilldown_marks_the_decisive_step_and_its_chain(seeded):
    """The run's stored attribution: its span marked in Steps, the chain in Attribution."""
    (stored,) = seeded.store.query(
        "SELECT DecisiveSpanId AS span, ResponsibleAgent AS agent, AttributionChain AS chain "
        f"FROM otel.mast_signatures FINAL WHERE TraceId = '{seeded.trace_with_findings}'"
    )
    assert stored["span"] and stored["agent"]
    ctx = context(seeded, scenarios(seeded)["all"])
    steps = next(t for u, p, t in TARGETS if u == "mast-run" and p["title"] == "Steps")
    marked = [r["SpanId"] for r in seeded.store.query(panel_query(steps["rawSql"], ctx))
              if r["attribution"] == "decisive"]  # fmt: skip
    assert marked == [stored["span"]]
    panel = next(t for u, p, t in TARGETS if u == "mast-run" and p["title"] == "Attribution")
    rows = seeded.store.query(panel_query(panel["rawSql"], ctx))
    assert {r["responsible_agent"] for r in rows} == {stored["agent"]}
    assert [r["span"] for r in rows] == [link["span_id"] for link in json.loads(stored["chain"])]
    assert rows[-1]["span"] == stored["span"]


def test_model_comparison_separates_the_models(seeded):
    success = next(t for u, p, t in TARGETS if p["title"] == "Success rate and recall")
    rows = {
        r["model"]: r
        for r in seeded.store.query(
            panel_query(success["rawSql"], context(seeded, scenarios(seeded)["all"]))
        )
    }
    assert rows[OTHER_MODEL]["recall"] == pytest.approx(0.4)
    assert rows["gpt-4o"]["recall"] is None
    assert rows["gpt-4o"]["success_rate"] == pytest.approx(2 / 6)


@pytest.mark.parametrize("name", sorted(variables.VARIABLE_SQL))
def test_variable_queries(seeded, name):
    sql = panel_query(variables.VARIABLE_SQL[name], context(seeded, scenarios(seeded)["all"]))
    values = {next(iter(row.values())) for row in seeded.store.query(sql)}
    expected = {
        "service": {"sre-agent"},
        "agent": {"sre-agent"},
        "model": {"gpt-4o", OTHER_MODEL},
        "environment": {"production", "staging"},
    }[name]
    assert values == expected


def test_time_series_bucket_by_the_panel_interval(seeded):
    series = next(t for u, p, t in TARGETS if p["title"].startswith("Fatal findings per minute"))
    for interval in (1, 60, 3600):
        rows = seeded.store.query(
            panel_query(series["rawSql"], context(seeded, scenarios(seeded)["all"], interval))
        )
        times = {row["time"] for row in rows}
        for stamp in times:
            moment = datetime.fromisoformat(stamp).replace(tzinfo=UTC)
            assert int(moment.timestamp()) % interval == 0


# -- ClickHouse alert rules ------------------------------------------------------------------


def alert_context(seeded: Seeded, alert: alerts.ClickHouseAlert, at: datetime) -> QueryContext:
    return QueryContext(at - timedelta(seconds=alert.window_s), at)


def firing(alert: alerts.ClickHouseAlert, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Grafana's threshold expression over the query's single numeric column."""
    compare = {"gt": float.__gt__, "gte": float.__ge__, "lt": float.__lt__}[alert.evaluator]
    out = []
    for row in rows:
        (value,) = [v for v in row.values() if isinstance(v, int | float)]
        if compare(float(value), float(alert.threshold)):
            out.append(row)
    return out


@pytest.mark.parametrize("alert", alerts.CLICKHOUSE_ALERTS, ids=lambda a: a.uid)
def test_alert_query_shape(seeded, alert):
    sql = alert_query(alerts.clickhouse_sql(alert.key), alert_context(seeded, alert, seeded.end))
    columns = describe(seeded.store, sql)
    numeric = [name for name, t in columns if is_numeric(t)]
    labels = [name for name, t in columns if not is_numeric(t)]
    # Grafana turns a table into one alert instance per row: one number, string labels.
    assert len(numeric) == 1, columns
    assert all(t.startswith(("String", "LowCardinality")) for n, t in columns if n in labels)
    assert DATABASE not in alerts.clickhouse_sql(alert.key)


def test_alerts_fire_on_the_seeded_failures_and_not_before(seeded):
    now, before = seeded.end, seeded.start - timedelta(hours=2)
    fired = {}
    for alert in alerts.CLICKHOUSE_ALERTS:
        rows_now = seeded.store.query(
            alert_query(alerts.clickhouse_sql(alert.key), alert_context(seeded, alert, now))
        )
        rows_before = seeded.store.query(
            alert_query(alerts.clickhouse_sql(alert.key), alert_context(seeded, alert, before))
        )
        fired[alert.key] = (firing(alert, rows_now), firing(alert, rows_before))
    spike_now, spike_before = fired["fatal_spike"]
    # The second model lost its history in 6 runs within minutes, with no baseline: a spike.
    # gpt-4o lost it in 4 (one per dialect): under the floor of 5, silent.
    assert {row["model"] for row in spike_now} == {OTHER_MODEL}
    assert spike_before == []
    loops_now, loops_before = fired["loop_storm"]
    assert {row["model"] for row in loops_now} >= {OTHER_MODEL}
    assert loops_before == []
    unverified_now, unverified_before = fired["unverified_remediation"]
    assert {(r["service"], r["model"]) for r in unverified_now} >= {("sre-agent", OTHER_MODEL)}
    assert unverified_before == []
    no_spans_now, no_spans_before = fired["no_spans"]
    assert no_spans_now == [] and len(no_spans_before) == 1


def test_spike_is_relative_to_the_models_baseline(seeded):
    """The same findings seen against a day of heavier history do not fire."""
    alert = next(a for a in alerts.CLICKHOUSE_ALERTS if a.key == "fatal_spike")
    rows = seeded.store.query(
        alert_query(alerts.clickhouse_sql(alert.key), alert_context(seeded, alert, seeded.end))
    )
    spike = {row["model"]: row["spike"] for row in rows}
    recent = seeded.store.query(
        "SELECT Model AS model, count() AS n FROM otel.mast_findings FINAL "
        f"WHERE Mode IN ({', '.join(repr(m) for m in sorted(alerts_fatal()))}) GROUP BY Model"
    )
    for row in recent:
        expected = row["n"] if row["n"] >= alerts.SPIKE_MIN_FINDINGS else 0
        assert spike[row["model"]] == pytest.approx(expected)


def alerts_fatal() -> frozenset[str]:
    from mast_otel.processors.conventions import FATAL_PRIOR

    return FATAL_PRIOR


def test_grafana_rule_files_carry_the_tested_sql():
    rules = {r["uid"]: r for r in alert_rules.grafana_rules()}
    for alert in alerts.CLICKHOUSE_ALERTS:
        (query,) = [q for q in rules[alert.uid]["data"] if q["refId"] == "A"]
        assert query["model"]["rawSql"] == alerts.clickhouse_sql(alert.key)
        assert query["relativeTimeRange"]["from"] == alert.window_s
