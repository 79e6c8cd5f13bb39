"""What the dashboards and alert rules read: table expressions and shared SQL fragments.

Every query names its tables through these constants, so moving a panel onto a rollup (a
materialized view per minute) or onto a stored fatality column changes one line here or one
entry of a dashboard's `SQL` mapping, not the SQL scattered across panels.
"""

from __future__ import annotations

from mast_otel.processors.conventions import FATAL_PRIOR, MODES

DATABASE = "${database}"

# FINAL folds the rows a re-analysis wrote again (findings) and the outcome posted after the
# fact (signatures), so counts and success rates are exact.
FINDINGS = f"{DATABASE}.mast_findings FINAL"
SIGNATURES = f"{DATABASE}.mast_signatures FINAL"
TRACES = f"{DATABASE}.otel_traces"


def _quoted(values: list[str]) -> str:
    return ", ".join(f"'{v}'" for v in values)


# Fatal vs benign: the study's prior until per-model lift is stored with each finding.
FATAL_MODES_SQL = _quoted(sorted(FATAL_PRIOR))
FATAL = f"Mode IN ({FATAL_MODES_SQL})"
# A run shows a fatal mode (on mast_signatures).
RUN_HAS_FATAL = f"hasAny(Modes, [{FATAL_MODES_SQL}])"
# A run failed: its harness said so, or it shows a fatal mode.
RUN_FAILING = f"(Outcome = 'failure' OR {RUN_HAS_FATAL})"

MODE_CODES_SQL = f"[{_quoted([m.code for m in MODES])}]"
MODE_NAMES_SQL = f"[{_quoted([m.name.replace(chr(39), chr(92) + chr(39)) for m in MODES])}]"

# deployment.environment.name (semantic conventions 1.27+), else the older deployment.environment.
ENVIRONMENT = (
    "if(ResourceAttributes['deployment.environment.name'] != '', "
    "ResourceAttributes['deployment.environment.name'], "
    "ResourceAttributes['deployment.environment'])"
)

# The kind of step a span is, whichever dialect described it.
STEP_KIND = (
    "multiIf("
    "SpanAttributes['gen_ai.operation.name'] != '', SpanAttributes['gen_ai.operation.name'], "
    "SpanAttributes['openinference.span.kind'] != '', "
    "lower(SpanAttributes['openinference.span.kind']), "
    "SpanAttributes['traceloop.span.kind'] != '', SpanAttributes['traceloop.span.kind'], "
    "'other')"
)
STEP_MODEL = (
    "multiIf(SpanAttributes['gen_ai.request.model'] != '', SpanAttributes['gen_ai.request.model'], "
    "SpanAttributes['llm.model_name'] != '', SpanAttributes['llm.model_name'], "
    "SpanAttributes['gen_ai.response.model'])"
)
STEP_TOOL = (
    "multiIf(SpanAttributes['gen_ai.tool.name'] != '', SpanAttributes['gen_ai.tool.name'], "
    "SpanAttributes['tool.name'] != '', SpanAttributes['tool.name'], "
    "SpanAttributes['traceloop.entity.name'])"
)
STEP_INPUT = (
    "multiIf(SpanAttributes['gen_ai.tool.call.arguments'] != '', "
    "SpanAttributes['gen_ai.tool.call.arguments'], "
    "SpanAttributes['input.value'] != '', SpanAttributes['input.value'], "
    "SpanAttributes['traceloop.entity.input'])"
)


def selected(variable: str) -> str:
    """The values selected in the dashboard variable `variable`, as an Array(String).

    Values come from what senders send (service, agent and model names), so they reach the SQL
    only through Grafana's `percentencode` format: RFC 3986 percent-encoding of every byte but
    letters, digits and `-_.~`, which no quote, backslash, `$` or newline survives, decoded by
    ClickHouse. (`singlequote` and `sqlstring` escape quotes but not backslashes, which
    ClickHouse reads as escapes.) Several values arrive as `{a,b}`, where a comma inside a
    name cannot be told from the separator: every run of consecutive parts is taken (`a`,
    `b` and `a,b`), so each selected name matches itself; a name that happens to be two
    selected names joined by a comma matches too."""
    runs = (
        "arrayFlatten(arrayMap(i -> arrayMap(j -> arrayStringConcat(arraySlice(parts, i, "
        "j - i + 1), ','), range(i, length(parts) + 1)), range(1, length(parts) + 1)))"
    )
    return (
        "arrayFlatten(arrayMap(d -> if(startsWith(d, '{') AND endsWith(d, '}'), "
        f"arrayPushFront(arrayMap(parts -> {runs}, "
        "[splitByChar(',', substring(d, 2, length(d) - 2))])[1], d), [d]), "
        f"[decodeURLComponent('${{{variable}:percentencode}}')]))"
    )


def one_selected(variable: str) -> str:
    """The value of a single-value variable (a trace id typed or linked), as a String read
    through `percentencode` like `selected`."""
    return f"decodeURLComponent('${{{variable}:percentencode}}')"


def run_filters(time_column: str | None = None) -> str:
    """The dashboard variables as conditions on a table with ServiceName, AgentName, Model and
    TraceId columns (findings, signatures). `$__conditionalAll` drops a condition whose
    variable is at All, so the default view costs nothing extra."""
    environment_runs = (
        f"SELECT TraceId FROM {TRACES} WHERE $__timeFilter(Timestamp) "
        f"AND has({selected('environment')}, {ENVIRONMENT})"
    )
    conditions = [
        f"$__conditionalAll(has({selected('service')}, ServiceName), $service)",
        f"$__conditionalAll(has({selected('agent')}, AgentName), $agent)",
        f"$__conditionalAll(has({selected('model')}, Model), $model)",
        f"$__conditionalAll(TraceId IN ({environment_runs}), $environment)",
    ]
    if time_column:
        conditions.insert(0, f"$__timeFilter({time_column})")
    return "\n  AND ".join(conditions)
