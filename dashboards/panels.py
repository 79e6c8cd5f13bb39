"""Small constructors over the foundation SDK's panel builders, so each dashboard module reads
as a list of questions and their queries rather than builder chains."""

from __future__ import annotations

from typing import Any

from grafana_foundation_sdk.builders import bargauge, stat, table, timeseries
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

from mast_otel.dashboards.clickhouse import CLICKHOUSE_DS, PROMETHEUS_DS, Format, sql

Panel = cogbuilder.Builder[model.Panel]


def _size(panel: Any, width: int, height: int) -> Any:
    return panel.span(width).height(height)


def _legend_and_tooltip(panel: Any) -> Any:
    """Time series options set explicitly (the SDK leaves them null otherwise)."""
    return panel.legend(
        common_builders.VizLegendOptions()
        .show_legend(True)
        .display_mode(common.LegendDisplayMode.LIST)
        .placement(common.LegendPlacement.BOTTOM)
        .calcs([])
    ).tooltip(
        common_builders.VizTooltipOptions()
        .mode(common.TooltipDisplayMode.MULTI)
        .sort(common.SortOrder.DESCENDING)
    )


def ch_timeseries(
    title: str,
    query: str,
    *,
    description: str,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
    series_label: str | None = None,
    bars: bool = False,
) -> Panel:
    """A time series from ClickHouse. `series_label` names the string column whose values
    name the series (the plugin turns long rows into one series per value)."""
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(CLICKHOUSE_DS)
        .with_target(sql(query, Format.TIME_SERIES))
        .interval("1m")
        .unit(unit)
        .fill_opacity(20 if bars else 10)
        .draw_style(common.GraphDrawStyle.BARS if bars else common.GraphDrawStyle.LINE)
        .stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
    )
    panel = _legend_and_tooltip(panel)
    if series_label:
        panel = panel.display_name(f"${{__field.labels.{series_label}}}")
    return _size(panel, width, height)


def ch_table(
    title: str,
    query: str,
    *,
    description: str,
    width: int = 12,
    height: int = 8,
    overrides: list[tuple[str, list[model.DynamicConfigValue]]] = (),  # type: ignore[assignment]
    transformations: list[model.DataTransformerConfig] = (),  # type: ignore[assignment]
    format_val: Format = Format.TABLE,
) -> Panel:
    panel = (
        table.Panel()
        .title(title)
        .description(description)
        .datasource(CLICKHOUSE_DS)
        .with_target(sql(query, format_val))
        .show_header(True)
    )
    for name, properties in overrides:
        panel = panel.override_by_name(name, properties)
    for transformation in transformations:
        panel = panel.with_transformation(transformation)
    return _size(panel, width, height)


def ch_stat(
    title: str,
    query: str,
    *,
    description: str,
    unit: str = "short",
    width: int = 6,
    height: int = 4,
    thresholds: list[tuple[float | None, str]] | None = None,
) -> Panel:
    panel = (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(CLICKHOUSE_DS)
        .with_target(sql(query, Format.TABLE))
        .unit(unit)
        .graph_mode(common.BigValueGraphMode.NONE)
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )
    if thresholds:
        panel = panel.thresholds(threshold_steps(thresholds))
    return _size(panel, width, height)


def ch_bargauge(
    title: str,
    query: str,
    *,
    description: str,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
) -> Panel:
    panel = (
        bargauge.Panel()
        .title(title)
        .description(description)
        .datasource(CLICKHOUSE_DS)
        .with_target(sql(query, Format.TABLE))
        .unit(unit)
        .orientation(common.VizOrientation.HORIZONTAL)
        .display_mode(common.BarGaugeDisplayMode.GRADIENT)
        .reduce_options(common_builders.ReduceDataOptions().values(True).calcs(["lastNotNull"]))
    )
    return _size(panel, width, height)


def traces_panel(
    title: str, query: str, *, description: str, width: int = 24, height: int = 12
) -> Panel:
    """Grafana's trace view (the `traces` panel) over the plugin's trace format."""
    panel = (
        db.Panel()
        .type("traces")
        .options({})
        .title(title)
        .description(description)
        .datasource(CLICKHOUSE_DS)
        .with_target(sql(query, Format.TRACES))
    )
    return _size(panel, width, height)


def threshold_steps(steps: list[tuple[float | None, str]]) -> db.ThresholdsConfig:
    return (
        db.ThresholdsConfig()
        .mode(model.ThresholdsMode.ABSOLUTE)
        .steps([model.Threshold(value=value, color=color) for value, color in steps])
    )


def prom_target(expr: str, legend: str = "", ref_id: str = "A") -> prom.Dataquery:
    target = prom.Dataquery().expr(expr).ref_id(ref_id).datasource(PROMETHEUS_DS).range()
    if legend:
        target = target.legend_format(legend)
    return target


def prom_timeseries(
    title: str,
    exprs: list[tuple[str, str]],
    *,
    description: str,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
) -> Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(PROMETHEUS_DS)
        .unit(unit)
        .fill_opacity(10)
    )
    panel = _legend_and_tooltip(panel)
    for index, (expr, legend) in enumerate(exprs):
        panel = panel.with_target(prom_target(expr, legend, chr(ord("A") + index)))
    return _size(panel, width, height)


def prom_stat(
    title: str,
    expr: str,
    *,
    description: str,
    unit: str = "short",
    width: int = 4,
    height: int = 4,
    thresholds: list[tuple[float | None, str]] | None = None,
) -> Panel:
    panel = (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(PROMETHEUS_DS)
        .with_target(prom_target(expr).instant())
        .unit(unit)
        .graph_mode(common.BigValueGraphMode.AREA)
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )
    if thresholds:
        panel = panel.thresholds(threshold_steps(thresholds))
    return _size(panel, width, height)


def row(title: str) -> db.Row:
    return db.Row(title)


def link_to_run(title: str = "Open this run") -> model.DynamicConfigValue:
    """A data link on a TraceId cell: the run drill-down with that trace, same time range."""
    return model.DynamicConfigValue(
        id_val="links",
        value=[
            {
                "title": title,
                "url": "/d/mast-run/mast-otel-run?var-trace_id=${__value.raw}&${__url_time_range}"
                "&${datasource:queryparam}",
            }
        ],
    )


def width(pixels: int) -> model.DynamicConfigValue:
    return model.DynamicConfigValue(id_val="custom.width", value=pixels)


def unit(name: str) -> model.DynamicConfigValue:
    return model.DynamicConfigValue(id_val="unit", value=name)


def cell_color(mode: str = "color-background") -> model.DynamicConfigValue:
    return model.DynamicConfigValue(id_val="custom.cellOptions", value={"type": mode})


def thresholds_override(steps: list[tuple[float | None, str]]) -> model.DynamicConfigValue:
    return model.DynamicConfigValue(
        id_val="thresholds",
        value={"mode": "absolute", "steps": [{"value": v, "color": c} for v, c in steps]},
    )


def grouping_to_matrix(column: str, row_field: str, value: str) -> model.DataTransformerConfig:
    return model.DataTransformerConfig(
        id_val="groupingToMatrix",
        options={"columnField": column, "rowField": row_field, "valueField": value},
    )


def with_ids(panels: list[Panel]) -> list[Panel]:
    """Number panels 1..n in order (ids must be unique within a dashboard)."""
    for index, panel in enumerate(panels, start=1):
        panel.id(index)  # type: ignore[attr-defined]
    return panels
