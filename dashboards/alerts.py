"""Alert definitions: page on what needs a person, not on every finding.

Two families, from one set of definitions:

- Agent failures, as Grafana-managed rules over ClickHouse (the findings and signatures the
  collector stores): spikes of fatal findings per model against that model's own baseline,
  storms of looping runs, unverified remediations, and a store that stopped receiving spans.
- Collector health, over the collector's self-metrics: as Prometheus rules (for Prometheus or
  any ruler that reads its rule files) and as the same expressions in Grafana-managed rules.

Thresholds are constants below, each with why it is where it is; README lists them. The
definitions are rendered as Prometheus and Grafana rules in `alert_rules`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mast_otel.dashboards.sources import DATABASE, FATAL, FINDINGS, TRACES
from mast_otel.dashboards.variables import DEFAULT_DATABASE
from mast_otel.schemas import metrics as m

# -- thresholds, and why ---------------------------------------------------------------------

# Fatal spike: the last 10 minutes against the same model's previous 24 hours (per 10
# minutes). Five findings is the floor: fewer is one or two unlucky runs, which the overview
# shows without waking anyone. Three times the baseline separates a change (a new model
# version, a broken tool, a prompt regression) from the model's usual failure rate.
SPIKE_WINDOW_MINUTES = 10
SPIKE_BASELINE_MINUTES = 24 * 60
SPIKE_MIN_FINDINGS = 5
SPIKE_FACTOR = 3.0
# Loop storm: one looping run is the detector doing its job; three runs of the same agent and
# model looping within 15 minutes is systematic (a tool that stopped answering, a stop
# condition the model cannot see) and burns tokens until someone acts.
LOOP_WINDOW_MINUTES = 15
LOOP_MIN_RUNS = 3
# Unverified remediation: a change made and never checked (FM-3.2) or checked wrongly (FM-3.3)
# in production is the study's most expensive failure; two runs in 30 minutes on one service
# is a pattern, one is a dashboard entry.
UNVERIFIED_WINDOW_MINUTES = 30
UNVERIFIED_MIN_RUNS = 2
# No spans stored for 10 minutes: the collector is down, cut off, or cannot write.
NO_SPANS_WINDOW_MINUTES = 10

LOOP_MODES = ("FM-1.3", "FM-1.5")
VERIFICATION_MODES = ("FM-3.2", "FM-3.3")


def _modes(codes: tuple[str, ...]) -> str:
    return ", ".join(f"'{c}'" for c in codes)


# Every ClickHouse alert query, in one place. Alert queries run on Grafana's back end, where
# dashboard variables do not exist: the database is written out (see `clickhouse_sql`).
SQL: dict[str, str] = {
    "fatal_spike": f"""SELECT Model AS model,
  if(recent >= {SPIKE_MIN_FINDINGS}, recent / greatest(baseline, 1), 0) AS spike
FROM (
  SELECT Model,
    countIf(Timestamp >= $__toTime - INTERVAL {SPIKE_WINDOW_MINUTES} MINUTE) AS recent,
    countIf(Timestamp < $__toTime - INTERVAL {SPIKE_WINDOW_MINUTES} MINUTE)
      / {SPIKE_BASELINE_MINUTES // SPIKE_WINDOW_MINUTES} AS baseline
  FROM {FINDINGS}
  WHERE $__timeFilter(Timestamp) AND {FATAL}
  GROUP BY Model
)""",
    "loop_storm": f"""SELECT Model AS model, AgentName AS agent, uniqExact(TraceId) AS looping_runs
FROM {FINDINGS}
WHERE $__timeFilter(Timestamp) AND Mode IN ({_modes(LOOP_MODES)})
GROUP BY model, agent""",
    "unverified_remediation": f"""SELECT ServiceName AS service, Model AS model,
  uniqExact(TraceId) AS unverified_runs
FROM {FINDINGS}
WHERE $__timeFilter(Timestamp) AND Mode IN ({_modes(VERIFICATION_MODES)})
GROUP BY service, model""",
    "no_spans": f"""SELECT count() AS spans
FROM {TRACES}
WHERE $__timeFilter(Timestamp)""",
}


def clickhouse_sql(key: str, database: str = DEFAULT_DATABASE) -> str:
    return SQL[key].replace(DATABASE, database)


@dataclass(frozen=True)
class ClickHouseAlert:
    key: str
    uid: str
    title: str
    window_s: int
    evaluator: str
    threshold: float
    pending: str
    severity: str
    summary: str
    why: str
    dashboard_uid: str = "mast-overview"


CLICKHOUSE_ALERTS: tuple[ClickHouseAlert, ...] = (
    ClickHouseAlert(
        "fatal_spike",
        "mast-fatal-spike",
        "Fatal failure modes spiking",
        (SPIKE_WINDOW_MINUTES + SPIKE_BASELINE_MINUTES) * 60,
        "gt",
        SPIKE_FACTOR,
        "0s",
        "page",
        "Model {{ $labels.model }}: fatal findings in the last 10 minutes are "
        '{{ $values.A.Value | printf "%.1f" }}x its 24-hour baseline',
        f">= {SPIKE_MIN_FINDINGS} fatal findings in {SPIKE_WINDOW_MINUTES} min and more than "
        f"{SPIKE_FACTOR:g}x the model's own rate over the previous 24 h",
    ),
    ClickHouseAlert(
        "loop_storm",
        "mast-loop-storm",
        "Runs stuck looping",
        LOOP_WINDOW_MINUTES * 60,
        "gte",
        LOOP_MIN_RUNS,
        "5m",
        "page",
        "{{ $values.A.Value }} runs of {{ $labels.agent }} on {{ $labels.model }} repeat "
        "steps or ignore termination (FM-1.3/FM-1.5) in the last 15 minutes",
        f">= {LOOP_MIN_RUNS} runs of one agent and model with FM-1.3/FM-1.5 in "
        f"{LOOP_WINDOW_MINUTES} min",
    ),
    ClickHouseAlert(
        "unverified_remediation",
        "mast-unverified-remediation",
        "Remediations not verified",
        UNVERIFIED_WINDOW_MINUTES * 60,
        "gte",
        UNVERIFIED_MIN_RUNS,
        "0s",
        "page",
        "{{ $values.A.Value }} runs on {{ $labels.service }} ({{ $labels.model }}) changed "
        "something and did not verify it (FM-3.2/FM-3.3) in the last 30 minutes",
        f">= {UNVERIFIED_MIN_RUNS} runs of one service and model with FM-3.2/FM-3.3 in "
        f"{UNVERIFIED_WINDOW_MINUTES} min",
    ),
    ClickHouseAlert(
        "no_spans",
        "mast-no-spans-stored",
        "No spans stored",
        NO_SPANS_WINDOW_MINUTES * 60,
        "lt",
        1,
        "5m",
        "warning",
        "No spans reached the store in the last 10 minutes",
        f"0 spans in otel_traces for {NO_SPANS_WINDOW_MINUTES} min (+5 min pending)",
        dashboard_uid="mast-collector",
    ),
)


@dataclass(frozen=True)
class PrometheusAlert:
    """A collector alert over self-metrics. `value` and `op`/`threshold` are kept apart so the
    same expression serves a Prometheus rule (`value op threshold`) and a Grafana rule (query
    `value`, threshold expression); `expr` overrides for rules only Prometheus can express."""

    name: str
    uid: str
    value: str
    op: str
    threshold: float
    pending: str
    severity: str
    summary: str
    why: str
    expr: str = ""
    grafana: bool = True

    @property
    def rule_expr(self) -> str:
        return self.expr or f"{self.value} {self.op} {self.threshold:g}"


_FATAL_RECENT = f'sum by (mode) (increase({m.total(m.FINDINGS)}{{fatal="true"}}[10m]))'
_FATAL_BASELINE = (
    f'(sum by (mode) (increase({m.total(m.FINDINGS)}{{fatal="true"}}[1d] offset 10m)) / 144)'
)

PROMETHEUS_ALERTS: tuple[PrometheusAlert, ...] = (
    PrometheusAlert(
        "MastOtelDown",
        "mast-otel-down",
        f"absent({m.BUILD_INFO})",
        "",
        0,
        "5m",
        "page",
        "No mast-otel collector is being scraped",
        "the collector's build_info series is absent for 5 min: it is down or not scraped",
        expr=f"absent({m.BUILD_INFO})",
        grafana=False,
    ),
    PrometheusAlert(
        "MastOtelNotIngesting",
        "mast-otel-not-ingesting",
        f"sum by (instance) (rate({m.total(m.RECEIVER_ITEMS_ACCEPTED)}[10m]))",
        "<=",
        0,
        "10m",
        "warning",
        "Collector {{ $labels.instance }} accepted no spans or logs for 20 minutes",
        "no item accepted for 10 min (+10 min pending); a fleet that is idle at night can "
        "silence it",
    ),
    PrometheusAlert(
        "MastOtelRefusing",
        "mast-otel-refusing",
        f"sum by (instance) (rate({m.total(m.RECEIVER_ITEMS_REFUSED)}[5m]))",
        ">",
        0,
        "10m",
        "page",
        "Collector {{ $labels.instance }} has refused spans for 10 minutes (queue full)",
        "short refusals are back-pressure doing its job; 10 min of them means the collector "
        "cannot keep up and senders will start dropping",
    ),
    PrometheusAlert(
        "MastOtelQueueNearlyFull",
        "mast-otel-queue-nearly-full",
        f"max by (instance) ({m.QUEUE_ITEMS} / {m.QUEUE_CAPACITY})",
        ">",
        0.8,
        "5m",
        "warning",
        "Collector {{ $labels.instance }} pipeline queue above 80% for 5 minutes",
        "past 100% receivers refuse; 80% for 5 min is the warning before that",
    ),
    PrometheusAlert(
        "MastOtelStoreWriteErrors",
        "mast-otel-store-write-errors",
        f"sum by (instance, table) (increase({m.total(m.STORE_WRITE_ERRORS)}[5m]))",
        ">",
        0,
        "5m",
        "page",
        "Collector {{ $labels.instance }} cannot write {{ $labels.table }} to ClickHouse",
        "rows stay buffered and are retried, so one failed write is harmless; failures for "
        "5 min mean the buffer grows and dashboards go stale",
    ),
    PrometheusAlert(
        "MastOtelRunsEvicted",
        "mast-otel-runs-evicted",
        f"sum by (instance) (increase({m.total(m.RUNS_EVICTED)}[15m]))",
        ">",
        0,
        "0s",
        "warning",
        "Collector {{ $labels.instance }} closed runs early (windows.max_active_runs reached)",
        "an evicted run is analysed before its end, so its findings may be incomplete; raise "
        "windows.max_active_runs or shard by trace id",
    ),
    PrometheusAlert(
        "MastOtelFatalFindingsSpike",
        "mast-otel-fatal-findings-spike",
        _FATAL_RECENT,
        ">=",
        SPIKE_MIN_FINDINGS,
        "0s",
        "page",
        "Fatal mode {{ $labels.mode }} is spiking across the fleet",
        f">= {SPIKE_MIN_FINDINGS} fatal findings of one mode in 10 min and more than "
        f"{SPIKE_FACTOR:g}x its rate over the previous day (or no history at all); the "
        "ClickHouse rule does the same per model",
        expr=(
            f"{_FATAL_RECENT} >= {SPIKE_MIN_FINDINGS} and "
            f"({_FATAL_RECENT} > {SPIKE_FACTOR:g} * {_FATAL_BASELINE} "
            f"or ({_FATAL_RECENT} unless {_FATAL_BASELINE}))"
        ),
        grafana=False,
    ),
)
