"""Recorded runs replayed through real instrumentation ("doors"), each door's runs sent to a
`mast-otel serve` of its own, and the findings read back from its store, each mapped to the
recording's message index its span stands for (the replay's own bookkeeping; see
`tests.replay.agent`).

A door is one way a real agent's runs reach the collector:
- openai-v2-span: opentelemetry-instrumentation-openai-v2, messages on the chat spans (latest
  GenAI conventions), OTLP/HTTP;
- openai-v2-events: the same instrumentation, messages as OTLP log records (its default
  conventions), OTLP/gRPC;
- openinference: openinference-instrumentation-openai (`llm.*` attributes), OTLP/HTTP;
- openllmetry: traceloop-sdk's OpenAI instrumentation (indexed `gen_ai.prompt.N.*`), in the
  environment its older SDK pins (`.venv-traceloop`), OTLP/HTTP;
- openai-v2-tools: openai-v2 chat spans (content on spans) plus the agent's own
  `execute_tool` span around every call, OTLP/gRPC;
- pydantic-ai: a pydantic-ai `Agent` plays the run (its tools built from the offered JSON
  schemas return the recorded results, one agent run per user turn), its own instrumentation
  making the `invoke_agent`, `chat` and `execute_tool` spans, OTLP/HTTP.
Every door's runs have the agent's `invoke_agent` root and the reward as an evaluation event.
Team doors (`TEAM_DOORS`) replay Who&When's group chats, a folder of `N.json` files, by file
number: `ag2`, real AG2 with its own tracing (`tests.replay.team_agent`), OTLP/gRPC. A run's
signature brings its attribution back too (`ReplayedRun.agent`, `decisive_span`, `chain`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mast_otel.collector.store import ChdbStore, queries
from tests.frameworks.harness import NO_NETWORK, ROOT, Collector, _env


@dataclass(frozen=True)
class Door:
    name: str
    transport: str
    environment: str = "main"  # "main": the collector's; "traceloop": .venv-traceloop
    module: str = "tests.replay.agent"  # the agent side's module


DOORS: dict[str, Door] = {
    d.name: d
    for d in (
        Door("openai-v2-span", "http"),
        Door("openai-v2-events", "grpc"),
        Door("openinference", "http"),
        Door("openllmetry", "http", "traceloop"),
        Door("openai-v2-tools", "grpc"),
        Door("pydantic-ai", "http"),
    )
}
# Doors for team runs (Who&When's AG2 group chats, a folder of `N.json` files, runs chosen by
# file number): AG2 itself with its own tracing, in .venv-ag2 (`tests.replay.team_agent`).
TEAM_DOORS: dict[str, Door] = {
    d.name: d for d in (Door("ag2", "grpc", "ag2", "tests.replay.team_agent"),)
}


def python_of(door: Door) -> str:
    """The interpreter of the door's agent side: the running one, or `.venv-traceloop` in the
    checkout or beside the environment running this (a work tree sharing one checkout's)."""
    if door.environment == "main":
        return sys.executable
    name = f".venv-{door.environment}"
    places = [ROOT / name, Path(sys.executable).resolve().parents[2] / name]
    places += [Path(sys.executable).parents[2] / name]
    for place in places:
        python = place / "bin" / "python"
        if python.exists():
            return str(python)
    raise FileNotFoundError(f"{ROOT / name} is missing: run scripts/setup.sh")


@dataclass
class ReplayedRun:
    index: int
    trace_id: str
    outcome: str
    score: float | None
    findings: list[dict[str, Any]] = field(default_factory=list)
    # The signature's attribution: the responsible agent, the decisive step's span and the
    # chain as stored (JSON); and the message index each span the replay started stands for.
    agent: str = ""
    decisive_span: str = ""
    chain: str = ""
    spans: dict[str, int] = field(default_factory=dict)


@dataclass
class DoorResult:
    door: str
    runs: dict[int, ReplayedRun]
    seconds: dict[str, float]  # replay (agent process), store (stop and read), total


def replay(
    door: Door,
    data: Path,
    tools: str,
    workdir: Path,
    indices: list[int] | None = None,
    latency_s: float = 0.0,
) -> DoorResult:
    """The runs of `data` (those at `indices`, or all) through `door` into a collector of its
    own over `workdir`, then what its store holds of them; each model answer taking
    `latency_s`."""
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "replayed.json"
    collector = Collector(workdir / "data")
    try:
        env = _env(
            MAST_REPLAY_DOOR=door.name,
            MAST_TEST_TRANSPORT=door.transport,
            MAST_TEST_ENDPOINT=collector.endpoint(door.transport),
            MAST_REPLAY_DATA=str(data),
            MAST_REPLAY_TOOLS=tools,
            MAST_REPLAY_RUNS=",".join(map(str, indices)) if indices is not None else "",
            MAST_REPLAY_OUT=str(out),
            MAST_REPLAY_LATENCY_S=str(latency_s),
            **NO_NETWORK,
        )
        done = subprocess.run(
            [python_of(door), "-m", door.module],
            capture_output=True,
            text=True,
            timeout=900,
            env=env,
            cwd=ROOT,
            check=False,
        )
        replayed = time.monotonic()
    finally:
        collector.stop()
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(
            f"replay through {door.name} failed ({done.returncode}):\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    book = json.loads(out.read_text("utf-8"))
    runs = read_back(workdir / "data", book)
    ended = time.monotonic()
    seconds = {
        "replay": replayed - started,
        "store": ended - replayed,
        "total": ended - started,
    }
    return DoorResult(door.name, runs, seconds)


# chDB runs one embedded server per process: doors replayed at once read their stores in turn.
_STORE = threading.Lock()


def read_back(data_dir: Path, book: list[dict[str, Any]]) -> dict[int, ReplayedRun]:
    """Each replayed run's outcome and findings from the store, every finding with the message
    index its span stands for (-1 for a span the replay did not start)."""
    with _STORE:
        store = ChdbStore(data_dir)
        try:
            findings = queries.findings(store, queries.FindingFilter(limit=1_000_000))
            signatures = {r["trace_id"]: r for r in queries.signatures(store, limit=1_000_000)}
        finally:
            store.close()
    runs: dict[str, ReplayedRun] = {}
    positions: dict[str, dict[str, int]] = {}
    for entry in book:
        signature = signatures.get(entry["trace_id"], {})
        score = signature.get("score")
        runs[entry["trace_id"]] = ReplayedRun(
            index=entry["index"],
            trace_id=entry["trace_id"],
            outcome=str(signature.get("outcome") or ""),
            score=float(score) if isinstance(score, int | float) else None,
            agent=str(signature.get("responsible_agent") or ""),
            decisive_span=str(signature.get("decisive_span_id") or ""),
            chain=str(signature.get("attribution_chain") or ""),
            spans=entry["spans"],
        )
        positions[entry["trace_id"]] = entry["spans"]
    for finding in sorted(findings, key=lambda f: (f["trace_id"], f["time_unix_nano"])):
        run = runs.get(finding["trace_id"])
        if run is None:
            continue
        run.findings.append(
            {
                "mode": finding["mode"],
                "rule": finding["rule"],
                "message_index": positions[run.trace_id].get(finding["span_id"], -1),
                "span_id": finding["span_id"],
                "message": finding["message"],
            }
        )
    return {run.index: run for run in runs.values()}


def replay_doors(
    names: list[str],
    data: Path,
    tools: str,
    workdir: Path,
    indices: list[int] | None = None,
    parallel: int = 2,
    latency_s: float = 0.0,
) -> dict[str, DoorResult]:
    """Several doors, `parallel` at a time (each its own collector and agent process)."""
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = {
            name: pool.submit(replay, DOORS[name], data, tools, workdir / name, indices, latency_s)
            for name in names
        }
        return {name: future.result() for name, future in futures.items()}


# --- equivalence ------------------------------------------------------------------------------


def finding_key(finding: dict[str, Any]) -> tuple[str, str, int]:
    """What must agree between doors: mode, rule and the message index of the step."""
    return finding["mode"], finding["rule"], int(finding["message_index"])


def differences(
    reference: dict[int, list[dict[str, Any]]], other: dict[int, list[dict[str, Any]]]
) -> dict[int, dict[str, list[tuple[str, str, int]]]]:
    """Per run whose findings differ: those only the reference raised (`missing`) and those
    only the other door raised (`extra`), as (mode, rule, message index)."""
    out: dict[int, dict[str, list[tuple[str, str, int]]]] = {}
    for index in sorted(set(reference) | set(other)):
        ref = Counter(finding_key(f) for f in reference.get(index, []))
        got = Counter(finding_key(f) for f in other.get(index, []))
        if ref != got:
            out[index] = {
                "missing": sorted((ref - got).elements()),
                "extra": sorted((got - ref).elements()),
            }
    return out


def same_modes_share(
    reference: dict[int, list[dict[str, Any]]], other: dict[int, list[dict[str, Any]]]
) -> float | None:
    """The share of runs where the other door finds the same set of modes as the reference."""
    indices = set(reference) | set(other)
    if not indices:
        return None
    same = sum(
        {f["mode"] for f in reference.get(i, [])} == {f["mode"] for f in other.get(i, [])}
        for i in indices
    )
    return same / len(indices)


def readable(diffs: dict[int, dict[str, list[tuple[str, str, int]]]], limit: int = 40) -> str:
    """The differing runs, one line per differing finding."""
    lines = []
    for index, diff in list(diffs.items())[:limit]:
        for side, sign in (("missing", "-"), ("extra", "+")):
            for mode, rule, message in diff[side]:
                lines.append(f"run {index}: {sign} {mode} {rule} at message {message}")
    if len(diffs) > limit:
        lines.append(f"... and {len(diffs) - limit} more runs")
    return "\n".join(lines)
