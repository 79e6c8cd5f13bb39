"""The Grafana ClickHouse data source plugin's query, as a type the foundation SDK can carry.

The SDK ships query types for the core data sources only; this adds the plugin's SQL query
(`grafana-clickhouse-datasource`: editorType, format, queryType, rawSql) with a builder and a
decoder registered with the SDK's runtime, so generated dashboards load back into the SDK's
types without falling back to an untyped bag.
"""

from __future__ import annotations

import enum
from typing import Any, Self

from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import runtime as cogruntime
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import DataSourceRef

PLUGIN_ID = "grafana-clickhouse-datasource"
PROMETHEUS = "prometheus"


class Format(enum.IntEnum):
    """The plugin's result formats (the `format` field of a query)."""

    TIME_SERIES = 0
    TABLE = 1
    LOGS = 2
    TRACES = 3


_QUERY_TYPES = {
    Format.TIME_SERIES: "timeseries",
    Format.TABLE: "table",
    Format.LOGS: "logs",
    Format.TRACES: "traces",
}


class ClickHouseQuery(cogvariants.Dataquery):
    """One SQL query of the ClickHouse plugin, as it appears in a panel's `targets`."""

    def __init__(
        self,
        ref_id: str = "A",
        raw_sql: str = "",
        format_val: Format = Format.TABLE,
        datasource: DataSourceRef | None = None,
        editor_type: str = "sql",
        query_type: str | None = None,
    ) -> None:
        self.ref_id = ref_id
        self.raw_sql = raw_sql
        self.format_val = Format(format_val)
        self.datasource = datasource
        self.editor_type = editor_type
        self.query_type = query_type or _QUERY_TYPES[self.format_val]

    def to_json(self) -> dict[str, object]:
        payload: dict[str, object] = {
            "editorType": self.editor_type,
            "format": int(self.format_val),
            "queryType": self.query_type,
            "rawSql": self.raw_sql,
            "refId": self.ref_id,
        }
        if self.datasource is not None:
            payload["datasource"] = self.datasource
        return payload

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        datasource = data.get("datasource")
        return cls(
            ref_id=data.get("refId", "A"),
            raw_sql=data.get("rawSql", ""),
            format_val=Format(data.get("format", Format.TABLE)),
            datasource=DataSourceRef.from_json(datasource) if datasource is not None else None,
            editor_type=data.get("editorType", "sql"),
            query_type=data.get("queryType"),
        )


class ClickHouseQueryBuilder(cogbuilder.Builder[cogvariants.Dataquery]):
    def __init__(self, raw_sql: str, format_val: Format = Format.TABLE) -> None:
        self._internal = ClickHouseQuery(raw_sql=raw_sql, format_val=format_val)

    def build(self) -> ClickHouseQuery:
        return self._internal

    def ref_id(self, ref_id: str) -> Self:
        self._internal.ref_id = ref_id
        return self

    def datasource(self, datasource: DataSourceRef) -> Self:
        self._internal.datasource = datasource
        return self


def register() -> None:
    """Teach the SDK's decoder the plugin's query type (and the core plugins)."""
    register_default_plugins()
    cogruntime.register_dataquery_variant(
        cogruntime.DataqueryConfig(identifier=PLUGIN_ID, from_json_hook=ClickHouseQuery.from_json)
    )


# Panels name their data source through a dashboard variable, so one dashboard serves any
# ClickHouse (or Prometheus) data source; provisioning installs one of each with these uids.
CLICKHOUSE_UID = "mast-clickhouse"
PROMETHEUS_UID = "mast-prometheus"
CLICKHOUSE_DS = DataSourceRef(type_val=PLUGIN_ID, uid="${datasource}")
PROMETHEUS_DS = DataSourceRef(type_val=PROMETHEUS, uid="${prometheus}")


def sql(
    raw_sql: str, format_val: Format = Format.TABLE, ref_id: str = "A"
) -> ClickHouseQueryBuilder:
    """A ClickHouse SQL target on the dashboard's ClickHouse data source."""
    return ClickHouseQueryBuilder(raw_sql, format_val).ref_id(ref_id).datasource(CLICKHOUSE_DS)
