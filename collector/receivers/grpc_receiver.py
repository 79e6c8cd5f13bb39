"""OTLP/gRPC receiver: TraceService/Export and LogsService/Export.

The methods are registered with raw-bytes request handling instead of the generated
servicer's deserializer: grpcio reports a failed deserialization as a bare INTERNAL error,
while OTLP wants INVALID_ARGUMENT (not retryable) with a message the sender can act on.
Method names come from the generated descriptors, so the service stays wire-identical.

Status mapping and the decoding and hand-over of a request are in `otlp_grpc`. gzip request
compression is handled by grpcio itself.

The server is grpcio's asyncio server, on an event loop of its own thread: an RPC waiting for
its request (a slow or stalled sender) is a coroutine, not a thread, and must have received its
whole request within `receive_timeout_s`. Only a received request, its objects counted and its
memory taken from the receivers' budget (see `limits`), goes to one of `max_workers` threads
to be decoded and handed over. RPCs in progress at once, streams per connection, metadata
size, idle and old connections are all bounded, and each bound hit is counted.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable
from concurrent import futures
from typing import Any

import grpc
import grpc.aio
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from mast_otel.collector.config.receivers import GrpcReceiverConfig, ReceiversConfig
from mast_otel.collector.consumer import TelemetryConsumer
from mast_otel.collector.otlp.decode import (
    DEFAULT_MAX_VALUE_DEPTH,
)
from mast_otel.collector.receivers.delivery import (
    ReceiverStats,
    admit_by_size,
)
from mast_otel.collector.receivers.limits import MemoryBudget, RequestCost
from mast_otel.collector.receivers.otlp_grpc import Abort, OtlpGrpcExport, retry_trailing_metadata
from mast_otel.collector.security import BearerTokenInterceptor

__all__ = ["DEFAULT_GRPC_MAX_MESSAGE_BYTES", "GrpcReceiver"]

log = logging.getLogger(__name__)

DEFAULT_GRPC_MAX_MESSAGE_BYTES = 16 * 1024 * 1024

_TRACE_SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name
_LOGS_SERVICE = logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name


def _channel_options(limits: GrpcReceiverConfig, max_message_bytes: int) -> list[tuple[str, int]]:
    """grpcio's server options for the limits of `receivers.grpc`."""

    def ms(seconds: float) -> int:
        return max(1, round(seconds * 1000))

    return [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_concurrent_streams", limits.max_concurrent_streams),
        ("grpc.max_allowed_incoming_connections", limits.max_connections),
        ("grpc.max_metadata_size", limits.max_metadata_bytes),
        ("grpc.keepalive_time_ms", ms(limits.keepalive_time_s)),
        ("grpc.keepalive_timeout_ms", ms(limits.keepalive_timeout_s)),
        ("grpc.max_connection_idle_ms", ms(limits.max_connection_idle_s)),
        ("grpc.max_connection_age_ms", ms(limits.max_connection_age_s)),
        ("grpc.max_connection_age_grace_ms", ms(limits.max_connection_age_grace_s)),
        # Senders may ping to keep a quiet connection open (no faster than every 10 s).
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        # Without this grpcio lets a second process bind the same port silently.
        ("grpc.so_reuseport", 0),
    ]


def _grpc_target(endpoint: str) -> str:
    """grpcio needs a host; an empty one (":4317") means every interface, as in the
    Collector's configuration."""
    if endpoint.startswith(":"):
        return "0.0.0.0" + endpoint
    return endpoint


def _peer_address(peer: str | None) -> str:
    """The address part of grpcio's peer string ("ipv4:1.2.3.4:5678", "ipv6:[::1]:5678")."""
    if not peer:
        return "unknown"
    _, _, rest = peer.partition(":")
    host, sep, _ = rest.rpartition(":")
    return host if sep else rest


class GrpcReceiver:
    """An OTLP/gRPC server feeding a `TelemetryConsumer`.

    The consumer is called on the receiver's worker threads (`max_workers` of them), so it must
    be thread-safe. `max_message_bytes` bounds the (decompressed) request size; larger
    requests get RESOURCE_EXHAUSTED from grpcio before any decoding happens. `limits` is the
    `receivers.grpc` section, read as it is (each limit declared once, there);
    `max_request_objects` is `receivers.max_request_objects`. `budget` is the memory budget
    shared with the HTTP receiver (one of its own when not given).
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
        limits: GrpcReceiverConfig | None = None,
        max_request_objects: int = ReceiversConfig.max_request_objects,
        budget: MemoryBudget | None = None,
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
        self._limits = limits or GrpcReceiverConfig()
        self._max_request_objects = max_request_objects
        self._budget = budget or MemoryBudget(1024 * 1024 * 1024)
        self._stats = ReceiverStats()
        self._otlp = OtlpGrpcExport(
            consumer,
            max_value_depth=max_value_depth,
            max_request_objects=self._max_request_objects,
            budget=self._budget,
            stats=self._stats,
        )
        self._lock = threading.Lock()
        self._server: grpc.aio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._executor: futures.ThreadPoolExecutor | None = None
        self._large_executor: futures.ThreadPoolExecutor | None = None
        self._port = 0
        # RPCs in progress, in all and by peer address; touched on the event loop's thread only.
        self._active = 0
        self._active_by_peer: Counter[str] = Counter()

    @property
    def port(self) -> int:
        """The bound TCP port (useful when the endpoint asked for port 0)."""
        if not self._port:
            raise RuntimeError("GrpcReceiver is not started")
        return self._port

    @property
    def stats(self) -> dict[str, int]:
        """A snapshot of the request and item counters."""
        snapshot = self._stats.snapshot()
        snapshot["rpcs_in_progress"] = self._active
        return snapshot

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds request threads spent parsing, decoding and handing requests over."""
        return self._stats.cpu_seconds

    def start(self) -> None:
        """Bind and start serving; raises RuntimeError when the endpoint cannot be bound."""
        with self._lock:
            if self._server is not None:
                raise RuntimeError("GrpcReceiver already started")
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="otlp-grpc", daemon=True)
            thread.start()
            executor = futures.ThreadPoolExecutor(
                max_workers=self._max_workers, thread_name_prefix="otlp-grpc"
            )
            large_executor = futures.ThreadPoolExecutor(
                max_workers=self._max_workers, thread_name_prefix="otlp-grpc-large"
            )
            try:
                server, port = asyncio.run_coroutine_threadsafe(self._serve(), loop).result(30)
            except BaseException:
                executor.shutdown(wait=False)
                large_executor.shutdown(wait=False)
                loop.call_soon_threadsafe(loop.stop)
                thread.join(timeout=5)
                loop.close()
                raise
            self._server = server
            self._loop = loop
            self._thread = thread
            self._executor = executor
            self._large_executor = large_executor
            self._port = port
            log.info(
                "OTLP/gRPC receiver listening on %s (port %d%s%s)",
                _grpc_target(self._endpoint),
                port,
                ", TLS" if self._credentials is not None else "",
                ", bearer token required" if self._auth_token else "",
            )

    async def _serve(self) -> tuple[grpc.aio.Server, int]:
        interceptors = (
            [BearerTokenInterceptor(self._auth_token, lambda: self._stats.add("unauthenticated"))]
            if self._auth_token
            else []
        )
        limits = self._limits
        server = grpc.aio.server(
            interceptors=interceptors,
            options=_channel_options(limits, self._max_message_bytes),
            # A backstop behind the receiver's own, counted, limit (`_export`).
            maximum_concurrent_rpcs=2 * limits.max_concurrent_rpcs + 16,
        )
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    _TRACE_SERVICE, {"Export": self._handler(self._export_traces)}
                ),
                grpc.method_handlers_generic_handler(
                    _LOGS_SERVICE, {"Export": self._handler(self._export_logs)}
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
            raise RuntimeError(f"cannot bind OTLP/gRPC receiver to {target}: {exc}") from exc
        if port == 0:  # older grpcio reports failure this way instead of raising
            raise RuntimeError(f"cannot bind OTLP/gRPC receiver to {target}")
        await server.start()
        return server, port

    def shutdown(self, grace_s: float = 5.0) -> None:
        """Stop accepting RPCs and give in-flight ones up to `grace_s` seconds to finish."""
        with self._lock:
            server, loop, thread = self._server, self._loop, self._thread
            executors = (self._executor, self._large_executor)
            self._server = None
            self._loop = None
            self._thread = None
            self._executor = None
            self._large_executor = None
        if server is None or loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(server.stop(grace_s), loop).result(grace_s + 10)
        finally:
            for executor in executors:
                if executor is not None:
                    executor.shutdown(wait=False, cancel_futures=True)
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(timeout=5)
            if not loop.is_running():
                loop.close()

    @staticmethod
    def _handler(behavior: Callable[..., Any]) -> grpc.RpcMethodHandler:
        # Registered as client-streaming (the wire is the same for a unary call) so the
        # request is read under the receiver's own deadline; request_deserializer=None hands
        # the raw bytes over.
        return grpc.stream_unary_rpc_method_handler(
            behavior,
            request_deserializer=None,
            response_serializer=lambda message: message.SerializeToString(),
        )

    async def _receive(self, requests: AsyncIterator[bytes]) -> bytes:
        """The one request message of a unary call."""
        received: bytes | None = None
        async for message in requests:
            if received is not None:
                raise Abort(
                    grpc.StatusCode.INVALID_ARGUMENT, "Export takes exactly one request message"
                )
            received = message
        if received is None:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "no request message received")
        return received

    async def _export(
        self,
        requests: AsyncIterator[bytes],
        context: grpc.aio.ServicerContext,
        work: Callable[[bytes, RequestCost | None], Message],
    ) -> Message:
        limits = self._limits
        if self._active >= limits.max_concurrent_rpcs:
            self._stats.add("rpcs_over_limit")
            message = (
                f"too many export RPCs in progress ({limits.max_concurrent_rpcs}, "
                "receivers.grpc.max_concurrent_rpcs)"
            )
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                message,
                trailing_metadata=retry_trailing_metadata(message, 1.0),
            )
        peer = _peer_address(context.peer())
        if self._active_by_peer[peer] >= limits.max_concurrent_rpcs_per_peer:
            self._stats.add("rpcs_over_peer_limit")
            message = (
                f"too many export RPCs in progress from {peer} "
                f"({limits.max_concurrent_rpcs_per_peer}, "
                "receivers.grpc.max_concurrent_rpcs_per_peer)"
            )
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                message,
                trailing_metadata=retry_trailing_metadata(message, 1.0),
            )
        self._active += 1
        self._active_by_peer[peer] += 1
        try:
            try:
                data = await asyncio.wait_for(
                    self._receive(requests), timeout=limits.receive_timeout_s
                )
                loop = asyncio.get_running_loop()
                # A request whose size bounds its cost within the budget goes straight to the
                # workers; one that must be counted first (large, or the budget is short)
                # is handled by threads of its own, so large requests cannot hold up small
                # ones.
                cost = admit_by_size(len(data), self._max_request_objects, self._budget)
                pool = self._executor if cost is not None else self._large_executor
                return await loop.run_in_executor(pool, work, data, cost)
            except TimeoutError:
                self._stats.add("receive_timeouts")
                failure = Abort(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"the request was not received within {limits.receive_timeout_s:g} s "
                    "(receivers.grpc.receive_timeout_s)",
                )
            except Abort as exc:
                failure = exc
            await context.abort(failure.code, failure.message, trailing_metadata=failure.trailing)
            raise AssertionError("unreachable: abort raises")  # pragma: no cover
        finally:
            self._active -= 1
            self._active_by_peer[peer] -= 1
            if self._active_by_peer[peer] <= 0:
                del self._active_by_peer[peer]

    async def _export_traces(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> Message:
        return await self._export(requests, context, self._otlp.traces)

    async def _export_logs(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> Message:
        return await self._export(requests, context, self._otlp.logs)
