"""The command line as a user runs it: `serve` stopped by SIGTERM keeps everything it
accepted; `analyze` reads OTLP files; `findings` filters what is stored; config files and flags
set the same options."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mast_otel.collector.config import ConfigError, apply_overrides, load_config
from mast_otel.collector.demo.agent import SCENARIOS, SreAgent, tracer_provider

CLI = [sys.executable, "-m", "mast_otel.collector.cli"]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Null(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS


def record_runs(dialect: str = "genai") -> tuple[list, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = tracer_provider(_Null(), also=memory)
    agent = SreAgent(provider.get_tracer("test"), dialect=dialect)
    runs = [agent.run(s) for s in SCENARIOS]
    provider.shutdown()
    return runs, memory


def _hex_ids(node):
    """OTLP/JSON spells ids in hex where protobuf's JSON mapping uses base64."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids(item)
    return node


def write_otlp_json_lines(path: Path, spans) -> None:
    with path.open("w") as out:
        for i in range(0, len(spans), 7):  # several requests, as the file exporter writes them
            request = encode_spans(spans[i : i + 7])
            out.write(json.dumps(_hex_ids(MessageToDict(request))) + "\n")


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, env=ENV, check=False
    )


def test_analyze_reads_otlp_json_lines_and_protobuf(tmp_path):
    runs, memory = record_runs("openinference")
    spans = list(memory.get_finished_spans())
    jsonl = tmp_path / "runs.jsonl"
    write_otlp_json_lines(jsonl, spans)
    pb = tmp_path / "runs.pb"
    pb.write_bytes(encode_spans(spans).SerializeToString())
    expected = sorted((r.trace_id, m) for r in runs for m in r.scenario.expected_modes)
    for path in (jsonl, pb):
        result = run_cli("analyze", str(path), "--output", "json")
        assert result.returncode == 0, result.stderr
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        assert sorted((r["trace_id"], r["mode"]) for r in rows) == expected
        for row in rows:
            assert len(row["trace_id"]) == 32 and len(row["span_id"]) == 16
            int(row["trace_id"], 16), int(row["span_id"], 16)
    table = run_cli("analyze", str(jsonl))
    assert "FM-1.3" in table.stdout and "trace id" in table.stdout


def test_analyze_names_the_bad_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"resourceSpans": []}\n{not json\n')
    result = run_cli("analyze", str(path))
    assert result.returncode == 2
    assert "bad.jsonl:2" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_flushes_everything_on_sigterm_then_findings_reads_it(tmp_path):
    data_dir = tmp_path / "store"
    grpc_port, http_port = free_port(), free_port()
    proc = subprocess.Popen(
        [
            *CLI,
            "serve",
            "--data-dir",
            str(data_dir),
            "--grpc-endpoint",
            f"127.0.0.1:{grpc_port}",
            "--http-endpoint",
            f"127.0.0.1:{http_port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=ENV,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/healthz", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(
                        f"serve did not come up: {proc.stdout.read() if proc.stdout else ''}"
                    )
                time.sleep(0.2)
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        memory = InMemorySpanExporter()
        provider = tracer_provider(
            OTLPSpanExporter(endpoint=f"127.0.0.1:{grpc_port}", insecure=True), also=memory
        )
        agent = SreAgent(provider.get_tracer("test"))
        runs = [agent.run(s) for s in SCENARIOS]
        assert provider.force_flush(30_000)
        provider.shutdown()
        # Stop at once: the runs' grace periods have not passed, nothing was flushed yet.
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output
    sent = len(memory.get_finished_spans())

    result = run_cli("findings", "--data-dir", str(data_dir), "--output", "json")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    expected = sorted((r.trace_id, m) for r in runs for m in r.scenario.expected_modes)
    assert sorted((r["trace_id"], r["mode"]) for r in rows) == expected

    only_loop = run_cli(
        "findings", "--data-dir", str(data_dir), "--mode", "FM-1.3", "--output", "json"
    )
    assert [json.loads(x)["mode"] for x in only_loop.stdout.splitlines()] == ["FM-1.3"]
    one_trace = run_cli(
        "findings", "--data-dir", str(data_dir), "--trace", runs[3].trace_id, "--output", "json"
    )
    assert [json.loads(x)["mode"] for x in one_trace.stdout.splitlines()] == ["FM-3.2"]
    recent = run_cli("findings", "--data-dir", str(data_dir), "--since", "1h", "--output", "json")
    assert len(recent.stdout.splitlines()) == len(expected)
    future = run_cli(
        "findings",
        "--data-dir",
        str(data_dir),
        "--since",
        "2999-01-01T00:00:00",
        "--output",
        "json",
    )
    assert future.stdout.strip() == ""
    bad = run_cli("findings", "--data-dir", str(data_dir), "--mode", "loop")
    assert bad.returncode == 2 and "FM-1.3" in bad.stderr

    sigs = run_cli("signatures", "--data-dir", str(data_dir), "--output", "json")
    assert len(sigs.stdout.splitlines()) == len(runs)

    from mast_otel.collector.store import ChdbStore

    store = ChdbStore(data_dir)
    try:
        count = store.query("SELECT count() AS n, uniqExact(SpanId) AS u FROM otel.otel_traces")
    finally:
        store.close()
    assert int(count[0]["n"]) == sent == int(count[0]["u"])


def test_config_file_sets_what_flags_set_and_flags_win(tmp_path):
    path = tmp_path / "mast.yaml"
    path.write_text(
        "receivers:\n"
        "  grpc: {endpoint: '127.0.0.1:14317'}\n"
        "  http: {endpoint: '127.0.0.1:14318'}\n"
        "storage: {data_dir: /var/lib/mast}\n"
        "detectors:\n"
        "  step_repetition: {min_repeats: 4}\n"
    )
    config = load_config(path)
    assert config.receivers.grpc.endpoint == "127.0.0.1:14317"
    assert config.receivers.http.endpoint == "127.0.0.1:14318"
    assert config.storage.data_dir == "/var/lib/mast"
    assert config.detectors.step_repetition.min_repeats == 4
    config = apply_overrides(config, {"receivers.grpc.endpoint": "0.0.0.0:4317"})
    assert config.receivers.grpc.endpoint == "0.0.0.0:4317"
    assert config.receivers.http.endpoint == "127.0.0.1:14318"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("receivers: {grpc: {endpont: x}}", "receivers.grpc.endpont: unknown option"),
        ("receivers: {grpc: {endpoint: 'nope'}}", "HOST:PORT"),
        ("windows: {max_active_runs: 0}", "windows.max_active_runs"),
        ("detectors: {step_repetition: {min_repeats: 'three'}}", "whole number"),
        ("classification: {mutating_patterns: ['(']}", "not a valid regular expression"),
        ("storage: {backend: postgres}", "storage.backend"),
        ("[1, 2", "not valid YAML"),
    ],
)
def test_bad_config_fails_at_start_with_the_key_to_fix(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_config(path)
    result = run_cli("serve", "--config", str(path), "--data-dir", str(tmp_path / "d"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_example_config_is_the_defaults_and_loads():
    from mast_otel.collector.config import Config, example_yaml

    path = Path(__file__).resolve().parent.parent / "deploy" / "config.example.yaml"
    assert path.read_text() == example_yaml()
    assert load_config(path) == Config()
