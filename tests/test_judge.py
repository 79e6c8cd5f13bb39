"""The optional semantic judge: off by default; when on, closed runs are sent to an
OpenAI-compatible endpoint (here a small fake one on loopback: no model runs here) and its
cited findings are stored beside the deterministic ones; a failing endpoint costs nothing."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from mast_otel.collector.config import ConfigError, apply_overrides, load_config
from mast_otel.collector.demo.agent import SCENARIOS_BY_NAME, SreAgent, tracer_provider
from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore, queries
from mast_otel.processors.judge import JudgeConfig, Transcript, parse_verdict
from tests.steps import RunBuilder
from tests.test_end_to_end import loopback_config
from tests.test_outcomes import wait_for


class FakeModel(BaseHTTPRequestHandler):
    """Answers every chat completion by citing the transcript's last tool call as FM-2.3."""

    requests: list[dict] = []
    fail = False

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeModel.requests.append(body)
        if FakeModel.fail:
            self.send_response(500)
            self.end_headers()
            return
        cited = re.findall(r"\[([0-9a-f]{16})\] \S+ tool ", body["messages"][1]["content"])
        verdict = {"findings": [{"mode": "FM-2.3", "span_id": cited[-1], "confidence": 0.7}]}
        answer = {"choices": [{"message": {"role": "assistant", "content": json.dumps(verdict)}}]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def fake_model():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeModel.requests, FakeModel.fail = [], False
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def run_with_judge(tmp_path, endpoint):
    config = loopback_config(tmp_path / "store")
    config = dataclasses.replace(
        config, judge=JudgeConfig(enabled=True, endpoint=endpoint, model="judge-1")
    )
    service = Service(config)
    service.start()
    try:
        provider = tracer_provider(
            OTLPSpanExporter(endpoint=f"127.0.0.1:{service.grpc_port}", insecure=True)
        )
        run = SreAgent(provider.get_tracer("t")).run(SCENARIOS_BY_NAME["blind_fix"])
        provider.force_flush(10_000)
        provider.shutdown()
        stage = service.pipeline.judge
        assert stage is not None
        wait_for(lambda: stage.stats["judged"] + stage.stats["errors"] >= 1)
    finally:
        service.stop()
    store = ChdbStore(config.storage.data_dir)
    try:
        found = queries.findings(store, queries.FindingFilter(trace_id=run.trace_id))
    finally:
        store.close()
    return run, found, service


def test_judge_findings_are_stored_with_the_deterministic_ones(tmp_path, fake_model):
    run, found, service = run_with_judge(tmp_path, fake_model)
    by_detector = {f["detector"]: f for f in found}
    assert by_detector["missing_verification"]["mode"] == "FM-3.2"
    judged = by_detector["semantic_judge"]
    assert judged["mode"] == "FM-2.3"
    assert judged["span_id"] == run.tool_spans[-1][1]
    assert judged["detector_version"] == "judge-1"
    assert FakeModel.requests[0]["model"] == "judge-1"
    assert service.pipeline.judge is not None and service.pipeline.judge.stats["judged"] == 1


def test_a_failing_judge_costs_nothing(tmp_path, fake_model):
    FakeModel.fail = True
    _, found, service = run_with_judge(tmp_path, fake_model)
    assert [f["mode"] for f in found] == ["FM-3.2"]
    assert service.pipeline.judge is not None and service.pipeline.judge.stats["errors"] == 1


def test_verdicts_that_cite_nothing_real_are_dropped():
    run = RunBuilder()
    step = run.tool("kubectl", {"command": "kubectl get pods"}, "ok")
    transcript = Transcript(run.trace_id, tuple(run.steps))
    config = JudgeConfig(enabled=True, endpoint="x", model="m")

    def verdict(mode: str, span_id: str, confidence: float) -> str:
        item = {"mode": mode, "span_id": span_id, "confidence": confidence}
        return json.dumps({"findings": [item]})

    answers = [
        "not json",
        verdict("FM-9.9", step.span_id, 1),
        verdict("FM-2.3", "ffffffffffffffff", 1),
        verdict("FM-2.3", step.span_id, 0.1),
    ]
    assert all(parse_verdict(a, transcript, config) == [] for a in answers)
    good = verdict("FM-2.3", step.span_id, 0.9)
    assert [f.span_id for f in parse_verdict(good, transcript, config)] == [step.span_id]


def test_the_judge_is_off_by_default_and_checked_when_on():
    assert load_config().judge.enabled is False
    with pytest.raises(ConfigError, match=r"judge\.endpoint"):
        apply_overrides(load_config(), {"judge.enabled": True})
