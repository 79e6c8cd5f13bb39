"""The ClickHouse server adapter. No ClickHouse server runs here (Debian ships 18.16, too old for
the schema's Map and DateTime64 columns; PyPI has no server binary), so the adapter is driven
through a real clickhouse-connect client on its chDB interface: the client's own statement
building (`command`, `raw_query`, `insert_arrow` with settings) runs against real ClickHouse
code, only the HTTP transport is not exercised. The transport is exercised for connection
errors against a closed loopback port."""

from __future__ import annotations

import re
import socket

import clickhouse_connect
import pytest

from mast_otel.collector.config import (
    ClickHouseServerConfig,
    ConfigError,
    StorageConfig,
    load_config,
)
from mast_otel.collector.store import (
    ClickHouseServerStore,
    StoreError,
    migrate,
    open_store,
    queries,
    schema_status,
)
from mast_otel.collector.store.backends import PASSWORD_ENV, client_arguments
from mast_otel.collector.store.batching import ClickHouseExporter
from mast_otel.collector.store.signatures import record_outcome
from tests.storedata import MINUTE, T0, finding, signature, span, trace_id


@pytest.fixture
def server_store(tmp_path):
    client = clickhouse_connect.get_client(interface="chdb", path=str(tmp_path / "ch"))
    store = ClickHouseServerStore(client, "otel")
    yield store
    store.close()


def test_migrate_write_and_read_through_clickhouse_connect(server_store):
    assert migrate(server_store) == list(schema_status(server_store).applied)
    assert schema_status(server_store).current
    exporter = ClickHouseExporter(server_store, 1000, 60)
    exporter.add_spans([span(1, 0, T0), span(1, 1, T0 + 10, 0)])
    exporter.add_findings([finding(1, 1, "FM-3.3", T0 + 10)])
    exporter.add_signatures([signature(1, T0 + MINUTE, {"FM-3.3": 1})])
    exporter.flush(0, force=True)
    assert queries.span_counts(server_store) == {"spans": 2, "unique_spans": 2}
    (row,) = queries.findings(server_store, queries.FindingFilter())
    assert (row["mode"], row["fatal"]) == ("FM-3.3", 1)
    timeline = queries.run_timeline(server_store, trace_id(1))
    assert timeline is not None
    assert [s["depth"] for s in timeline["spans"]] == [0, 1]
    assert timeline["spans"][1]["findings"][0]["mode"] == "FM-3.3"
    record_outcome(server_store, trace_id(1), "failure", 0.0)
    assert queries.signatures(server_store)[0]["outcome"] == "failure"
    runs = queries.runs_per_minute(server_store, queries.Scope(T0 - MINUTE))
    assert [(r["outcome"], r["runs"]) for r in runs] == [("failure", 1)]


def test_insert_deduplication_token_is_sent_as_a_setting(server_store):
    migrate(server_store)
    from mast_otel.collector.store.arrow import spans_table

    batch = spans_table([span(2, i, T0 + i) for i in range(3)])
    server_store.insert_arrow("otel_traces", batch, dedup_token="t-1")
    server_store.insert_arrow("otel_traces", batch, dedup_token="t-1")
    assert queries.span_counts(server_store)["spans"] == 3
    server_store.insert_arrow("otel_traces", batch, dedup_token="t-2")  # the token decides
    assert queries.span_counts(server_store)["spans"] == 6


def test_errors_carry_clickhouse_words_and_whether_to_retry(server_store):
    with pytest.raises(StoreError) as failed:
        server_store.query("SELECT * FROM otel.no_such_table")
    assert "no_such_table" in str(failed.value) and not failed.value.transient


def test_client_arguments_from_configuration(tmp_path, monkeypatch):
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    server = ClickHouseServerConfig(
        url="https://ch.internal:9443",
        username="mast",
        password_file=str(secret),
        verify_tls=True,
        ca_cert="/etc/ssl/ca.pem",
    )
    args = client_arguments(server)
    assert args["host"] == "ch.internal" and args["port"] == 9443 and args["secure"] is True
    assert args["password"] == "s3cret" and args["ca_cert"] == "/etc/ssl/ca.pem"
    assert args["username"] == "mast" and args["verify"] is True
    # Every argument is one the clickhouse-connect HTTP client takes.
    import inspect

    from clickhouse_connect.driver.httpclient import HttpClient

    accepted = set(inspect.signature(HttpClient.__init__).parameters) | {"secure", "username"}
    assert set(args) <= accepted
    monkeypatch.setenv(PASSWORD_ENV, "from-env")
    plain = client_arguments(ClickHouseServerConfig(url="http://127.0.0.1"))
    assert plain["password"] == "from-env" and plain["port"] == 8123 and not plain["secure"]


def test_unreachable_server_is_a_clear_transient_error_without_the_password(monkeypatch):
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv(PASSWORD_ENV, "hunter2-secret")
    storage = StorageConfig(
        backend="clickhouse",
        clickhouse=ClickHouseServerConfig(url=f"http://127.0.0.1:{port}", connect_timeout_s=2),
    )
    with pytest.raises(StoreError) as failed:
        open_store(storage)
    message = str(failed.value)
    assert f"127.0.0.1:{port}" in message and "hunter2-secret" not in message
    assert PASSWORD_ENV in message
    assert failed.value.transient


def test_storage_configuration_is_checked(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("storage:\n  cluster: mast\n")
    with pytest.raises(
        ConfigError, match=re.escape("storage.cluster needs storage.backend: clickhouse")
    ):
        load_config(bad)
    bad.write_text("storage:\n  backend: clickhouse\n  clickhouse:\n    url: ch:8123\n")
    with pytest.raises(ConfigError, match=re.escape("storage.clickhouse.url")):
        load_config(bad)
    bad.write_text("storage:\n  ttl_days:\n    spans: -1\n")
    with pytest.raises(ConfigError, match=re.escape("storage.ttl_days.spans")):
        load_config(bad)
    good = tmp_path / "g.yaml"
    good.write_text(
        "storage:\n  backend: clickhouse\n  cluster: '{cluster}'\n"
        "  clickhouse:\n    url: https://ch:8443\n  ttl_days:\n    spans: 7\n"
    )
    config = load_config(good)
    assert config.storage.cluster == "{cluster}" and config.storage.ttl_days.spans == 7
