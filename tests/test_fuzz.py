"""Fuzzing the receive path with hypothesis: at least 10^5 generated payloads through decoding,
limits, redaction, normalization, the run windows, the detectors and the exporter's encoding
in-process, and a smaller number over real gRPC and HTTP sockets into a running collector with
its real store. Zero crashes: a payload is either refused as malformed (400 /
INVALID_ARGUMENT) or taken whole. `scripts/fuzz.py --examples N` runs longer."""

from __future__ import annotations

import urllib.error
import urllib.request

import grpc
from hypothesis import HealthCheck, given, settings

from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore
from tests.fuzzing import Harness, fuzz_config, mutations, requests, to_json
from tests.test_end_to_end import loopback_config

EXAMPLES = 200
MUTANTS = 640
# Derandomized: the same examples every run, so CI is repeatable; scripts/fuzz.py explores.
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


def test_decode_and_normalize_survive_a_hundred_thousand_payloads():
    harness = Harness()

    @FUZZ_SETTINGS
    @given(requests())
    def fuzz(request):
        harness.example(request, MUTANTS)

    fuzz()
    harness.flush()
    print(
        f"\nfuzz: {harness.payloads} payloads, {harness.decoded} decoded "
        f"({harness.records} records), {harness.refused} refused as malformed; "
        f"limits hit {dict(harness.pipeline.limits.stats)}"
    )
    assert harness.payloads >= 100_000
    assert harness.decoded > 1_000 and harness.refused > 10_000
    assert harness.pipeline.stats.processing_errors == 0
    # Hostile values reached the limits (each limit is checked exactly in test_security).
    limits = harness.pipeline.limits.stats
    assert limits["timestamps_clamped"] and sum(limits.values()) > limits["timestamps_clamped"]


def test_receivers_and_store_survive_fuzzed_requests_over_sockets(tmp_path):
    base = loopback_config(tmp_path / "data")
    fuzzed = fuzz_config()
    config = base.__class__(**{**vars(base), "limits": fuzzed.limits, "pipeline": fuzzed.pipeline})
    service = Service(config)
    service.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}")
    methods = {
        "traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
    }
    calls = {
        signal: channel.unary_unary(
            path, request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        for signal, path in methods.items()
    }
    grpc_codes: dict[str, int] = {}
    http_codes: dict[int, int] = {}

    def post(signal: str, body: bytes, content_type: str) -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{service.http_port}/v1/{signal}",
            data=body,
            headers={"Content-Type": content_type},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        http_codes[status] = http_codes.get(status, 0) + 1

    def send(signal: str, binary: bytes, text: bytes) -> None:
        try:
            calls[signal](binary, timeout=30)
            code = "OK"
        except grpc.RpcError as exc:
            code = exc.code().name
        grpc_codes[code] = grpc_codes.get(code, 0) + 1
        post(signal, binary, "application/x-protobuf")
        if text:
            post(signal, text, "application/json")

    @settings(
        max_examples=60,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(requests())
    def fuzz(request):
        signal = "traces" if request.DESCRIPTOR.name == "ExportTraceServiceRequest" else "logs"
        binary = request.SerializeToString()
        text = to_json(request) if len(binary) < 64_000 else b""
        send(signal, binary, text)
        import random

        rng = random.Random(len(binary))
        for mutant in mutations(binary, rng, 2):
            send(signal, mutant, b"")

    try:
        fuzz()
        health = service.health()
    finally:
        channel.close()
        service.stop()
    print(f"\nsocket fuzz: gRPC {grpc_codes}, HTTP {http_codes}")
    assert set(grpc_codes) <= {"OK", "INVALID_ARGUMENT"}
    assert set(http_codes) <= {200, 400}
    assert grpc_codes.get("OK") and http_codes.get(200)
    assert health["grpc"]["internal_errors"] == 0 == health["http"]["internal_errors"]
    assert health["pipeline"]["processing_errors"] == 0
    assert health["store"]["write_errors"] == 0 == health["store"]["rows_unwritable"]

    store = ChdbStore(config.storage.data_dir)
    try:
        rows = store.query(
            "SELECT count() AS n, uniqExact(TraceId, SpanId) AS u FROM otel.otel_traces"
        )
    finally:
        store.close()
    # The same ids arrive again and again (fixed span ids, both transports): stored once.
    assert int(rows[0]["n"]) == int(rows[0]["u"]) > 0
