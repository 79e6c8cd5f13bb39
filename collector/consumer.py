"""The narrow interface between receivers and the pipeline.

Receivers decode requests into records and hand them to a `TelemetryConsumer`. The consumer
either takes them (possibly reporting some as rejected, which becomes an OTLP partial success)
or raises `Refused` when it cannot take more right now, which receivers turn into OTLP's
retryable status (gRPC UNAVAILABLE with retry info, HTTP 503 with Retry-After).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from mast_otel.processors.records import LogRecord, SpanRecord


@dataclass(frozen=True, slots=True)
class Accepted:
    rejected: int = 0
    message: str = ""


class Refused(Exception):
    """The pipeline cannot take this batch now; the sender should retry after a pause."""

    def __init__(self, message: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class BatchTooLarge(Exception):
    """A batch larger than the pipeline can ever hold (more items than its whole queue): not
    retryable, the sender has to send smaller batches."""


@dataclass(frozen=True, slots=True)
class RawRequest:
    """A request's body as received (decompressed), for the write-ahead spool: the pipeline
    writes these bytes to disk before acknowledging the records decoded from them."""

    signal: Literal["traces", "logs"]
    encoding: Literal["protobuf", "json"]
    data: bytes


class TelemetryConsumer(Protocol):
    def consume_spans(self, spans: list[SpanRecord], raw: RawRequest | None = None) -> Accepted: ...

    def consume_logs(self, logs: list[LogRecord], raw: RawRequest | None = None) -> Accepted: ...
