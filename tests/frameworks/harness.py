"""The test side: a real `mast-otel serve` on loopback ports with a data directory of its
own, agent processes pointed at it, and what the store holds once it has stopped."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mast_otel.collector.run_steps import run_steps
from mast_otel.collector.store import ChdbStore, queries
from tests.load import PYTHONPATH

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "mast_otel.collector.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Agent processes reach nothing but loopback: any other HTTP(S) goes to a closed port.
NO_NETWORK = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = PYTHONPATH
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


@dataclass
class Stored:
    """What the store holds after the collector stopped."""

    findings: list[dict[str, Any]]
    signatures: dict[str, dict[str, Any]]
    timelines: dict[str, dict[str, Any]] = field(default_factory=dict)

    def findings_of(self, trace_id: str) -> list[dict[str, Any]]:
        return [f for f in self.findings if f["trace_id"] == trace_id]

    def steps_of(self, trace_id: str) -> list[dict[str, Any]]:
        return [s["step"] for s in self.timelines[trace_id]["spans"] if s.get("step")]


def collect(
    data_dir: Path, module: str, transport: str, python: str = sys.executable
) -> tuple[dict[str, list[str]], Stored]:
    """One framework's agent process against a collector of its own, stopped (so everything
    is stored) before the store is read: its scenarios' trace ids and what was stored of them."""
    collector = Collector(data_dir)
    try:
        runs = collector.run_agent(module, transport, python=python)
    finally:
        collector.stop()
    return runs, collector.read([t for ts in runs.values() for t in ts])


class Collector:
    """`mast-otel serve` as a user starts it, stopped by SIGTERM."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.grpc_port, self.http_port = free_port(), free_port()
        self.proc = subprocess.Popen(
            [
                *CLI,
                "serve",
                "--data-dir",
                str(data_dir),
                "--grpc-endpoint",
                f"127.0.0.1:{self.grpc_port}",
                "--http-endpoint",
                f"127.0.0.1:{self.http_port}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_env(),
            cwd=ROOT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.http_url}/healthz", timeout=1):
                    return
            except OSError as exc:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.proc.kill()
                    out = self.proc.communicate()[0]
                    raise RuntimeError(f"serve did not come up: {out}") from exc
                time.sleep(0.2)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def endpoint(self, transport: str) -> str:
        return f"127.0.0.1:{self.grpc_port}" if transport == "grpc" else self.http_url

    def run_agent(
        self, module: str, transport: str, python: str = sys.executable, **env: str
    ) -> dict[str, list[str]]:
        """Run one framework's agent process; its scenarios' trace ids."""
        done = subprocess.run(
            [python, "-m", f"tests.frameworks.agents.{module}"],
            capture_output=True,
            text=True,
            timeout=300,
            env=_env(
                MAST_TEST_TRANSPORT=transport,
                MAST_TEST_ENDPOINT=self.endpoint(transport),
                **NO_NETWORK,
                **env,
            ),
            cwd=ROOT,
            check=False,
        )
        lines = [x for x in done.stdout.splitlines() if x.startswith("RUNS ")]
        if done.returncode != 0 or not lines:
            raise AssertionError(
                f"agent {module} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )
        runs: dict[str, list[str]] = json.loads(lines[-1][5:])
        return runs

    def stop(self) -> str:
        """SIGTERM: the collector flushes everything it accepted, then exits."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
            raise
        if self.proc.returncode != 0:
            raise AssertionError(f"serve exited {self.proc.returncode}:\n{out}")
        return out

    def read(self, trace_ids: list[str]) -> Stored:
        store = ChdbStore(self.data_dir)
        try:
            findings = queries.findings(store, queries.FindingFilter(limit=10_000))
            signatures = {r["trace_id"]: r for r in queries.signatures(store, limit=10_000)}
            timelines = {}
            for trace_id in trace_ids:
                timeline = run_steps(store, trace_id)
                assert timeline is not None, trace_id
                timelines[trace_id] = timeline
        finally:
            store.close()
        return Stored(findings, signatures, timelines)


def run_cli(data_dir: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    store = ["--data-dir", str(data_dir)] if data_dir is not None else []
    return subprocess.run(
        [*CLI, *args, *store],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        cwd=ROOT,
        check=False,
    )


def parsed_arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def check_scenario(stored: Stored, trace_ids: list[str], scenario: Any, agents: tuple[str, ...]):
    """The run's findings are the scenario's, at its tool steps, with evidence naming the
    deployment; its tool steps are the scenario's, each with its agent, tool, arguments and
    result; the final answer is read. `agents`: the single agent, or sender and receiver."""
    steps = [s for t in trace_ids for s in stored.steps_of(t)]
    spans = [span for t in trace_ids for span in stored.timelines[t]["spans"] if span.get("step")]
    tools = [(span, s) for span, s in zip(spans, steps, strict=True) if s["kind"] == "tool"]
    got = [(s["tool"], parsed_arguments(s["arguments"]), s["result"], s["agent"]) for _, s in tools]
    want = []
    for i, expected in enumerate(scenario.tools):
        if isinstance(got[i][1] if i < len(got) else None, str) and len(expected.arguments) == 1:
            # A one-argument tool called with its bare value (LangChain records that).
            got[i] = (got[i][0], {next(iter(expected.arguments)): got[i][1]}, *got[i][2:])
        agent = agents[0]
        if scenario.handoff_after is not None and i >= scenario.handoff_after:
            agent = agents[-1]
        want.append((expected.tool, expected.arguments, expected.result, agent))
    assert got == want, (scenario.name, got)
    assert all(s["agent"] for s in steps), [(s["kind"], s["agent"]) for s in steps]
    assert any(scenario.answer in (s["output"] or "") for s in steps), scenario.name
    findings = [f for t in trace_ids for f in stored.findings_of(t)]
    assert sorted(f["mode"] for f in findings) == sorted(scenario.expected), (
        scenario.name,
        [(f["mode"], f["rule"], f["message"]) for f in findings],
    )
    for finding in findings:
        span, _ = tools[scenario.expected[finding["mode"]]]
        assert finding["span_id"] == span["span_id"], (scenario.name, finding["message"])
        assert "checkout" in json.dumps(finding["evidence"]) + finding["message"], finding
    return findings
