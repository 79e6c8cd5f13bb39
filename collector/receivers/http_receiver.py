"""OTLP/HTTP receiver on the standard library's threading HTTP server.

Implements the OTLP/HTTP binding: POST /v1/traces and /v1/logs with protobuf or JSON bodies
(optionally gzip- or deflate-compressed), answered in the request's encoding. Failures use the
status codes OTLP senders act on: 400 (do not retry) with a google.rpc.Status body for
malformed payloads, 503 with Retry-After when the pipeline is full, 413 for bodies over the
limit.

Every body is size-checked before it is read and while it is decompressed, so a small gzip
bomb cannot allocate more than `max_body_bytes`. Connections get a socket timeout so a
stalled client only ties up its own thread, and are closed after any response sent before
the body was fully read, because the unread bytes would corrupt the next request.

GET /healthz answers "ok" (or what `health_check` reports); GET /metrics answers what
`metrics` returns (the collector's self-metrics), or 404 when no `metrics` is given.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import socketserver
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
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
    check_room,
    deliver_logs,
    deliver_spans,
    logs_response,
    retry_after_seconds,
    trace_response,
)
from collector.security import UNAUTHENTICATED_MESSAGE, bearer_matches

__all__ = ["DEFAULT_HTTP_MAX_BODY_BYTES", "HEALTH_PATH", "HttpReceiver"]

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
# After an early response, read (and discard) at most this much of the unread body so the
# client sees the response instead of a connection reset.
_LINGER_BYTES = 1024 * 1024
_LINGER_SECONDS = 1.0

HealthCheck = Callable[[], tuple[int, str]]
# (content type, body) of a metrics scrape.
MetricsSource = Callable[[], tuple[str, bytes]]


class _HttpError(Exception):
    """A failure answered with `status`; `grpc_code` fills the google.rpc.Status body."""

    def __init__(self, status: int, grpc_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.grpc_code = grpc_code
        self.message = message


def _split_endpoint(endpoint: str) -> tuple[str, int]:
    """Split "host:port", "[v6]:port" or ":port" (every interface, as in the Collector)."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"endpoint must look like host:port, got {endpoint!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


# Content-Encoding → zlib window bits: gzip framing, or the zlib framing HTTP calls "deflate".
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def _decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """Inflate a gzip/deflate body (every gzip member) without ever holding more than
    limit+1 bytes of output, so a tiny compressed bomb is refused with 413."""
    out = bytearray()
    data = body
    while True:
        decompressor = zlib.decompressobj(_DECODERS[encoding])
        try:
            out += decompressor.decompress(data, limit + 1 - len(out))
        except zlib.error as exc:
            raise _HttpError(
                400, code_pb2.INVALID_ARGUMENT, f"malformed {encoding} request body: {exc}"
            ) from exc
        if len(out) > limit:
            raise _HttpError(
                413,
                code_pb2.RESOURCE_EXHAUSTED,
                f"decompressed request body exceeds the limit of {limit} bytes",
            )
        if not decompressor.eof:
            raise _HttpError(400, code_pb2.INVALID_ARGUMENT, f"truncated {encoding} request body")
        data = decompressor.unused_data
        if not data:
            return bytes(out)
        if encoding != "gzip":
            raise _HttpError(
                400, code_pb2.INVALID_ARGUMENT, f"trailing data after {encoding} request body"
            )


def _encode(message: Message, media_type: str) -> bytes:
    if media_type == _JSON:
        return json.dumps(json_format.MessageToDict(message), separators=(",", ":")).encode()
    return message.SerializeToString()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: HttpReceiver

    def __init__(self, address: tuple[str, int], receiver: HttpReceiver) -> None:
        self.receiver = receiver
        self._busy = 0
        self._idle = threading.Condition()
        self._connections: set[socket.socket] = set()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN, which can stall on a broken
        # resolver; the name is only used in CGI environments.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("OTLP/HTTP connection from %s failed", client_address, exc_info=True)

    def track(self, connection: socket.socket) -> None:
        with self._idle:
            self._connections.add(connection)

    def untrack(self, connection: socket.socket) -> None:
        with self._idle:
            self._connections.discard(connection)

    def enter(self) -> None:
        with self._idle:
            self._busy += 1

    def leave(self) -> None:
        with self._idle:
            self._busy -= 1
            if self._busy == 0:
                self._idle.notify_all()

    def drain(self, grace_s: float) -> None:
        """Wait up to `grace_s` for requests in progress, then cut every connection (idle
        keep-alive ones would otherwise hold their threads until the socket timeout)."""
        with self._idle:
            self._idle.wait_for(lambda: self._busy == 0, timeout=max(0.0, grace_s))
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mast-otel"
    sys_version = ""
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.receiver.socket_timeout_s)
        if isinstance(self.connection, ssl.SSLSocket):
            # Raises on a failed handshake (no client certificate under mutual TLS, plain
            # HTTP on a TLS port): the server logs it at debug level and drops the connection.
            self.connection.do_handshake()
        self._linger = False
        self._body_read = False
        self.server.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
            if self._linger:
                self._discard_unread()
        except OSError:
            pass
        finally:
            self.server.untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    # --- dispatch ---------------------------------------------------------------------------

    def _run(self, action: Callable[[], None]) -> None:
        self._body_read = False
        self.server.enter()
        try:
            if self._authenticated():
                action()
        except (ConnectionError, TimeoutError):
            self.close_connection = True
        finally:
            self.server.leave()

    def _authenticated(self) -> bool:
        """Every path needs the bearer token when one is set (the health check too, unless
        configured open); answers 401 otherwise."""
        receiver = self.server.receiver
        token = receiver.auth_token
        if not token:
            return True
        if receiver.health_open and self._path() == HEALTH_PATH:
            return True
        if bearer_matches(self.headers.get("Authorization"), token):
            return True
        receiver.stats_counter.add("unauthenticated")
        self._plain(
            401, UNAUTHENTICATED_MESSAGE, (("WWW-Authenticate", 'Bearer realm="mast-otel"'),)
        )
        return False

    def do_POST(self) -> None:
        self._run(self._post)

    def do_GET(self) -> None:
        self._run(self._get)

    def do_HEAD(self) -> None:
        self._run(self._get)

    def do_PUT(self) -> None:
        self._run(self._other)

    def do_DELETE(self) -> None:
        self._run(self._other)

    def do_PATCH(self) -> None:
        self._run(self._other)

    def do_OPTIONS(self) -> None:
        self._run(self._other)

    def _path(self) -> str:
        return urlsplit(self.path).path

    def _post(self) -> None:
        path = self._path()
        if path == TRACES_PATH:
            self._export(traces=True)
        elif path == LOGS_PATH:
            self._export(traces=False)
        elif path in (HEALTH_PATH, METRICS_PATH):
            self._plain(405, "method not allowed", (("Allow", "GET, HEAD"),))
        else:
            self._plain(404, "not found")

    def _get(self) -> None:
        path = self._path()
        metrics = self.server.receiver.metrics
        if path == HEALTH_PATH:
            status, text = self.server.receiver.health()
            self._plain(status, text)
        elif path == METRICS_PATH and metrics is not None:
            try:
                content_type, body = metrics()
            except Exception:
                log.exception("collecting self-metrics failed")
                self._plain(500, "collecting metrics failed; see the collector's log")
                return
            self._send(200, body, content_type)
        elif path in (TRACES_PATH, LOGS_PATH):
            self._plain(405, "method not allowed", (("Allow", "POST"),))
        else:
            self._plain(404, "not found")

    def _other(self) -> None:
        path = self._path()
        if path in (TRACES_PATH, LOGS_PATH):
            self._plain(405, "method not allowed", (("Allow", "POST"),))
        elif path in (HEALTH_PATH, METRICS_PATH):
            self._plain(405, "method not allowed", (("Allow", "GET, HEAD"),))
        else:
            self._plain(404, "not found")

    # --- export -----------------------------------------------------------------------------

    def _export(self, *, traces: bool) -> None:
        receiver = self.server.receiver
        content_type = self.headers.get("Content-Type", "")
        media_type = _MEDIA_TYPES.get(content_type.split(";", 1)[0].strip().lower())
        if media_type is None:
            self._plain(
                415,
                f"unsupported Content-Type {content_type!r}: "
                "use application/x-protobuf or application/json",
            )
            return
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding != "identity" and encoding not in _DECODERS:
            self._plain(
                415, f"unsupported Content-Encoding {encoding!r}: use gzip, deflate or none"
            )
            return
        try:
            body = self._read_body(receiver.max_body_bytes)
            if encoding != "identity":
                body = _decompress(body, encoding, receiver.max_body_bytes)
        except _HttpError as exc:
            self._status(media_type, exc.status, exc.grpc_code, exc.message)
            return

        stats = receiver.stats_counter
        response: Message
        started = time.thread_time()
        try:
            check_room(receiver.consumer, len(body), stats)
            if traces:
                trace_request = (
                    parse_trace_json(body) if media_type == _JSON else parse_trace_request(body)
                )
                response = trace_response(
                    deliver_spans(
                        receiver.consumer,
                        trace_request,
                        stats,
                        max_value_depth=receiver.max_value_depth,
                        raw=RawRequest("traces", _ENCODINGS[media_type], body),
                    )
                )
            else:
                logs_request = (
                    parse_logs_json(body) if media_type == _JSON else parse_logs_request(body)
                )
                response = logs_response(
                    deliver_logs(
                        receiver.consumer,
                        logs_request,
                        stats,
                        max_value_depth=receiver.max_value_depth,
                        raw=RawRequest("logs", _ENCODINGS[media_type], body),
                    )
                )
        except OtlpDecodeError as exc:
            stats.add("decode_errors")
            self._status(media_type, 400, code_pb2.INVALID_ARGUMENT, str(exc))
            return
        except Refused as exc:
            seconds = retry_after_seconds(exc.retry_after_s)
            self._status(
                media_type,
                503,
                code_pb2.UNAVAILABLE,
                str(exc) or "pipeline is full",
                headers=(("Retry-After", str(seconds)),),
                retry_after_s=float(seconds),
            )
            return
        except Exception:
            log.exception("OTLP/HTTP export failed")
            stats.add("internal_errors")
            self._status(
                media_type, 500, code_pb2.INTERNAL, "internal error while handling the export"
            )
            return
        finally:
            stats.add_cpu(time.thread_time() - started)
        self._send(200, _encode(response, media_type), media_type)

    # --- body -------------------------------------------------------------------------------

    def _has_body(self) -> bool:
        if "Transfer-Encoding" in self.headers:
            return True
        length = (self.headers.get("Content-Length") or "0").strip()
        return not (length.isascii() and length.isdigit() and int(length) == 0)

    def _read_body(self, limit: int) -> bytes:
        transfer_encoding = self.headers.get("Transfer-Encoding")
        if transfer_encoding is not None:
            if "Content-Length" in self.headers:
                raise _HttpError(
                    400,
                    code_pb2.INVALID_ARGUMENT,
                    "both Transfer-Encoding and Content-Length are set",
                )
            if transfer_encoding.strip().lower() != "chunked":
                raise _HttpError(
                    501,
                    code_pb2.UNIMPLEMENTED,
                    f"unsupported Transfer-Encoding {transfer_encoding!r}",
                )
            return self._read_chunked(limit)
        lengths = {value.strip() for value in self.headers.get_all("Content-Length") or ()}
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
        body = self._read_exact(length)
        self._body_read = True
        return body

    def _read_exact(self, length: int) -> bytes:
        try:
            body = self.rfile.read(length)
        except TimeoutError as exc:
            raise _HttpError(
                408, code_pb2.DEADLINE_EXCEEDED, "timed out reading the request body"
            ) from exc
        if len(body) < length:
            raise ConnectionError("client closed the connection mid-body")
        return body

    def _read_chunked(self, limit: int) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024)
            if not line.endswith(b"\n"):
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
            parts.append(self._read_exact(size))
            if self.rfile.readline(3).strip():
                raise _HttpError(400, code_pb2.INVALID_ARGUMENT, "malformed chunked body")
        # Trailer section: header lines up to an empty line.
        for _ in range(100):
            line = self.rfile.readline(8192)
            if line in (b"\r\n", b"\n", b""):
                self._body_read = True
                return b"".join(parts)
        raise _HttpError(400, code_pb2.INVALID_ARGUMENT, "too many chunked trailers")

    def _discard_unread(self) -> None:
        """Lingering close: stop sending, then swallow what the client is still sending for a
        moment, so closing with unread data does not reset the connection before the client
        has read our response."""
        connection = self.connection
        connection.shutdown(socket.SHUT_WR)
        connection.settimeout(_LINGER_SECONDS)
        discarded = 0
        while discarded < _LINGER_BYTES:
            chunk = connection.recv(65536)
            if not chunk:
                break
            discarded += len(chunk)

    # --- responses --------------------------------------------------------------------------

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        if not self._body_read and self._has_body():
            self.close_connection = True
            self._linger = True
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _plain(self, status: int, text: str, headers: Sequence[tuple[str, str]] = ()) -> None:
        self._send(status, text.encode(), "text/plain; charset=utf-8", headers)

    def _status(
        self,
        media_type: str,
        http_status: int,
        grpc_code: int,
        message: str,
        *,
        headers: Sequence[tuple[str, str]] = (),
        retry_after_s: float | None = None,
    ) -> None:
        status = status_pb2.Status(code=grpc_code, message=message)
        if retry_after_s is not None:
            retry_delay = Duration()
            retry_delay.FromNanoseconds(round(retry_after_s * 1e9))
            status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=retry_delay))
        self._send(http_status, _encode(status, media_type), media_type, headers)


def _default_health() -> tuple[int, str]:
    return 200, "ok"


class HttpReceiver:
    """An OTLP/HTTP server feeding a `TelemetryConsumer`.

    Each connection gets its own thread, and the consumer is called on it, so the consumer
    must be thread-safe. `health_check` returns the (HTTP status, text) for GET /healthz.
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
        self.stats_counter = ReceiverStats()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._port = 0

    @property
    def port(self) -> int:
        """The bound TCP port (useful when the endpoint asked for port 0)."""
        if not self._port:
            raise RuntimeError("HttpReceiver is not started")
        return self._port

    @property
    def stats(self) -> dict[str, int]:
        """A snapshot of the request and item counters."""
        return self.stats_counter.snapshot()

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

    def start(self) -> None:
        """Bind and start serving in a background thread; raises OSError if binding fails."""
        with self._lock:
            if self._server is not None:
                raise RuntimeError("HttpReceiver already started")
            host, _ = self._address
            server_class = _Server6 if ":" in host else _Server
            server = server_class(self._address, self)
            if self.ssl_context is not None:
                # The handshake runs on each connection's own thread (see _Handler.setup), so
                # a slow or hostile client cannot stall the accept loop.
                server.socket = self.ssl_context.wrap_socket(
                    server.socket, server_side=True, do_handshake_on_connect=False
                )
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.1},
                name="otlp-http",
                daemon=True,
            )
            thread.start()
            self._server = server
            self._thread = thread
            self._port = int(server.server_address[1])
            log.info(
                "OTLP/HTTP receiver listening on %s:%d%s%s",
                host or "0.0.0.0",
                self._port,
                " (TLS)" if self.ssl_context is not None else "",
                " (bearer token required)" if self.auth_token else "",
            )

    def shutdown(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let requests in progress finish for up to `grace_s` seconds, then
        close every connection."""
        with self._lock:
            server, thread = self._server, self._thread
            self._server = None
            self._thread = None
        if server is None:
            return
        server.shutdown()
        server.drain(grace_s)
        server.server_close()
        if thread is not None:
            thread.join(timeout=5.0)
