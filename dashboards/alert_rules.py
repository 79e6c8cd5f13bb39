"""The alert definitions of `alerts` rendered as rules.

A Prometheus rule file (`rule_files:`), Grafana-managed rules as the provisioning API takes
them, and the same rules as a Grafana alerting provisioning file; the folder and groups they
live in.
"""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders import alerting, expr
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dash_model
from grafana_foundation_sdk.models.alerting import RelativeTimeRange

from mast_otel.dashboards.alerts import CLICKHOUSE_ALERTS, PROMETHEUS_ALERTS, clickhouse_sql
from mast_otel.dashboards.clickhouse import (
    CLICKHOUSE_UID,
    PLUGIN_ID,
    PROMETHEUS_UID,
    ClickHouseQueryBuilder,
    Format,
)
from mast_otel.dashboards.variables import DEFAULT_DATABASE

FOLDER_UID = "mast-otel"
FOLDER_TITLE = "mast-otel"
AGENTS_GROUP = "mast-otel-agents"
COLLECTOR_GROUP = "mast-otel-collector"
EVALUATION_INTERVAL = "1m"

# Prometheus comparison operators as Grafana threshold evaluator types.
_OPS = {">": "gt", ">=": "gte", "<": "lt", "<=": "lte", "==": "eq"}


# -- Prometheus rule file --------------------------------------------------------------------


def prometheus_rules() -> dict[str, Any]:
    """The rule file Prometheus loads (`rule_files:`), as a mapping for YAML."""
    return {
        "groups": [
            {
                "name": COLLECTOR_GROUP,
                "rules": [
                    {
                        "alert": a.name,
                        "expr": a.rule_expr,
                        "for": a.pending,
                        "labels": {"severity": a.severity},
                        "annotations": {"summary": a.summary},
                    }
                    for a in PROMETHEUS_ALERTS
                ],
            }
        ]
    }


# -- Grafana-managed rules -------------------------------------------------------------------


def _threshold(evaluator: str, value: float) -> expr.TypeThreshold:
    return (
        expr.TypeThreshold()
        .ref_id("B")
        .expression("A")
        .datasource(dash_model.DataSourceRef(type_val="__expr__", uid="__expr__"))
        .conditions(
            [
                expr.ExprTypeThresholdConditions().evaluator(
                    expr.ExprTypeThresholdConditionsEvaluator()
                    .type(evaluator)  # type: ignore[arg-type]
                    .params([value])
                )
            ]
        )
    )


def _expression(evaluator: str, value: float) -> alerting.Query:
    return alerting.Query("B").datasource_uid("__expr__").model(_threshold(evaluator, value))


def grafana_rules(database: str = DEFAULT_DATABASE) -> list[dict[str, Any]]:
    """Every Grafana-managed rule, as `/api/v1/provisioning/alert-rules` takes it."""
    built = []
    for a in CLICKHOUSE_ALERTS:
        query = (
            ClickHouseQueryBuilder(clickhouse_sql(a.key, database), Format.TABLE)
            .ref_id("A")
            .datasource(dash_model.DataSourceRef(type_val=PLUGIN_ID, uid=CLICKHOUSE_UID))
        )
        rule = (
            alerting.Rule(a.title)
            .uid(a.uid)
            .rule_group(AGENTS_GROUP)
            .org_id(1)
            .folder_uid(FOLDER_UID)
            .condition("B")
            .with_query(
                alerting.Query("A")
                .datasource_uid(CLICKHOUSE_UID)
                .relative_time_range(RelativeTimeRange(from_val=a.window_s, to=0))
                .model(query)
            )
            .with_query(_expression(a.evaluator, a.threshold))
            .for_val(a.pending)
            .no_data_state("OK")
            .exec_err_state("Error")
            .labels({"severity": a.severity, "team": "agents"})
            .annotations(
                {
                    "summary": a.summary,
                    "threshold": a.why,
                    "__dashboardUid__": a.dashboard_uid,
                }
            )
        )
        built.append(rule.build())
    for p in PROMETHEUS_ALERTS:
        if not p.grafana:
            continue
        prom_query = (
            prom.Dataquery()
            .expr(p.value)
            .instant()
            .ref_id("A")
            .datasource(dash_model.DataSourceRef(type_val="prometheus", uid=PROMETHEUS_UID))
        )
        rule = (
            alerting.Rule(p.name)
            .uid(p.uid)
            .rule_group(COLLECTOR_GROUP)
            .org_id(1)
            .folder_uid(FOLDER_UID)
            .condition("B")
            .with_query(
                alerting.Query("A")
                .datasource_uid(PROMETHEUS_UID)
                .relative_time_range(RelativeTimeRange(from_val=900, to=0))
                .model(prom_query)
            )
            .with_query(_expression(_OPS[p.op], p.threshold))
            .for_val(p.pending)
            # A collector that stopped reporting is not ingesting.
            .no_data_state("Alerting" if p.name == "MastOtelNotIngesting" else "OK")
            .exec_err_state("Error")
            .labels({"severity": p.severity, "team": "platform"})
            .annotations(
                {"summary": p.summary, "threshold": p.why, "__dashboardUid__": "mast-collector"}
            )
        )
        built.append(rule.build())
    return [_plain(rule) for rule in built]


def _plain(obj: Any) -> Any:
    """SDK objects to plain JSON values (dicts, lists, str, numbers)."""
    return json.loads(json.dumps(obj, cls=JSONEncoder))


def grafana_rule_file(database: str = DEFAULT_DATABASE) -> dict[str, Any]:
    """The same rules as a Grafana alerting provisioning file (provisioning/alerting/)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for rule in grafana_rules(database):
        entry = {
            "uid": rule["uid"],
            "title": rule["title"],
            "condition": rule["condition"],
            "data": rule["data"],
            "noDataState": rule["noDataState"],
            "execErrState": rule["execErrState"],
            "for": rule["for"],
            "labels": rule["labels"],
            "annotations": rule["annotations"],
            "isPaused": False,
        }
        groups.setdefault(rule["ruleGroup"], []).append(entry)
    return {
        "apiVersion": 1,
        "groups": [
            {
                "orgId": 1,
                "name": name,
                "folder": FOLDER_TITLE,
                "interval": EVALUATION_INTERVAL,
                "rules": rules,
            }
            for name, rules in groups.items()
        ],
    }
