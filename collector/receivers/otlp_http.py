"""The OTLP/HTTP binding of an export request: media types, status bodies, decode, hand-over.

A body comes here read, counted against `max_body_bytes` and holding its bytes of the memory
budget. Protobuf or JSON (optionally gzip- or deflate-compressed, inflated within
`max_body_bytes` and `max_gzip_members`, so a small gzip bomb cannot allocate more), it is
counted and budgeted before anything is copied or parsed, decoded and handed to the consumer,
and answered in the request's encoding. Failures use the status codes OTLP senders act on: 400
(do not retry) with a google.rpc.Status body for malformed payloads, 503 with Retry-After when
the pipeline is full or the receivers' memory budget is taken, 413 for bodies over the limit.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import Literal

from google.protobuf import json_format
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2

from mast_otel.collector.consumer import RawRequest, Refused, TelemetryConsumer
from mast_otel.collector.otlp.decode import OtlpDecodeError, parse_logs_request, parse_trace_request
from mast_otel.collector.otlp.jsonpb import parse_logs_json, parse_trace_json
from mast_otel.collector.receivers.delivery import (
    ReceiverStats,
    Rejection,
    admit,
    check_room,
    deliver_logs,
    deliver_spans,
    logs_response,
    parse_protobuf,
    retry_after_seconds,
    trace_response,
)
from mast_otel.collector.receivers.http_wire import HttpError, Request, Response, plain
from mast_otel.collector.receivers.limits import (
    DECODERS,
    BodyError,
    MemoryBudget,
    RequestCost,
    inflate,
)

__all__ = [
    "ENCODINGS",
    "JSON",
    "MEDIA_TYPES",
    "PROTOBUF",
    "OtlpHttpExport",
    "error_response",
    "negotiate",
    "status_response",
]

# Logged under the receiver's name, as the receiver's own messages are.
log = logging.getLogger("mast_otel.collector.receivers.http_receiver")

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
MEDIA_TYPES = {
    "application/x-protobuf": PROTOBUF,
    "application/protobuf": PROTOBUF,
    "application/json": JSON,
}
ENCODINGS: dict[str, Literal["protobuf", "json"]] = {PROTOBUF: "protobuf", JSON: "json"}


def _encode(message: Message, media_type: str) -> bytes:
    if media_type == JSON:
        return json.dumps(json_format.MessageToDict(message), separators=(",", ":")).encode()
    return message.SerializeToString()


def _status_body(
    media_type: str, grpc_code: int, message: str, retry_after_s: float | None = None
) -> bytes:
    status = status_pb2.Status(code=grpc_code, message=message)
    if retry_after_s is not None:
        retry_delay = Duration()
        retry_delay.FromNanoseconds(round(retry_after_s * 1e9))
        status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=retry_delay))
    return _encode(status, media_type)


def status_response(
    media_type: str,
    http_status: int,
    grpc_code: int,
    message: str,
    *,
    headers: Sequence[tuple[str, str]] = (),
    retry_after_s: float | None = None,
) -> Response:
    """A failure answered with a google.rpc.Status body in `media_type`."""
    return Response(
        http_status,
        _status_body(media_type, grpc_code, message, retry_after_s),
        media_type,
        tuple(headers),
    )


def error_response(request: Request | None, exc: HttpError) -> Response:
    """`exc` answered in the request's encoding (protobuf when unknown or unparsed)."""
    media_type = PROTOBUF
    if request is not None:
        media_type = MEDIA_TYPES.get(
            (request.get("content-type") or "").split(";", 1)[0].strip().lower(),
            PROTOBUF,
        )
    return status_response(
        media_type,
        exc.status,
        exc.grpc_code,
        exc.message,
        headers=exc.headers,
        retry_after_s=exc.retry_after_s,
    )


def negotiate(request: Request) -> tuple[str, str] | Response:
    """The request's media type and content encoding, or the 415 refusing them."""
    content_type = request.get("content-type") or ""
    media_type = MEDIA_TYPES.get(content_type.split(";", 1)[0].strip().lower())
    if media_type is None:
        return plain(
            415,
            f"unsupported Content-Type {content_type!r}: "
            "use application/x-protobuf or application/json",
        )
    encoding = (request.get("content-encoding") or "identity").strip().lower()
    if encoding != "identity" and encoding not in DECODERS:
        return plain(415, f"unsupported Content-Encoding {encoding!r}: use gzip, deflate or none")
    return media_type, encoding


def _rejection(media_type: str, exc: Rejection) -> Response:
    if exc.retryable:
        seconds = retry_after_seconds(exc.retry_after_s)
        return status_response(
            media_type,
            503,
            code_pb2.UNAVAILABLE,
            exc.message,
            headers=(("Retry-After", str(seconds)),),
            retry_after_s=float(seconds),
        )
    return status_response(media_type, 413, code_pb2.RESOURCE_EXHAUSTED, exc.message)


def _refused(media_type: str, exc: Refused) -> Response:
    seconds = retry_after_seconds(exc.retry_after_s)
    return status_response(
        media_type,
        503,
        code_pb2.UNAVAILABLE,
        str(exc) or "pipeline is full",
        headers=(("Retry-After", str(seconds)),),
        retry_after_s=float(seconds),
    )


def _internal_error(media_type: str, stats: ReceiverStats) -> Response:
    log.exception("OTLP/HTTP export failed")
    stats.add("internal_errors")
    return status_response(
        media_type, 500, code_pb2.INTERNAL, "internal error while handling the export"
    )


class OtlpHttpExport:
    """Turns a read body into the consumer's call and the response to send, on the receiver's
    threads (so the consumer must be thread-safe)."""

    def __init__(
        self,
        consumer: TelemetryConsumer,
        *,
        max_body_bytes: int,
        max_value_depth: int,
        max_gzip_members: int,
        max_request_objects: int,
        budget: MemoryBudget,
        stats: ReceiverStats,
    ) -> None:
        self.consumer = consumer
        self.max_body_bytes = max_body_bytes
        self.max_value_depth = max_value_depth
        self.max_gzip_members = max_gzip_members
        self.max_request_objects = max_request_objects
        self.budget = budget
        self.stats = stats

    def prepare(
        self, body: bytearray, encoding: str, media_type: str, traces: bool
    ) -> tuple[bytes | bytearray, RequestCost] | Response:
        """On a thread for large requests: inflate, count and budget. Returns the body to
        decode and its cost (taken from the budget), or the response refusing it."""
        stats = self.stats
        signal: Literal["traces", "logs"] = "traces" if traces else "logs"
        started = time.thread_time()
        data: bytes | bytearray = body
        try:
            if encoding != "identity":
                try:
                    data = inflate(body, encoding, self.max_body_bytes, self.max_gzip_members)
                except BodyError as exc:
                    if "members" in str(exc):
                        stats.add("gzip_members_over_limit")
                    if exc.too_large:
                        return status_response(
                            media_type, 413, code_pb2.RESOURCE_EXHAUSTED, str(exc)
                        )
                    return status_response(media_type, 400, code_pb2.INVALID_ARGUMENT, str(exc))
            check_room(self.consumer, len(data), stats)
            # Counted and budgeted before anything is copied or parsed.
            cost = admit(
                data,
                signal,
                ENCODINGS[media_type],
                self.max_request_objects,
                self.budget,
                stats,
            )
            return data, cost
        except Rejection as exc:
            return _rejection(media_type, exc)
        except Refused as exc:
            return _refused(media_type, exc)
        except Exception:
            return _internal_error(media_type, stats)
        finally:
            stats.add_cpu(time.thread_time() - started)

    def decode_and_deliver(
        self, body: bytes | bytearray, cost: RequestCost, media_type: str, traces: bool
    ) -> Response:
        """On a worker thread: parse, decode and hand over a counted and budgeted request."""
        stats = self.stats
        signal: Literal["traces", "logs"] = "traces" if traces else "logs"
        started = time.thread_time()
        try:
            check_room(self.consumer, len(body), stats)
            data = bytes(body)
            del body
            response: Message
            if traces:
                if media_type == JSON:
                    trace_request = parse_trace_json(data)
                else:
                    trace_request, data = parse_protobuf(
                        data, cost, signal, self.max_value_depth, parse_trace_request
                    )
                raw = RawRequest(signal, ENCODINGS[media_type], data)
                response = trace_response(
                    deliver_spans(
                        self.consumer,
                        trace_request,
                        stats,
                        max_value_depth=self.max_value_depth,
                        raw=raw,
                    )
                )
            else:
                if media_type == JSON:
                    logs_request = parse_logs_json(data)
                else:
                    logs_request, data = parse_protobuf(
                        data, cost, signal, self.max_value_depth, parse_logs_request
                    )
                raw = RawRequest(signal, ENCODINGS[media_type], data)
                response = logs_response(
                    deliver_logs(
                        self.consumer,
                        logs_request,
                        stats,
                        max_value_depth=self.max_value_depth,
                        raw=raw,
                    )
                )
        except Rejection as exc:
            return _rejection(media_type, exc)
        except OtlpDecodeError as exc:
            stats.add("decode_errors")
            return status_response(media_type, 400, code_pb2.INVALID_ARGUMENT, str(exc))
        except Refused as exc:
            return _refused(media_type, exc)
        except Exception:
            return _internal_error(media_type, stats)
        finally:
            stats.add_cpu(time.thread_time() - started)
        return Response(200, _encode(response, media_type), media_type)
