"""Fuzzing harness for the receive path: hypothesis builds OTLP requests (spans and logs in every
dialect the collector reads, with hostile values: ids of every length, clocks at the limits,
deep nesting, huge and invalid text, too many attributes and events), and each one becomes many
payloads: its protobuf and OTLP/JSON encodings and byte-level mutations of both.

`Harness.feed` runs a payload through what a receiver does (parse, decode), then through the
pipeline (limits, redaction, normalization, windows, detectors) and the exporter's encoding
into Arrow batches. A payload may be refused as malformed (OtlpDecodeError, what receivers
answer with 400 / INVALID_ARGUMENT); anything else that raises, or any processing error the
pipeline counts, is a crash.

Used by tests/test_fuzz.py and scripts/fuzz.py (longer runs).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from mast_otel.collector.config import Config
from mast_otel.collector.otlp.decode import (
    OtlpDecodeError,
    decode_logs,
    decode_spans,
    parse_logs_request,
    parse_trace_request,
)
from mast_otel.collector.otlp.jsonpb import parse_logs_json, parse_trace_json
from mast_otel.collector.pipeline import Pipeline
from mast_otel.collector.store.arrow import (
    findings_table,
    logs_table,
    signatures_table,
    spans_table,
)
from mast_otel.collector.store.exporter import MemoryExporter

KEYS = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.system",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.agent.name",
    "gen_ai.conversation.id",
    "gen_ai.prompt.0.content",
    "gen_ai.completion.0.content",
    "gen_ai.completion.0.tool_calls.0.name",
    "openinference.span.kind",
    "input.value",
    "output.value",
    "tool.name",
    "tool.parameters",
    "llm.model_name",
    "llm.input_messages.0.message.content",
    "llm.token_count.prompt",
    "traceloop.span.kind",
    "traceloop.entity.input",
    "llm.request.type",
    "mast.task.read_only",
    "mast.task.allowed_tools",
    "mast.task.max_steps",
    "mast.run.outcome",
    "mast.run.score",
    "mast.run.end",
    "conversation.id",
    "event.name",
    "tool_name",
    "arguments",
    "output",
    "success",
    "http.request.header.authorization",
    "password",
    "service.name",
)
OPERATIONS = ("chat", "execute_tool", "invoke_agent", "text_completion", "", "CHAIN", "TOOL", "LLM")
EVENT_NAMES = (
    "codex.tool_result",
    "codex.user_prompt",
    "codex.tool_decision",
    "codex.sse_event",
    "codex.api_request",
    "gen_ai.user.message",
    "gen_ai.choice",
    "gen_ai.evaluation.result",
    "",
)
UINT64_MAX = 2**64 - 1
MUTATED_MAX_BYTES = 16 * 1024
JSON_MAX_BYTES = 64 * 1024
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TIMES = st.one_of(
    st.just(0),
    st.just(UINT64_MAX),
    st.just(2**63),
    st.integers(min_value=1_600_000_000_000_000_000, max_value=1_900_000_000_000_000_000),
    st.integers(min_value=0, max_value=UINT64_MAX),
)
SPECIAL_TEXT = (
    '{"command": "kubectl get pods -n shop"}',
    '[{"role": "user", "content": "fix it"}]',
    '[{"role": "assistant", "parts": [{"type": "tool_call", "name": "kubectl"}]}]',
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz",
    "postgres://admin:hunter2@db/x --token=sekrit",
    "-----BEGIN PRIVATE KEY-----" * 20,
    "{" * 50,
)


def _text(choice: int, small: str, special: str, char: str) -> str:
    if choice == 0:
        # Longer than the harness's value limit (4 KiB), in 1- to 4-byte characters.
        return char * 1_500
    if choice < 4:
        return special
    return small


TEXT = st.builds(
    _text,
    st.integers(0, 24),
    st.text(max_size=30),
    st.sampled_from(SPECIAL_TEXT + OPERATIONS),
    st.sampled_from("xé漢🙂"),
)


def any_value(depth: int) -> st.SearchStrategy[AnyValue]:
    scalar = st.one_of(
        TEXT.map(lambda v: AnyValue(string_value=v)),
        INT64.map(lambda v: AnyValue(int_value=v)),
        st.floats(allow_nan=True, allow_infinity=True).map(lambda v: AnyValue(double_value=v)),
        st.booleans().map(lambda v: AnyValue(bool_value=v)),
        st.binary(max_size=40).map(lambda v: AnyValue(bytes_value=v)),
        st.just(AnyValue()),
    )
    if depth <= 0:
        return scalar

    def array(items: list[AnyValue]) -> AnyValue:
        value = AnyValue()
        value.array_value.values.extend(items)
        return value

    def kvlist(items: list[tuple[str, AnyValue]]) -> AnyValue:
        value = AnyValue()
        for key, item in items:
            value.kvlist_value.values.add(key=key, value=item)
        return value

    inner = any_value(depth - 1)
    return st.one_of(
        scalar,
        st.lists(inner, max_size=3).map(array),
        st.lists(st.tuples(st.sampled_from(KEYS) | st.text(max_size=8), inner), max_size=3).map(
            kvlist
        ),
    )


@st.composite
def deep_value(draw: Any) -> AnyValue:
    """Nested far past the decoder's depth limit."""
    levels = draw(st.integers(min_value=30, max_value=44))
    value = AnyValue(string_value="bottom")
    for _ in range(levels):
        outer = AnyValue()
        outer.array_value.values.append(value)
        value = outer
    return value


@st.composite
def attributes(draw: Any) -> list[KeyValue]:
    keys = st.sampled_from(KEYS) | st.text(max_size=20)
    out = []
    for _ in range(draw(st.integers(0, 4))):
        key = draw(keys)
        if key in ("gen_ai.operation.name", "openinference.span.kind", "traceloop.span.kind"):
            value = AnyValue(string_value=draw(st.sampled_from(OPERATIONS)))
        else:
            value = draw(st.one_of(any_value(2), deep_value()))
        out.append(KeyValue(key=key, value=value))
    # Sometimes far more than the limit allows (copies, so drawing stays cheap).
    times = draw(st.sampled_from((1, 1, 1, 40)))
    if times > 1 and out and sum(kv.ByteSize() for kv in out) < 512:
        out = [
            KeyValue(key=f"{kv.key}.{i}" if i else kv.key, value=kv.value)
            for i in range(times)
            for kv in out
        ]
    return out


def repeat(items: list[Any], times: int) -> list[Any]:
    return [item for _ in range(times) for item in items]


ID_SIZES = {"trace": (16, 16, 16, 0, 8, 15, 17, 32), "span": (8, 8, 8, 0, 4, 7, 9, 16)}


@st.composite
def trace_request(draw: Any) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    trace_ids = [draw(st.binary(min_size=16, max_size=16)) for _ in range(draw(st.integers(1, 3)))]
    for _ in range(draw(st.integers(1, 2))):
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(draw(attributes()))
        scope = resource_spans.scope_spans.add()
        scope.scope.name = draw(st.text(max_size=10))
        for _ in range(draw(st.integers(0, 4))):
            span = scope.spans.add()
            size = draw(st.sampled_from(ID_SIZES["trace"]))
            span.trace_id = (
                draw(st.sampled_from(trace_ids))
                if size == 16
                else draw(st.binary(min_size=size, max_size=size))
            )
            span.span_id = (
                draw(st.binary(min_size=8, max_size=8))
                if draw(st.booleans())
                else draw(st.sampled_from((b"\x01" * 8, b"\x02" * 8, b"", b"\x03" * 9)))
            )
            span.parent_span_id = draw(st.sampled_from((b"", b"\x01" * 8, b"\x05" * 8, b"\x07")))
            span.name = draw(TEXT)
            span.kind = draw(st.integers(0, 9))
            span.start_time_unix_nano = draw(TIMES)
            span.end_time_unix_nano = draw(TIMES)
            span.attributes.extend(draw(attributes()))
            span.status.code = draw(st.integers(0, 4))
            span.status.message = draw(st.text(max_size=20))
            events = []
            for _ in range(draw(st.integers(0, 2))):
                event = span.events.add()
                event.name = draw(st.sampled_from(EVENT_NAMES))
                event.time_unix_nano = draw(TIMES)
                event.attributes.extend(draw(attributes()) if draw(st.booleans()) else [])
                events.append(event)
            # Sometimes more events and links than the limits allow.
            span.events.extend(repeat(events, draw(st.sampled_from((0, 0, 0, 70)))))
            if draw(st.booleans()):
                link = span.links.add()
                link.trace_id = draw(st.binary(max_size=17))
                link.span_id = draw(st.binary(max_size=9))
                span.links.extend(repeat([link], draw(st.sampled_from((0, 0, 140)))))
    return request


@st.composite
def logs_request(draw: Any) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    resource_logs.resource.attributes.extend(draw(attributes()))
    scope = resource_logs.scope_logs.add()
    for _ in range(draw(st.integers(0, 4))):
        record = scope.log_records.add()
        record.time_unix_nano = draw(TIMES)
        record.observed_time_unix_nano = draw(TIMES)
        record.severity_number = draw(st.integers(0, 30))
        record.event_name = draw(st.sampled_from(EVENT_NAMES))
        record.trace_id = draw(st.binary(max_size=17))
        record.span_id = draw(st.binary(max_size=9))
        record.body.CopyFrom(draw(any_value(2)))
        record.attributes.extend(draw(attributes()))
        conversation = record.attributes.add()
        conversation.key = "conversation.id"
        conversation.value.string_value = draw(st.sampled_from(("c-1", "c-2", "")))
    return request


def to_json(request: ExportTraceServiceRequest | ExportLogsServiceRequest) -> bytes:
    """OTLP/JSON as senders write it: ids in hex (json_format writes base64)."""
    doc = json_format.MessageToDict(request)

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                    node[key] = base64.b64decode(value).hex()
                else:
                    fix(value)
        elif isinstance(node, list):
            for item in node:
                fix(item)

    fix(doc)
    return json.dumps(doc).encode()


def mutations(data: bytes, rng: random.Random, count: int) -> Iterator[bytes]:
    """Byte-level damage: flipped bytes, cuts, insertions, repeats, invalid UTF-8."""
    for _ in range(count):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            choice = rng.randrange(6)
            pos = rng.randrange(len(buf) + 1)
            if choice == 0 and buf:
                buf[min(pos, len(buf) - 1)] = rng.randrange(256)
            elif choice == 1:
                del buf[pos:]
            elif choice == 2:
                buf[pos:pos] = rng.randbytes(rng.randint(1, 8))
            elif choice == 3 and buf:
                start = rng.randrange(len(buf))
                buf[pos:pos] = buf[start : start + rng.randint(1, 32)]
            elif choice == 4:
                buf[pos:pos] = rng.choice((b"\xff\xfe", b"\xc3(", b"\xed\xa0\x80", b"\\ud800"))
            elif choice == 5 and buf:
                del buf[pos : pos + rng.randint(1, 8)]
        yield bytes(buf)


def fuzz_config() -> Config:
    """Small limits, so generated values cross them often."""
    config = Config()
    return dataclasses.replace(
        config,
        limits=dataclasses.replace(config.limits, max_attribute_value_bytes=4096),
        pipeline=dataclasses.replace(config.pipeline, max_step_text=2048, workers=1),
    )


@dataclass
class Harness:
    """Runs payloads through decode → pipeline → Arrow encoding, counting outcomes."""

    config: Config = field(default_factory=lambda: fuzz_config())
    payloads: int = 0
    refused: int = 0
    decoded: int = 0
    records: int = 0

    def __post_init__(self) -> None:
        self.exporter = MemoryExporter()
        self.pipeline = Pipeline(self.config, self.exporter)
        self._now = 0.0

    def feed(self, payload: bytes, signal: str, encoding: str) -> None:
        self.payloads += 1
        depth = self.config.receivers.max_value_depth
        try:
            if signal == "traces":
                request: Any = (
                    parse_trace_request(payload)
                    if encoding == "protobuf"
                    else parse_trace_json(payload)
                )
                spans = decode_spans(request, max_value_depth=depth).records
                self._now += 0.05
                self.pipeline.process_spans(spans, now=self._now)
                self.records += len(spans)
            else:
                request = (
                    parse_logs_request(payload)
                    if encoding == "protobuf"
                    else parse_logs_json(payload)
                )
                logs = decode_logs(request, max_value_depth=depth).records
                self._now += 0.05
                self.pipeline.process_logs(logs, now=self._now)
                self.records += len(logs)
        except OtlpDecodeError:
            self.refused += 1
            return
        self.decoded += 1
        if self.decoded % 50 == 0:
            self.flush()
        errors = self.pipeline.stats.processing_errors
        assert errors == 0, f"the pipeline failed on a payload ({errors} errors)"

    def flush(self) -> None:
        """Close every run (past grace and idle), and encode what the exporter would write:
        strings, maps and timestamps must all fit the store's columns."""
        self._now += 120
        self.pipeline.tick(self._now)
        exporter = self.exporter
        if exporter.spans:
            spans_table(exporter.spans)
        if exporter.logs:
            logs_table(exporter.logs)
        if exporter.findings:
            findings_table(exporter.findings)
        if exporter.signatures:
            signatures_table(exporter.signatures)
        exporter.spans.clear()
        exporter.logs.clear()
        exporter.findings.clear()
        exporter.signatures.clear()
        assert self.pipeline.stats.processing_errors == 0

    def example(
        self, request: ExportTraceServiceRequest | ExportLogsServiceRequest, mutants: int
    ) -> None:
        """One generated request: its two encodings and `mutants` damaged copies of them
        (seeded by the request, so a failing example replays exactly)."""
        signal = "traces" if isinstance(request, ExportTraceServiceRequest) else "logs"
        binary = request.SerializeToString()
        rng = random.Random(zlib.crc32(binary))
        self.feed(binary, signal, "protobuf")
        # OTLP/JSON decoding is pure Python and slow: large requests go as protobuf only.
        text = to_json(request) if len(binary) <= JSON_MAX_BYTES else b""
        if text:
            self.feed(text, signal, "json")
        # Damage small requests only: mutants of a large one cost far more and find the same.
        sources = [
            (data, encoding)
            for data, encoding in ((binary, "protobuf"), (text, "json"))
            if len(data) <= MUTATED_MAX_BYTES
        ]
        for i, (data, encoding) in enumerate(sources):
            share = mutants // len(sources) + (1 if i < mutants % len(sources) else 0)
            for mutant in mutations(data, rng, share):
                self.feed(mutant, signal, encoding)


def requests() -> st.SearchStrategy[ExportTraceServiceRequest | ExportLogsServiceRequest]:
    return st.one_of(trace_request(), trace_request(), logs_request())
