"""`receivers`: where telemetry comes in (OTLP over gRPC and over HTTP) and the bounds on
what a request may cost."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GrpcReceiverConfig:
    """OTLP over gRPC (`opentelemetry.proto.collector.{trace,logs}.v1` services)."""

    # Serve OTLP/gRPC at all.
    enabled: bool = True
    # Loopback by default: exposing the receiver to the network is a deliberate choice.
    endpoint: str = "127.0.0.1:4317"
    # Largest request accepted; a larger one is refused with RESOURCE_EXHAUSTED.
    max_message_bytes: int = 16 * 1024 * 1024
    # Requests decoded at once (worker threads). Calls still receiving their request wait
    # on the server's event loop, not on a worker. As many threads again serve requests too
    # large for their size to bound their cost (their objects are counted first), so those
    # cannot hold up the others.
    max_workers: int = 4
    # Export calls in progress at once, receiving or decoding, from all senders together.
    # Past it a call is refused with UNAVAILABLE and a retry delay (counted as
    # rpcs_over_limit).
    max_concurrent_rpcs: int = 64
    # Export calls in progress at once from one IP address; past it a call is refused with
    # UNAVAILABLE and a retry delay (counted as rpcs_over_peer_limit). Below
    # max_concurrent_rpcs, so one peer holding calls open cannot take every slot.
    max_concurrent_rpcs_per_peer: int = 16
    # Open connections from all senders together; past it grpcio closes a new connection as
    # soon as it is accepted (inside grpcio, so not counted by the receiver).
    max_connections: int = 1024
    # Calls open at once on one HTTP/2 connection (SETTINGS_MAX_CONCURRENT_STREAMS). Enforced
    # by grpcio's HTTP/2 layer (a stream past it is refused there), which the receiver cannot
    # count; calls past max_concurrent_rpcs are counted.
    max_concurrent_streams: int = 16
    # A call must have received its whole request within this many seconds of starting;
    # past it the call ends with DEADLINE_EXCEEDED (counted as receive_timeouts).
    receive_timeout_s: float = 10.0
    # Largest request metadata (headers) accepted on a call; enforced by grpcio before the
    # call reaches the receiver (so not counted by it).
    max_metadata_bytes: int = 16 * 1024
    # The server pings a connection quiet for this long, and closes it if the ping is not
    # answered within keepalive_timeout_s.
    keepalive_time_s: float = 60.0
    # How long a keepalive ping may go unanswered.
    keepalive_timeout_s: float = 20.0
    # A connection without calls for this long is closed.
    max_connection_idle_s: float = 300.0
    # A connection older than this is asked to close (senders reconnect), so none is held
    # forever; calls in progress get max_connection_age_grace_s to finish.
    max_connection_age_s: float = 3600.0
    # Time calls in progress get when their connection reaches max_connection_age_s.
    max_connection_age_grace_s: float = 30.0


@dataclass
class HttpReceiverConfig:
    """OTLP over HTTP (`/v1/traces`, `/v1/logs`, protobuf or JSON) and `GET /healthz`."""

    # Serve OTLP/HTTP and the health endpoint at all.
    enabled: bool = True
    # Loopback by default; health checks (container, Kubernetes probes) use this port.
    endpoint: str = "127.0.0.1:4318"
    # Checked before reading and again while decompressing (a gzip bomb stops here).
    max_body_bytes: int = 16 * 1024 * 1024
    # A kept-alive connection idle for this long between requests is closed.
    socket_timeout_s: float = 30.0
    # Open connections from all senders together; past it a new connection is closed as soon
    # as it is accepted (counted as connections_over_limit).
    max_connections: int = 1024
    # Open connections from one IP address; past it a new one is closed as soon as it is
    # accepted (counted as connections_over_peer_limit).
    max_connections_per_peer: int = 64
    # A request's line and headers must arrive within this many seconds of its first byte
    # (a total, not per read: a header trickled a line at a time is cut here; counted as
    # header_timeouts). Also bounds the TLS handshake.
    header_timeout_s: float = 10.0
    # A request's body must arrive within this many seconds of its headers (a total;
    # counted as body_timeouts; answered 408).
    body_timeout_s: float = 30.0
    # Largest request line plus headers (431 past it; counted as headers_too_large).
    max_header_bytes: int = 64 * 1024
    # Export requests in progress at once (reading their body, waiting for a worker or
    # decoding); past it a request is answered 503 with Retry-After before its body is read
    # (counted as requests_over_limit). Larger than max_connections_per_peer, so one peer
    # sending slow bodies cannot take every slot.
    max_concurrent_requests: int = 256
    # Requests decoded at once (worker threads); the rest wait, their memory held in
    # receivers.memory_budget_bytes. As many threads again inflate compressed bodies and count
    # the objects of bodies too large for their size to bound their cost, so those cannot
    # hold up the others.
    max_workers: int = 4
    # gzip members in one request body (real senders send one); past it 413 (counted as
    # gzip_members_over_limit).
    max_gzip_members: int = 16


@dataclass
class ReceiversConfig:
    """Where telemetry comes in."""

    grpc: GrpcReceiverConfig = field(default_factory=GrpcReceiverConfig)
    http: HttpReceiverConfig = field(default_factory=HttpReceiverConfig)
    # Attribute values nested deeper than this (arrays in maps in arrays ...) are replaced by
    # "[truncated: depth]"; at most 256.
    max_value_depth: int = 32
    # Memory that requests in progress on both receivers may hold at once: each request's
    # body and what decoding it takes (counted from the body before decoding: about 384
    # bytes per protobuf message, 3 per body byte). A request that does not fit now is
    # refused with OTLP's retryable status (503 / UNAVAILABLE, counted as
    # memory_budget_full); one that could never fit, with 413 / INVALID_ARGUMENT.
    memory_budget_bytes: int = 1024 * 1024 * 1024
    # Objects (messages and repeated values) one request may decode into, counted from its
    # bytes before decoding: 16 MB of empty spans would be 8 million. Past it the request is
    # refused with 413 / INVALID_ARGUMENT (not retryable; counted as too_many_objects).
    max_request_objects: int = 1_000_000
