"""Cluster DDL, generated from the same files as the single-node schema.

No ClickHouse cluster runs here. What is checked: every statement is generated and parses
(ClickHouse's own parser, through chDB's `formatQuery`); the replicated local tables and the
Distributed tables are created by chDB given the macros and a cluster definition a server would
have (with ClickHouse's in-memory test keeper standing in for ZooKeeper/Keeper: creation works,
but such replicas stay read-only); and the whole cluster layout, with the replicated engines
swapped for their plain twins, runs end to end through Distributed tables on one local shard.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mast_otel.collector.config import TtlConfig
from mast_otel.collector.store import ChdbStore, migrate, queries, schema_status
from mast_otel.collector.store.batching import ClickHouseExporter
from mast_otel.collector.store.signatures import record_outcome
from mast_otel.schemas import (
    TTL_TABLES,
    Layout,
    bootstrap_statements,
    migrations,
    sharded_tables,
    ttl_statement,
)
from tests.storedata import MINUTE, T0, finding, signature, span, trace_id

CLUSTER_CONFIG = """<clickhouse>
  <tcp_port>9000</tcp_port>
  <zookeeper><implementation>testkeeper</implementation></zookeeper>
  <macros><cluster>mast</cluster><shard>01</shard><replica>replica-a</replica></macros>
  <remote_servers>
    <mast><shard><replica><host>localhost</host><port>9000</port></replica></shard></mast>
  </remote_servers>
</clickhouse>
"""
ON_CLUSTER = re.compile(r" ON CLUSTER '[^']*'")


def cluster_statements(cluster: str) -> list[str]:
    layout = Layout("otel", cluster)
    out = bootstrap_statements(layout)
    out += [s for m in migrations("otel", cluster) for s in m.statements]
    for group in TTL_TABLES.values():
        for table, column in group:
            out += ttl_statement(layout, table, column, 30)
    return out


@pytest.mark.parametrize("cluster", ["mast", "{cluster}"])
def test_every_cluster_statement_is_generated_and_parses(tmp_path, cluster):
    statements = cluster_statements(cluster)
    creates = [s for s in statements if s.startswith("CREATE TABLE")]
    for table in sharded_tables():
        local = [
            s for s in creates if s.startswith(f"CREATE TABLE IF NOT EXISTS otel.{table}_local ")
        ]
        dist = [s for s in creates if s.startswith(f"CREATE TABLE IF NOT EXISTS otel.{table} ")]
        assert len(local) == 1 and len(dist) == 1, table
        assert "ENGINE = Replicated" in local[0]
        assert f"'/clickhouse/tables/{{shard}}/otel/{table}_local', '{{replica}}'" in local[0]
        assert f"ENGINE = Distributed('{cluster}', 'otel', '{table}_local', " in dist[0]
    for statement in statements:
        if statement.startswith("INSERT"):
            assert "ON CLUSTER" not in statement
            assert "distributed_foreground_insert = 1" in statement
        elif not statement.startswith("CREATE DATABASE"):
            assert f" ON CLUSTER '{cluster}'" in statement, statement[:100]
        if statement.startswith("CREATE MATERIALIZED VIEW"):
            refs = re.findall(r"otel\.(\w+)", statement)
            assert all(r.endswith("_local") for r in refs[1:]), refs
    assert any("cityHash64(TraceId)" in s for s in creates)
    store = ChdbStore(tmp_path)
    try:
        for statement in statements:
            literal = statement.replace("\\", "\\\\").replace("'", "\\'")
            (row,) = store.query(f"SELECT formatQuery('{literal}') AS q")
            if "ON CLUSTER" in statement:
                assert "ON CLUSTER" in row["q"]
    finally:
        store.close()


def test_replicated_local_tables_are_created_with_the_servers_macros(tmp_path):
    """In a child process: chDB aborts at exit if replicated tables are still open, so the
    database is dropped first, and a crash could not take the test run with it."""
    config = tmp_path / "cluster.xml"
    config.write_text(CLUSTER_CONFIG)
    statements = [
        ON_CLUSTER.sub("", s)
        for s in cluster_statements("mast")
        # The views need the columns later ALTERs add, which read-only replicas refuse; they
        # run in the one-shard test below.
        if s.startswith(("CREATE DATABASE", "CREATE TABLE"))
    ]
    script = textwrap.dedent(
        """
        import json, sys
        from mast_otel.collector.store import ChdbStore
        data_dir, config, statements = sys.argv[1], sys.argv[2], json.loads(sys.stdin.read())
        store = ChdbStore(data_dir, options={"config-file": config})
        try:
            for statement in statements:
                store.execute(statement)
            replicas = store.query(
                "SELECT table, zookeeper_path, replica_name FROM system.replicas "
                "WHERE database = 'otel' ORDER BY table")
            engines = store.query(
                "SELECT name, engine, engine_full FROM system.tables WHERE database = 'otel'")
            print(json.dumps({"replicas": replicas, "engines": engines}))
        finally:
            store.execute("DROP DATABASE IF EXISTS otel SYNC")
            store.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "data"), str(config)],
        input=json.dumps(statements),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    replicas = {r["table"]: r for r in result["replicas"]}
    assert set(replicas) == {f"{t}_local" for t in sharded_tables()}
    for table, replica in replicas.items():
        assert replica["zookeeper_path"] == f"/clickhouse/tables/01/otel/{table}"
        assert replica["replica_name"] == "replica-a"
    engines = {r["name"]: r for r in result["engines"]}
    for table in sharded_tables():
        assert engines[table]["engine"] == "Distributed"
        assert engines[f"{table}_local"]["engine"].startswith("Replicated")
    assert engines["mast_runs_per_minute_local"]["engine"] == "ReplicatedSummingMergeTree"


class OneShardCluster(ChdbStore):
    """chDB as one node of the cluster `mast` with one local shard: runs the cluster DDL
    without ON CLUSTER (no distributed DDL queue) and with plain engines for the replicated
    ones (no keeper), so everything else (local tables, Distributed tables, views on the
    local tables, inserts and reads through the Distributed tables) runs for real."""

    cluster = "mast"
    _REPLICATED = re.compile(r"Replicated(\w*)MergeTree\('[^']*', '[^']*'(?:, )?")

    def execute(self, sql: str) -> None:
        super().execute(self._REPLICATED.sub(r"\1MergeTree(", ON_CLUSTER.sub("", sql)))


def test_cluster_layout_runs_end_to_end_through_distributed_tables(tmp_path):
    config = tmp_path / "cluster.xml"
    config.write_text(CLUSTER_CONFIG)
    store = OneShardCluster(tmp_path / "data", options={"config-file": str(config)})
    try:
        assert migrate(store, "mast", TtlConfig(spans=3650)) == list(schema_status(store).applied)
        assert schema_status(store).current
        assert migrate(store, "mast") == []
        engines = {
            r["name"]: r["engine_full"]
            for r in store.query(
                "SELECT name, engine_full FROM system.tables WHERE database = 'otel'"
            )
        }
        assert engines["otel_traces"].startswith("Distributed('mast', 'otel', 'otel_traces_local'")
        assert "toIntervalDay(3650)" in engines["otel_traces_local"]
        exporter = ClickHouseExporter(store, 1000, 60)
        exporter.add_spans([span(1, 0, T0), span(1, 1, T0 + 10, 0)])
        exporter.add_findings([finding(1, 1, "FM-1.5", T0 + 10), finding(1, 0, "FM-1.3", T0)])
        exporter.add_signatures([signature(1, T0 + MINUTE, {"FM-1.5": 1, "FM-1.3": 1})])
        exporter.flush(0, force=True)
        local = store.query("SELECT count() AS n FROM otel.otel_traces_local")
        assert int(local[0]["n"]) == 2
        assert queries.span_counts(store)["spans"] == 2
        assert {r["mode"] for r in queries.findings(store, queries.FindingFilter())} == {
            "FM-1.5",
            "FM-1.3",
        }
        now = queries.failing_now(store, queries.Scope(T0 - MINUTE))
        assert [(r["mode"], r["fatal"], r["findings"]) for r in now] == [
            ("FM-1.5", 1, 1),
            ("FM-1.3", 0, 1),
        ]
        record_outcome(store, trace_id(1), "failure")
        runs = queries.runs_per_minute(store, queries.Scope(T0 - MINUTE))
        assert [(r["outcome"], r["runs"], r["fatal_runs"]) for r in runs] == [("failure", 1, 1)]
        assert queries.trace_bounds(store, [trace_id(1)])
    finally:
        store.close()
