"""HTTP/1.1 on asyncio streams, as the OTLP/HTTP receiver speaks it, with every wait bounded.

A request's line and headers are read within `header_timeout_s` (a total from the first byte,
not per read, so a header trickled a line at a time is cut), after a kept-alive connection has
waited at most its idle timeout for that first byte; a body is read within `body_timeout_s`.
A body is size-checked before it is read (Content-Length, or the running total of a chunked
body), read into one buffer, however small the pieces it arrives in, and its bytes are taken
from the memory budget as they arrive (a body announced large and trickled holds only what it
sent). Every bound hit is counted in the receiver's stats.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from google.rpc import code_pb2

from mast_otel.collector.receivers.delivery import ReceiverStats
from mast_otel.collector.receivers.limits import MemoryBudget

__all__ = [
    "LINGER_SECONDS",
    "REASONS",
    "Closed",
    "HttpError",
    "Request",
    "Response",
    "budget_full",
    "discard_unread",
    "parse_head",
    "plain",
    "read_body",
    "read_head",
    "send",
    "split_endpoint",
]

_HEX_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_REQUEST_LINE = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP/(1\.[01])")
# Headers a request may carry once only (a repeat is refused: 400, or 401 for Authorization).
_SINGLE = ("authorization", "content-type", "content-encoding", "transfer-encoding", "host")
# After an early response, read (and discard) at most this much of the unread body so the
# client sees the response instead of a connection reset.
_LINGER_BYTES = 1024 * 1024
LINGER_SECONDS = 1.0
_READ_CHUNK = 256 * 1024

REASONS = {
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


class HttpError(Exception):
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


class Closed(Exception):
    """The connection is to be dropped without an answer (peer gone, deadline passed)."""


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """Split "host:port", "[v6]:port" or ":port" (every interface, as in the Collector)."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"endpoint must look like host:port, got {endpoint!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


class Request:
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


def parse_head(head: bytes) -> Request:
    text = head.decode("latin-1")
    lines = text.split("\r\n")
    match = _REQUEST_LINE.fullmatch(lines[0])
    if not match:
        raise HttpError(400, code_pb2.INVALID_ARGUMENT, "malformed request line")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name):
            raise HttpError(400, code_pb2.INVALID_ARGUMENT, f"malformed header line {line!r}")
        headers.append((name.lower(), value.strip(" \t")))
    request = Request(match[1], match[2], match[3], headers)
    counts = Counter(key for key, _ in headers)
    for name in _SINGLE:
        if counts[name] > 1 and name != "authorization":
            raise HttpError(400, code_pb2.INVALID_ARGUMENT, f"repeated {name} header")
    return request


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()


def plain(status: int, text: str, headers: Sequence[tuple[str, str]] = ()) -> Response:
    return Response(status, text.encode(), "text/plain; charset=utf-8", tuple(headers))


async def read_head(
    reader: asyncio.StreamReader,
    first: bool,
    *,
    idle_timeout_s: float,
    header_timeout_s: float,
    max_header_bytes: int,
    stats: ReceiverStats,
) -> bytes | None:
    """The request line and headers, or None when the client closed between requests.
    A new connection has `header_timeout_s` for them; a kept-alive one waits up to
    `idle_timeout_s` idle for the first byte, then has `header_timeout_s` for the rest."""
    lead = b""
    if not first:
        try:
            lead = await asyncio.wait_for(reader.read(1), timeout=idle_timeout_s)
        except TimeoutError:
            stats.add("idle_timeouts")
            raise Closed from None
        if not lead:
            return None
    try:
        async with asyncio.timeout(header_timeout_s):
            head = await reader.readuntil(b"\r\n\r\n")
    except TimeoutError:
        stats.add("header_timeouts")
        raise Closed from None
    except asyncio.IncompleteReadError as exc:
        if not exc.partial and not lead:
            return None
        raise Closed from None
    except asyncio.LimitOverrunError:
        stats.add("headers_too_large")
        raise HttpError(
            431,
            code_pb2.INVALID_ARGUMENT,
            f"request headers exceed {max_header_bytes} bytes (receivers.http.max_header_bytes)",
        ) from None
    return lead + head


def budget_full(stats: ReceiverStats) -> HttpError:
    stats.add("memory_budget_full")
    stats.add("requests_refused")
    return HttpError(
        503,
        code_pb2.UNAVAILABLE,
        "the receivers' memory budget is taken by requests in progress "
        "(receivers.memory_budget_bytes): retry later",
        headers=(("Retry-After", "1"),),
        retry_after_s=1.0,
    )


async def read_body(
    request: Request,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    limit: int,
    body_timeout_s: float,
    budget: MemoryBudget,
    stats: ReceiverStats,
) -> tuple[bytearray, int]:
    """The body, at most `limit` bytes, read within `body_timeout_s`, and the budget bytes it
    holds."""
    transfer_encoding = request.all("transfer-encoding")
    if transfer_encoding:
        if request.all("content-length"):
            raise HttpError(
                400,
                code_pb2.INVALID_ARGUMENT,
                "both Transfer-Encoding and Content-Length are set",
            )
        if transfer_encoding[0].strip().lower() != "chunked":
            raise HttpError(
                501,
                code_pb2.UNIMPLEMENTED,
                f"unsupported Transfer-Encoding {transfer_encoding[0]!r}",
            )
    else:
        lengths = {value.strip() for value in request.all("content-length")}
        if not lengths:
            raise HttpError(411, code_pb2.INVALID_ARGUMENT, "Content-Length is required")
        if len(lengths) > 1:
            raise HttpError(400, code_pb2.INVALID_ARGUMENT, "conflicting Content-Length")
        (text,) = lengths
        if not (text.isascii() and text.isdigit()):
            raise HttpError(400, code_pb2.INVALID_ARGUMENT, f"invalid Content-Length {text!r}")
        length = int(text)
        if length > limit:
            raise HttpError(
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
                raise Closed("client closed the connection mid-body")
            if not budget.try_take(len(chunk)):
                raise budget_full(stats)
            held += len(chunk)
            body.extend(chunk)

    try:
        async with asyncio.timeout(body_timeout_s):
            if (request.get("expect") or "").lower() == "100-continue":
                # The body is wanted: say so rather than have the client wait for a timeout.
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                await writer.drain()
            if transfer_encoding:
                async for size in _chunks(reader, limit):
                    await read_into(size)
                    if await reader.readline() not in (b"\r\n", b"\n"):
                        raise HttpError(400, code_pb2.INVALID_ARGUMENT, "malformed chunked body")
            else:
                await read_into(length)
    except TimeoutError:
        if held:
            budget.give_back(held)
        stats.add("body_timeouts")
        raise HttpError(
            408,
            code_pb2.DEADLINE_EXCEEDED,
            f"the request body was not received within {body_timeout_s:g} s "
            "(receivers.http.body_timeout_s)",
        ) from None
    except asyncio.IncompleteReadError:
        if held:
            budget.give_back(held)
        raise Closed("client closed the connection mid-body") from None
    except BaseException:
        if held:
            budget.give_back(held)
        raise
    request.body_read = True
    return body, held


async def _chunks(reader: asyncio.StreamReader, limit: int) -> AsyncIterator[int]:
    """Chunk sizes of a chunked body (its trailer section is read at the end)."""
    total = 0
    while True:
        line = await reader.readline()
        if not line.endswith(b"\n") or len(line) > 1024:
            raise HttpError(400, code_pb2.INVALID_ARGUMENT, "malformed chunked body")
        size_text = line.split(b";", 1)[0].strip()
        if not _HEX_SIZE.fullmatch(size_text):
            raise HttpError(400, code_pb2.INVALID_ARGUMENT, "malformed chunk size")
        size = int(size_text, 16)
        if size == 0:
            break
        total += size
        if total > limit:
            raise HttpError(
                413,
                code_pb2.RESOURCE_EXHAUSTED,
                f"chunked request body exceeds the limit of {limit} bytes",
            )
        yield size
    for _ in range(100):
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            return
    raise HttpError(400, code_pb2.INVALID_ARGUMENT, "too many chunked trailers")


async def send(
    writer: asyncio.StreamWriter,
    request: Request | None,
    response: Response,
    *,
    close: bool,
    drain_timeout_s: float,
) -> None:
    lines = [
        f"HTTP/1.1 {response.status} {REASONS.get(response.status, 'Unknown')}",
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
    async with asyncio.timeout(drain_timeout_s):
        await writer.drain()


async def discard_unread(reader: asyncio.StreamReader) -> None:
    """Lingering close: swallow what the client is still sending for a moment, so closing
    with unread data does not reset the connection before the client has read our
    response."""
    discarded = 0
    with contextlib.suppress(TimeoutError, ConnectionError, OSError):
        async with asyncio.timeout(LINGER_SECONDS):
            while discarded < _LINGER_BYTES:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                discarded += len(chunk)
