"""The official `opentelemetry-instrumentation-openai-v2` on a hand-written agent (its own
agent and tool spans on GenAI conventions), in both ways it records content: messages on the
chat spans (latest conventions, over OTLP/HTTP) and message events as OTLP log records (its
default conventions, over gRPC), sent to a running `mast-otel serve`."""

from __future__ import annotations

import subprocess

import pytest

from tests.frameworks.harness import CLI, Collector, _env, check_scenario, run_cli
from tests.frameworks.scenarios import CLEAN, SINGLE_AGENT

MODES = {"span": "http", "events": "grpc"}


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("openai-v2")
    collector = Collector(data_dir)
    try:
        runs = {
            content: collector.run_agent("openai_v2", transport, MAST_TEST_CONTENT=content)
            for content, transport in MODES.items()
        }
        health = run_cli(None, "health", "--endpoint", f"127.0.0.1:{collector.http_port}")
    finally:
        collector.stop()
    ids = [t for by_scenario in runs.values() for ts in by_scenario.values() for t in ts]
    return data_dir, runs, collector.read(ids), health


@pytest.mark.parametrize("content", list(MODES))
@pytest.mark.parametrize("scenario", SINGLE_AGENT, ids=lambda s: s.name)
def test_each_scenario_is_read_right(collected, content, scenario):
    _, runs, stored, _ = collected
    trace_ids = runs[content][scenario.name]
    assert len(trace_ids) == 1
    check_scenario(stored, trace_ids, scenario, ("sre-agent",))
    steps = stored.steps_of(trace_ids[0])
    # Every chat call is read with its model and what it asked for or answered.
    chats = [s for s in steps if s["kind"] == "llm"]
    assert len(chats) == len(scenario.turns)
    assert all(s["model"] == "gpt-4o-mini" for s in chats)
    assert [c["name"] for s in chats for c in s["tool_calls"]] == [t.tool for t in scenario.tools]
    assert chats[-1]["output"] == scenario.answer
    # The root span names no agent: it stands for the service.
    assert steps[0]["agent"] == "sre-agent"


def test_run_command_shows_each_step_and_the_findings(collected):
    data_dir, runs, _, _ = collected
    clean = run_cli(data_dir, "run", runs["events"][CLEAN.name][0])
    assert clean.returncode == 0, clean.stderr
    lines = clean.stdout.splitlines()
    assert "modes -" in lines[0]
    applied = [x for x in lines if " apply_manifest " in x]
    assert len(applied) == 1 and "tool" in applied[0] and "sre-agent" in applied[0]
    assert "deployment.apps/checkout configured" in applied[0]
    claimed = run_cli(data_dir, "run", runs["events"]["claimed_despite_failure"][0])
    marks = [x.strip() for x in claimed.stdout.splitlines() if x.strip().startswith("^")]
    assert len(marks) == 1 and marks[0].startswith("^ FM-3.3")


def test_health_prints_what_it_checked(collected):
    *_, health = collected
    assert health.returncode == 0, health.stderr
    lines = health.stdout.splitlines()
    assert lines[0].startswith("ok: http://127.0.0.1:")
    assert lines[0].endswith("/healthz answered 200")
    said = "\n".join(lines)
    assert "queue: 0 of" in said and "received:" in said and "log records" in said
    assert "store:" in said


def test_a_closed_pipe_ends_quietly(collected):
    data_dir, *_ = collected
    # The reader is gone before the command writes a line (`mast-otel findings | head -0`).
    proc = subprocess.Popen(
        [*CLI, "findings", "--data-dir", str(data_dir), "--output", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and err == b"", err.decode()
