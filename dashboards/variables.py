"""Template variables shared by the dashboards: data sources, database, and the service, agent,
model and environment filters (multi-value, with All as the default)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import dashboard as model

from mast_otel.dashboards.clickhouse import CLICKHOUSE_DS, CLICKHOUSE_UID, PLUGIN_ID, PROMETHEUS_UID
from mast_otel.dashboards.sources import ENVIRONMENT, SIGNATURES, TRACES, selected

DEFAULT_DATABASE = "otel"

# Each variable's options query, in one place (tests run them like the panels' queries).
VARIABLE_SQL: dict[str, str] = {
    "service": f"SELECT DISTINCT ServiceName FROM {SIGNATURES} "
    "WHERE $__timeFilter(Start) AND ServiceName != '' ORDER BY ServiceName",
    "agent": f"SELECT DISTINCT AgentName FROM {SIGNATURES} "
    "WHERE $__timeFilter(Start) AND AgentName != '' "
    f"AND $__conditionalAll(has({selected('service')}, ServiceName), $service) ORDER BY AgentName",
    "model": f"SELECT DISTINCT Model FROM {SIGNATURES} "
    "WHERE $__timeFilter(Start) AND Model != '' "
    f"AND $__conditionalAll(has({selected('service')}, ServiceName), $service) ORDER BY Model",
    "environment": f"SELECT DISTINCT {ENVIRONMENT} AS environment FROM {TRACES} "
    f"WHERE $__timeFilter(Timestamp) AND {ENVIRONMENT} != '' ORDER BY environment",
}

_LABELS = {
    "service": "Service",
    "agent": "Agent",
    "model": "Model",
    "environment": "Environment",
}


def clickhouse_datasource() -> db.DatasourceVariable:
    return (
        db.DatasourceVariable("datasource")
        .label("ClickHouse")
        .type(PLUGIN_ID)
        .current(model.VariableOption(selected=True, text=CLICKHOUSE_UID, value=CLICKHOUSE_UID))
    )


def prometheus_datasource() -> db.DatasourceVariable:
    return (
        db.DatasourceVariable("prometheus")
        .label("Prometheus")
        .type("prometheus")
        .current(model.VariableOption(selected=True, text=PROMETHEUS_UID, value=PROMETHEUS_UID))
    )


def database(name: str = DEFAULT_DATABASE) -> db.ConstantVariable:
    """The store's database (the collector's `storage.database`), hidden."""
    return db.ConstantVariable("database").value(name)


def run_filter(name: str) -> db.QueryVariable:
    """A multi-value filter with All (which `$__conditionalAll` turns into no condition)."""
    all_option = model.VariableOption(selected=True, text=["All"], value=["$__all"])
    return (
        db.QueryVariable(name)
        .label(_LABELS[name])
        .datasource(CLICKHOUSE_DS)
        .query({"editorType": "sql", "rawSql": VARIABLE_SQL[name]})
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .current(all_option)
    )


def run_filters() -> list[cogbuilder.Builder[model.VariableModel]]:
    """Data source, database, then service, agent, model, environment."""
    return [
        clickhouse_datasource(),
        database(),
        *(run_filter(name) for name in ("service", "agent", "model", "environment")),
    ]
