"""`mast-otel demo --endpoint`: the demo agent alone, sending its runs to a collector that is
already running (in the compose stack: the OpenTelemetry Collector in front of the replicas),
once or round after round until it is stopped."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mast_otel.collector.config import load_config
from mast_otel.collector.service import Service
from mast_otel.collector.store import queries

CLI = [sys.executable, "-m", "mast_otel.collector.cli"]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def service(tmp_path: Path):  # type: ignore[no-untyped-def]
    config = load_config()
    config = dataclasses.replace(
        config,
        receivers=dataclasses.replace(
            config.receivers,
            grpc=dataclasses.replace(config.receivers.grpc, endpoint="127.0.0.1:0"),
            http=dataclasses.replace(config.receivers.http, endpoint="127.0.0.1:0"),
        ),
        storage=dataclasses.replace(config.storage, data_dir=str(tmp_path / "store")),
    )
    running = Service(config)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def signatures_of(service: Service, trace_ids: set[str]) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + 30
    while True:
        rows = {
            r["trace_id"]: r
            for r in queries.signatures(service.store, limit=10_000)
            if r["trace_id"] in trace_ids
        }
        if len(rows) == len(trace_ids) or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def test_loop_sends_rounds_until_sigterm_and_the_collector_names_each_run(
    service: Service, tmp_path: Path
) -> None:
    log = (tmp_path / "sender.log").open("w+")
    proc = subprocess.Popen(
        [
            *CLI,
            "demo",
            "--endpoint",
            f"127.0.0.1:{service.grpc_port}",
            "--loop",
            "--interval",
            "0.2",
            "--output",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=ENV,
    )
    sent: list[dict[str, Any]] = []
    try:
        assert proc.stdout is not None
        while len({r["round"] for r in sent}) < 2:
            line = proc.stdout.readline()
            if not line:
                log.seek(0)
                pytest.fail(f"the sender stopped: {log.read()}")
            sent.append(json.loads(line))
        # It stops after the round it is sending: the rest of that round still arrives.
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        rest = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    log.seek(0)
    assert proc.returncode == 0, log.read()
    sent += [json.loads(line) for line in rest.splitlines()]
    assert len({r["trace_id"] for r in sent}) == len(sent) >= 12
    stored = signatures_of(service, {r["trace_id"] for r in sent})
    for run in sent:
        signature = stored[run["trace_id"]]
        assert sorted(signature["modes"]) == sorted(run["expected_modes"]), run["scenario"]


def test_one_round_over_http_to_a_url(service: Service) -> None:
    result = subprocess.run(
        [
            *CLI,
            "demo",
            "--transport",
            "http",
            "--endpoint",
            f"http://127.0.0.1:{service.http_port}/v1/traces",
            "--dialect",
            "openinference",
            "--service-name",
            "triage-bot",
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("round 1: sent 6 agent runs (openinference)")
    query = "SELECT DISTINCT ServiceName AS s FROM otel.otel_traces"
    deadline = time.monotonic() + 30
    while not (rows := service.store.query(query)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rows == [{"s": "triage-bot"}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--loop"], "--loop sends to a running collector"),
        (["--endpoint", "collector"], "--endpoint: expected HOST:PORT"),
        (["--endpoint", "127.0.0.1:4317", "--interval", "0"], "--interval must be"),
    ],
)
def test_sender_mistakes_are_named(args: list[str], message: str) -> None:
    result = subprocess.run(
        [*CLI, "demo", *args], capture_output=True, text=True, env=ENV, timeout=60
    )
    assert result.returncode == 2
    assert message in result.stderr
