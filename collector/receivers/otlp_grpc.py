"""The OTLP/gRPC binding of an export request: status mapping, decode and hand-over.

Status mapping follows the OTLP specification: full success → empty response; some items
dropped → `partial_success`; pipeline full (`Refused`) → UNAVAILABLE with a
`google.rpc.RetryInfo` in the status details; undecodable payload → INVALID_ARGUMENT.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from mast_otel.collector.consumer import RawRequest, Refused, TelemetryConsumer
from mast_otel.collector.otlp.decode import OtlpDecodeError, parse_logs_request, parse_trace_request
from mast_otel.collector.receivers.delivery import (
    ExportOutcome,
    ReceiverStats,
    Rejection,
    admit,
    check_room,
    deliver_logs,
    deliver_spans,
    logs_response,
    parse_protobuf,
    trace_response,
)
from mast_otel.collector.receivers.limits import MemoryBudget, RequestCost

__all__ = ["Abort", "OtlpGrpcExport", "retry_trailing_metadata"]

# Logged under the receiver's name, as the receiver's own messages are.
log = logging.getLogger("mast_otel.collector.receivers.grpc_receiver")

Req = TypeVar("Req", bound=Message)


def retry_trailing_metadata(message: str, retry_after_s: float) -> tuple[tuple[str, bytes], ...]:
    """Trailing metadata for a retryable refusal.

    `grpc-status-details-bin` carries a google.rpc.Status with RetryInfo, the standard form
    (what grpcio-status would build). The OpenTelemetry Python exporter instead reads a bare
    RetryInfo from `google.rpc.retryinfo-bin`, so that is sent as well.
    """
    delay = retry_after_s if math.isfinite(retry_after_s) else 1.0
    retry_delay = Duration()
    retry_delay.FromNanoseconds(round(max(0.0, delay) * 1e9))
    retry = error_details_pb2.RetryInfo(retry_delay=retry_delay)
    status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message=message)
    status.details.add().Pack(retry)
    return (
        ("grpc-status-details-bin", status.SerializeToString()),
        ("google.rpc.retryinfo-bin", retry.SerializeToString()),
    )


class Abort(Exception):
    """Ends an RPC with `code` (raised on a worker thread, turned into an abort on the loop)."""

    def __init__(
        self, code: grpc.StatusCode, message: str, trailing: Sequence[tuple[str, bytes]] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.trailing = tuple(trailing)


class OtlpGrpcExport:
    """Counts, budgets, decodes and hands over one export request, on the receiver's worker
    threads (so the consumer must be thread-safe); failures are raised as `Abort`."""

    def __init__(
        self,
        consumer: TelemetryConsumer,
        *,
        max_value_depth: int,
        max_request_objects: int,
        budget: MemoryBudget,
        stats: ReceiverStats,
    ) -> None:
        self.consumer = consumer
        self.max_value_depth = max_value_depth
        self.max_request_objects = max_request_objects
        self.budget = budget
        self.stats = stats

    def work(
        self,
        data: bytes,
        signal: str,
        parse: Callable[[bytes], Req],
        deliver: Callable[[Req, bytes], ExportOutcome],
        cost: RequestCost | None,
    ) -> ExportOutcome:
        """On a worker thread: count and budget (unless `cost` was taken already), parse,
        decode and hand over one request."""
        started = time.thread_time()
        taken = cost.bytes if cost is not None else 0
        try:
            check_room(self.consumer, len(data), self.stats)
            if cost is None:
                cost = admit(
                    data,
                    signal,
                    "protobuf",
                    self.max_request_objects,
                    self.budget,
                    self.stats,
                )
                taken = cost.bytes
            request, data = parse_protobuf(data, cost, signal, self.max_value_depth, parse)
            return deliver(request, data)
        except Rejection as exc:
            raise Abort(
                grpc.StatusCode.UNAVAILABLE if exc.retryable else grpc.StatusCode.INVALID_ARGUMENT,
                exc.message,
                retry_trailing_metadata(exc.message, exc.retry_after_s) if exc.retryable else (),
            ) from exc
        except OtlpDecodeError as exc:
            self.stats.add("decode_errors")
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from exc
        except Refused as exc:
            message = str(exc) or "pipeline is full"
            raise Abort(
                grpc.StatusCode.UNAVAILABLE,
                message,
                retry_trailing_metadata(message, exc.retry_after_s),
            ) from exc
        except Exception as exc:
            log.exception("OTLP/gRPC export failed")
            self.stats.add("internal_errors")
            raise Abort(
                grpc.StatusCode.INTERNAL, "internal error while handling the export"
            ) from exc
        finally:
            if taken:
                self.budget.give_back(taken)
            self.stats.add_cpu(time.thread_time() - started)

    def traces(
        self, data: bytes, cost: RequestCost | None
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        outcome = self.work(
            data,
            "traces",
            parse_trace_request,
            lambda request, body: deliver_spans(
                self.consumer,
                request,
                self.stats,
                max_value_depth=self.max_value_depth,
                raw=RawRequest("traces", "protobuf", body),
            ),
            cost,
        )
        return trace_response(outcome)

    def logs(
        self, data: bytes, cost: RequestCost | None
    ) -> logs_service_pb2.ExportLogsServiceResponse:
        outcome = self.work(
            data,
            "logs",
            parse_logs_request,
            lambda request, body: deliver_logs(
                self.consumer,
                request,
                self.stats,
                max_value_depth=self.max_value_depth,
                raw=RawRequest("logs", "protobuf", body),
            ),
            cost,
        )
        return logs_response(outcome)
