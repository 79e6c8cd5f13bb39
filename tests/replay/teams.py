"""Team runs read two ways and compared: through the team importer and the offline pipeline
(the path `mast-otel analyze` takes), and replayed through a team door
(`tests.replay.doors.TEAM_DOORS`: real AG2 and its own tracing, to a real `mast-otel serve`).

A run's reading is what the store keeps of it: the signature's attribution (the responsible
agent, the decisive step as the index of the recorded message its span stands for, the rule
that named it, the chain of steps and the finding it points at) and the findings (mode, rule,
message index). Messages are indexed as the Who&When file's `history`: the importer puts the
index on its spans (`mast.import.message_index`), the replay keeps it in its own bookkeeping.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mast_otel.collector.analyze import run_files
from mast_otel.collector.config import load_config
from mast_otel.collector.importers.spans import MESSAGE_INDEX, SOURCE
from mast_otel.collector.store.exporter import MemoryExporter
from tests.replay.doors import TEAM_DOORS, replay

Link = tuple[Any, ...]


@dataclass(frozen=True)
class Reading:
    """What the store keeps of one team run (see the module's docstring)."""

    outcome: str = ""
    agent: str = ""
    step: int = -1
    rule: str = ""
    chain: tuple[Link, ...] = ()
    findings: tuple[tuple[str, str, int], ...] = ()

    @property
    def modes(self) -> list[str]:
        return sorted({mode for mode, _, _ in self.findings})


def reading(
    outcome: str,
    agent: str,
    decisive_span: str,
    chain: str,
    findings: Iterable[tuple[str, str, str]],
    index_of: dict[str, int],
) -> Reading:
    """A run's reading from its signature's outcome and attribution and its findings (mode,
    rule, span), spans mapped to message indices by `index_of` (-1 for a span it does not
    know)."""
    links: list[Link] = []
    rule = ""
    for link in json.loads(chain) if chain else []:
        span = str(link.get("span_id", ""))
        if "finding" in link:
            links.append(("finding", link.get("mode"), link.get("rule"), index_of.get(span, -1)))
            continue
        links.append((index_of.get(span, -1), link.get("agent"), link.get("why")))
        if span == decisive_span:
            rule = str(link.get("why", ""))
    # One finding a span, mode and rule: the store keeps findings by that identity.
    found = sorted((mode, rule_, index_of.get(span, -1)) for mode, rule_, span in set(findings))
    return Reading(
        outcome,
        agent,
        index_of.get(decisive_span, -1) if decisive_span else -1,
        rule,
        tuple(links),
        tuple(found),
    )


def imported(paths: list[Path]) -> dict[str, Reading]:
    """Each file's reading through the team importer and the offline pipeline, by file name."""
    exporter = MemoryExporter()
    run_files(load_config(None), [str(path) for path in paths], exporter)
    source_of: dict[str, str] = {}
    index_of: dict[str, dict[str, int]] = {}
    for span in exporter.spans:
        index = span.attributes.get(MESSAGE_INDEX)
        if isinstance(index, int):
            index_of.setdefault(span.trace_id, {})[span.span_id] = index
        if not span.parent_span_id:
            source_of[span.trace_id] = str(span.attributes.get(SOURCE, ""))
    findings: dict[str, list[tuple[str, str, str]]] = {}
    for finding in exporter.findings:
        findings.setdefault(finding.trace_id, []).append(
            (finding.mode, finding.rule, finding.span_id)
        )
    out: dict[str, Reading] = {}
    for signature in exporter.signatures:
        trace = signature.trace_id
        out[source_of.get(trace, "")] = reading(
            signature.outcome,
            signature.responsible_agent,
            signature.decisive_span_id,
            signature.attribution_chain,
            findings.get(trace, []),
            index_of.get(trace, {}),
        )
    return out


def replayed(
    door: str,
    folder: Path,
    numbers: list[int],
    workdir: Path | None = None,
    latency_s: float = 0.0,
) -> tuple[dict[int, Reading], dict[str, float]]:
    """The files `numbers` of `folder` replayed through the team door `door`: each run's
    reading by file number, and the seconds the replay took."""
    with tempfile.TemporaryDirectory(prefix="mast-team-replay-") as scratch:
        result = replay(
            TEAM_DOORS[door], folder, "", workdir or Path(scratch), numbers, latency_s=latency_s
        )
    out: dict[int, Reading] = {}
    for number, run in result.runs.items():
        out[number] = reading(
            run.outcome,
            run.agent,
            run.decisive_span,
            run.chain,
            [(f["mode"], f["rule"], f["span_id"]) for f in run.findings],
            run.spans,
        )
    return out, result.seconds


def differences(reference: Reading, other: Reading) -> list[str]:
    """How `other` reads a run differently from `reference`, one line per difference ("-"
    the reference's, "+" the other's)."""
    lines = []
    for name in ("outcome", "agent", "step", "rule"):
        mine, theirs = getattr(reference, name), getattr(other, name)
        if mine != theirs:
            lines.append(f"{name}: - {mine!r} + {theirs!r}")
    if reference.chain != other.chain:
        lines.append(f"chain: - {list(reference.chain)} + {list(other.chain)}")
    for finding in sorted(set(reference.findings) - set(other.findings)):
        lines.append("finding: - {} {} at message {}".format(*finding))
    for finding in sorted(set(other.findings) - set(reference.findings)):
        lines.append("finding: + {} {} at message {}".format(*finding))
    if not lines and reference.findings != other.findings:
        lines.append(f"findings counted differently: - {reference.findings} + {other.findings}")
    return lines
