"""`telemetry`: the collector's own metrics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TelemetryConfig:
    """The collector's own metrics (Prometheus exposition of what /healthz reports)."""

    # The collector's own metrics are always on GET /metrics of the OTLP/HTTP receiver. Set
    # HOST:PORT here to serve them on a listener of their own too ("" = no extra listener).
    metrics_endpoint: str = ""
