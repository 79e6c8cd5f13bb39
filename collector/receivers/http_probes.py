"""The HTTP receiver's probes: GET /healthz and GET /metrics.

/healthz answers "ok" (or what `health_check` reports; a failing check reads as 503, not a
crash); /metrics answers what `metrics` returns (the collector's self-metrics), or 404 when no
`metrics` is given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from mast_otel.collector.receivers.http_wire import Response, plain

__all__ = ["HEALTH_PATH", "METRICS_PATH", "HealthCheck", "MetricsSource", "Probes"]

# Logged under the receiver's name, as the receiver's own messages are.
log = logging.getLogger("mast_otel.collector.receivers.http_receiver")

HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"

HealthCheck = Callable[[], tuple[int, str]]
# (content type, body) of a metrics scrape.
MetricsSource = Callable[[], tuple[str, bytes]]


def _default_health() -> tuple[int, str]:
    return 200, "ok"


class Probes:
    """Answers the probe paths (run on a thread of their own, off the event loop)."""

    def __init__(self, health_check: HealthCheck | None, metrics: MetricsSource | None) -> None:
        self._health_check = health_check or _default_health
        self.metrics = metrics

    def health(self) -> tuple[int, str]:
        """Status and text for GET /healthz; a failing check reads as 503, not a crash."""
        try:
            return self._health_check()
        except Exception as exc:
            log.warning("health check failed", exc_info=True)
            return 503, f"unhealthy: {exc}"

    def answer(self, path: str) -> Response:
        if path == HEALTH_PATH:
            status, text = self.health()
            return plain(status, text)
        if self.metrics is None:
            return plain(404, "not found")
        try:
            content_type, body = self.metrics()
        except Exception:
            log.exception("collecting self-metrics failed")
            return plain(500, "collecting metrics failed; see the collector's log")
        return Response(200, body, content_type)
