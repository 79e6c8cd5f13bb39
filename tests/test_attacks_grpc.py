"""The OTLP/gRPC receiver under attack, with a legitimate OpenTelemetry SDK exporter sending
beside the attacker the whole time: its exports must keep succeeding.

The attacker is a raw HTTP/2 client (the `h2` package over a plain socket on loopback) that
opens gRPC calls announcing a 1,000-byte message, sends 10 bytes of it and holds the rest.
Every attack is bounded in count and time and stops by itself.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import h2.config
import h2.connection
import h2.events
import h2.exceptions
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mast_otel.collector.config.receivers import GrpcReceiverConfig
from mast_otel.collector.receivers.grpc_receiver import GrpcReceiver
from tests.test_receivers import RecordingConsumer

TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
# A gRPC message header announcing 1,000 bytes, then 10 of them.
PARTIAL_MESSAGE = b"\x00" + (1000).to_bytes(4, "big") + b"x" * 10


class StallingClient:
    """Keeps `streams` unfinished gRPC calls open on one HTTP/2 connection, opening a new one
    whenever the server ends one, until stopped."""

    def __init__(
        self,
        port: int,
        streams: int,
        metadata: list[tuple[str, str]] = (),
        source: str = "127.0.0.1",
        max_opened: int = 500,
    ) -> None:
        self.sock = socket.create_connection(
            ("127.0.0.1", port), timeout=1, source_address=(source, 0)
        )
        self.max_opened = max_opened
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.streams = streams
        self.metadata = list(metadata)
        self.lock = threading.Lock()
        self.open: set[int] = set()
        self.opened = 0
        self.ended_by_server = 0
        self.goaway = False
        self.stop = threading.Event()
        with self.lock:
            self.conn.initiate_connection()
            self._top_up()
            self.sock.sendall(self.conn.data_to_send())
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _top_up(self) -> None:
        while len(self.open) < self.streams and self.opened < self.max_opened:
            stream = self.conn.get_next_available_stream_id()
            headers = [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", TRACE_EXPORT),
                (":authority", "127.0.0.1"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                *self.metadata,
            ]
            self.conn.send_headers(stream, headers)
            self.conn.send_data(stream, PARTIAL_MESSAGE)
            self.open.add(stream)
            self.opened += 1

    def _run(self) -> None:
        deadline = time.monotonic() + 30  # stops by itself whatever happens
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            with self.lock:
                try:
                    events = self.conn.receive_data(data)
                except h2.exceptions.ProtocolError:
                    # A frame after the server's GOAWAY (grpc sends a PING with it), which h2
                    # refuses once the connection is closed.
                    closed = h2.connection.ConnectionState.CLOSED
                    self.goaway = self.conn.state_machine.state == closed
                    return
                for event in events:
                    if isinstance(event, h2.events.ConnectionTerminated):
                        self.goaway = True
                    ended = getattr(event, "stream_id", None)
                    if isinstance(event, h2.events.StreamEnded | h2.events.StreamReset) and (
                        ended in self.open
                    ):
                        self.open.discard(ended)
                        self.ended_by_server += 1
                if not self.stop.is_set():
                    self._top_up()
                try:
                    self.sock.sendall(self.conn.data_to_send())
                except OSError:
                    return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


@contextmanager
def steady_sender(port: int, headers: tuple[tuple[str, str], ...] = ()) -> Iterator[list[str]]:
    """A real SDK exporter sending one span every 0.2 s; yields the list of results."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    tracer = provider.get_tracer("steady")
    exporter = GrpcSpanExporter(
        endpoint=f"127.0.0.1:{port}", insecure=True, timeout=3, headers=headers or None
    )
    results: list[str] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            with tracer.start_as_current_span("steady"):
                pass
            spans = memory.get_finished_spans() or ()
            memory.clear()
            started = time.monotonic()
            # One attempt per export: a retry hidden inside the exporter would mask a stall.
            result = exporter.export(spans) if spans else SpanExportResult.SUCCESS
            took = time.monotonic() - started
            results.append("ok" if result == SpanExportResult.SUCCESS and took < 3 else "fail")
            stop.wait(0.2)

    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider.add_span_processor(SimpleSpanProcessor(memory))
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield results
    finally:
        stop.set()
        thread.join(timeout=15)
        exporter.shutdown()
        provider.shutdown()
        print(f"steady sender: {results.count('ok')}/{len(results)} ok")


def receiver_with(consumer: RecordingConsumer, **kwargs: object) -> GrpcReceiver:
    limits = GrpcReceiverConfig(receive_timeout_s=1.5)
    receiver = GrpcReceiver(consumer, "127.0.0.1:0", limits=limits, **kwargs)  # type: ignore[arg-type]
    receiver.start()
    return receiver


def test_unfinished_streams_on_one_connection_do_not_stop_other_senders() -> None:
    consumer = RecordingConsumer()
    receiver = receiver_with(consumer)
    try:
        attacker = StallingClient(receiver.port, streams=8)
        try:
            time.sleep(0.3)
            # Streams per connection are bounded (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS).
            assert attacker.conn.remote_settings.max_concurrent_streams == 16
            with steady_sender(receiver.port) as results:
                time.sleep(4)
        finally:
            attacker.close()
        assert len(results) >= 10
        assert results.count("fail") == 0, results
        assert len(consumer.spans) == len(results)
        # Held calls are ended at the receive deadline, and counted.
        assert receiver.stats["receive_timeouts"] >= 8
        assert attacker.ended_by_server >= 8
    finally:
        receiver.shutdown(0)


def test_unauthenticated_streams_hold_no_worker() -> None:
    consumer = RecordingConsumer()
    receiver = receiver_with(consumer, auth_token="s3cret")
    try:
        attacker = StallingClient(receiver.port, streams=8)
        try:
            time.sleep(0.3)
            with steady_sender(receiver.port, (("authorization", "Bearer s3cret"),)) as results:
                time.sleep(3)
        finally:
            attacker.close()
        assert receiver.stats["unauthenticated"] >= 8
    finally:
        receiver.shutdown(0)
    assert len(results) >= 8
    assert results.count("fail") == 0, results


def test_one_peer_holding_calls_open_cannot_take_every_slot() -> None:
    consumer = RecordingConsumer()
    receiver = receiver_with(consumer)
    attackers: list[StallingClient] = []
    try:
        # Five connections from one address, sixteen unfinished calls on each.
        attackers = [
            StallingClient(receiver.port, streams=16, source="127.0.0.6", max_opened=100)
            for _ in range(5)
        ]
        time.sleep(0.5)
        with steady_sender(receiver.port) as results:
            time.sleep(4)
        assert receiver.stats["rpcs_over_peer_limit"] >= 5 * 16 - 16
    finally:
        for attacker in attackers:
            attacker.close()
        receiver.shutdown(0)
    assert len(results) >= 10
    assert results.count("fail") == 0, results


def test_rpcs_in_progress_are_capped_and_counted() -> None:
    consumer = RecordingConsumer()
    limits = GrpcReceiverConfig(max_concurrent_rpcs=4, receive_timeout_s=5)
    receiver = GrpcReceiver(consumer, "127.0.0.1:0", limits=limits)
    receiver.start()
    try:
        attacker = StallingClient(receiver.port, streams=4)
        try:
            time.sleep(0.5)
            assert receiver.stats["rpcs_in_progress"] == 4
            channel = grpc.insecure_channel(f"127.0.0.1:{receiver.port}")
            call = channel.unary_unary(TRACE_EXPORT)
            try:
                call(b"", timeout=3)
                raise AssertionError("a fifth RPC was taken past max_concurrent_rpcs")
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAVAILABLE
                assert "max_concurrent_rpcs" in (exc.details() or "")
            finally:
                channel.close()
        finally:
            attacker.close()
        assert receiver.stats["rpcs_over_limit"] >= 1
    finally:
        receiver.shutdown(0)


def test_duplicated_authorization_metadata_is_refused() -> None:
    consumer = RecordingConsumer()
    receiver = receiver_with(consumer, auth_token="s3cret")
    channel = grpc.insecure_channel(f"127.0.0.1:{receiver.port}")
    try:
        call = channel.unary_unary(TRACE_EXPORT)
        good = (("authorization", "Bearer s3cret"),)
        assert call(b"", timeout=3, metadata=good) == b""
        for metadata in (
            (("authorization", "Bearer s3cret"), ("authorization", "Bearer s3cret")),
            (("authorization", "Bearer  s3cret"),),
            (("authorization", "Basic s3cret"),),
        ):
            try:
                call(b"", timeout=3, metadata=metadata)
                raise AssertionError(f"{metadata} was accepted")
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        channel.close()
        receiver.shutdown(0)


def test_idle_and_old_connections_are_closed() -> None:
    consumer = RecordingConsumer()
    for limits in (
        GrpcReceiverConfig(max_connection_idle_s=1.0),
        GrpcReceiverConfig(max_connection_age_s=1.0, max_connection_age_grace_s=0.5),
    ):
        receiver = GrpcReceiver(consumer, "127.0.0.1:0", limits=limits)
        receiver.start()
        try:
            client = StallingClient(receiver.port, streams=0)
            try:
                deadline = time.monotonic() + 5
                while not client.goaway and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert client.goaway, limits
            finally:
                client.close()
        finally:
            receiver.shutdown(0)


def test_connections_are_capped() -> None:
    consumer = RecordingConsumer()
    receiver = GrpcReceiver(consumer, "127.0.0.1:0", limits=GrpcReceiverConfig(max_connections=5))
    receiver.start()
    socks: list[socket.socket] = []
    try:
        socks = [socket.create_connection(("127.0.0.1", receiver.port)) for _ in range(10)]
        time.sleep(0.5)
        closed = 0
        for sock in socks:
            sock.settimeout(0.2)
            try:
                if not sock.recv(65536):
                    closed += 1
            except TimeoutError:
                pass
            except OSError:
                closed += 1
        assert closed >= 5
        for sock in socks:
            sock.close()
        time.sleep(0.3)
        # Once the connections are gone, senders get in again.
        with grpc.insecure_channel(f"127.0.0.1:{receiver.port}") as channel:
            assert channel.unary_unary(TRACE_EXPORT)(b"", timeout=5) == b""
    finally:
        for sock in socks:
            sock.close()
        receiver.shutdown(0)
