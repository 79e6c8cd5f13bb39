"""The OTLP/HTTP receiver (and both receivers' memory) under attack, with a legitimate
OpenTelemetry SDK exporter sending beside the attacker: its exports must keep succeeding.

Attackers connect from other loopback addresses (127.0.0.2 and up) than the sender
(127.0.0.1), as they would from other hosts, so per-peer bounds can tell them apart. Every
attack is bounded in count and time, targets loopback only and stops by itself.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import grpc
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mast_otel.collector.config.receivers import HttpReceiverConfig
from mast_otel.collector.receivers.http_receiver import HttpReceiver
from tests.load import CollectorProcess, free_port
from tests.test_receivers import RecordingConsumer, pb_request, pb_span

TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@contextmanager
def steady_sender(port: int) -> Iterator[list[str]]:
    """A real SDK exporter sending one span every 0.2 s over OTLP/HTTP; yields its results."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("steady")
    exporter = HttpSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=5)
    results: list[str] = []
    latencies: list[float] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            with tracer.start_as_current_span("steady"):
                pass
            spans = memory.get_finished_spans()
            memory.clear()
            started = time.monotonic()
            # Success within the exporter's own timeout (5 s), its retries on 503 included.
            result = exporter.export(spans)
            took = time.monotonic() - started
            results.append("ok" if result == SpanExportResult.SUCCESS else "fail")
            latencies.append(took)
            stop.wait(0.2)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield results
    finally:
        stop.set()
        thread.join(timeout=15)
        exporter.shutdown()
        provider.shutdown()
        if latencies:
            ok = results.count("ok")
            print(f"steady sender: {ok}/{len(results)} ok, slowest {max(latencies):.2f} s")


def connect_from(source: str, port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=2, source_address=(source, 0))


def closed_by_server(sock: socket.socket, within_s: float) -> bool:
    """Whether the server closes `sock` within `within_s` (reading whatever it sends)."""
    sock.settimeout(0.1)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            continue
        except OSError:
            return True
    return False


class Slowloris:
    """`count` connections from `source`, each sending a request line and then one header
    line every `interval_s`, never finishing; stops by itself after `duration_s`."""

    def __init__(self, port: int, source: str, count: int, interval_s: float, duration_s: float):
        self.socks: list[socket.socket] = []
        self.refused = 0
        for _ in range(count):
            try:
                sock = connect_from(source, port)
                sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")
                self.socks.append(sock)
            except OSError:
                self.refused += 1
        self.cut = [False] * len(self.socks)
        self.stop = threading.Event()
        self.interval_s = interval_s
        self.thread = threading.Thread(target=self._run, args=(duration_s,), daemon=True)
        self.thread.start()

    def _run(self, duration_s: float) -> None:
        deadline = time.monotonic() + duration_s
        n = 0
        while not self.stop.is_set() and time.monotonic() < deadline:
            for i, sock in enumerate(self.socks):
                if self.cut[i]:
                    continue
                try:
                    sock.sendall(f"X-Trickle-{n}: {'a' * 20}\r\n".encode())
                except OSError:
                    self.cut[i] = True
            n += 1
            self.stop.wait(self.interval_s)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        for sock in self.socks:
            sock.close()


def test_slowloris_is_cut_at_the_header_deadline_and_capped_per_peer() -> None:
    consumer = RecordingConsumer()
    limits = HttpReceiverConfig(
        max_connections=200, max_connections_per_peer=10, header_timeout_s=2
    )
    receiver = HttpReceiver(consumer, "127.0.0.1:0", limits=limits)
    receiver.start()
    try:
        with steady_sender(receiver.port) as results:
            attack = Slowloris(receiver.port, "127.0.0.2", 40, interval_s=0.3, duration_s=8)
            try:
                time.sleep(0.5)
                # Only the per-peer cap's worth of them is held; the rest were closed at once.
                held = [sock for sock in attack.socks if not closed_by_server(sock, 0.05)]
                assert attack.refused + len(attack.socks) - len(held) >= 30
                assert len(held) <= 10
                # Trickling a header line every 0.3 s does not extend the header deadline.
                assert all(closed_by_server(sock, limits.header_timeout_s + 1.5) for sock in held)
            finally:
                attack.close()
    finally:
        receiver.shutdown(0)
    stats = receiver.stats
    assert stats["connections_over_peer_limit"] >= 30
    assert stats["header_timeouts"] >= 10
    # Served all along: one export every 0.2 s plus its latency; a loaded machine fits fewer.
    assert len(results) >= 5
    assert results.count("fail") == 0, results
    assert len(consumer.spans) == len(results)


def test_idle_connections_are_bounded_in_all_and_cut() -> None:
    consumer = RecordingConsumer()
    limits = HttpReceiverConfig(max_connections=50, max_connections_per_peer=20, header_timeout_s=2)
    receiver = HttpReceiver(consumer, "127.0.0.1:0", limits=limits)
    receiver.start()
    socks: list[socket.socket] = []
    try:
        for peer in range(3, 11):  # 8 peers x 15 idle connections = 120 > 50
            for _ in range(15):
                with suppress(OSError):
                    socks.append(connect_from(f"127.0.0.{peer}", receiver.port))
        time.sleep(0.5)
        held = [sock for sock in socks if not closed_by_server(sock, 0.05)]
        assert len(held) <= 50
        assert receiver.stats["connections_open"] <= 50
        assert receiver.stats["connections_over_limit"] >= 70
        # The idle ones held are cut at the header deadline, and senders get in again.
        started = time.monotonic()
        assert all(closed_by_server(sock, 4.0) for sock in socks)
        assert time.monotonic() - started < limits.header_timeout_s + 2
        body = pb_request(pb_span("after")).SerializeToString()
        conn = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=5)
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        for sock in socks:
            sock.close()
        receiver.shutdown(0)
    assert receiver.stats["header_timeouts"] >= 50


def test_slow_bodies_from_one_peer_hold_neither_every_slot_nor_the_budget() -> None:
    consumer = RecordingConsumer()
    receiver = HttpReceiver(consumer, "127.0.0.1:0")  # default limits
    receiver.start()
    socks: list[socket.socket] = []
    try:
        # As many connections as one peer may open, each announcing a 16 MB body and
        # trickling it a byte at a time.
        for _ in range(receiver.limits.max_connections_per_peer):
            sock = connect_from("127.0.0.5", receiver.port)
            sock.sendall(
                b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/x-protobuf\r\nContent-Length: 16777216\r\n\r\n"
            )
            socks.append(sock)
        with steady_sender(receiver.port) as results:
            deadline = time.monotonic() + 6
            while time.monotonic() < deadline:
                for sock in socks:
                    with suppress(OSError):
                        sock.send(b"\x0a")
                time.sleep(0.3)
            # The budget holds what they sent, not what they announced.
            assert receiver.budget.used < 64 * 1024
            assert receiver.stats["requests_in_progress"] >= 64
    finally:
        for sock in socks:
            sock.close()
        receiver.shutdown(0)
    assert len(results) >= 15
    assert results.count("fail") == 0, results


def test_a_body_in_one_byte_pieces_is_read_into_one_buffer() -> None:
    consumer = RecordingConsumer()
    receiver = HttpReceiver(consumer, "127.0.0.1:0")
    receiver.start()
    try:
        body = pb_request(*(pb_span(f"piece-{i}") for i in range(200))).SerializeToString()
        with socket.create_connection(("127.0.0.1", receiver.port), timeout=5) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(
                b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
            )
            for i in range(len(body)):
                sock.send(body[i : i + 1])
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert response.status == 200
    finally:
        receiver.shutdown(0)
    assert len(consumer.spans) == 200


def test_a_slow_body_is_cut_at_the_body_deadline() -> None:
    consumer = RecordingConsumer()
    limits = HttpReceiverConfig(body_timeout_s=1.5)
    receiver = HttpReceiver(consumer, "127.0.0.1:0", limits=limits)
    receiver.start()
    try:
        with socket.create_connection(("127.0.0.1", receiver.port), timeout=5) as sock:
            sock.sendall(
                b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                b"Content-Length: 1000\r\n\r\n"
            )
            started = time.monotonic()
            for _ in range(30):  # a byte every 0.1 s: each read is quick, the total is not
                try:
                    sock.sendall(b"x")
                except OSError:
                    break
                time.sleep(0.1)
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert response.status == 408
            assert time.monotonic() - started < 3.5
    finally:
        receiver.shutdown(0)
    assert receiver.stats["body_timeouts"] == 1
    assert receiver.budget.used == 0


# --- memory: a collector process under bodies of millions of empty objects ----------------

EMPTY_SPANS_BODY_BYTES = 16 * 1024 * 1024
# The serve process's resident memory must stay under this during the attack. Before
# decoding was bounded, 8 such bodies took it past 12 GB.
RSS_BOUND = 1536 * 1024 * 1024


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def empty_spans_body(size: int) -> bytes:
    """An ExportTraceServiceRequest of `size` bytes, nearly all of it empty spans (2 bytes
    each: ~size/2 spans)."""
    spans = b"\x12\x00" * ((size - 16) // 2)
    scope = b"\x12" + _varint(len(spans)) + spans
    resource = b"\x12" + _varint(len(scope)) + scope
    return b"\x0a" + _varint(len(resource)) + resource


def empty_json_spans_body(size: int) -> bytes:
    head = b'{"resourceSpans":[{"scopeSpans":[{"spans":['
    tail = b"{}]}]}]}"
    return head + b"{}," * ((size - len(head) - len(tail)) // 3) + tail


class RssWatch:
    """Samples a process's RSS every 50 ms; kills it past `bound` (so a failing run cannot
    take the machine down) and remembers the peak."""

    def __init__(self, collector: CollectorProcess, bound: int) -> None:
        self.collector = collector
        self.bound = bound
        self.peak = 0
        self.killed = False
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                rss = self.collector.rss_bytes()
            except OSError:
                return
            self.peak = max(self.peak, rss)
            if rss > self.bound:
                self.killed = True
                self.collector.ensure_stopped()
                return
            self.stop.wait(0.05)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


def post_body(port: int, body: bytes, content_type: str) -> int:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
        conn.request("POST", "/v1/traces", body, {"Content-Type": content_type})
        status = conn.getresponse().status
        conn.close()
        return status
    except OSError:
        return 0


def grpc_export(port: int, body: bytes) -> grpc.StatusCode:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            channel.unary_unary(TRACE_EXPORT)(body, timeout=15)
            return grpc.StatusCode.OK
        except grpc.RpcError as exc:
            return exc.code()


def test_bodies_of_millions_of_empty_objects_keep_memory_bounded(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("durability:\n  mode: memory\n")
    collector = CollectorProcess(config, tmp_path / "data", free_port(), free_port())
    collector.start()
    watch = RssWatch(collector, RSS_BOUND)
    try:
        baseline = collector.rss_bytes()
        protobuf = empty_spans_body(EMPTY_SPANS_BODY_BYTES)
        json_body = empty_json_spans_body(EMPTY_SPANS_BODY_BYTES)
        statuses: list[object] = []
        attackers = [
            *(
                threading.Thread(
                    target=lambda: statuses.append(
                        post_body(collector.http_port, protobuf, "application/x-protobuf")
                    )
                )
                for _ in range(8)
            ),
            *(
                threading.Thread(
                    target=lambda: statuses.append(
                        post_body(collector.http_port, json_body, "application/json")
                    )
                )
                for _ in range(4)
            ),
            *(
                threading.Thread(
                    target=lambda: statuses.append(grpc_export(collector.grpc_port, protobuf))
                )
                for _ in range(16)
            ),
        ]
        # Just under receivers.max_request_objects: taken, and decoded a few at a time
        # within the memory budget.
        under_cap = empty_spans_body(1_900_000)  # 950,000 empty spans
        attackers += [
            threading.Thread(
                target=lambda: statuses.append(
                    post_body(collector.http_port, under_cap, "application/x-protobuf")
                )
            )
            for _ in range(3)
        ]
        with steady_sender(collector.http_port) as results:
            for thread in attackers:
                thread.start()
            for thread in attackers:
                thread.join(timeout=30)
            time.sleep(0.5)
        assert not watch.killed, f"RSS passed {RSS_BOUND} bytes (peak {watch.peak})"
        assert collector.proc is not None and collector.proc.poll() is None
        health = collector.health()
        print(
            f"RSS baseline {baseline / 2**20:.0f} MiB, peak {watch.peak / 2**20:.0f} MiB; "
            f"attack statuses {statuses}; sender {results.count('ok')}/{len(results)} ok"
        )
        # Each body is refused before it is decoded, as too large ever to be taken.
        assert statuses.count(413) == 12, statuses
        # The bodies under the cap are decoded (every empty span rejected: no ids) or, when
        # the budget is taken, refused as retryable.
        assert statuses.count(200) + statuses.count(503) == 3, statuses
        assert statuses.count(grpc.StatusCode.INVALID_ARGUMENT) == 16, statuses
        assert health["http"]["too_many_objects"] == 12
        assert health["grpc"]["too_many_objects"] == 16
        assert len(results) >= 5
        assert results.count("fail") == 0, results
    finally:
        watch.close()
        collector.ensure_stopped()
