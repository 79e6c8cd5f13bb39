"""The schema on chDB: every migration from empty and from each earlier version, idempotence,
TTLs, and a store created by the OpenTelemetry Collector's ClickHouse exporter."""

from __future__ import annotations

import pytest

from mast_otel.collector.config import TtlConfig
from mast_otel.collector.store import ChdbStore, apply_ttls, migrate, schema_status
from mast_otel.collector.store.arrow import findings_table, signatures_table, spans_table
from mast_otel.processors.conventions import FATAL_PRIOR_CODES, MODES
from mast_otel.schemas import Layout, SchemaSourceError, latest_version, migrations, render
from tests.storedata import EXPORTER_TRACES_SQL, T0, finding, run_sql_file, signature, span

LATEST = latest_version()
ATTRIBUTION_COLUMNS = ("DecisiveSpanId", "DecisiveStep", "ResponsibleAgent", "AttributionChain")


def columns(store: ChdbStore, table: str) -> dict[str, str]:
    rows = store.query(
        f"SELECT name, type FROM system.columns WHERE database = 'otel' AND table = '{table}'"
    )
    return {r["name"]: r["type"] for r in rows}


def test_versions_are_numbered_one_to_latest_without_gaps():
    assert [m.version for m in migrations("otel")] == list(range(1, LATEST + 1))
    assert LATEST >= 6


def test_fatal_prior_is_the_studys_six_modes_and_the_ddl_uses_it():
    assert sorted(FATAL_PRIOR_CODES) == sorted(
        ["FM-3.3", "FM-1.5", "FM-2.6", "FM-3.1", "FM-1.4", "FM-2.2"]
    )
    assert sum(m.fatal_prior for m in MODES) == 6
    ddl = "\n".join(s for m in migrations("otel") for s in m.statements)
    for code in FATAL_PRIOR_CODES:
        assert f"'{code}'" in ddl


def test_from_empty_creates_every_table_and_records_every_version(tmp_path):
    store = ChdbStore(tmp_path)
    try:
        assert migrate(store) == list(range(1, LATEST + 1))
        assert migrate(store) == []
        assert schema_status(store).current
        tables = {
            r["name"]: r["engine"]
            for r in store.query("SELECT name, engine FROM system.tables WHERE database = 'otel'")
        }
        assert tables["mast_findings"] == "ReplacingMergeTree"
        assert tables["mast_signatures"] == "ReplacingMergeTree"
        assert tables["mast_findings_per_minute"] == "AggregatingMergeTree"
        assert tables["mast_runs_per_minute"] == "SummingMergeTree"
        assert tables["mast_findings_per_minute_mv"] == "MaterializedView"
        assert tables["mast_runs_per_minute_mv"] == "MaterializedView"
        assert columns(store, "mast_findings")["Fatal"] == "UInt8"
        assert columns(store, "mast_signatures")["Sign"] == "Int8"
        assert columns(store, "mast_findings")["Mode"] == "LowCardinality(String)"
        # Every statement may run again (a migration interrupted half way is re-applied).
        for migration in migrations("otel"):
            for statement in migration.statements:
                if not statement.startswith("INSERT"):
                    store.execute(statement)
    finally:
        store.close()


def _fill_at(store: ChdbStore, version: int) -> None:
    """Rows a store at `version` could hold, written with that version's columns."""
    if version >= 1:
        store.insert_arrow("otel_traces", spans_table([span(1, 0, T0), span(1, 1, T0 + 1)]))
    if version >= 3:
        table = findings_table([finding(1, 1, "FM-1.4", T0), finding(1, 0, "FM-1.3", T0)])
        if version < 5:
            table = table.drop_columns(["Fatal"])
        store.insert_arrow("mast_findings", table)
    if version >= 4:
        table = signatures_table([signature(1, T0, {"FM-1.4": 1, "FM-1.3": 1}, "failure")])
        if version < 5:
            table = table.drop_columns(["Fatal", "Sign"])
        if version < 7:
            table = table.drop_columns(list(ATTRIBUTION_COLUMNS))
        store.insert_arrow("mast_signatures", table)


@pytest.mark.parametrize("start", range(LATEST))
def test_from_each_earlier_version_to_latest(tmp_path, start):
    store = ChdbStore(tmp_path)
    try:
        assert migrate(store, up_to=start) == list(range(1, start + 1))
        _fill_at(store, start)
        assert migrate(store) == list(range(start + 1, LATEST + 1))
        assert schema_status(store).applied == tuple(range(1, LATEST + 1))
        if start >= 3:
            # Findings stored before Fatal existed read the static prior.
            fatal = {
                r["Mode"]: int(r["Fatal"])
                for r in store.query("SELECT Mode, Fatal FROM otel.mast_findings")
            }
            assert fatal == {"FM-1.4": 1, "FM-1.3": 0}
            # ...and the rollups created later count them.
            rows = store.query(
                "SELECT Mode, Fatal, uniqExactMerge(Findings) AS n "
                "FROM otel.mast_findings_per_minute GROUP BY Mode, Fatal ORDER BY Mode"
            )
            assert [(r["Mode"], int(r["Fatal"]), int(r["n"])) for r in rows] == [
                ("FM-1.3", 0, 1),
                ("FM-1.4", 1, 1),
            ]
        if start >= 4:
            runs = store.query(
                "SELECT Outcome, sum(Runs) AS runs, sum(FatalRuns) AS fatal "
                "FROM otel.mast_runs_per_minute GROUP BY Outcome"
            )
            assert [(r["Outcome"], int(r["runs"]), int(r["fatal"])) for r in runs] == [
                ("failure", 1, 1)
            ]
        if 4 <= start < 7:
            # Signatures stored before attribution read as naming no step.
            (row,) = store.query(
                "SELECT DecisiveSpanId, DecisiveStep, ResponsibleAgent, AttributionChain "
                "FROM otel.mast_signatures FINAL"
            )
            assert row == {
                "DecisiveSpanId": "",
                "DecisiveStep": -1,
                "ResponsibleAgent": "",
                "AttributionChain": "",
            }
        # The store takes the current writers' batches.
        store.insert_arrow("mast_findings", findings_table([finding(2, 0, "FM-3.2", T0)]))
        store.insert_arrow("mast_signatures", signatures_table([signature(2, T0, {})]))
    finally:
        store.close()


def test_rollup_fill_is_not_repeated_when_a_migration_is_applied_again(tmp_path):
    """The fill inserts carry a deduplication token: re-running migration 6 after a crash
    between its statements and its version record does not double the run counts."""
    store = ChdbStore(tmp_path)
    try:
        migrate(store, up_to=5)
        _fill_at(store, 5)
        migrate(store)
        store.execute("DELETE FROM otel.mast_schema_versions WHERE Version = 6")
        assert migrate(store) == [6]
        runs = store.query("SELECT sum(Runs) AS n FROM otel.mast_runs_per_minute")
        assert int(runs[0]["n"]) == 1
    finally:
        store.close()


def test_ttls_follow_the_configuration_and_zero_leaves_a_table_alone(tmp_path):
    store = ChdbStore(tmp_path)
    try:
        migrate(store)
        store.execute(
            "ALTER TABLE otel.otel_logs MODIFY TTL TimestampTime + toIntervalDay(3)"
        )  # set by hand
        changed = apply_ttls(store, TtlConfig(spans=7, findings=30, rollups=90))
        assert sorted(changed) == sorted(
            [
                "otel_traces",
                "otel_traces_trace_id_ts",
                "mast_findings",
                "mast_findings_per_minute",
                "mast_runs_per_minute",
            ]
        )
        assert apply_ttls(store, TtlConfig(spans=7, findings=30, rollups=90)) == []
        engines = {
            r["name"]: r["engine_full"]
            for r in store.query(
                "SELECT name, engine_full FROM system.tables WHERE database = 'otel'"
            )
        }
        assert "TTL toDateTime(Timestamp) + toIntervalDay(7)" in engines["otel_traces"]
        assert "TTL Minute + toIntervalDay(90)" in engines["mast_runs_per_minute"]
        assert "TTL TimestampTime + toIntervalDay(3)" in engines["otel_logs"]
        assert "TTL" not in engines["mast_signatures"]
        assert apply_ttls(store, TtlConfig(spans=14)) == ["otel_traces", "otel_traces_trace_id_ts"]
    finally:
        store.close()


def test_a_statement_of_unknown_form_is_refused_not_half_translated():
    with pytest.raises(SchemaSourceError):
        render("DROP TABLE {db}.mast_findings", Layout("otel", "c"))
    with pytest.raises(SchemaSourceError):
        render("INSERT INTO {db}.t SELECT 1", Layout("otel", "c"))


def test_store_created_by_the_opentelemetry_exporter_is_migrated_and_read(tmp_path):
    """The exporter's own table definitions first; migrate accepts them, writes and reads
    go through them unchanged."""
    from mast_otel.collector.store import queries

    store = ChdbStore(tmp_path)
    try:
        run_sql_file(store, EXPORTER_TRACES_SQL)
        assert migrate(store) == list(range(1, LATEST + 1))
        assert "ResourceAttributeItems" in columns(store, "otel_traces")
        assert columns(store, "otel_traces_trace_id_ts")["Start"].startswith(
            "SimpleAggregateFunction"
        )
        store.insert_arrow("otel_traces", spans_table([span(5, 0, T0), span(5, 1, T0 + 10, 0)]))
        rows = queries.stored_spans(store, [span(5, 0, T0).trace_id])
        assert [r["span_id"] for r in rows] == [span(5, 0, T0).span_id, span(5, 1, T0).span_id]
        assert queries.trace_ids_between(store, T0 - 10**9, T0 + 10**9) == [span(5, 0, 0).trace_id]
    finally:
        store.close()


def test_start_refuses_a_store_behind_when_auto_migrate_is_off(tmp_path):
    import dataclasses

    from mast_otel.collector.config import load_config
    from mast_otel.collector.service import prepare_store
    from mast_otel.collector.store import StoreError

    base = load_config()
    config = dataclasses.replace(
        base, storage=dataclasses.replace(base.storage, auto_migrate=False)
    )
    store = ChdbStore(tmp_path)
    try:
        migrate(store, up_to=4)
        with pytest.raises(StoreError, match="mast-otel migrate") as refused:
            prepare_store(store, config)
        assert str(list(range(5, LATEST + 1))) in str(refused.value)
        prepare_store(store, base)  # auto_migrate on: brought up to date
        prepare_store(store, config)  # now current: accepted
    finally:
        store.close()
