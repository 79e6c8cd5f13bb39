"""What both receivers do with a decoded request: hand it to the pipeline, count the result,
and word the OTLP response (success, partial success, or a retryable refusal)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from mast_otel.collector.consumer import (
    Accepted,
    BatchTooLarge,
    RawRequest,
    Refused,
    TelemetryConsumer,
)
from mast_otel.collector.otlp.decode import (
    DEFAULT_MAX_VALUE_DEPTH,
    TRUNCATED_VALUE,
    OtlpDecodeError,
    decode_logs,
    decode_spans,
)
from mast_otel.collector.receivers.deep_values import cut_deep_values, needs_cut
from mast_otel.collector.receivers.limits import (
    BYTE_COST,
    OBJECT_COST,
    MemoryBudget,
    RequestCost,
    TooLarge,
    request_cost,
)


class ReceiverStats:
    """Thread-safe counters for a receiver, read as a snapshot by health and self-metrics."""

    KEYS = (
        "trace_requests",
        "log_requests",
        "spans_accepted",
        "spans_rejected",
        "spans_refused",
        "logs_accepted",
        "logs_rejected",
        "logs_refused",
        "decode_errors",
        "internal_errors",
        "requests_refused",
        "unauthenticated",
        # Bounds hit (each a limit of its own; see the receivers' configuration).
        "too_many_objects",
        "too_many_items",
        "memory_budget_full",
        "rpcs_over_limit",
        "rpcs_over_peer_limit",
        "receive_timeouts",
        "connections_over_limit",
        "connections_over_peer_limit",
        "requests_over_limit",
        "header_timeouts",
        "body_timeouts",
        "idle_timeouts",
        "headers_too_large",
        "gzip_members_over_limit",
    )
    # Bounds hit, as above, for the self-metrics.
    LIMIT_KEYS = KEYS[KEYS.index("too_many_objects") :]

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(self.KEYS, 0)
        self._cpu_seconds = 0.0

    def add(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + n

    def add_cpu(self, seconds: float) -> None:
        """CPU time a request thread spent parsing, decoding and handing a request over (the
        pipeline's write-ahead included)."""
        with self._lock:
            self._cpu_seconds += seconds

    @property
    def cpu_seconds(self) -> float:
        with self._lock:
            return self._cpu_seconds

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


@dataclass(frozen=True, slots=True)
class ExportOutcome:
    """What to tell the sender: how many items were dropped (decode + pipeline) and why."""

    rejected: int = 0
    message: str = ""


def _merge(
    result_rejected: int, result_reason: str, accepted: Accepted, noun: str
) -> ExportOutcome:
    messages = []
    if result_rejected:
        messages.append(f"{result_rejected} {noun} rejected: {result_reason}")
    if accepted.rejected or accepted.message:
        messages.append(accepted.message or f"{accepted.rejected} {noun} rejected by the pipeline")
    return ExportOutcome(rejected=result_rejected + accepted.rejected, message="; ".join(messages))


class Rejection(Exception):
    """A request refused by a receiver bound before it is decoded: `retryable` when it would
    fit later (503 / UNAVAILABLE with a retry delay), not when it never can (413 /
    INVALID_ARGUMENT)."""

    def __init__(self, message: str, *, retryable: bool, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.retry_after_s = retry_after_s


def admit_by_size(size: int, max_objects: int, budget: MemoryBudget) -> RequestCost | None:
    """The cost of a protobuf body of `size` bytes bounded by its size alone (every object
    takes two bytes on the wire at least), taken from `budget` when it fits; None when the
    bound passes `max_objects` or the budget, and the body's objects must be counted. The
    common case (a sender's batch of a few hundred spans) fits, and is never walked."""
    bound = size // 2 + 1
    if bound > max_objects:
        return None
    worst = RequestCost(bound, bound * OBJECT_COST + size * BYTE_COST)
    return worst if budget.try_take(worst.bytes) else None


def admit(
    body: bytes | bytearray,
    signal: str,
    encoding: str,
    max_objects: int,
    budget: MemoryBudget,
    stats: ReceiverStats,
) -> RequestCost:
    """Count what `body` decodes into and take the memory it needs from `budget`, before any
    decoding. Returns the cost, whose `bytes` were taken (give them back once the request is
    handed over); raises `Rejection` (counted) when the request is too large ever to fit, or
    does not fit now."""
    if encoding == "protobuf":
        worst = admit_by_size(len(body), max_objects, budget)
        if worst is not None:
            return worst
    try:
        cost = request_cost(body, signal, encoding, max_objects)
    except TooLarge as exc:
        stats.add("too_many_objects")
        stats.add("requests_refused")
        raise Rejection(str(exc), retryable=False) from exc
    if cost.bytes > budget.total:
        stats.add("too_many_objects")
        stats.add("requests_refused")
        raise Rejection(
            f"decoding the request would take about {cost.bytes} bytes, more than the "
            f"receivers' whole memory budget ({budget.total} bytes, "
            "receivers.memory_budget_bytes): send smaller batches",
            retryable=False,
        )
    if not budget.try_take(cost.bytes):
        stats.add("memory_budget_full")
        stats.add("requests_refused")
        raise Rejection(
            "the receivers' memory budget is taken by requests in progress "
            "(receivers.memory_budget_bytes): retry later",
            retryable=True,
        )
    return cost


Parsed = TypeVar("Parsed")


def parse_protobuf(
    data: bytes,
    cost: RequestCost,
    signal: str,
    max_value_depth: int,
    parse: Callable[[bytes], Parsed],
) -> tuple[Parsed, bytes]:
    """Parse a protobuf body, with values nested past `max_value_depth` or past what the
    parser takes cut to the truncation marker first, so the rest of the request is kept
    instead of refused. Returns the request and the body it was parsed from (the one to
    spool). The cut is made when the body's walk saw deep nesting, or when the parser
    refused a body that was not walked and cutting changes it."""
    if needs_cut(cost, max_value_depth):
        data = cut_deep_values(data, signal, max_value_depth, TRUNCATED_VALUE)
        return parse(data), data
    try:
        return parse(data), data
    except OtlpDecodeError:
        cut = cut_deep_values(data, signal, max_value_depth, TRUNCATED_VALUE)
        if cut is data:
            raise
        return parse(cut), cut


def check_room(consumer: TelemetryConsumer, request_bytes: int, stats: ReceiverStats) -> None:
    """Ask a consumer that can tell (the pipeline's `check_room`) whether it has room, before
    spending anything on parsing: under overload a refusal then costs next to nothing.
    Raises `Refused` (counted)."""
    check = getattr(consumer, "check_room", None)
    if check is None:
        return
    try:
        check(request_bytes)
    except Refused:
        stats.add("requests_refused")
        raise


def deliver_spans(
    consumer: TelemetryConsumer,
    request: ExportTraceServiceRequest,
    stats: ReceiverStats,
    *,
    max_value_depth: int = DEFAULT_MAX_VALUE_DEPTH,
    raw: RawRequest | None = None,
) -> ExportOutcome:
    """Decode a trace request and hand it to the consumer, counting the result. `raw` is the
    body it was parsed from, which a durable consumer writes ahead before acknowledging.

    Raises `Refused` (after counting) so each transport can map it to its retryable status.
    """
    stats.add("trace_requests")
    raw = _redacted(consumer, request, raw)
    if raw is not None and hasattr(consumer, "consume_request"):
        return _route(consumer, request, raw, stats, "spans")
    result = decode_spans(request, max_value_depth=max_value_depth)
    if not result.records:
        accepted = Accepted()
    else:
        try:
            accepted = consumer.consume_spans(result.records, raw)
        except BatchTooLarge as exc:
            stats.add("too_many_items")
            stats.add("requests_refused")
            raise Rejection(str(exc), retryable=False) from exc
        except Refused:
            stats.add("requests_refused")
            stats.add("spans_refused", len(result.records) + result.rejected)
            raise
    outcome = _merge(result.rejected, result.reason, accepted, "spans")
    stats.add("spans_accepted", max(0, len(result.records) - accepted.rejected))
    stats.add("spans_rejected", outcome.rejected)
    return outcome


def deliver_logs(
    consumer: TelemetryConsumer,
    request: ExportLogsServiceRequest,
    stats: ReceiverStats,
    *,
    max_value_depth: int = DEFAULT_MAX_VALUE_DEPTH,
    raw: RawRequest | None = None,
) -> ExportOutcome:
    """Decode a logs request and hand it to the consumer; see `deliver_spans`."""
    stats.add("log_requests")
    raw = _redacted(consumer, request, raw)
    if raw is not None and hasattr(consumer, "consume_request"):
        return _route(consumer, request, raw, stats, "logs")
    result = decode_logs(request, max_value_depth=max_value_depth)
    if not result.records:
        accepted = Accepted()
    else:
        try:
            accepted = consumer.consume_logs(result.records, raw)
        except BatchTooLarge as exc:
            stats.add("too_many_items")
            stats.add("requests_refused")
            raise Rejection(str(exc), retryable=False) from exc
        except Refused:
            stats.add("requests_refused")
            stats.add("logs_refused", len(result.records))
            raise
    outcome = _merge(result.rejected, result.reason, accepted, "log records")
    stats.add("logs_accepted", max(0, len(result.records) - accepted.rejected))
    stats.add("logs_rejected", outcome.rejected)
    return outcome


def _redacted(
    consumer: TelemetryConsumer,
    request: ExportTraceServiceRequest | ExportLogsServiceRequest,
    raw: RawRequest | None,
) -> RawRequest | None:
    """The request redacted in place before anything writes it ahead (a durable consumer's
    `request_redactor`), and the body to spool: the request serialized again when the
    redaction changed it, else the body as received."""
    redactor = getattr(consumer, "request_redactor", None)
    if raw is None or redactor is None or not redactor.active:
        return raw
    if not redactor.redact(request, raw.data, raw.encoding):
        return raw
    return RawRequest(raw.signal, "protobuf", request.SerializeToString())


def _route(
    consumer: TelemetryConsumer,
    request: ExportTraceServiceRequest | ExportLogsServiceRequest,
    raw: RawRequest,
    stats: ReceiverStats,
    noun: str,
) -> ExportOutcome:
    """Hand a parsed request whole to a consumer that routes it to worker processes (which
    decode it there), counting as `deliver_spans` does."""
    try:
        total, rejected, reason = consumer.consume_request(request, raw)  # type: ignore[attr-defined]
    except BatchTooLarge as exc:
        stats.add("too_many_items")
        stats.add("requests_refused")
        raise Rejection(str(exc), retryable=False) from exc
    except Refused:
        stats.add("requests_refused")
        stats.add(f"{noun}_refused", _count(request))
        raise
    stats.add(f"{noun}_accepted", total - rejected)
    stats.add(f"{noun}_rejected", rejected)
    label = "spans" if noun == "spans" else "log records"
    return ExportOutcome(rejected, f"{rejected} {label} rejected: {reason}" if rejected else "")


def _count(request: ExportTraceServiceRequest | ExportLogsServiceRequest) -> int:
    if isinstance(request, ExportTraceServiceRequest):
        return sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
    return sum(len(s.log_records) for r in request.resource_logs for s in r.scope_logs)


def trace_response(outcome: ExportOutcome) -> ExportTraceServiceResponse:
    """The OTLP response: empty on full success, `partial_success` when anything was dropped."""
    response = ExportTraceServiceResponse()
    if outcome.rejected or outcome.message:
        response.partial_success.rejected_spans = outcome.rejected
        response.partial_success.error_message = outcome.message
    return response


def logs_response(outcome: ExportOutcome) -> ExportLogsServiceResponse:
    """The OTLP response for logs; see `trace_response`."""
    response = ExportLogsServiceResponse()
    if outcome.rejected or outcome.message:
        response.partial_success.rejected_log_records = outcome.rejected
        response.partial_success.error_message = outcome.message
    return response


def retry_after_seconds(retry_after_s: float) -> int:
    """Whole seconds for an HTTP Retry-After header: rounded up, never below 1, so a client
    never retries immediately in a tight loop."""
    if not math.isfinite(retry_after_s):
        return 1
    return max(1, math.ceil(retry_after_s))
