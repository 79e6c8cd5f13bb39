"""Imported runs as the steps detectors see: a transcript through the importer, OTLP decoding
and normalization, as `mast-otel analyze` reads it."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from mast_otel.collector.analyze import analyze_files
from mast_otel.collector.config import Config
from mast_otel.collector.importers import chat
from mast_otel.collector.importers.spans import RunSpec, request_for
from mast_otel.collector.otlp.decode import decode_spans
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.normalize import normalize_span
from mast_otel.processors.run import DetectorRun, Run
from mast_otel.processors.window import RunWindows, WindowConfig
from tests import corpora

ROOT = Path(__file__).resolve().parent.parent


def tau_file() -> Path:
    """The tau-bench airline file (shipped compressed in tests/data)."""
    return corpora.tau_file()


def steps_of(run: RunSpec) -> list[Step]:
    """The normalized steps of an imported run, in span order."""
    records = decode_spans(request_for(run)).records
    return [step for r in records if (step := normalize_span(r)) is not None]


class _Recorder(DetectorRun):
    """A detector that keeps every step it is shown and the run's attributes at close."""

    __slots__ = ("attributes", "steps")

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.attributes: dict[str, Any] = {}

    def on_step(self, step: Step, run: Run) -> tuple[()]:
        self.steps.append(step)
        return ()

    def on_close(self, run: Run) -> tuple[()]:
        self.attributes = dict(run.attributes)
        return ()


def read_steps(steps: list[Step]) -> tuple[list[Step], dict[str, Any]]:
    """The steps detectors are shown for these spans' steps (of one run), in order, user
    turns and tool results recovered from model inputs included, and the run's attributes."""
    recorders: list[_Recorder] = []

    def open_detectors(run: Run) -> list[DetectorRun]:
        recorders.append(_Recorder())
        return [recorders[-1]]

    windows = RunWindows(WindowConfig(), open_detectors)
    for step in steps:
        windows.add(step, 0.0)
    windows.close_all()
    assert len(recorders) == 1, "one run"
    return recorders[0].steps, recorders[0].attributes


def chat_steps(messages: list[dict[str, Any]], position: int = 0) -> list[Step]:
    """The steps detectors see of a chat transcript (OpenAI messages) the chat importer read."""
    run = chat.build_run({"messages": messages}, position, "test run")
    return read_steps(steps_of(run))[0]


def tau_run(index: int) -> dict[str, Any]:
    path = tau_file()
    runs: list[dict[str, Any]] = json.loads(path.read_text())
    return runs[index]


def tau_steps(index: int) -> list[Step]:
    """The steps detectors see of one real tau-bench run."""
    return read_steps(steps_of(chat.build_run(tau_run(index), index, f"tau run {index}")))[0]


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An assistant message of a chat transcript that calls one tool."""
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def findings_of(runs: list[Any], config: Config | None = None) -> list[Finding]:
    """Every finding the offline pipeline (`mast-otel analyze`) raises on these runs (chat
    transcripts: run objects or message lists, or Codex rollout lines), in run order."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "runs.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(runs, handle)
        return analyze_files(config or Config(), [path])


def codex_findings(lines: list[dict[str, Any]], config: Config | None = None) -> list[Finding]:
    """Every finding on one Codex session file made of these rollout lines."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "rollout-test.jsonl")
        with open(path, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(line) + "\n" for line in lines)
        return analyze_files(config or Config(), [path])


def tau_findings(index: int, mode: str | None = None) -> list[Finding]:
    """The findings on one real tau-bench run (of one mode, if given)."""
    found = findings_of([tau_run(index)])
    return [f for f in found if mode is None or f.mode == mode]
