"""OTLP/gRPC receiver: TraceService/Export and LogsService/Export.

The methods are registered with raw-bytes request handling instead of the generated
servicer's deserializer: grpcio reports a failed deserialization as a bare INTERNAL error,
while OTLP wants INVALID_ARGUMENT (not retryable) with a message the sender can act on.
Method names come from the generated descriptors, so the service stays wire-identical.

Status mapping follows the OTLP specification: full success → empty response; some items
dropped → `partial_success`; pipeline full (`Refused`) → UNAVAILABLE with a
`google.rpc.RetryInfo` in the status details; undecodable payload → INVALID_ARGUMENT.
gzip request compression is handled by grpcio itself.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from typing import TypeVar

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from collector.consumer import RawRequest, Refused, TelemetryConsumer
from collector.otlp.decode import (
    DEFAULT_MAX_VALUE_DEPTH,
    OtlpDecodeError,
    parse_logs_request,
    parse_trace_request,
)
from collector.receivers.delivery import (
    ExportOutcome,
    ReceiverStats,
    check_room,
    deliver_logs,
    deliver_spans,
    logs_response,
    trace_response,
)
from collector.security import BearerTokenInterceptor

__all__ = ["DEFAULT_GRPC_MAX_MESSAGE_BYTES", "GrpcReceiver", "retry_trailing_metadata"]

log = logging.getLogger(__name__)

DEFAULT_GRPC_MAX_MESSAGE_BYTES = 16 * 1024 * 1024

_TRACE_SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name
_LOGS_SERVICE = logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name

Req = TypeVar("Req", bound=Message)


def _grpc_target(endpoint: str) -> str:
    """grpcio needs a host; an empty one (":4317") means every interface, as in the
    Collector's configuration."""
    if endpoint.startswith(":"):
        return "0.0.0.0" + endpoint
    return endpoint


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


class GrpcReceiver:
    """An OTLP/gRPC server feeding a `TelemetryConsumer`.

    The consumer is called on the server's worker threads (`max_workers` of them), so it must
    be thread-safe. `max_message_bytes` bounds the (decompressed) request size; larger
    requests get RESOURCE_EXHAUSTED from grpcio before any decoding happens.
    """

    def __init__(
        self,
        consumer: TelemetryConsumer,
        endpoint: str = "127.0.0.1:4317",
        max_message_bytes: int = DEFAULT_GRPC_MAX_MESSAGE_BYTES,
        max_workers: int = 4,
        *,
        max_value_depth: int = DEFAULT_MAX_VALUE_DEPTH,
        credentials: grpc.ServerCredentials | None = None,
        auth_token: str | None = None,
    ) -> None:
        if max_message_bytes <= 0:
            raise ValueError("max_message_bytes must be positive")
        if max_workers <= 0:
            raise ValueError("max_workers must be positive")
        self._consumer = consumer
        self._endpoint = endpoint
        self._max_message_bytes = max_message_bytes
        self._max_workers = max_workers
        self._max_value_depth = max_value_depth
        self._credentials = credentials
        self._auth_token = auth_token
        self._stats = ReceiverStats()
        self._lock = threading.Lock()
        self._server: grpc.Server | None = None
        self._executor: futures.ThreadPoolExecutor | None = None
        self._port = 0

    @property
    def port(self) -> int:
        """The bound TCP port (useful when the endpoint asked for port 0)."""
        if not self._port:
            raise RuntimeError("GrpcReceiver is not started")
        return self._port

    @property
    def stats(self) -> dict[str, int]:
        """A snapshot of the request and item counters."""
        return self._stats.snapshot()

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds request threads spent parsing, decoding and handing requests over."""
        return self._stats.cpu_seconds

    def start(self) -> None:
        """Bind and start serving; raises RuntimeError when the endpoint cannot be bound."""
        with self._lock:
            if self._server is not None:
                raise RuntimeError("GrpcReceiver already started")
            executor = futures.ThreadPoolExecutor(
                max_workers=self._max_workers, thread_name_prefix="otlp-grpc"
            )
            interceptors = (
                [
                    BearerTokenInterceptor(
                        self._auth_token, lambda: self._stats.add("unauthenticated")
                    )
                ]
                if self._auth_token
                else []
            )
            server = grpc.server(
                executor,
                interceptors=interceptors,
                options=[
                    ("grpc.max_receive_message_length", self._max_message_bytes),
                    # Without this grpcio lets a second process bind the same port silently.
                    ("grpc.so_reuseport", 0),
                ],
            )
            server.add_generic_rpc_handlers(
                (
                    grpc.method_handlers_generic_handler(
                        _TRACE_SERVICE,
                        {"Export": self._handler(self._export_traces)},
                    ),
                    grpc.method_handlers_generic_handler(
                        _LOGS_SERVICE,
                        {"Export": self._handler(self._export_logs)},
                    ),
                )
            )
            target = _grpc_target(self._endpoint)
            try:
                if self._credentials is not None:
                    port = server.add_secure_port(target, self._credentials)
                else:
                    port = server.add_insecure_port(target)
            except RuntimeError as exc:
                executor.shutdown(wait=False)
                raise RuntimeError(f"cannot bind OTLP/gRPC receiver to {target}: {exc}") from exc
            if port == 0:  # older grpcio reports failure this way instead of raising
                executor.shutdown(wait=False)
                raise RuntimeError(f"cannot bind OTLP/gRPC receiver to {target}")
            server.start()
            self._server = server
            self._executor = executor
            self._port = port
            log.info(
                "OTLP/gRPC receiver listening on %s (port %d%s%s)",
                target,
                port,
                ", TLS" if self._credentials is not None else "",
                ", bearer token required" if self._auth_token else "",
            )

    def shutdown(self, grace_s: float = 5.0) -> None:
        """Stop accepting RPCs and give in-flight ones up to `grace_s` seconds to finish."""
        with self._lock:
            server, executor = self._server, self._executor
            self._server = None
            self._executor = None
        if server is None:
            return
        server.stop(grace_s).wait()
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    @staticmethod
    def _handler(
        behavior: Callable[[bytes, grpc.ServicerContext], Message],
    ) -> grpc.RpcMethodHandler:
        # request_deserializer=None hands the raw bytes to `behavior`.
        return grpc.unary_unary_rpc_method_handler(
            behavior,
            request_deserializer=None,
            response_serializer=lambda message: message.SerializeToString(),
        )

    def _export(
        self,
        data: bytes,
        context: grpc.ServicerContext,
        parse: Callable[[bytes], Req],
        deliver: Callable[[Req], ExportOutcome],
    ) -> ExportOutcome:
        code: grpc.StatusCode | None = None
        message = ""
        trailing: Sequence[tuple[str, bytes]] = ()
        outcome = ExportOutcome()
        try:
            check_room(self._consumer, len(data), self._stats)
            started = time.thread_time()
            try:
                outcome = deliver(parse(data))
            finally:
                self._stats.add_cpu(time.thread_time() - started)
        except OtlpDecodeError as exc:
            self._stats.add("decode_errors")
            code, message = grpc.StatusCode.INVALID_ARGUMENT, str(exc)
        except Refused as exc:
            code, message = grpc.StatusCode.UNAVAILABLE, str(exc) or "pipeline is full"
            trailing = retry_trailing_metadata(message, exc.retry_after_s)
        except Exception:
            log.exception("OTLP/gRPC export failed")
            self._stats.add("internal_errors")
            code, message = grpc.StatusCode.INTERNAL, "internal error while handling the export"
        if code is not None:
            # abort() raises, so it must stay outside the try above.
            if trailing:
                context.set_trailing_metadata(trailing)
            context.abort(code, message)
        return outcome

    def _export_traces(
        self, data: bytes, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        outcome = self._export(
            data,
            context,
            parse_trace_request,
            lambda request: deliver_spans(
                self._consumer,
                request,
                self._stats,
                max_value_depth=self._max_value_depth,
                raw=RawRequest("traces", "protobuf", data),
            ),
        )
        return trace_response(outcome)

    def _export_logs(
        self, data: bytes, context: grpc.ServicerContext
    ) -> logs_service_pb2.ExportLogsServiceResponse:
        outcome = self._export(
            data,
            context,
            parse_logs_request,
            lambda request: deliver_logs(
                self._consumer,
                request,
                self._stats,
                max_value_depth=self._max_value_depth,
                raw=RawRequest("logs", "protobuf", data),
            ),
        )
        return logs_response(outcome)
