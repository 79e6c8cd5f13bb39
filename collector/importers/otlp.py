"""OTLP files: what `collector.otlp.jsonpb.read_otlp_file` reads (OTLP/JSON lines, one
request or a list of them, OTLP protobuf, gzip)."""

from __future__ import annotations

from collections.abc import Iterator

from collector.otlp.jsonpb import OtlpRequest, read_otlp_file

FORMAT = "otlp"


def recognises(head: bytes) -> bool:
    """OTLP/JSON names its resources; anything that is not JSON text may be protobuf."""
    text = head.lstrip()
    if text[:1] not in (b"{", b"["):
        return True
    return any(
        key in head
        for key in (
            b'"resourceSpans"',
            b'"resource_spans"',
            b'"resourceLogs"',
            b'"resource_logs"',
            b'"resourceMetrics"',
            b'"resource_metrics"',
        )
    )


def read(path: str) -> Iterator[OtlpRequest]:
    yield from read_otlp_file(path)
