"""The on-call questions as named queries, on chDB, and the commands that print them."""

from __future__ import annotations

import json

import pytest

from mast_otel.collector.cli import main
from mast_otel.collector.store import ChdbStore, migrate, queries
from mast_otel.collector.store.batching import ClickHouseExporter
from tests.storedata import MINUTE, T0, finding, signature, span, trace_id

BASE = (T0 // MINUTE) * MINUTE  # a minute boundary


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """FM-1.3 (m1) early, then quiet for an hour, then again; FM-3.3 (m2) in the last minutes;
    run 1 with spans, findings at its spans and a signature."""
    path = tmp_path_factory.mktemp("queries")
    store = ChdbStore(path)
    migrate(store)
    exporter = ClickHouseExporter(store, 10_000, 60)
    found = [finding(10 + i, 0, "FM-1.3", BASE + i * MINUTE) for i in range(3)]
    found += [finding(20 + i, 0, "FM-1.3", BASE + (70 + i) * MINUTE) for i in range(4)]
    found += [finding(30 + i, 0, "FM-3.3", BASE + (72 + i) * MINUTE, model="m2") for i in range(2)]
    found.append(finding(1, 2, "FM-3.2", BASE + 5 * MINUTE))
    exporter.add_findings(found)
    exporter.add_spans([span(1, 0, BASE), span(1, 1, BASE + 1000, 0), span(1, 2, BASE + 2000, 1)])
    exporter.add_signatures(
        [
            signature(1, BASE + 5 * MINUTE, {"FM-3.2": 1}, "failure"),
            signature(2, BASE + 5 * MINUTE, {}, "success"),
            signature(3, BASE + 6 * MINUTE, {}, "success", model="m2"),
        ]
    )
    exporter.flush(0, force=True)
    store.close()
    return path


@pytest.fixture
def store(data_dir):
    s = ChdbStore(data_dir)
    yield s
    s.close()


def test_failing_now_ranks_fatal_modes_first_and_says_since_when(store):
    rows = queries.failing_now(store, queries.Scope(BASE + 60 * MINUTE))
    assert [(r["mode"], r["model"], r["fatal"], r["findings"], r["runs"]) for r in rows] == [
        ("FM-3.3", "m2", 1, 2, 2),
        ("FM-1.3", "m1", 0, 4, 4),
    ]
    assert rows[0]["first_minute_unix"] == (BASE + 72 * MINUTE) // 10**9
    only_m1 = queries.failing_now(store, queries.Scope(BASE, model="m1"), fatal_only=True)
    assert only_m1 == []
    everything = queries.failing_now(store, queries.Scope(BASE, service="svc"))
    assert sum(r["findings"] for r in everything) == 10


def test_failing_since_finds_the_start_of_the_current_stretch(store):
    since = queries.failing_since(store, "FM-1.3", queries.Scope(BASE), quiet_minutes=30)
    assert since == {
        "mode": "FM-1.3",
        "since_unix": (BASE + 70 * MINUTE) // 10**9,
        "last_minute_unix": (BASE + 73 * MINUTE) // 10**9,
        "findings": 4,
        "runs": 4,
    }
    longer = queries.failing_since(store, "FM-1.3", queries.Scope(BASE), quiet_minutes=120)
    assert longer is not None and longer["since_unix"] == BASE // 10**9
    assert longer["findings"] == 7
    assert queries.failing_since(store, "FM-2.1", queries.Scope(BASE)) is None
    with pytest.raises(queries.QueryError):
        queries.failing_since(store, "FM-9", queries.Scope(BASE))


def test_series_per_minute(store):
    series = queries.findings_per_minute(
        store, queries.Scope(BASE + 70 * MINUTE, BASE + 73 * MINUTE), by=("mode", "model")
    )
    assert [(r["minute_unix"] - BASE // 10**9, r["mode"], r["findings"]) for r in series] == [
        (70 * 60, "FM-1.3", 1),
        (71 * 60, "FM-1.3", 1),
        (72 * 60, "FM-1.3", 1),
        (72 * 60, "FM-3.3", 1),
    ]
    runs = queries.runs_per_minute(store, queries.Scope(BASE), by=("outcome", "model"))
    assert [(r["outcome"], r["model"], r["runs"], r["runs_with_findings"]) for r in runs] == [
        ("failure", "m1", 1, 1),
        ("success", "m1", 1, 0),
        ("success", "m2", 1, 0),
    ]
    with pytest.raises(queries.QueryError):
        queries.findings_per_minute(store, queries.Scope(BASE), by=("colour",))


def test_run_timeline_puts_findings_at_their_spans(store):
    timeline = queries.run_timeline(store, trace_id(1).upper())
    assert timeline is not None
    assert [(s["name"], s["depth"], s["offset_ms"]) for s in timeline["spans"]] == [
        ("step-0", 0, 0.0),
        ("step-1", 1, 0.001),
        ("step-2", 2, 0.002),
    ]
    assert timeline["spans"][2]["findings"][0]["mode"] == "FM-3.2"
    assert timeline["spans"][2]["evidence_for"] == ["FM-3.2"]
    assert timeline["spans"][0]["findings"] == []
    assert timeline["signature"]["outcome"] == "failure"
    assert queries.run_timeline(store, trace_id(999)) is None
    with pytest.raises(queries.QueryError):
        queries.run_timeline(store, "not-a-trace")


def test_scope_values_are_quoted(store):
    assert queries.failing_now(store, queries.Scope(BASE, service="x' OR '1'='1")) == []


def test_commands_failing_run_outcome_and_migrate(data_dir, capsys):
    d = str(data_dir)
    assert (
        main(["failing", "--data-dir", d, "--since", "2000-01-01T00:00:00", "--output", "json"])
        == 0
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["mode"] == "FM-3.3" and rows[0]["fatal"] == 1
    assert main(["run", "--data-dir", d, trace_id(1)]) == 0
    out = capsys.readouterr().out
    # Spans of no known dialect are listed as not read, with the findings at them.
    assert "Ok         step-2 (not read)\n            ^ FM-3.2 FM-3.2 at 2" in out
    assert "outcome failure" in out
    assert main(["outcome", "--data-dir", d, trace_id(2), "failure", "--score", "0.2"]) == 0
    capsys.readouterr()
    assert main(["signatures", "--data-dir", d, "--trace", trace_id(2), "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["outcome"] == "failure"
    assert main(["outcome", "--data-dir", d, trace_id(77), "failure"]) == 2
    assert "no signature is stored" in capsys.readouterr().err
    assert main(["migrate", "--data-dir", d]) == 0
    assert "(up to date)" in capsys.readouterr().out
    assert (
        main(["migrate", "--print-sql", "--cluster", "mast", "--clickhouse-url", "http://h:8123"])
        == 0
    )
    sql = capsys.readouterr().out
    assert "ON CLUSTER 'mast'" in sql and "ReplicatedReplacingMergeTree" in sql
