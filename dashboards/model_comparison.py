"""Dashboard 3, model comparison: which modes each model shows, how dense its failures are,
which modes are fatal for it (lift in failed vs successful runs), success rate and recall."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import dashboard as model

from mast_otel.dashboards import panels as p
from mast_otel.dashboards.sources import MODE_CODES_SQL, MODE_NAMES_SQL, SIGNATURES, run_filters
from mast_otel.dashboards.variables import run_filters as filter_variables
from mast_otel.processors.scoring import ScoringConfig

UID = "mast-models"
TITLE = "mast-otel · Model comparison"

# The collector's own fatality rule (processors/scoring.py): a mode is fatal for a model when
# it shows in a share of its failed runs at least this much larger than of its successful
# ones (the study's fatal modes sit at +43 to +52 points, its benign ones near zero), and
# below this many runs of either outcome a lift is noise: no verdict.
FATAL_LIFT = ScoringConfig().min_lift
MIN_RUNS = ScoringConfig().min_runs_per_outcome

_FAILED = "Outcome = 'failure'"
_SUCCEEDED = "Outcome = 'success'"

# Every SQL this dashboard runs, in one place.
SQL: dict[str, str] = {
    "heatmap": f"""SELECT Model AS model, code AS mode,
  countIf(has(Modes, code)) / count() AS share_of_runs
FROM {SIGNATURES}
ARRAY JOIN {MODE_CODES_SQL} AS code
WHERE {run_filters("Start")}
GROUP BY model, mode
ORDER BY mode, model""",
    "density": f"""SELECT Model AS model,
  countIf({_FAILED}) AS failed_runs,
  avgIf(DistinctModes, {_FAILED}) AS modes_per_failed_run,
  quantileExactIf(0.5)(DistinctModes, {_FAILED}) AS median,
  maxIf(DistinctModes, {_FAILED}) AS most
FROM {SIGNATURES}
WHERE {run_filters("Start")}
GROUP BY model
HAVING failed_runs > 0
ORDER BY modes_per_failed_run DESC""",
    "lift": f"""SELECT model, mode, mode_name, failed_runs, successful_runs,
  in_failed, in_successful, in_failed - in_successful AS lift,
  multiIf(failed_runs < {MIN_RUNS} OR successful_runs < {MIN_RUNS}, 'too few runs',
          in_failed - in_successful >= {FATAL_LIFT}, 'fatal', 'benign') AS verdict
FROM (
  SELECT Model AS model, code AS mode, name AS mode_name,
    countIf({_FAILED}) AS failed_runs,
    countIf({_SUCCEEDED}) AS successful_runs,
    countIf({_FAILED} AND has(Modes, code)) / greatest(countIf({_FAILED}), 1) AS in_failed,
    countIf({_SUCCEEDED} AND has(Modes, code)) / greatest(countIf({_SUCCEEDED}), 1)
      AS in_successful
  FROM {SIGNATURES}
  ARRAY JOIN {MODE_CODES_SQL} AS code, {MODE_NAMES_SQL} AS name
  WHERE {run_filters("Start")}
    AND Outcome IN ('success', 'failure')
  GROUP BY model, mode, mode_name
)
WHERE in_failed > 0 OR in_successful > 0
ORDER BY lift DESC, model, mode""",
    "success": f"""SELECT Model AS model, count() AS runs,
  countIf({_SUCCEEDED}) / greatest(countIf(Outcome IN ('success', 'failure')), 1)
    AS success_rate,
  avg(Score) AS recall,
  countIf(Score IS NOT NULL) AS scored_runs
FROM {SIGNATURES}
WHERE {run_filters("Start")}
GROUP BY model
ORDER BY success_rate DESC, model""",
    "success_over_time": f"""SELECT $__timeInterval(End) AS time, Model AS model,
  countIf({_SUCCEEDED}) / greatest(countIf(Outcome IN ('success', 'failure')), 1)
    AS success_rate
FROM {SIGNATURES}
WHERE {run_filters("End")}
GROUP BY time, model
ORDER BY time, model""",
}


def build() -> db.Dashboard:
    heat = [
        p.cell_color(),
        p.unit("percentunit"),
        p.thresholds_override(
            [(None, "transparent"), (0.05, "yellow"), (0.25, "orange"), (0.5, "red")]
        ),
    ]
    panels: list[p.Panel] = [
        p.ch_table(
            "Failure modes per model",
            SQL["heatmap"],
            description="Share of each model's runs showing each mode: one row per mode, one "
            "column per model, hotter is more frequent.",
            width=24,
            height=12,
            transformations=[p.grouping_to_matrix("model", "mode", "share_of_runs")],
            overrides=[],
        ),
        p.ch_table(
            "Distinct modes per failed run",
            SQL["density"],
            description="Isolated (about one mode) or cascading (several) failures, per model.",
            width=12,
        ),
        p.ch_table(
            "Success rate and recall",
            SQL["success"],
            description="Share of runs with a success outcome, and recall: the mean task "
            "score (mast.run.score) over the runs that report one.",
            width=12,
            overrides=[
                ("success_rate", [p.unit("percentunit")]),
                ("recall", [p.unit("percentunit")]),
            ],
        ),
        p.ch_table(
            "Lift per mode: fatal or benign",
            SQL["lift"],
            description=f"How much more often a mode shows in a model's failed runs than in "
            f"its successful ones. Fatal at +{FATAL_LIFT:.0%} or more; fewer than {MIN_RUNS} "
            "runs of either outcome give no verdict.",
            width=24,
            height=10,
            overrides=[
                ("in_failed", [p.unit("percentunit")]),
                ("in_successful", [p.unit("percentunit")]),
                ("lift", [p.unit("percentunit")]),
            ],
        ),
        p.ch_timeseries(
            "Success rate over time",
            SQL["success_over_time"],
            description="Per model, by interval.",
            unit="percentunit",
            series_label="model",
            width=24,
        ),
    ]
    # The matrix has one column per model, whose names are data: color every number cell.
    heatmap_panel = panels[0]
    heatmap_panel.override_by_field_type("number", heat)  # type: ignore[attr-defined]
    dashboard = (
        db.Dashboard(TITLE)
        .uid(UID)
        .description("Failure modes, density, fatal vs benign lift, success and recall by model.")
        .tags(["mast-otel", "models"])
        .time("now-7d", "now")
        .refresh("5m")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
    )
    for variable in filter_variables():
        dashboard = dashboard.with_variable(variable)
    for panel in p.with_ids(panels):
        dashboard = dashboard.with_panel(panel)
    return dashboard
