"""The OpenTelemetry Collector's `loadbalancing` exporter's trace-id routing, reimplemented
exactly, so tests can split a fleet of runs across collector replicas as a real deployment
does.

Source: open-telemetry/opentelemetry-collector-contrib, exporter/loadbalancingexporter:
- consistent_hashing.go: `newHashRing` places each endpoint at `defaultWeight` = 100 positions,
  position i being crc32.IEEE(endpoint bytes + the single byte i) % `maxPositions` (36000); a
  position already taken by an earlier endpoint is skipped; items are sorted by position.
  `endpointFor` hashes the routing identifier with crc32.IEEE, takes it % 36000, and `bsearch`
  returns the first item at or after that position, wrapping to the first item.
- trace_exporter.go: `routingIdentifiersFromTraces` uses the trace id's 16 raw bytes as the
  identifier; `ConsumeTraces` first splits a batch per trace (`batchpersignal.SplitTraces`).
- resolver_static.go: the static resolver sorts the endpoint list before the ring is built
  (the DNS resolver sorts the addresses it resolves too).
"""

from __future__ import annotations

import bisect
import threading
import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

MAX_POSITIONS = 36_000
DEFAULT_WEIGHT = 100


def positions_for(endpoint: str, points: int) -> list[int]:
    base = endpoint.encode()
    return [zlib.crc32(base + bytes([i & 0xFF])) % MAX_POSITIONS for i in range(points)]


class HashRing:
    """The exporter's ring over `endpoints` (sorted first, as its resolvers do)."""

    def __init__(self, endpoints: Sequence[str], weight: int = DEFAULT_WEIGHT) -> None:
        taken: set[int] = set()
        items: list[tuple[int, str]] = []
        for endpoint in sorted(endpoints):
            for position in positions_for(endpoint, weight):
                if position in taken:
                    continue
                taken.add(position)
                items.append((position, endpoint))
        items.sort()
        self.items = items
        self._positions = [p for p, _ in items]

    def endpoint_for(self, identifier: bytes) -> str:
        return self.endpoint_at(zlib.crc32(identifier) % MAX_POSITIONS)

    def endpoint_at(self, position: int) -> str:
        """The first item at or after `position`, wrapping round (upstream's `bsearch`)."""
        if not self.items:
            return ""
        index = bisect.bisect_left(self._positions, position)
        return self.items[index % len(self.items)][1]

    def endpoint_for_trace(self, trace_id: int) -> str:
        return self.endpoint_for(trace_id.to_bytes(16, "big"))


class TraceIdRouter(SpanExporter):
    """An SDK span exporter that routes each trace's spans to one backend exporter by the
    ring, as the load-balancing exporter does; `ring_for` picks the ring for the n-th span
    routed, so tests can add and remove replicas while runs are in flight."""

    def __init__(
        self,
        backends: dict[str, SpanExporter],
        ring_for: Callable[[int], HashRing],
    ) -> None:
        self.backends = backends
        self.ring_for = ring_for
        self.routed = 0
        self.routes: dict[str, set[str]] = defaultdict(set)
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
        for span in spans:
            by_trace[span.context.trace_id].append(span)
        result = SpanExportResult.SUCCESS
        for trace_id, trace_spans in by_trace.items():
            with self._lock:
                ring = self.ring_for(self.routed)
                self.routed += len(trace_spans)
            endpoint = ring.endpoint_for_trace(trace_id)
            self.routes[format(trace_id, "032x")].add(endpoint)
            if self.backends[endpoint].export(trace_spans) is not SpanExportResult.SUCCESS:
                result = SpanExportResult.FAILURE
        return result

    def shutdown(self) -> None:
        for backend in self.backends.values():
            backend.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return all(b.force_flush(timeout_millis) for b in self.backends.values())
