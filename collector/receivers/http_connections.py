"""The connections of the HTTP receiver's server: capped, then served request by request.

Connections are capped in all and per peer address (closed as soon as accepted past the cap);
each is then served one request at a time, its headers and body read by `http_wire` within
their bounds, until the client closes it, asks for it to be closed, or a response goes out
before its body was read (the unread bytes would corrupt the next request). Every bound hit
is counted in the receiver's stats. Touched on the event loop's thread only.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable

from mast_otel.collector.receivers.delivery import ReceiverStats
from mast_otel.collector.receivers.http_wire import (
    LINGER_SECONDS,
    Closed,
    HttpError,
    Request,
    Response,
    discard_unread,
    parse_head,
    read_head,
    send,
)

__all__ = ["Connections", "Dispatch", "ErrorResponse"]

# Logged under the receiver's name, as the receiver's own messages are.
log = logging.getLogger("mast_otel.collector.receivers.http_receiver")

# Answers one parsed request (its body, if any, still to be read from the reader).
Dispatch = Callable[[Request, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[Response]]
# The response to a failure, for the request when it was parsed.
ErrorResponse = Callable[[Request | None, HttpError], Response]


class Connections:
    """The open connections, by peer, and how each is served (`serve`, the server's callback)."""

    def __init__(
        self,
        dispatch: Dispatch,
        error_response: ErrorResponse,
        *,
        max_connections: int,
        max_connections_per_peer: int,
        idle_timeout_s: float,
        header_timeout_s: float,
        max_header_bytes: int,
        drain_timeout_s: float,
        stats: ReceiverStats,
    ) -> None:
        self.dispatch = dispatch
        self.error_response = error_response
        self.max_connections = max_connections
        self.max_connections_per_peer = max_connections_per_peer
        self.idle_timeout_s = idle_timeout_s
        self.header_timeout_s = header_timeout_s
        self.max_header_bytes = max_header_bytes
        self.drain_timeout_s = drain_timeout_s
        self.stats = stats
        self.open = 0
        self.per_peer: Counter[str] = Counter()
        self.writers: set[asyncio.StreamWriter] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        peer = str(peername[0]) if isinstance(peername, tuple) else str(peername)
        stats = self.stats
        if self.open >= self.max_connections:
            stats.add("connections_over_limit")
            writer.transport.abort()
            return
        if self.per_peer[peer] >= self.max_connections_per_peer:
            stats.add("connections_over_peer_limit")
            writer.transport.abort()
            return
        self.open += 1
        self.per_peer[peer] += 1
        self.writers.add(writer)
        try:
            first = True
            while await self._serve_one(reader, writer, first):
                first = False
        except (TimeoutError, ConnectionError, OSError, ssl.SSLError, Closed):
            pass
        except Exception:
            log.debug("OTLP/HTTP connection from %s failed", peer, exc_info=True)
        finally:
            # Flush what is left of the last response, briefly; a peer that does not read it
            # is cut.
            try:
                writer.close()
                await asyncio.wait_for(writer.wait_closed(), timeout=LINGER_SECONDS)
            except (TimeoutError, ConnectionError, OSError, ssl.SSLError):
                pass
            finally:
                writer.transport.abort()
                self.open -= 1
                self.per_peer[peer] -= 1
                if self.per_peer[peer] <= 0:
                    del self.per_peer[peer]
                self.writers.discard(writer)

    async def _serve_one(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bool
    ) -> bool:
        """Serve one request; whether the connection stays open for another."""
        request: Request | None = None
        drain_timeout_s = self.drain_timeout_s
        try:
            head = await read_head(
                reader,
                first,
                idle_timeout_s=self.idle_timeout_s,
                header_timeout_s=self.header_timeout_s,
                max_header_bytes=self.max_header_bytes,
                stats=self.stats,
            )
            if head is None:
                return False
            request = parse_head(head)
            response = await self.dispatch(request, reader, writer)
        except HttpError as exc:
            response = self.error_response(request, exc)
            if request is None:
                await send(writer, None, response, close=True, drain_timeout_s=drain_timeout_s)
                return False
        keep = request.keep_alive()
        early = not request.body_read and request.has_body()
        await send(
            writer, request, response, close=early or not keep, drain_timeout_s=drain_timeout_s
        )
        if early:
            await discard_unread(reader)
            return False
        return keep
