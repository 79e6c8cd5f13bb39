"""OTLP/HTTP receiver on an asyncio server with a bound on everything a client can hold.

Implements the OTLP/HTTP binding: POST /v1/traces and /v1/logs with protobuf or JSON bodies
(optionally gzip- or deflate-compressed), answered in the request's encoding. Failures use the
status codes OTLP senders act on: 400 (do not retry) with a google.rpc.Status body for
malformed payloads, 503 with Retry-After when the pipeline is full or the receivers' memory
budget is taken, 413 for bodies over the limit.

Connections are served on one event loop in a thread of its own, so an idle, slow or stalled
client costs a coroutine and a socket, never a thread, and each is bounded: connections in all
and per peer address (closed as soon as accepted past the cap), the time to receive a request's
headers and then its body (totals from the first byte, not per read, so a header trickled a
line at a time is cut), the time a kept-alive connection may sit idle, the header size, the
requests in progress, and the memory their bodies and decoding take (`limits`). Only a request
whose body is read, counted and budgeted goes to one of `max_workers` threads to be decoded and
handed to the pipeline. Every bound hit is counted in the receiver's stats.

Every body is size-checked before it is read and while it is decompressed, so a small gzip
bomb cannot allocate more than `max_body_bytes`. A body is read into one buffer, however small
the pieces it arrives in, and its bytes are taken from the memory budget as they arrive (a body
announced large and trickled holds only what it sent). A connection is closed after any
response sent before the body was fully read, because the unread bytes would corrupt the next
request.

GET /healthz answers "ok" (or what `health_check` reports); GET /metrics answers what
`metrics` returns (the collector's self-metrics), or 404 when no `metrics` is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import ssl
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from google.protobuf import json_format
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2

from collector.consumer import RawRequest, Refused, TelemetryConsumer
from collector.otlp.decode import (
    DEFAULT_MAX_VALUE_DEPTH,
    OtlpDecodeError,
    parse_logs_request,
    parse_trace_request,
)
from collector.otlp.jsonpb import parse_logs_json, parse_trace_json
from collector.receivers.delivery import (
    ReceiverStats,
    Rejection,
    admit,
    admit_by_size,
    check_room,
    deliver_logs,
    deliver_spans,
    logs_response,
    parse_protobuf,
    retry_after_seconds,
    trace_response,
)
from collector.receivers.limits import DECODERS, BodyError, MemoryBudget, RequestCost, inflate
from collector.security import UNAUTHENTICATED_MESSAGE, bearer_matches

__all__ = ["DEFAULT_HTTP_MAX_BODY_BYTES", "HEALTH_PATH", "HttpLimits", "HttpReceiver"]

log = logging.getLogger(__name__)

DEFAULT_HTTP_MAX_BODY_BYTES = 16 * 1024 * 1024
HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"
TRACES_PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"

_PROTOBUF = "application/x-protobuf"
_JSON = "application/json"
_MEDIA_TYPES = {
    "application/x-protobuf": _PROTOBUF,
    "application/protobuf": _PROTOBUF,
    "application/json": _JSON,
}
_ENCODINGS: dict[str, Literal["protobuf", "json"]] = {_PROTOBUF: "protobuf", _JSON: "json"}
_HEX_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_REQUEST_LINE = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP/(1\.[01])")
# Headers a request may carry once only (a repeat is refused: 400, or 401 for Authorization).
_SINGLE = ("authorization", "content-type", "content-encoding", "transfer-encoding", "host")
# After an early response, read (and discard) at most this much of the unread body so the
# client sees the response instead of a connection reset.
_LINGER_BYTES = 1024 * 1024
_LINGER_SECONDS = 1.0
_READ_CHUNK = 256 * 1024

HealthCheck = Callable[[], tuple[int, str]]
# (content type, body) of a metrics scrape.
MetricsSource = Callable[[], tuple[str, bytes]]
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class HttpLimits:
    """What one peer or many may make the HTTP receiver hold (see HttpReceiverConfig)."""

    max_connections: int = 1024
    max_connections_per_peer: int = 64
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_header_bytes: int = 64 * 1024
    max_concurrent_requests: int = 256
    max_workers: int = 4
    max_gzip_members: int = 16
    max_request_objects: int = 1_000_000


class _HttpError(Exception):
    """A failure answered with `status`; `grpc_code` fills the google.rpc.Status body."""

    def __init__(
        self,
        status: int,
        grpc_code: int,
        message: str,
        headers: Sequence[tuple[str, str]] = (),
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.grpc_code = grpc_code
        self.message = message
        self.headers = tuple(headers)
        self.retry_after_s = retry_after_s


class _Closed(Exception):
    """The connection is to be dropped without an answer (peer gone, deadline passed)."""


def _split_endpoint(endpoint: str) -> tuple[str, int]:
    """Split "host:port", "[v6]:port" or ":port" (every interface, as in the Collector)."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"endpoint must look like host:port, got {endpoint!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _encode(message: Message, media_type: str) -> bytes:
    if media_type == _JSON:
        return json.dumps(json_format.MessageToDict(message), separators=(",", ":")).encode()
    return message.SerializeToString()


class _Request:
    """A parsed request line and header section."""

    def __init__(self, method: str, target: str, version: str, headers: list[tuple[str, str]]):
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.path = urlsplit(target).path
        self.body_read = False

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]

    def get(self, name: str, default: str | None = None) -> str | None:
        values = self.all(name)
        return values[0] if values else default

    def has_body(self) -> bool:
        if self.all("transfer-encoding"):
            return True
        length = (self.get("content-length") or "0").strip()
        return not (length.isascii() and length.isdigit() and int(length) == 0)

    def keep_alive(self) -> bool:
        tokens = {
            token.strip().lower() for value in self.all("connection") for token in value.split(",")
        }
        if self.version == "1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


def _parse_head(head: bytes) -> _Request:
    text = head.decode("latin-1")
    lines = text.split("\r\n")
    match = _REQUEST_LINE.fullmatch(lines[0])
    if not match:
        raise _HttpError(400, code_pb2.INVALID_ARGUMENT, "malformed request line")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name):
            raise _HttpError(400, code_pb2.INVALID_ARGUMENT, f"malformed header line {line!r}")
        headers.append((name.lower(), value.strip(" \t")))
    request = _Request(match[1], match[2], match[3], headers)
    counts = Counter(key for key, _ in headers)
    for name in _SINGLE:
        if counts[name] > 1 and name != "authorization":
            raise _HttpError(400, code_pb2.INVALID_ARGUMENT, f"repeated {name} header")
    return request


def _status_body(
    media_type: str, grpc_code: int, message: str, retry_after_s: float | None = None
) -> bytes:
    status = status_pb2.Status(code=grpc_code, message=message)
    if retry_after_s is not None:
        retry_delay = Duration()
        retry_delay.FromNanoseconds(round(retry_after_s * 1e9))
        status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=retry_delay))
    return _encode(status, media_type)


@dataclass
class _Response:
    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()


def _plain(status: int, text: str, headers: Sequence[tuple[str, str]] = ()) -> _Response:
    return _Response(status, text.encode(), "text/plain; charset=utf-8", tuple(headers))


def _default_health() -> tuple[int, str]:
    return 200, "ok"


class HttpReceiver:
    """An OTLP/HTTP server feeding a `TelemetryConsumer`.

    The consumer is called on the receiver's worker threads, so it must be thread-safe.
    `health_check` returns the (HTTP status, text) for GET /healthz. `socket_timeout_s` is how
    long a kept-alive connection may wait idle for its next request. `budget` is the memory
    budget shared with the gRPC receiver (one of its own when not given).
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
        limits: HttpLimits | None = None,
        budget: MemoryBudget | None = None,
    ) -> None:
        if max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be positive")
        if socket_timeout_s <= 0:
            raise ValueError("socket_timeout_s must be positive")
        self._address = _split_endpoint(endpoint)
        self.consumer = consumer
        self.max_body_bytes = max_body_bytes
        self.max_value_depth = max_value_depth
        self.socket_timeout_s = socket_timeout_s
        self._health_check = health_check or _default_health
        self.metrics = metrics
        self.ssl_context = ssl_context
        self.auth_token = auth_token
        self.health_open = health_open
        self.limits = limits or HttpLimits()
        self.budget = budget or MemoryBudget(max(1024 * 1024 * 1024, 4 * max_body_bytes))
        self.stats_counter = ReceiverStats()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._workers: futures.ThreadPoolExecutor | None = None
        self._probes: futures.ThreadPoolExecutor | None = None
        self._large: futures.ThreadPoolExecutor | None = None
        self._port = 0
        # Touched on the event loop's thread only.
        self._open = 0
        self._per_peer: Counter[str] = Counter()
        self._writers: set[asyncio.StreamWriter] = set()
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
        snapshot["connections_open"] = self._open
        snapshot["requests_in_progress"] = self._in_progress
        return snapshot

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds request threads spent parsing, decoding and handing requests over."""
        return self.stats_counter.cpu_seconds

    def health(self) -> tuple[int, str]:
        """Status and text for GET /healthz; a failing check reads as 503, not a crash."""
        try:
            return self._health_check()
        except Exception as exc:
            log.warning("health check failed", exc_info=True)
            return 503, f"unhealthy: {exc}"

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
            self._connection,
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
        for writer in list(self._writers):
            writer.transport.abort()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), timeout=2)

    # --- connections ------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        peer = str(peername[0]) if isinstance(peername, tuple) else str(peername)
        limits = self.limits
        stats = self.stats_counter
        if self._open >= limits.max_connections:
            stats.add("connections_over_limit")
            writer.transport.abort()
            return
        if self._per_peer[peer] >= limits.max_connections_per_peer:
            stats.add("connections_over_peer_limit")
            writer.transport.abort()
            return
        self._open += 1
        self._per_peer[peer] += 1
        self._writers.add(writer)
        try:
            first = True
            while await self._serve_one(reader, writer, first):
                first = False
        except (TimeoutError, ConnectionError, OSError, ssl.SSLError, _Closed):
            pass
        except Exception:
            log.debug("OTLP/HTTP connection from %s failed", peer, exc_info=True)
        finally:
            # Flush what is left of the last response, briefly; a peer that does not read it
            # is cut.
            try:
                writer.close()
                await asyncio.wait_for(writer.wait_closed(), timeout=_LINGER_SECONDS)
            except (TimeoutError, ConnectionError, OSError, ssl.SSLError):
                pass
            finally:
                writer.transport.abort()
                self._open -= 1
                self._per_peer[peer] -= 1
                if self._per_peer[peer] <= 0:
                    del self._per_peer[peer]
                self._writers.discard(writer)

    async def _read_head(self, reader: asyncio.StreamReader, first: bool) -> bytes | None:
        """The request line and headers, or None when the client closed between requests.
        A new connection has `header_timeout_s` for them; a kept-alive one waits up to
        `socket_timeout_s` idle for the first byte, then has `header_timeout_s` for the rest."""
        stats = self.stats_counter
        lead = b""
        if not first:
            try:
                lead = await asyncio.wait_for(reader.read(1), timeout=self.socket_timeout_s)
            except TimeoutError:
                stats.add("idle_timeouts")
                raise _Closed from None
            if not lead:
                return None
        try:
            async with asyncio.timeout(self.limits.header_timeout_s):
                head = await reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            stats.add("header_timeouts")
            raise _Closed from None
        except asyncio.IncompleteReadError as exc:
            if not exc.partial and not lead:
                return None
            raise _Closed from None
        except asyncio.LimitOverrunError:
            stats.add("headers_too_large")
            raise _HttpError(
                431,
                code_pb2.INVALID_ARGUMENT,
                f"request headers exceed {self.limits.max_header_bytes} bytes "
                "(receivers.http.max_header_bytes)",
            ) from None
        return lead + head

    async def _serve_one(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bool
    ) -> bool:
        """Serve one request; whether the connection stays open for another."""
        request: _Request | None = None
        try:
            head = await self._read_head(reader, first)
            if head is None:
                return False
            request = _parse_head(head)
            response = await self._dispatch(request, reader, writer)
        except _HttpError as exc:
            media_type = _PROTOBUF
            if request is not None:
                media_type = _MEDIA_TYPES.get(
                    (request.get("content-type") or "").split(";", 1)[0].strip().lower(),
                    _PROTOBUF,
                )
            response = _Response(
                exc.status,
                _status_body(media_type, exc.grpc_code, exc.message, exc.retry_after_s),
                media_type,
                exc.headers,
            )
            if request is None:
                await self._send(writer, None, response, close=True)
                return False
        keep = request.keep_alive()
        early = not request.body_read and request.has_body()
        await self._send(writer, request, response, close=early or not keep)
        if early:
            await self._discard_unread(reader)
            return False
        return keep

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        request: _Request | None,
        response: _Response,
        *,
        close: bool,
    ) -> None:
        lines = [
            f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Unknown')}",
            "Server: mast-otel",
            f"Content-Type: {response.content_type}",
            f"Content-Length: {len(response.body)}",
            *(f"{name}: {value}" for name, value in response.headers),
        ]
        if close:
            lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if request is None or request.method != "HEAD":
            writer.write(response.body)
        # A client that does not read its responses is cut like one that does not send.
        async with asyncio.timeout(self.limits.body_timeout_s):
            await writer.drain()

    async def _discard_unread(self, reader: asyncio.StreamReader) -> None:
        """Lingering close: swallow what the client is still sending for a moment, so closing
        with unread data does not reset the connection before the client has read our
        response."""
        discarded = 0
        with contextlib.suppress(TimeoutError, ConnectionError, OSError):
            async with asyncio.timeout(_LINGER_SECONDS):
                while discarded < _LINGER_BYTES:
                    chunk = await reader.read(65536)
                    if not chunk:
                        break
                    discarded += len(chunk)

    # --- dispatch ---------------------------------------------------------------------------

    def _authenticated(self, request: _Request) -> bool:
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
        self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> _Response:
        if not self._authenticated(request):
            self.stats_counter.add("unauthenticated")
            return _plain(
                401, UNAUTHENTICATED_MESSAGE, (("WWW-Authenticate", 'Bearer realm="mast-otel"'),)
            )
        path, method = request.path, request.method
        if method == "POST" and path in (TRACES_PATH, LOGS_PATH):
            return await self._export(request, reader, writer, traces=path == TRACES_PATH)
        if method in ("GET", "HEAD") and path in (HEALTH_PATH, METRICS_PATH):
            return await asyncio.get_running_loop().run_in_executor(self._probes, self._probe, path)
        if path in (TRACES_PATH, LOGS_PATH):
            return _plain(405, "method not allowed", (("Allow", "POST"),))
        if path == HEALTH_PATH or (path == METRICS_PATH and self.metrics is not None):
            return _plain(405, "method not allowed", (("Allow", "GET, HEAD"),))
        return _plain(404, "not found")

    def _probe(self, path: str) -> _Response:
        if path == HEALTH_PATH:
            status, text = self.health()
            return _plain(status, text)
        if self.metrics is None:
            return _plain(404, "not found")
        try:
            content_type, body = self.metrics()
        except Exception:
            log.exception("collecting self-metrics failed")
            return _plain(500, "collecting metrics failed; see the collector's log")
        return _Response(200, body, content_type)

    # --- export -----------------------------------------------------------------------------

    async def _export(
        self,
        request: _Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        traces: bool,
    ) -> _Response:
        content_type = request.get("content-type") or ""
        media_type = _MEDIA_TYPES.get(content_type.split(";", 1)[0].strip().lower())
        if media_type is None:
            return _plain(
                415,
                f"unsupported Content-Type {content_type!r}: "
                "use application/x-protobuf or application/json",
            )
        encoding = (request.get("content-encoding") or "identity").strip().lower()
        if encoding != "identity" and encoding not in DECODERS:
            return _plain(
                415, f"unsupported Content-Encoding {encoding!r}: use gzip, deflate or none"
            )
        limits = self.limits
        if self._in_progress >= limits.max_concurrent_requests:
            self.stats_counter.add("requests_over_limit")
            raise _HttpError(
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
            body, held = await self._read_body(request, reader, writer)
            loop = asyncio.get_running_loop()
            cost = None
            if encoding == "identity" and media_type == _PROTOBUF:
                cost = admit_by_size(len(body), limits.max_request_objects, self.budget)
            data: bytes | bytearray = body
            if cost is None:
                # Inflating, or counting the objects of a body too large to be bounded by its
                # size, runs on threads of its own, so large requests cannot hold up small
                # ones on the decoding workers.
                prepared = await loop.run_in_executor(
                    self._large, self._prepare, body, encoding, media_type, traces
                )
                if isinstance(prepared, _Response):
                    return prepared
                data, cost = prepared
            del body
            try:
                return await loop.run_in_executor(
                    self._workers, self._decode_and_deliver, data, cost, media_type, traces
                )
            finally:
                self.budget.give_back(cost.bytes)
        finally:
            if held:
                self.budget.give_back(held)
            self._in_progress -= 1
            if self._in_progress == 0 and self._idle is not None:
                self._idle.set()

    def _budget_full(self) -> _HttpError:
        self.stats_counter.add("memory_budget_full")
        self.stats_counter.add("requests_refused")
        return _HttpError(
            503,
            code_pb2.UNAVAILABLE,
            "the receivers' memory budget is taken by requests in progress "
            "(receivers.memory_budget_bytes): retry later",
            headers=(("Retry-After", "1"),),
            retry_after_s=1.0,
        )

    async def _read_body(
        self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[bytearray, int]:
        """The body, read within `body_timeout_s`, and the budget bytes it holds."""
        limit = self.max_body_bytes
        transfer_encoding = request.all("transfer-encoding")
        if transfer_encoding:
            if request.all("content-length"):
                raise _HttpError(
                    400,
                    code_pb2.INVALID_ARGUMENT,
                    "both Transfer-Encoding and Content-Length are set",
                )
            if transfer_encoding[0].strip().lower() != "chunked":
                raise _HttpError(
                    501,
                    code_pb2.UNIMPLEMENTED,
                    f"unsupported Transfer-Encoding {transfer_encoding[0]!r}",
                )
        else:
            lengths = {value.strip() for value in request.all("content-length")}
            if not lengths:
                raise _HttpError(411, code_pb2.INVALID_ARGUMENT, "Content-Length is required")
            if len(lengths) > 1:
                raise _HttpError(400, code_pb2.INVALID_ARGUMENT, "conflicting Content-Length")
            (text,) = lengths
            if not (text.isascii() and text.isdigit()):
                raise _HttpError(400, code_pb2.INVALID_ARGUMENT, f"invalid Content-Length {text!r}")
            length = int(text)
            if length > limit:
                raise _HttpError(
                    413,
                    code_pb2.RESOURCE_EXHAUSTED,
                    f"request body of {length} bytes exceeds the limit of {limit} bytes",
                )
        # Budget is taken for the bytes as they arrive (not as announced), so a body trickled
        # slowly holds only what it has sent; they go into one buffer, however small the
        # pieces they arrive in.
        held = 0
        body = bytearray()

        async def read_into(n: int) -> None:
            nonlocal held
            end = len(body) + n
            while len(body) < end:
                chunk = await reader.read(min(_READ_CHUNK, end - len(body)))
                if not chunk:
                    raise _Closed("client closed the connection mid-body")
                if not self.budget.try_take(len(chunk)):
                    raise self._budget_full()
                held += len(chunk)
                body.extend(chunk)

        try:
            async with asyncio.timeout(self.limits.body_timeout_s):
                if (request.get("expect") or "").lower() == "100-continue":
                    # The body is wanted: say so rather than have the client wait for a timeout.
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    await writer.drain()
                if transfer_encoding:
                    async for size in self._chunks(reader, limit):
                        await read_into(size)
                        if await reader.readline() not in (b"\r\n", b"\n"):
                            raise _HttpError(
                                400, code_pb2.INVALID_ARGUMENT, "malformed chunked body"
                            )
                else:
                    await read_into(length)
        except TimeoutError:
            if held:
                self.budget.give_back(held)
            self.stats_counter.add("body_timeouts")
            raise _HttpError(
                408,
                code_pb2.DEADLINE_EXCEEDED,
                f"the request body was not received within {self.limits.body_timeout_s:g} s "
                "(receivers.http.body_timeout_s)",
            ) from None
        except asyncio.IncompleteReadError:
            if held:
                self.budget.give_back(held)
            raise _Closed("client closed the connection mid-body") from None
        except BaseException:
            if held:
                self.budget.give_back(held)
            raise
        request.body_read = True
        return body, held

    async def _chunks(self, reader: asyncio.StreamReader, limit: int) -> AsyncIterator[int]:
        """Chunk sizes of a chunked body (its trailer section is read at the end)."""
        total = 0
        while True:
            line = await reader.readline()
            if not line.endswith(b"\n") or len(line) > 1024:
                raise _HttpError(400, code_pb2.INVALID_ARGUMENT, "malformed chunked body")
            size_text = line.split(b";", 1)[0].strip()
            if not _HEX_SIZE.fullmatch(size_text):
                raise _HttpError(400, code_pb2.INVALID_ARGUMENT, "malformed chunk size")
            size = int(size_text, 16)
            if size == 0:
                break
            total += size
            if total > limit:
                raise _HttpError(
                    413,
                    code_pb2.RESOURCE_EXHAUSTED,
                    f"chunked request body exceeds the limit of {limit} bytes",
                )
            yield size
        for _ in range(100):
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                return
        raise _HttpError(400, code_pb2.INVALID_ARGUMENT, "too many chunked trailers")

    def _prepare(
        self, body: bytearray, encoding: str, media_type: str, traces: bool
    ) -> tuple[bytes | bytearray, RequestCost] | _Response:
        """On a thread for large requests: inflate, count and budget. Returns the body to
        decode and its cost (taken from the budget), or the response refusing it."""
        stats = self.stats_counter
        signal: Literal["traces", "logs"] = "traces" if traces else "logs"
        started = time.thread_time()
        data: bytes | bytearray = body
        try:
            if encoding != "identity":
                try:
                    data = inflate(
                        body, encoding, self.max_body_bytes, self.limits.max_gzip_members
                    )
                except BodyError as exc:
                    if "members" in str(exc):
                        stats.add("gzip_members_over_limit")
                    if exc.too_large:
                        return self._status(media_type, 413, code_pb2.RESOURCE_EXHAUSTED, str(exc))
                    return self._status(media_type, 400, code_pb2.INVALID_ARGUMENT, str(exc))
            check_room(self.consumer, len(data), stats)
            # Counted and budgeted before anything is copied or parsed.
            cost = admit(
                data,
                signal,
                _ENCODINGS[media_type],
                self.limits.max_request_objects,
                self.budget,
                stats,
            )
            return data, cost
        except Rejection as exc:
            return self._rejection(media_type, exc)
        except Refused as exc:
            return self._refused(media_type, exc)
        except Exception:
            log.exception("OTLP/HTTP export failed")
            stats.add("internal_errors")
            return self._status(
                media_type, 500, code_pb2.INTERNAL, "internal error while handling the export"
            )
        finally:
            stats.add_cpu(time.thread_time() - started)

    def _rejection(self, media_type: str, exc: Rejection) -> _Response:
        if exc.retryable:
            seconds = retry_after_seconds(exc.retry_after_s)
            return self._status(
                media_type,
                503,
                code_pb2.UNAVAILABLE,
                exc.message,
                headers=(("Retry-After", str(seconds)),),
                retry_after_s=float(seconds),
            )
        return self._status(media_type, 413, code_pb2.RESOURCE_EXHAUSTED, exc.message)

    def _refused(self, media_type: str, exc: Refused) -> _Response:
        seconds = retry_after_seconds(exc.retry_after_s)
        return self._status(
            media_type,
            503,
            code_pb2.UNAVAILABLE,
            str(exc) or "pipeline is full",
            headers=(("Retry-After", str(seconds)),),
            retry_after_s=float(seconds),
        )

    def _decode_and_deliver(
        self, body: bytes | bytearray, cost: RequestCost, media_type: str, traces: bool
    ) -> _Response:
        """On a worker thread: parse, decode and hand over a counted and budgeted request."""
        stats = self.stats_counter
        signal: Literal["traces", "logs"] = "traces" if traces else "logs"
        started = time.thread_time()
        try:
            check_room(self.consumer, len(body), stats)
            data = bytes(body)
            del body
            response: Message
            if traces:
                if media_type == _JSON:
                    trace_request = parse_trace_json(data)
                else:
                    trace_request, data = parse_protobuf(
                        data, cost, signal, self.max_value_depth, parse_trace_request
                    )
                raw = RawRequest(signal, _ENCODINGS[media_type], data)
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
                if media_type == _JSON:
                    logs_request = parse_logs_json(data)
                else:
                    logs_request, data = parse_protobuf(
                        data, cost, signal, self.max_value_depth, parse_logs_request
                    )
                raw = RawRequest(signal, _ENCODINGS[media_type], data)
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
            return self._rejection(media_type, exc)
        except OtlpDecodeError as exc:
            stats.add("decode_errors")
            return self._status(media_type, 400, code_pb2.INVALID_ARGUMENT, str(exc))
        except Refused as exc:
            return self._refused(media_type, exc)
        except Exception:
            log.exception("OTLP/HTTP export failed")
            stats.add("internal_errors")
            return self._status(
                media_type, 500, code_pb2.INTERNAL, "internal error while handling the export"
            )
        finally:
            stats.add_cpu(time.thread_time() - started)
        return _Response(200, _encode(response, media_type), media_type)

    @staticmethod
    def _status(
        media_type: str,
        http_status: int,
        grpc_code: int,
        message: str,
        *,
        headers: Sequence[tuple[str, str]] = (),
        retry_after_s: float | None = None,
    ) -> _Response:
        return _Response(
            http_status,
            _status_body(media_type, grpc_code, message, retry_after_s),
            media_type,
            tuple(headers),
        )
