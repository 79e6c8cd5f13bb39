"""OTLP/HTTP receiver on an asyncio server with a bound on everything a client can hold.

Implements the OTLP/HTTP binding: POST /v1/traces and /v1/logs with protobuf or JSON bodies
(optionally gzip- or deflate-compressed), answered in the request's encoding (`otlp_http`).

Connections are served on one event loop in a thread of its own, so an idle, slow or stalled
client costs a coroutine and a socket, never a thread, and each is bounded: connections in all
and per peer address (`http_connections`), the time to receive a request's headers and then its
body, the time a kept-alive connection may sit idle, the header size (the HTTP layer:
`http_wire`), the requests in progress, and the memory their bodies and decoding
take (`limits`). Only a request whose body is read, counted and budgeted goes to one of
`max_workers` threads to be decoded and handed to the pipeline. Every bound hit is counted in
the receiver's stats. A connection is closed after any response sent before the body was fully
read, because the unread bytes would corrupt the next request.

GET /healthz answers "ok" (or what `health_check` reports); GET /metrics answers what
`metrics` returns (the collector's self-metrics), or 404 when no `metrics` is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
from concurrent import futures

from google.rpc import code_pb2

from mast_otel.collector.config.receivers import HttpReceiverConfig, ReceiversConfig
from mast_otel.collector.consumer import TelemetryConsumer
from mast_otel.collector.otlp.decode import DEFAULT_MAX_VALUE_DEPTH
from mast_otel.collector.receivers.delivery import ReceiverStats, admit_by_size
from mast_otel.collector.receivers.http_connections import Connections
from mast_otel.collector.receivers.http_probes import (
    HEALTH_PATH,
    METRICS_PATH,
    HealthCheck,
    MetricsSource,
    Probes,
)
from mast_otel.collector.receivers.http_wire import (
    HttpError,
    Request,
    Response,
    plain,
    read_body,
    split_endpoint,
)
from mast_otel.collector.receivers.limits import MemoryBudget
from mast_otel.collector.receivers.otlp_http import (
    PROTOBUF,
    OtlpHttpExport,
    error_response,
    negotiate,
)
from mast_otel.collector.security import UNAUTHENTICATED_MESSAGE, bearer_matches

__all__ = ["DEFAULT_HTTP_MAX_BODY_BYTES", "HttpReceiver"]

log = logging.getLogger(__name__)

DEFAULT_HTTP_MAX_BODY_BYTES = 16 * 1024 * 1024
TRACES_PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"


class HttpReceiver:
    """An OTLP/HTTP server feeding a `TelemetryConsumer`.

    The consumer is called on the receiver's worker threads, so it must be thread-safe.
    `health_check` returns the (HTTP status, text) for GET /healthz. `socket_timeout_s` is how
    long a kept-alive connection may wait idle for its next request. `limits` is the
    `receivers.http` section, read as it is (each limit declared once, there);
    `max_request_objects` is `receivers.max_request_objects`. `budget` is the memory budget
    shared with the gRPC receiver (one of its own when not given).
    """

    def __init__(
        self,
        consumer: TelemetryConsumer,
        endpoint: str = "127.0.0.1:4318",
        max_body_bytes: int = DEFAULT_HTTP_MAX_BODY_BYTES,
        *,
        max_value_depth: int = DEFAULT_MAX_VALUE_DEPTH,
        socket_timeout_s: float = 30.0,
        health_check: HealthCheck | None = None,
        metrics: MetricsSource | None = None,
        ssl_context: ssl.SSLContext | None = None,
        auth_token: str | None = None,
        health_open: bool = False,
        limits: HttpReceiverConfig | None = None,
        max_request_objects: int = ReceiversConfig.max_request_objects,
        budget: MemoryBudget | None = None,
    ) -> None:
        if max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be positive")
        if socket_timeout_s <= 0:
            raise ValueError("socket_timeout_s must be positive")
        self._address = split_endpoint(endpoint)
        self.consumer = consumer
        self.max_body_bytes = max_body_bytes
        self.max_value_depth = max_value_depth
        self.socket_timeout_s = socket_timeout_s
        self._probe_handler = Probes(health_check, metrics)
        self.metrics = metrics
        self.ssl_context = ssl_context
        self.auth_token = auth_token
        self.health_open = health_open
        self.limits = limits or HttpReceiverConfig()
        self.max_request_objects = max_request_objects
        self.budget = budget or MemoryBudget(max(1024 * 1024 * 1024, 4 * max_body_bytes))
        self.stats_counter = ReceiverStats()
        self._otlp = OtlpHttpExport(
            consumer,
            max_body_bytes=max_body_bytes,
            max_value_depth=max_value_depth,
            max_gzip_members=self.limits.max_gzip_members,
            max_request_objects=self.max_request_objects,
            budget=self.budget,
            stats=self.stats_counter,
        )
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._workers: futures.ThreadPoolExecutor | None = None
        self._probes: futures.ThreadPoolExecutor | None = None
        self._large: futures.ThreadPoolExecutor | None = None
        self._port = 0
        self._connections = Connections(
            self._dispatch,
            error_response,
            max_connections=self.limits.max_connections,
            max_connections_per_peer=self.limits.max_connections_per_peer,
            idle_timeout_s=socket_timeout_s,
            header_timeout_s=self.limits.header_timeout_s,
            max_header_bytes=self.limits.max_header_bytes,
            drain_timeout_s=self.limits.body_timeout_s,
            stats=self.stats_counter,
        )
        # Touched on the event loop's thread only.
        self._in_progress = 0
        self._idle: asyncio.Event | None = None

    @property
    def port(self) -> int:
        """The bound TCP port (useful when the endpoint asked for port 0)."""
        if not self._port:
            raise RuntimeError("HttpReceiver is not started")
        return self._port

    @property
    def stats(self) -> dict[str, int]:
        """A snapshot of the request and item counters, and the connections open now."""
        snapshot = self.stats_counter.snapshot()
        snapshot["connections_open"] = self._connections.open
        snapshot["requests_in_progress"] = self._in_progress
        return snapshot

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds request threads spent parsing, decoding and handing requests over."""
        return self.stats_counter.cpu_seconds

    def health(self) -> tuple[int, str]:
        """Status and text for GET /healthz; a failing check reads as 503, not a crash."""
        return self._probe_handler.health()

    # --- start and stop ---------------------------------------------------------------------

    def start(self) -> None:
        """Bind and start serving in a background thread; raises OSError if binding fails."""
        with self._lock:
            if self._server is not None:
                raise RuntimeError("HttpReceiver already started")
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="otlp-http", daemon=True)
            thread.start()
            try:
                server = asyncio.run_coroutine_threadsafe(self._listen(), loop).result(30)
            except BaseException:
                loop.call_soon_threadsafe(loop.stop)
                thread.join(timeout=5)
                loop.close()
                raise
            self._workers = futures.ThreadPoolExecutor(
                max_workers=self.limits.max_workers, thread_name_prefix="otlp-http"
            )
            self._probes = futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="otlp-http-probe"
            )
            self._large = futures.ThreadPoolExecutor(
                max_workers=self.limits.max_workers, thread_name_prefix="otlp-http-large"
            )
            self._loop = loop
            self._thread = thread
            self._server = server
            self._port = int(server.sockets[0].getsockname()[1])
            host, _ = self._address
            log.info(
                "OTLP/HTTP receiver listening on %s:%d%s%s",
                host or "0.0.0.0",
                self._port,
                " (TLS)" if self.ssl_context is not None else "",
                " (bearer token required)" if self.auth_token else "",
            )

    async def _listen(self) -> asyncio.Server:
        self._idle = asyncio.Event()
        self._idle.set()
        host, port = self._address
        return await asyncio.start_server(
            self._connections.serve,
            host or None,
            port,
            limit=self.limits.max_header_bytes,
            backlog=1024,
            ssl=self.ssl_context,
            # A client that stalls in the handshake is cut like one that stalls in its headers.
            ssl_handshake_timeout=self.limits.header_timeout_s if self.ssl_context else None,
        )

    def shutdown(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let requests in progress finish for up to `grace_s` seconds, then
        close every connection."""
        with self._lock:
            server, loop, thread = self._server, self._loop, self._thread
            pools = (self._workers, self._probes, self._large)
            self._server = None
            self._loop = None
            self._thread = None
        if server is None or loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close(server, grace_s), loop).result(
                grace_s + 10
            )
        finally:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(timeout=5)
            if not loop.is_running():
                loop.close()
            for pool in pools:
                if pool is not None:
                    pool.shutdown(wait=False, cancel_futures=True)

    async def _close(self, server: asyncio.Server, grace_s: float) -> None:
        server.close()
        if self._idle is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), timeout=max(0.0, grace_s))
        for writer in list(self._connections.writers):
            writer.transport.abort()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), timeout=2)

    # --- dispatch ---------------------------------------------------------------------------

    def _authenticated(self, request: Request) -> bool:
        """Every path needs the bearer token when one is set (the health check too, unless
        configured open). A repeated Authorization header is refused."""
        token = self.auth_token
        if not token:
            return True
        if self.health_open and request.path == HEALTH_PATH:
            return True
        values = request.all("authorization")
        return len(values) == 1 and bearer_matches(values[0], token)

    async def _dispatch(
        self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Response:
        if not self._authenticated(request):
            self.stats_counter.add("unauthenticated")
            return plain(
                401, UNAUTHENTICATED_MESSAGE, (("WWW-Authenticate", 'Bearer realm="mast-otel"'),)
            )
        path, method = request.path, request.method
        if method == "POST" and path in (TRACES_PATH, LOGS_PATH):
            return await self._export(request, reader, writer, traces=path == TRACES_PATH)
        if method in ("GET", "HEAD") and path in (HEALTH_PATH, METRICS_PATH):
            return await asyncio.get_running_loop().run_in_executor(
                self._probes, self._probe_handler.answer, path
            )
        if path in (TRACES_PATH, LOGS_PATH):
            return plain(405, "method not allowed", (("Allow", "POST"),))
        if path == HEALTH_PATH or (path == METRICS_PATH and self.metrics is not None):
            return plain(405, "method not allowed", (("Allow", "GET, HEAD"),))
        return plain(404, "not found")

    # --- export -----------------------------------------------------------------------------

    async def _export(
        self,
        request: Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        traces: bool,
    ) -> Response:
        negotiated = negotiate(request)
        if isinstance(negotiated, Response):
            return negotiated
        media_type, encoding = negotiated
        limits = self.limits
        if self._in_progress >= limits.max_concurrent_requests:
            self.stats_counter.add("requests_over_limit")
            raise HttpError(
                503,
                code_pb2.UNAVAILABLE,
                f"too many requests in progress ({limits.max_concurrent_requests}, "
                "receivers.http.max_concurrent_requests)",
                headers=(("Retry-After", "1"),),
                retry_after_s=1.0,
            )
        self._in_progress += 1
        if self._idle is not None:
            self._idle.clear()
        held = 0
        try:
            body, held = await read_body(
                request,
                reader,
                writer,
                limit=self.max_body_bytes,
                body_timeout_s=limits.body_timeout_s,
                budget=self.budget,
                stats=self.stats_counter,
            )
            loop = asyncio.get_running_loop()
            cost = None
            if encoding == "identity" and media_type == PROTOBUF:
                cost = admit_by_size(len(body), self.max_request_objects, self.budget)
            data: bytes | bytearray = body
            if cost is None:
                # Inflating, or counting the objects of a body too large to be bounded by its
                # size, runs on threads of its own, so large requests cannot hold up small
                # ones on the decoding workers.
                prepared = await loop.run_in_executor(
                    self._large, self._otlp.prepare, body, encoding, media_type, traces
                )
                if isinstance(prepared, Response):
                    return prepared
                data, cost = prepared
            del body
            try:
                return await loop.run_in_executor(
                    self._workers, self._otlp.decode_and_deliver, data, cost, media_type, traces
                )
            finally:
                self.budget.give_back(cost.bytes)
        finally:
            if held:
                self.budget.give_back(held)
            self._in_progress -= 1
            if self._in_progress == 0 and self._idle is not None:
                self._idle.set()
