"""Real runs for detector tests: tau-bench airline runs (GPT-4o) read through the chat
importer and the offline pipeline, as `mast-otel analyze` reads them."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from mast_otel.collector.analyze import analyze_files
from mast_otel.collector.config import load_config
from mast_otel.collector.importers import chat
from mast_otel.processors.model import Finding
from tests.corpora import tau_file

ROOT = Path(__file__).resolve().parents[2]


TAU = tau_file()


@lru_cache(maxsize=1)
def tau_runs() -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(TAU.read_text())
    return runs


@lru_cache(maxsize=1)
def _all_findings() -> dict[int, list[Finding]]:
    """Every finding of every tau-bench run, by the run's index in the file."""
    index = {run.trace_id: i for i, run in enumerate(chat.runs(str(TAU)))}
    out: dict[int, list[Finding]] = {i: [] for i in index.values()}
    for finding in analyze_files(load_config(None), [str(TAU)]):
        out[index[finding.trace_id]].append(finding)
    return out


def tau_findings(index: int, mode: str | None = None) -> list[Finding]:
    """The findings on the tau-bench run at `index` (of one mode, if given)."""
    return [f for f in _all_findings()[index] if mode is None or f.mode == mode]


def all_tau_findings() -> dict[int, list[Finding]]:
    return _all_findings()
