"""A name a sender chose cannot change a dashboard or alert query.

Service, agent, model and environment names come from what agents send, and the dashboards
offer them as variable values. Every panel query, variable query and alert query is expanded
as Grafana and the ClickHouse plugin expand it, with hostile names selected (quotes,
backslashes, an injected UNION, newlines, `${...}` and macro text), and run on chDB against a
store holding runs under those names. The same rows are stored a second time, in a twin
database, under plain names: the hostile query must return exactly what the plain query returns
on the twin (names mapped back), and never fail."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mast_otel.collector.store import ChdbStore, migrate
from mast_otel.collector.store.batching import ClickHouseExporter
from mast_otel.dashboards import alerts, variables
from mast_otel.dashboards.interpolate import ALL, QueryContext, Variable, alert_query, panel_query
from mast_otel.processors.model import Finding
from tests.storedata import finding, signature, span, trace_id
from tests.test_dashboard_queries import TARGETS

HOSTILE = [
    "x\\') UNION ALL SELECT name FROM system.tables --",
    "x') UNION ALL SELECT name FROM system.tables --",
    "ends in a backslash\\",
    "it's \"quoted\" \\' twice",
    "two\nlines\r\tand tab",
    "${database}.mast_signatures $__timeFilter(Start) $service",
    "a,b",
    "{brace}",
    "%27 already encoded %5C",
    "naïve 漢字 \U0001f511",
]
PLAIN = [f"plainname{i}x" for i in range(len(HOSTILE))]
NORMAL = "svc"


def _rows(names: list[str], base_ns: int) -> tuple[list, list[Finding], list]:
    spans, found, signatures = [], [], []
    for i, name in enumerate([NORMAL, *names]):
        n = 500 + i
        records = [span(n, 0, base_ns), span(n, 1, base_ns + 1_000_000, 0)]
        for record in records:
            record.service_name = name
            record.resource_attributes = {
                "service.name": name,
                "deployment.environment.name": name,
            }
            record.attributes = {"gen_ai.request.model": name, "gen_ai.agent.name": name}
        spans.extend(records)
        for mode in ("FM-1.3", "FM-1.4"):
            f = finding(n, 1, mode, base_ns + 2_000_000, model=name, service=name)
            f.agent = name
            found.append(f)
        sig = signature(n, base_ns + 3_000_000, {"FM-1.3": 1, "FM-1.4": 1}, "failure", model=name)
        sig.service = name
        sig.agent = name
        signatures.append(sig)
    return spans, found, signatures


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ChdbStore, datetime]]:
    path = tmp_path_factory.mktemp("hostile-dashboards")
    base_ns = time.time_ns() - 120 * 10**9
    store = ChdbStore(path, "otel")
    migrate(store)
    twin = ChdbStore.__new__(ChdbStore)
    twin.__dict__.update(store.__dict__)
    twin.database = "twin"
    migrate(twin)
    for target, names in ((store, HOSTILE), (twin, PLAIN)):
        exporter = ClickHouseExporter(target, 10_000, 60)
        spans, found, signatures = _rows(names, base_ns)
        exporter.add_spans(spans)
        exporter.add_findings(found)
        exporter.add_signatures(signatures)
        exporter.flush(0, force=True)
    yield store, datetime.fromtimestamp(base_ns / 1e9, UTC)
    store.close()


def _context(at: datetime, database: str, values: dict[str, Variable]) -> QueryContext:
    return QueryContext(
        at - timedelta(hours=1),
        at + timedelta(hours=1),
        60,
        {"database": Variable(database), **values},
    )


def _selections(i: int, name: str) -> list[dict[str, Variable]]:
    """Variables with `name` selected: all at once (one value, then several), and each
    alone while the others are at All."""
    every = [NORMAL, name]
    out: list[dict[str, Variable]] = [
        {v: Variable(name) for v in ("service", "agent", "model", "environment")},
        {v: Variable(list(every)) for v in ("service", "agent", "model", "environment")},
    ]
    for alone in ("service", "agent", "model", "environment"):
        out.append(
            {
                v: (Variable([name]) if v == alone else Variable(ALL, every))
                for v in ("service", "agent", "model", "environment")
            }
        )
    for selection in out:
        selection["trace_id"] = Variable(name if i % 2 else trace_id(501 + i))
    return out


def _plain(selection: dict[str, Variable], hostile: str, plain: str) -> dict[str, Variable]:
    def swap(value: str) -> str:
        return plain if value == hostile else value

    out = {}
    for key, variable in selection.items():
        current = variable.current
        out[key] = Variable(
            [swap(v) for v in current] if isinstance(current, list) else swap(current),
            [swap(v) for v in variable.options],
            variable.all_value,
        )
    return out


def _mapped(rows: list[dict[str, Any]]) -> list[Any]:
    """Rows of the twin with every plain name back to its hostile original."""

    def back(value: Any) -> Any:
        if isinstance(value, str):
            for plain, hostile in zip(PLAIN, HOSTILE, strict=True):
                value = value.replace(plain, hostile)
            return value
        if isinstance(value, list):
            return [back(v) for v in value]
        if isinstance(value, dict):
            return {back(k): back(v) for k, v in value.items()}
        return value

    return sorted((back(row) for row in rows), key=repr)


QUERIES = [(f"{uid}:{panel['title']}", target["rawSql"]) for uid, panel, target in TARGETS] + [
    (f"variable:{name}", sql) for name, sql in sorted(variables.VARIABLE_SQL.items())
]


@pytest.mark.parametrize("index", range(len(HOSTILE)), ids=[repr(h)[:30] for h in HOSTILE])
def test_a_hostile_name_selected_in_any_variable_cannot_change_a_query(stores, index):
    store, at = stores
    hostile, plain = HOSTILE[index], PLAIN[index]
    nonempty = 0
    for selection in _selections(index, hostile):
        twin = _plain(selection, hostile, plain)
        for label, sql in QUERIES:
            expanded = panel_query(sql, _context(at, "otel", selection))
            expected = store.query(panel_query(sql, _context(at, "twin", twin)))
            try:
                got = store.query(expanded)
            except Exception as exc:  # any failure is the finding
                pytest.fail(f"{label} fails with {hostile!r} selected: {exc}\n{expanded}")
            assert sorted(got, key=repr) == _mapped(expected), (
                label,
                selection,
                expanded,
            )
            nonempty += bool(got)
    # Not vacuous: the hostile rows are found when their name is selected.
    assert nonempty > len(QUERIES)


def test_the_agent_options_with_a_hostile_service_are_its_agents_only(stores):
    store, at = stores
    hostile = HOSTILE[0]
    sql = panel_query(
        variables.VARIABLE_SQL["agent"],
        _context(at, "otel", {"service": Variable([hostile])}),
    )
    assert [row["AgentName"] for row in store.query(sql)] == [hostile]


@pytest.mark.parametrize("alert", alerts.CLICKHOUSE_ALERTS, ids=lambda a: a.uid)
def test_alert_queries_read_hostile_names_as_data(stores, alert):
    store, at = stores
    context = QueryContext(at - timedelta(seconds=alert.window_s), at + timedelta(minutes=5))
    got = store.query(alert_query(alerts.clickhouse_sql(alert.key, "otel"), context))
    expected = store.query(alert_query(alerts.clickhouse_sql(alert.key, "twin"), context))
    assert sorted(got, key=repr) == _mapped(expected)


SENDER_CONTROLLED = ("service", "agent", "model", "environment", "trace_id")


def test_sender_controlled_variables_reach_sql_only_percent_encoded():
    """Anywhere a panel or variable query names one of these variables, it is through the
    `percentencode` format, or as the variable `$__conditionalAll` tests for All (the plugin
    removes that argument before Grafana expands anything)."""
    for label, sql in QUERIES:
        rest = re.sub(r", \$(\w+)\)", ")", sql)  # $__conditionalAll(..., $var)
        for name in SENDER_CONTROLLED:
            uses = re.findall(rf"\$\{{{name}(?::(\w+))?\}}|\$\b{name}\b|\[\[{name}", rest)
            assert all(fmt == "percentencode" for fmt in uses), (label, name, uses)


def test_formats_expand_as_grafana_does():
    """Grafana's own escaping, reproduced: `singlequote` and `sqlstring` leave a backslash
    alone (which is why the dashboards do not use them), `percentencode` leaves nothing but
    letters, digits and -_.~."""
    from mast_otel.dashboards.interpolate import replace_variables

    value = {"v": Variable("a\\'b\"c !*()~")}
    assert replace_variables("${v:singlequote}", value) == "'a\\\\'b\"c !*()~'"
    assert replace_variables("${v:sqlstring}", value) == "'a\\''b\\\"c !*()~'"
    assert replace_variables("${v:percentencode}", value) == "a%5C%27b%22c%20%21%2A%28%29~"
    several = {"v": Variable(["x,y", "é"])}
    assert replace_variables("${v:percentencode}", several) == "%7Bx%2Cy%2C%C3%A9%7D"
    assert replace_variables("${v:singlequote}", several) == "'x,y','é'"
