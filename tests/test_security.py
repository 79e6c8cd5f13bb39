"""Bearer-token authentication on every endpoint of both receivers, TLS with a certificate this
test makes (and mutual TLS that turns away a client without one), redaction of secrets before
storage, and limits on what one span may carry."""

from __future__ import annotations

import dataclasses
import datetime
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

from mast_otel.collector.config import Config, ConfigError
from mast_otel.collector.security import AUTH_TOKEN_ENV, bearer_matches, load_token
from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore
from mast_otel.processors.limits import LimitsConfig, RecordLimits, truncate_text
from mast_otel.processors.records import SpanEvent, SpanRecord
from mast_otel.processors.redact import Redactor
from mast_otel.processors.redact_rules import RedactionConfig
from tests.load import AckRecorder, sender_provider
from tests.test_backpressure import request
from tests.test_end_to_end import loopback_config

TOKEN = "s3cret-token-for-tests"


def service_with(tmp_path: Path, **security: object) -> Service:
    config = loopback_config(tmp_path / "data")
    config = dataclasses.replace(
        config,
        security=dataclasses.replace(config.security, **security),  # type: ignore[arg-type]
    )
    return Service(config)


def http(
    port: int,
    path: str,
    *,
    method: str = "GET",
    token: str | None = None,
    context: ssl.SSLContext | None = None,
    scheme: str = "http",
) -> int:
    headers = {"Content-Type": "application/x-protobuf"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = request(2, 5).SerializeToString() if method == "POST" else None
    req = urllib.request.Request(
        f"{scheme}://127.0.0.1:{port}{path}", data=body, headers=headers, method=method
    )
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_without_the_token_every_endpoint_refuses(tmp_path, monkeypatch):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    service = service_with(
        tmp_path, auth=dataclasses.replace(Config().security.auth, token_file=str(token_file))
    )
    service.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}")
    try:
        traces = trace_service_pb2_grpc.TraceServiceStub(channel)
        logs = logs_service_pb2_grpc.LogsServiceStub(channel)
        for metadata in ((), (("authorization", "Bearer wrong"),), (("authorization", TOKEN),)):
            for call, message in (
                (traces.Export, request(2, 1)),
                (logs.Export, logs_service_pb2.ExportLogsServiceRequest()),
            ):
                with pytest.raises(grpc.RpcError) as refused:
                    call(message, metadata=metadata, timeout=5)
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
                assert TOKEN not in (refused.value.details() or "")
        traces.Export(request(2, 2), metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=5)

        port = service.http_port
        for path, method in (
            ("/v1/traces", "POST"),
            ("/v1/logs", "POST"),
            ("/healthz", "GET"),
            ("/metrics", "GET"),
            ("/other", "GET"),
        ):
            assert http(port, path, method=method) == 401
            assert http(port, path, method=method, token="wrong") == 401
        assert http(port, "/v1/traces", method="POST", token=TOKEN) == 200
        assert http(port, "/healthz", token=TOKEN) == 200

        # The SDK exporter with the token in its headers gets in.
        recorder = AckRecorder(
            OTLPSpanExporter(
                endpoint=f"127.0.0.1:{service.grpc_port}",
                insecure=True,
                headers={"authorization": f"Bearer {TOKEN}"},
            )
        )
        provider = sender_provider(recorder)
        with provider.get_tracer("t").start_as_current_span("root"):
            pass
        assert provider.force_flush(10_000)
        provider.shutdown()
        assert len(recorder.acked) == 1
        health = service.health()
        assert health["grpc"]["unauthenticated"] == 6
        assert health["http"]["unauthenticated"] == 10
    finally:
        channel.close()
        service.stop()


def test_token_sources_and_comparison(tmp_path):
    auth = Config().security.auth
    assert load_token(auth, environ={}) is None
    assert load_token(auth, environ={AUTH_TOKEN_ENV: " abc \n"}) == "abc"
    token_file = tmp_path / "t"
    token_file.write_text("")
    with pytest.raises(ConfigError, match="is empty"):
        load_token(dataclasses.replace(auth, token_file=str(token_file)), environ={})
    # Exactly: the scheme in any case, one space, the token; HTTP's own optional whitespace
    # around the whole value is not part of it.
    for accepted in ("Bearer abc", "bearer abc", "BEARER abc", " Bearer abc\t"):
        assert bearer_matches(accepted, "abc"), accepted
    for refused in ("bearer  abc", "Bearer abc x", "Bearer", "Bearer ", "Basic abc", "", None):
        assert not bearer_matches(refused, "abc"), refused


def test_health_can_stay_open_for_probes(tmp_path, monkeypatch):
    monkeypatch.setenv(AUTH_TOKEN_ENV, TOKEN)
    service = service_with(
        tmp_path, auth=dataclasses.replace(Config().security.auth, health_open=True)
    )
    service.start()
    try:
        assert http(service.http_port, "/healthz") == 200
        assert http(service.http_port, "/v1/traces", method="POST") == 401
    finally:
        service.stop()


def make_certificates(directory: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate."""
    now = datetime.datetime.now(datetime.UTC)

    def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def issue(name: str, key, issuer_name, issuer_key, ca: bool, san=None) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(issuer_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if san is not None:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    import ipaddress

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = issue("test CA", ca_key, ca_name, ca_key, True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = issue(
        "localhost",
        server_key,
        ca_name,
        ca_key,
        False,
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = issue("agent", client_key, ca_name, ca_key, False)
    files = {
        "ca": (ca.public_bytes(serialization.Encoding.PEM)),
        "server_cert": server.public_bytes(serialization.Encoding.PEM),
        "server_key": key_pem(server_key),
        "client_cert": client.public_bytes(serialization.Encoding.PEM),
        "client_key": key_pem(client_key),
    }
    paths = {}
    for name, data in files.items():
        path = directory / f"{name}.pem"
        path.write_bytes(data)
        paths[name] = path
    return paths


def tls_config(paths: dict[str, Path], mutual: bool):
    return dataclasses.replace(
        Config().security.tls,
        cert_file=str(paths["server_cert"]),
        key_file=str(paths["server_key"]),
        client_ca_file=str(paths["ca"]) if mutual else "",
    )


def test_tls_on_both_receivers_with_a_test_made_certificate(tmp_path):
    paths = make_certificates(tmp_path)
    service = service_with(tmp_path, tls=tls_config(paths, mutual=False))
    service.start()
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=paths["ca"].read_bytes())
        channel = grpc.secure_channel(f"127.0.0.1:{service.grpc_port}", credentials)
        trace_service_pb2_grpc.TraceServiceStub(channel).Export(request(2, 3), timeout=10)
        channel.close()
        # The SDK's exporter over TLS, trusting the test's CA.
        recorder = AckRecorder(
            OTLPSpanExporter(endpoint=f"127.0.0.1:{service.grpc_port}", credentials=credentials)
        )
        provider = sender_provider(recorder)
        with provider.get_tracer("t").start_as_current_span("root"):
            pass
        assert provider.force_flush(10_000)
        provider.shutdown()
        assert len(recorder.acked) == 1
        context = ssl.create_default_context(cafile=str(paths["ca"]))
        assert (
            http(service.http_port, "/v1/traces", method="POST", context=context, scheme="https")
            == 200
        )
        # Plain text on the TLS ports is turned away.
        plain = grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}")
        with pytest.raises(grpc.RpcError):
            trace_service_pb2_grpc.TraceServiceStub(plain).Export(request(2, 4), timeout=3)
        plain.close()
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(f"http://127.0.0.1:{service.http_port}/healthz", timeout=3)
    finally:
        service.stop()


def test_mutual_tls_turns_away_a_client_without_a_certificate(tmp_path):
    paths = make_certificates(tmp_path)
    service = service_with(tmp_path, tls=tls_config(paths, mutual=True))
    service.start()
    try:
        ca = paths["ca"].read_bytes()
        anonymous = grpc.secure_channel(
            f"127.0.0.1:{service.grpc_port}", grpc.ssl_channel_credentials(root_certificates=ca)
        )
        with pytest.raises(grpc.RpcError) as refused:
            trace_service_pb2_grpc.TraceServiceStub(anonymous).Export(request(2, 5), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        anonymous.close()
        identified = grpc.secure_channel(
            f"127.0.0.1:{service.grpc_port}",
            grpc.ssl_channel_credentials(
                root_certificates=ca,
                private_key=paths["client_key"].read_bytes(),
                certificate_chain=paths["client_cert"].read_bytes(),
            ),
        )
        trace_service_pb2_grpc.TraceServiceStub(identified).Export(request(2, 6), timeout=10)
        identified.close()

        context = ssl.create_default_context(cafile=str(paths["ca"]))
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            http(service.http_port, "/v1/traces", method="POST", context=context, scheme="https")
        context.load_cert_chain(paths["client_cert"], paths["client_key"])
        assert (
            http(service.http_port, "/v1/traces", method="POST", context=context, scheme="https")
            == 200
        )
    finally:
        service.stop()


def test_secrets_are_redacted_before_storage_and_detection(tmp_path):
    service = service_with(tmp_path)
    service.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}")
    try:
        message = request(1, 9)
        span = message.resource_spans[0].scope_spans[0].spans[0]
        for key, value in (
            (
                "gen_ai.tool.call.arguments",
                '{"command": "curl -H \'Authorization: Bearer abcdefghijklmnop\' https://api"}',
            ),
            ("gen_ai.tool.call.result", "export AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP"),
            ("db.url", "postgres://admin:hunter2@db:5432/shop"),
            ("cli", "deploy --token=tok_123456 --verbose"),
            ("api_key", "anything at all"),
        ):
            kv = span.attributes.add()
            kv.key, kv.value.string_value = key, value
        trace_service_pb2_grpc.TraceServiceStub(channel).Export(message, timeout=5)
    finally:
        channel.close()
        service.stop()
    store = ChdbStore(tmp_path / "data")
    try:
        (row,) = store.query("SELECT SpanAttributes AS a FROM otel.otel_traces")
    finally:
        store.close()
    stored = row["a"]
    text = " ".join(stored.values())
    for secret in ("abcdefghijklmnop", "AKIAABCDEFGHIJKLMNOP", "hunter2", "tok_123456"):
        assert secret not in text
    assert stored["api_key"] == "[REDACTED]"
    assert "Bearer [REDACTED]" in stored["gen_ai.tool.call.arguments"]
    assert stored["db.url"] == "postgres://admin:[REDACTED]@db:5432/shop"
    assert stored["cli"] == "deploy --token=[REDACTED] --verbose"


def test_limits_cut_with_a_marker_and_count():
    limits = RecordLimits(
        LimitsConfig(
            max_attribute_value_bytes=100,
            max_attributes_per_span=3,
            max_events_per_span=2,
            max_links_per_span=1,
        )
    )
    record = SpanRecord(
        trace_id="a" * 32,
        span_id="b" * 16,
        parent_span_id="",
        name="n",
        start_ns=2**64 - 1,
        end_ns=5,
        attributes={f"k{i}": "é" * 200 for i in range(5)},
        events=[SpanEvent(1, f"e{i}") for i in range(4)],
    )
    limits.span(record)
    assert list(record.attributes)[:3] == ["k0", "k1", "k2"]
    assert record.attributes["mast.dropped.attributes"] == 2
    assert record.attributes["mast.dropped.events"] == 2 and len(record.events) == 2
    value = record.attributes["k0"]
    assert len(value.encode()) <= 100 and value.endswith("bytes]") and "…[truncated " in value
    assert record.start_ns == 2**63 - 1
    assert dict(limits.stats) == {
        "events_dropped": 2,
        "attributes_dropped": 2,
        "values_truncated": 3,
        "timestamps_clamped": 1,
    }
    assert truncate_text("short", 100) == ("short", 0)


def test_redaction_rules_are_configurable_and_checked():
    with pytest.raises(ValueError, match="not a valid regular expression"):
        RedactionConfig(value_patterns=["("]).validate()
    redactor = Redactor(
        RedactionConfig(
            key_patterns=[],
            value_patterns=[r"ticket-\d+"],
            truncate_key_patterns=["result$"],
            truncate_bytes=64,
        )
    )
    record = SpanRecord(
        trace_id="a" * 32,
        span_id="b" * 16,
        parent_span_id="",
        name="n",
        start_ns=1,
        end_ns=2,
        attributes={"note": "see ticket-42 now", "tool.result": "z" * 500, "password": "kept"},
    )
    redactor.span(record)
    assert record.attributes["note"] == "see [REDACTED] now"
    assert record.attributes["password"] == "kept"  # no key rules configured
    assert record.attributes["tool.result"].endswith("bytes]")
    assert len(record.attributes["tool.result"].encode()) <= 64
    assert redactor.stats["values_redacted"] == 1 and redactor.stats["values_truncated"] == 1
