"""Self-metrics: a running collector, fed real OTLP by the SDK, serves its counters on
GET /metrics (and on a listener of its own); Prometheus' own parser reads them, they agree
with /healthz, and every metric the dashboards and rules use is there."""

from __future__ import annotations

import dataclasses
import json
import re
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mast_otel.collector.config import Config, ConfigError
from mast_otel.collector.demo.dialects import DIALECTS
from mast_otel.collector.demo.runner import run_agents
from mast_otel.collector.service import Service
from mast_otel.dashboards import alerts, collector_health
from tests.test_end_to_end import loopback_config


def scrape(port: int, path: str = "/metrics") -> tuple[str, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return response.headers["Content-Type"], response.read().decode("utf-8")


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    config = loopback_config(tmp_path_factory.mktemp("metrics-store"))
    config = dataclasses.replace(
        config, telemetry=dataclasses.replace(config.telemetry, metrics_endpoint="127.0.0.1:0")
    )
    service = Service(config)
    service.start()
    try:
        run_agents(service, "grpc", list(DIALECTS))
        run_agents(service, "http", ["genai"])
        # Runs close and batches are written on the pipeline's tick: wait for the numbers.
        for _ in range(100):
            health = service.health()
            if (
                health["store"]["rows_written"].get("mast_signatures", 0) >= 30
                and not (health["store"]["buffered_rows"])
            ):
                break
            time.sleep(0.1)
        content_type, text = scrape(service.http_port)
        _, separate = scrape(service.metrics_server.port)
        _, health_text = scrape(service.http_port, "/healthz")
    finally:
        service.stop()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    return content_type, text, separate, families, json.loads(health_text)


def samples(families, name, **labels):
    family = families[name]
    return [
        s
        for s in family.samples
        if s.name.startswith(name) and all(s.labels.get(k) == v for k, v in labels.items())
    ]


def value(families, sample_name, **labels):
    family_name = sample_name.removesuffix("_total")
    found = [
        s.value
        for s in families[family_name].samples
        if s.name == sample_name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    return sum(found)


def test_exposition_format(scraped):
    content_type, text, separate, families, _ = scraped
    assert content_type.startswith("text/plain") and "version=0.0.4" in content_type
    assert "# TYPE mast_otel_receiver_accepted_total counter" in text
    # The separate listener serves the same families.
    assert {f.name for f in text_string_to_metric_families(separate)} == set(families)


def test_receiver_and_pipeline_counts_match_the_traffic(scraped):
    _, _, _, families, health = scraped
    grpc = value(families, "mast_otel_receiver_accepted_total", transport="grpc", signal="traces")
    http = value(families, "mast_otel_receiver_accepted_total", transport="http", signal="traces")
    assert grpc == health["grpc"]["spans_accepted"] > 0
    assert http == health["http"]["spans_accepted"] > 0
    assert value(families, "mast_otel_pipeline_received_total", signal="traces") == grpc + http
    assert value(families, "mast_otel_receiver_refused_total") == 0
    assert value(families, "mast_otel_runs_opened_total") == 5 * 6
    assert value(families, "mast_otel_runs_closed_total", reason="root_ended") == 5 * 6
    assert (
        value(families, "mast_otel_pipeline_queue_capacity_items")
        == Config().pipeline.queue_max_items
    )


def test_findings_by_mode_and_fatality(scraped):
    _, _, _, families, health = scraped
    by_mode = {
        s.labels["mode"]: (s.labels["fatal"], s.value)
        for s in families["mast_otel_findings"].samples
    }
    assert by_mode["FM-1.4"] == ("true", 5)  # amnesia, once per dialect and transport
    assert by_mode["FM-1.3"][0] == "false" and by_mode["FM-3.2"][0] == "false"
    assert sum(v for _, v in by_mode.values()) == health["pipeline"]["findings"]


def test_store_writes_and_latency_histogram(scraped):
    _, _, _, families, health = scraped
    assert (
        value(families, "mast_otel_store_rows_written_total", table="otel_traces")
        == (health["store"]["rows_written"]["otel_traces"])
    )
    assert value(families, "mast_otel_store_write_errors_total") == 0
    histogram = families["mast_otel_store_write_duration_seconds"]
    count = next(s.value for s in histogram.samples if s.name.endswith("_count"))
    buckets = [s for s in histogram.samples if s.name.endswith("_bucket")]
    assert count == health["store"]["batches_written"] > 0
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == count
    assert [b.value for b in buckets] == sorted(b.value for b in buckets)


def used_metric_names() -> set[str]:
    texts = [
        *collector_health.PROMQL.values(),
        *(a.rule_expr for a in alerts.PROMETHEUS_ALERTS),
        *(a.value for a in alerts.PROMETHEUS_ALERTS),
    ]
    return {name for text in texts for name in re.findall(r"\bmast_otel_\w+", text)}


def test_every_metric_the_dashboards_and_rules_use_is_served(scraped):
    _, text, _, _, _ = scraped
    served = set(re.findall(r"^(mast_otel_\w+)", text, re.MULTILINE))
    missing = used_metric_names() - served
    assert not missing, missing
    assert len(used_metric_names()) >= 12


def test_cpu_time_by_stage(scraped):
    """Every stage a span goes through reports the CPU it took, in health and as a counter:
    what an operator divides by spans received to see where the time goes."""
    _, _, _, families, health = scraped
    stages = health["stages"]
    assert set(stages) == {"receive", "redact", "normalize", "detect", "store"}
    for stage, seconds in stages.items():
        assert seconds > 0, stage
        scraped_seconds = value(families, "mast_otel_stage_cpu_seconds_total", stage=stage)
        # The scrape came before the health read, so it can only be behind.
        assert 0 < scraped_seconds <= seconds


def test_serve_sets_the_garbage_collection_threshold_it_is_given(tmp_path):
    import gc

    config = loopback_config(tmp_path / "store")
    config = dataclasses.replace(
        config, pipeline=dataclasses.replace(config.pipeline, gc_gen0_threshold=12_345)
    )
    before = gc.get_threshold()
    service = Service(config)
    service.start()
    try:
        assert gc.get_threshold() == (12_345, *before[1:])
    finally:
        service.stop()
        gc.set_threshold(*before)
    bad = dataclasses.replace(config.pipeline, gc_gen0_threshold=-1)
    with pytest.raises(ConfigError, match="gc_gen0_threshold"):
        dataclasses.replace(config, pipeline=bad).validate()
