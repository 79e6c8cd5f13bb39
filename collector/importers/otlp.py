"""OTLP files: what `collector.otlp.files.read_otlp_file` reads (OTLP/JSON lines, one
request or a list of them, OTLP protobuf, gzip)."""

from __future__ import annotations

from collections.abc import Iterator

from mast_otel.collector.otlp.files import OtlpRequest, read_otlp_file

FORMAT = "otlp"


def recognises(head: bytes) -> bool:
    """OTLP/JSON names its resources; binary content (control bytes, or not UTF-8) is read as
    OTLP protobuf. Other text is not OTLP."""
    text = head.lstrip()
    if text[:1] not in (b"{", b"["):
        return _binary(head)
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


_TEXT_CONTROLS = frozenset(b"\t\n\r\f")


def _binary(head: bytes) -> bool:
    if any(byte < 0x20 and byte not in _TEXT_CONTROLS for byte in head):
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 4  # a character cut at the end of the head is text
    return False
