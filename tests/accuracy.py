"""Replays the scenario corpus through a running collector and scores what it found against
the labels: per-mode precision and recall, and per-run agreement."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass

from mast_otel.collector.config import load_config, on_free_loopback_ports
from mast_otel.collector.demo.agent import AgentRun, Scenario
from mast_otel.collector.demo.dialects import DIALECTS
from mast_otel.collector.demo.runner import run_agents
from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore, queries
from mast_otel.processors.conventions import MODE_CODES
from tests.corpus import CORPUS


@dataclass
class RunResult:
    run: AgentRun
    found: set[str]
    findings: list[dict[str, object]]

    @property
    def expected(self) -> set[str]:
        return set(self.run.scenario.expected_modes)

    @property
    def agrees(self) -> bool:
        return self.found == self.expected


@dataclass
class ModeScore:
    mode: str
    true_positives: int
    false_positives: int
    false_negatives: int

    @property
    def precision(self) -> float:
        called = self.true_positives + self.false_positives
        return self.true_positives / called if called else 1.0

    @property
    def recall(self) -> float:
        actual = self.true_positives + self.false_negatives
        return self.true_positives / actual if actual else 1.0


def replay(
    scenarios: tuple[Scenario, ...] = CORPUS,
    dialects: Iterable[str] = DIALECTS,
    transport: str = "grpc",
    data_dir: str | None = None,
) -> list[RunResult]:
    """Send every scenario in every dialect through the real SDK to a collector on loopback,
    then read back what it stored."""
    with tempfile.TemporaryDirectory() as scratch:
        config = on_free_loopback_ports(load_config(), data_dir or scratch)
        service = Service(config)
        service.start()
        try:
            runs = run_agents(service, transport, list(dialects), scenarios=scenarios)
        finally:
            service.stop()
        store = ChdbStore(config.storage.data_dir, config.storage.database)
        try:
            stored = queries.findings(store, queries.FindingFilter(limit=1_000_000))
        finally:
            store.close()
    by_trace: dict[str, list[dict[str, object]]] = {}
    for row in stored:
        by_trace.setdefault(str(row["trace_id"]), []).append(row)
    return [
        RunResult(
            run,
            {str(f["mode"]) for f in by_trace.get(run.trace_id, [])},
            by_trace.get(run.trace_id, []),
        )
        for run in runs
    ]


def score(results: list[RunResult]) -> list[ModeScore]:
    scores = []
    for mode in MODE_CODES:
        tp = sum(1 for r in results if mode in r.found and mode in r.expected)
        fp = sum(1 for r in results if mode in r.found and mode not in r.expected)
        fn = sum(1 for r in results if mode not in r.found and mode in r.expected)
        scores.append(ModeScore(mode, tp, fp, fn))
    return scores


def report(results: list[RunResult]) -> str:
    """The accuracy table as markdown, then the runs that disagree with their labels."""
    lines = [
        "| mode | precision | recall | TP | FP | FN |",
        "|---|---|---|---|---|---|",
    ]
    for s in score(results):
        lines.append(
            f"| {s.mode} | {s.precision:.2f} | {s.recall:.2f} | {s.true_positives} | "
            f"{s.false_positives} | {s.false_negatives} |"
        )
    agree = sum(r.agrees for r in results)
    lines.append("")
    lines.append(f"Runs whose modes match their labels exactly: {agree} of {len(results)}.")
    for r in results:
        if not r.agrees:
            lines.append(
                f"- {r.run.scenario.name} ({r.run.dialect}): expected "
                f"{sorted(r.expected) or 'none'}, found {sorted(r.found) or 'none'} "
                f"{[(f['mode'], f['rule']) for f in r.findings]}"
            )
    return "\n".join(lines)
