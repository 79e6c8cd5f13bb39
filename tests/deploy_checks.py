"""Checks of deployment files that no tool installable here performs: the OpenTelemetry
Collector configuration the load-balancing tier runs (no `otelcol-contrib` binary is in a
package registry), and cross-references between files (what one file names, another defines).

The loadbalancing exporter's keys follow its config.schema.yaml and README in
open-telemetry/opentelemetry-collector-contrib (exporter/loadbalancingexporter).
"""

from __future__ import annotations

from typing import Any

import pytest

from mast_otel.collector import config as collector_config

# The server and cluster shapes write to a ClickHouse server (`storage.backend: clickhouse`,
# `storage.clickhouse.*`, `storage.cluster`). Where this build of the collector does not have
# that backend yet, loading those configurations must fail with a ConfigError, and the tests
# that load them are expected to fail for exactly that reason; once the backend is there,
# they run as ordinary tests.
CLICKHOUSE_BACKEND = "clickhouse" in getattr(collector_config, "STORAGE_BACKENDS", ())
needs_clickhouse_backend = pytest.mark.xfail(
    not CLICKHOUSE_BACKEND,
    reason="storage.backend: clickhouse is not in this build of the collector",
    raises=collector_config.ConfigError,
    strict=True,
)

OTELCOL_SECTIONS = {"receivers", "processors", "exporters", "extensions", "connectors", "service"}
LOADBALANCING_KEYS = {
    "routing_key",
    "routing_attributes",
    "protocol",
    "resolver",
    "sending_queue",
    "timeout",
    "retry_on_failure",
}
RESOLVERS = {
    "static": {"hostnames"},
    "dns": {"hostname", "port", "interval", "timeout"},
    "k8s": {"service", "ports", "timeout", "return_hostnames"},
    "aws_cloud_map": {"namespace", "service_name", "port", "health_status", "interval", "timeout"},
}
PIPELINE_KINDS = {"traces", "logs", "metrics"}


def component_type(name: str) -> str:
    """`otlp/backend-1` is an `otlp` component named `backend-1`."""
    return name.split("/", 1)[0]


def check_otelcol_config(config: dict[str, Any]) -> list[str]:
    """Problems in an OpenTelemetry Collector configuration meant to route traces by trace id
    to mast-otel replicas; empty when there are none."""
    problems: list[str] = []
    unknown = set(config) - OTELCOL_SECTIONS
    if unknown:
        problems.append(f"unknown top-level sections {sorted(unknown)}")
    service = config.get("service") or {}
    for extension in service.get("extensions", []):
        if extension not in (config.get("extensions") or {}):
            problems.append(f"service.extensions names undefined extension {extension!r}")
    pipelines = service.get("pipelines") or {}
    if not pipelines:
        problems.append("service.pipelines is empty")
    for name, pipeline in pipelines.items():
        if component_type(name) not in PIPELINE_KINDS:
            problems.append(f"pipeline {name!r} is not traces, logs or metrics")
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                if component not in (config.get(kind) or {}):
                    problems.append(f"pipeline {name} names undefined {kind[:-1]} {component!r}")
        if not pipeline.get("receivers") or not pipeline.get("exporters"):
            problems.append(f"pipeline {name} needs receivers and exporters")
    for name, settings in (config.get("processors") or {}).items():
        if component_type(name) == "memory_limiter" and "check_interval" not in (settings or {}):
            problems.append(f"processor {name} needs check_interval")
    for name, settings in (config.get("exporters") or {}).items():
        if component_type(name) == "loadbalancing":
            problems += [f"exporter {name}: {p}" for p in check_loadbalancing(settings or {})]
    return problems


def check_loadbalancing(settings: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    unknown = set(settings) - LOADBALANCING_KEYS
    if unknown:
        problems.append(f"unknown keys {sorted(unknown)}")
    if settings.get("routing_key", "traceID") != "traceID":
        problems.append(f"routing_key is {settings.get('routing_key')!r}, not traceID")
    protocol = settings.get("protocol") or {}
    if set(protocol) != {"otlp"}:
        problems.append("protocol must hold exactly `otlp`")
    otlp = protocol.get("otlp") or {}
    if "endpoint" in otlp:
        problems.append("protocol.otlp.endpoint is set by the resolver and must not be given")
    resolver = settings.get("resolver") or {}
    if len(resolver) != 1 or next(iter(resolver), None) not in RESOLVERS:
        problems.append(f"resolver must be one of {sorted(RESOLVERS)}, got {sorted(resolver)}")
    for kind, options in resolver.items():
        extra = set(options or {}) - RESOLVERS.get(kind, set())
        if extra:
            problems.append(f"resolver.{kind}: unknown keys {sorted(extra)}")
    dns = resolver.get("dns")
    if dns is not None:
        if not dns.get("hostname"):
            problems.append("resolver.dns.hostname is required")
        if "port" in dns and not isinstance(dns["port"], str):
            problems.append("resolver.dns.port is a string in the exporter's schema")
    return problems


def loadbalancing_exporters(config: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        settings
        for name, settings in (config.get("exporters") or {}).items()
        if component_type(name) == "loadbalancing"
    ]


def pipelines_exporting_to(config: dict[str, Any], exporter: str) -> set[str]:
    pipelines = (config.get("service") or {}).get("pipelines") or {}
    return {
        component_type(name)
        for name, pipeline in pipelines.items()
        if exporter in pipeline.get("exporters", [])
    }
