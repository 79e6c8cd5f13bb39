"""Splitting OTLP requests by run (collector/workers/route.py): every record lands in exactly
one shard, with its resource and scope, whole runs together, the same shard in every process;
malformed bytes are refused with the error receivers answer 400 / INVALID_ARGUMENT to.

Requests are built by hypothesis from the real opentelemetry-proto messages, with unknown
fields spliced in at every level, and decoded back with the collector's own decoder."""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord as PbLogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from mast_otel.collector.otlp.decode import (
    OtlpDecodeError,
    decode_logs,
    decode_spans,
    parse_logs_request,
    parse_trace_request,
)
from mast_otel.collector.workers.route import (
    MAX_SHARDS,
    RouteError,
    log_run_key,
    route_logs,
    route_request,
    route_traces,
    shard_for,
    shard_for_hex,
)
from mast_otel.processors.normalize import codex
from tests.fuzzing import any_value, mutations, to_json

SETTINGS = settings(
    max_examples=120,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
SHARD_COUNTS = (1, 2, 3, 4, 8)

# --- strategies -------------------------------------------------------------------------------


def _unknown_field(number: int, kind: int, payload: bytes) -> bytes:
    """One field the message does not define (kept by protobuf as an unknown field)."""
    tag = bytes(_varint((number << 3) | kind))
    if kind == 0:
        return tag + bytes(_varint(len(payload)))
    if kind == 1:
        return tag + payload.ljust(8, b"\0")[:8]
    if kind == 5:
        return tag + payload.ljust(4, b"\0")[:4]
    return tag + bytes(_varint(len(payload))) + payload


def _varint(value: int) -> bytearray:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return out


UNKNOWN = st.lists(
    st.builds(
        _unknown_field,
        st.integers(min_value=50, max_value=5000),
        st.sampled_from((0, 1, 2, 5)),
        st.binary(max_size=12),
    ),
    max_size=2,
).map(b"".join)

ATTRIBUTES = st.lists(
    st.builds(
        lambda key, value: KeyValue(key=key, value=value),
        st.sampled_from(("service.name", "gen_ai.operation.name", "k", "conversation.id"))
        | st.text(max_size=6),
        any_value(1),
    ),
    max_size=3,
)


def _with_unknown(message: Any, unknown: bytes) -> Any:
    if unknown:
        message.MergeFromString(unknown)
    return message


@st.composite
def spans(draw: Any, trace_ids: list[bytes]) -> PbSpan:
    span = PbSpan(
        trace_id=draw(st.sampled_from(trace_ids)),
        span_id=draw(st.binary(min_size=8, max_size=8)),
        parent_span_id=draw(st.sampled_from((b"", b"\x01" * 8))),
        name=draw(st.text(max_size=12)),
        kind=draw(st.integers(0, 5)),
        start_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
        end_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
    )
    span.attributes.extend(draw(ATTRIBUTES))
    for _ in range(draw(st.integers(0, 2))):
        event = span.events.add(name=draw(st.text(max_size=8)))
        event.attributes.extend(draw(ATTRIBUTES))
    for _ in range(draw(st.integers(0, 1))):
        link = span.links.add(
            trace_id=draw(st.binary(min_size=16, max_size=16)),
            span_id=draw(st.binary(min_size=8, max_size=8)),
        )
        link.attributes.extend(draw(ATTRIBUTES))
    span.status.code = draw(st.integers(0, 2))
    span.status.message = draw(st.text(max_size=8))
    return _with_unknown(span, draw(UNKNOWN))


@st.composite
def trace_requests(draw: Any) -> ExportTraceServiceRequest:
    """Traces spread over resources and scopes (a trace id may appear in several), with empty
    resources and scopes, schema urls, unknown fields, and sometimes ids of other lengths."""
    pool = draw(
        st.lists(
            st.binary(min_size=16, max_size=16) | st.binary(max_size=20), min_size=1, max_size=6
        )
    )
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 3))):
        resource_spans = request.resource_spans.add(schema_url=draw(st.text(max_size=5)))
        resource_spans.resource.attributes.extend(draw(ATTRIBUTES))
        resource_spans.resource.dropped_attributes_count = draw(st.integers(0, 3))
        for _ in range(draw(st.integers(0, 3))):
            scope_spans = resource_spans.scope_spans.add(schema_url=draw(st.text(max_size=5)))
            scope_spans.scope.name = draw(st.text(max_size=6))
            scope_spans.scope.version = draw(st.text(max_size=3))
            scope_spans.scope.attributes.extend(draw(ATTRIBUTES))
            scope_spans.spans.extend(draw(st.lists(spans(pool), max_size=6)))
            _with_unknown(scope_spans, draw(UNKNOWN))
        _with_unknown(resource_spans, draw(UNKNOWN))
    return _with_unknown(request, draw(UNKNOWN))


CONVERSATION = st.one_of(
    st.sampled_from(("c-1", "c-2", " c-1 ", "")).map(lambda v: AnyValue(string_value=v)),
    st.integers(0, 3).map(lambda v: AnyValue(int_value=v)),
    st.just(AnyValue()),
)


@st.composite
def log_requests(draw: Any) -> ExportLogsServiceRequest:
    """Log records with a trace id, with a conversation on the record or on the resource
    (strings, numbers, empty values), or with neither."""
    pool = draw(st.lists(st.binary(min_size=16, max_size=16), min_size=1, max_size=3))
    request = ExportLogsServiceRequest()
    for _ in range(draw(st.integers(0, 3))):
        resource_logs = request.resource_logs.add()
        resource_logs.resource.attributes.extend(draw(ATTRIBUTES))
        if draw(st.booleans()):
            resource_logs.resource.attributes.add(key="conversation.id", value=draw(CONVERSATION))
        for _ in range(draw(st.integers(0, 2))):
            scope_logs = resource_logs.scope_logs.add(schema_url=draw(st.text(max_size=4)))
            scope_logs.scope.name = draw(st.text(max_size=6))
            for _ in range(draw(st.integers(0, 6))):
                record = PbLogRecord(
                    time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                    event_name=draw(
                        st.sampled_from(("codex.tool_result", "codex.user_prompt", ""))
                    ),
                    trace_id=draw(st.sampled_from(pool) | st.binary(max_size=17)),
                    span_id=draw(st.binary(max_size=9)),
                )
                record.body.CopyFrom(draw(any_value(1)))
                record.attributes.extend(draw(ATTRIBUTES))
                for _ in range(draw(st.integers(0, 2))):
                    record.attributes.add(key="conversation.id", value=draw(CONVERSATION))
                scope_logs.log_records.append(_with_unknown(record, draw(UNKNOWN)))
    return _with_unknown(request, draw(UNKNOWN))


# --- what a request holds, decoded -----------------------------------------------------------


def _bytes(message: Any) -> bytes:
    return message.SerializeToString(deterministic=True)


def span_placements(data: bytes) -> Counter[tuple[bytes, str, bytes, str, bytes]]:
    """Every span with the resource and scope it sits in (and their schema urls)."""
    request = parse_trace_request(data)
    return Counter(
        (_bytes(rs.resource), rs.schema_url, _bytes(ss.scope), ss.schema_url, _bytes(span))
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    )


def log_placements(data: bytes) -> Counter[tuple[bytes, bytes, str, bytes]]:
    request = parse_logs_request(data)
    return Counter(
        (_bytes(rl.resource), _bytes(sl.scope), sl.schema_url, _bytes(record))
        for rl in request.resource_logs
        for sl in rl.scope_logs
        for record in sl.log_records
    )


# --- traces -----------------------------------------------------------------------------------


@SETTINGS
@given(trace_requests(), st.sampled_from(SHARD_COUNTS))
def test_every_span_lands_in_exactly_one_shard_with_its_resource_and_scope(request, n):
    data = request.SerializeToString()
    routed = route_traces(data, n)
    assert set(routed.shards) <= set(range(n))
    union: Counter[Any] = Counter()
    for shard, body in routed.shards.items():
        placements = span_placements(body)
        assert sum(placements.values()) == routed.records[shard] > 0
        union += placements
    assert union == span_placements(data)


@SETTINGS
@given(trace_requests(), st.sampled_from(SHARD_COUNTS))
def test_a_trace_lives_in_the_one_shard_its_trace_id_names(request, n):
    data = request.SerializeToString()
    routed = route_traces(data, n)
    owner: dict[bytes, int] = {}
    for shard, body in routed.shards.items():
        # Each shard's request is what a worker decodes: the collector's own decoder takes it.
        decoded = decode_spans(parse_trace_request(body))
        assert len(decoded.records) + decoded.rejected == routed.records[shard]
        for span in (
            s
            for rs in parse_trace_request(body).resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
        ):
            assert owner.setdefault(span.trace_id, shard) == shard
            assert shard_for(span.trace_id, n) == shard
    decoded_input = decode_spans(request)
    for record in decoded_input.records:
        assert shard_for_hex(record.trace_id, n) == owner[bytes.fromhex(record.trace_id)]
    # The receiving process can answer the same partial success a decode would.
    assert (routed.rejected, routed.reason) == (decoded_input.rejected, decoded_input.reason)


@SETTINGS
@given(trace_requests(), st.sampled_from(SHARD_COUNTS))
def test_the_wire_walk_alone_routes_exactly_as_the_validating_parse(request, n):
    data = request.SerializeToString()
    walked, parsed = route_traces(data, n, validate=False), route_traces(data, n, validate=True)
    assert (walked.shards, walked.records) == (parsed.shards, parsed.records)
    # And again: the same bytes give the same shards, call after call.
    assert route_traces(data, n) == route_traces(data, n)


@SETTINGS
@given(trace_requests(), st.sampled_from((2, 4)))
def test_otlp_json_is_routed_like_its_protobuf(request, n):
    routed_json = route_request(to_json(request), n, "traces", "json")
    routed_pb = route_traces(request.SerializeToString(), n)
    assert routed_json.records == routed_pb.records

    def spans_of(body: bytes) -> Counter[tuple[bytes, bytes, str, str]]:
        # JSON drops unknown fields and may respell NaN: compare what identifies a span.
        return Counter(
            (span.trace_id, span.span_id, span.name, rs.resource.attributes[0].key)
            if rs.resource.attributes
            else (span.trace_id, span.span_id, span.name, "")
            for rs in parse_trace_request(body).resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        )

    for shard, body in routed_pb.shards.items():
        assert spans_of(routed_json.shards[shard]) == spans_of(body)


def test_a_trace_split_over_requests_and_scopes_goes_to_one_shard_every_time():
    rng = random.Random(5)
    trace_ids = [rng.randbytes(16) for _ in range(40)]
    for n in SHARD_COUNTS:
        seen: dict[bytes, set[int]] = {t: set() for t in trace_ids}
        for _ in range(20):
            request = ExportTraceServiceRequest()
            for _ in range(3):
                scope = request.resource_spans.add().scope_spans.add()
                for trace_id in rng.sample(trace_ids, 10):
                    scope.spans.add(trace_id=trace_id, span_id=rng.randbytes(8), name="s")
            for shard, body in route_traces(request.SerializeToString(), n).shards.items():
                for rs in parse_trace_request(body).resource_spans:
                    for ss in rs.scope_spans:
                        for span in ss.spans:
                            seen[span.trace_id].add(shard)
        assert all(len(shards) == 1 for shards in seen.values())
        if n > 1:
            # Spread over the workers, not piled on one.
            assert len({next(iter(s)) for s in seen.values()}) == n


def test_the_shard_function_is_the_same_in_another_process():
    keys = [bytes([i]) * 16 for i in range(32)] + [b"", b"\x07" * 17]
    here = [[shard_for(key, n) for key in keys] for n in SHARD_COUNTS]
    program = (
        "from mast_otel.collector.workers.route import shard_for\n"
        f"keys = {keys!r}\n"
        f"print([[shard_for(k, n) for k in keys] for n in {SHARD_COUNTS!r}])\n"
    )
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run(
            [sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == repr(here)
    # Spread: every shard gets some of 32 keys.
    assert set(here[-1]) == set(range(8))


def test_one_shard_is_the_request_itself_not_a_copy():
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.add(
        trace_id=b"\x01" * 16, span_id=b"\x02" * 8
    )
    data = request.SerializeToString()
    routed = route_traces(data, 1)
    assert routed.shards[0] is data
    assert routed.records == {0: 1}


def test_a_request_without_records_gives_no_shard():
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add()
    request.resource_spans.add()
    for n in (1, 4):
        assert route_traces(request.SerializeToString(), n).shards == {}
        assert route_traces(b"", n).shards == {}


def test_shard_counts_outside_the_bounds_are_refused():
    for bad in (0, -1, MAX_SHARDS + 1, True, 2.0):
        with pytest.raises(ValueError, match="number of shards"):
            route_traces(b"", bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="number of shards"):
            shard_for(b"x", bad)  # type: ignore[arg-type]


# --- logs -------------------------------------------------------------------------------------


@SETTINGS
@given(log_requests(), st.sampled_from(SHARD_COUNTS))
def test_log_records_land_where_the_normalizer_puts_their_run(request, n):
    data = request.SerializeToString()
    routed = route_logs(data, n)
    walked = route_logs(data, n, validate=False)
    assert (walked.shards, walked.records) == (routed.shards, routed.records)
    union: Counter[Any] = Counter()
    for shard, body in routed.shards.items():
        union += log_placements(body)
        for record in decode_logs(parse_logs_request(body)).records:
            # The run the Codex normalizer files this record under is this shard's.
            run_trace_id = codex.to_step(record).trace_id
            assert shard_for_hex(run_trace_id, n) == shard
    assert union == log_placements(data)


def test_log_only_conversations_and_records_with_no_key_are_routed_by_their_run():
    request = ExportLogsServiceRequest()
    resource = request.resource_logs.add()
    resource.resource.attributes.add(key="conversation.id").value.string_value = "from-resource"
    scope = resource.scope_logs.add()
    on_record = scope.log_records.add(event_name="codex.user_prompt")
    on_record.attributes.add(key="conversation.id").value.string_value = "c-9"
    scope.log_records.add(event_name="codex.user_prompt")  # falls back to the resource's
    bare = request.resource_logs.add().scope_logs.add().log_records.add(event_name="x")
    bare.trace_id = b"\x05" * 15  # not a trace id: blanked when decoded
    data = request.SerializeToString()
    expected = [
        shard_for(log_run_key(b"", "c-9"), 8),
        shard_for(log_run_key(b"", "from-resource"), 8),
        shard_for(log_run_key(b"", ""), 8),
    ]
    routed = route_logs(data, 8)
    got = []
    for shard, body in routed.shards.items():
        for record in decode_logs(parse_logs_request(body)).records:
            got.append((codex.to_step(record).conversation_id, shard))
    assert sorted(got) == sorted(zip(["c-9", "from-resource", ""], expected, strict=True))


# --- malformed input --------------------------------------------------------------------------


def _valid_request() -> bytes:
    rng = random.Random(3)
    request = ExportTraceServiceRequest()
    for _ in range(2):
        rs = request.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = "svc"
        ss = rs.scope_spans.add()
        for _ in range(6):
            span = ss.spans.add(trace_id=rng.randbytes(16), span_id=rng.randbytes(8), name="x")
            span.attributes.add(key="k").value.string_value = "v" * 200
    return request.SerializeToString()


@pytest.mark.parametrize("validate", [True, False])
def test_truncated_requests_are_refused_or_hold_only_whole_records(validate):
    data = _valid_request()
    refused = 0
    for cut in range(1, len(data)):
        prefix = data[:cut]
        try:
            routed = route_traces(prefix, 4, validate=validate)
        except RouteError as exc:
            assert "malformed OTLP/protobuf" in str(exc)
            refused += 1
            continue
        # A cut on a field boundary is itself a valid (smaller) request.
        for body in routed.shards.values():
            decode_spans(parse_trace_request(body))
    assert refused > len(data) * 0.9


@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize(
    "payload, problem",
    [
        (b"\x0f\x00", "wire type 7"),  # field 1, wire type 7
        (b"\x0b", "wire type 3"),  # a group: not OTLP
        (b"\x02\x00", "field number 0"),
        (b"\x0a\xff\xff\xff\xff\x0f", "runs past the end"),
        (b"\x0a\x05\x12\x10\x12\x01\x00", "runs past the end"),
        (b"\x0a" + b"\xff" * 11, "longer than 10 bytes"),
        (b"\x0a\x03\x12\x01\x12", "truncated"),
        (b"\x0a\x04\x12\x02\x12\x05", "runs past the end"),
        (b"\x0a\x06\x12\x04\x12\x82\x01\x00", "runs past the end"),
        (b"\x0a\x02\x12\x80", "truncated"),
    ],
)
def test_bad_tags_and_lengths_are_refused_clearly(payload, problem, validate):
    with pytest.raises(RouteError) as caught:
        route_traces(payload, 4, validate=validate)
    assert isinstance(caught.value, OtlpDecodeError)
    if not validate:  # the validating parse words its own message
        assert problem in str(caught.value)


def test_nesting_past_the_parsers_limit_is_refused_before_acknowledgement():
    # Written on the wire by hand: the protobuf runtime refuses to build it.
    value = _unknown_field(1, 2, b"bottom")  # AnyValue.string_value
    for _ in range(200):
        value = _unknown_field(5, 2, _unknown_field(1, 2, value))  # array_value.values
    attribute = _unknown_field(1, 2, b"deep") + _unknown_field(2, 2, value)
    span = PbSpan(trace_id=b"\x01" * 16, span_id=b"\x02" * 8).SerializeToString()
    span += _unknown_field(9, 2, attribute)  # Span.attributes
    data = _unknown_field(1, 2, _unknown_field(2, 2, _unknown_field(2, 2, span)))
    with pytest.raises(RouteError, match="malformed OTLP/protobuf"):
        route_traces(data, 4)
    # The wire walk alone does not descend into attributes: it routes the span whole, and a
    # worker's parse would refuse it; this is why receivers route with validation on.
    assert route_traces(data, 4, validate=False).total == 1


def test_invalid_json_is_refused_clearly():
    with pytest.raises(RouteError, match="OTLP/JSON"):
        route_request(b'{"resourceSpans": [', 2, "traces", "json")
    with pytest.raises(RouteError, match="hex"):
        route_request(
            b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}',
            2,
            "traces",
            "json",
        )


@pytest.mark.parametrize("validate", [True, False])
def test_damaged_bytes_never_escape_as_anything_but_a_route_error(validate):
    rng = random.Random(11)
    data = _valid_request()
    logs = ExportLogsServiceRequest()
    logs.resource_logs.add().scope_logs.add().log_records.add(body=AnyValue(string_value="x"))
    started = time.monotonic()
    for signal, seed in (("traces", data), ("logs", logs.SerializeToString())):
        for damaged in mutations(seed, rng, 1500):
            try:
                routed = route_request(damaged, 3, signal, validate=validate)  # type: ignore[arg-type]
            except RouteError:
                continue
            if validate:
                parse = parse_trace_request if signal == "traces" else parse_logs_request
                for body in routed.shards.values():
                    parse(body)
        for _ in range(500):
            with contextlib.suppress(RouteError):
                noise = rng.randbytes(rng.randint(0, 64))
                route_request(noise, 3, signal, validate=validate)  # type: ignore[arg-type]
    assert time.monotonic() - started < 60


def test_work_is_linear_in_the_bytes():
    """A megabyte of the smallest fields the walk can meet (one-byte unknown varints inside
    scopes) costs about what the same number of bytes in big spans does, times a constant:
    no field can make the walk go back."""
    scope = b"".join(b"\x28\x01" for _ in range(250_000))  # field 5 varint 1
    body = b"\x12" + bytes(_varint(len(scope))) + scope
    data = b"\x0a" + bytes(_varint(len(body))) + body
    started = time.thread_time()
    assert route_traces(data, 4, validate=False).total == 0
    small_fields = time.thread_time() - started
    twice = data * 2  # concatenated messages merge: twice the fields, still no records
    started = time.thread_time()
    route_traces(twice, 4, validate=False)
    assert time.thread_time() - started < small_fields * 4 + 0.5
