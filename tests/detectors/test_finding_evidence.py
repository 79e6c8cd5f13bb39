"""Evidence a person trusts: every finding's message names a real resource, value or call of
its run. Reads the message of every finding on the 200 real tau-bench runs and on the scenario
corpus, and fails on an empty or meaningless target (an empty quote, "None", "{}", an API
version where a name belongs, a bare number where a call or resource is named)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from mast_otel.processors.model import Finding
from tests.detectors.real_runs import all_tau_findings, tau_runs

ROOT = Path(__file__).resolve().parents[2]

# A quoted, listed or named target that says nothing.
MEANINGLESS = [
    (re.compile(r"''|\"\"|\(\)|\[\]|\{\}"), "an empty quote, call or list"),
    (re.compile(r"\b(None|null|undefined|nan)\b"), "a missing value printed"),
    (re.compile(r"\bv\d+(beta\d+|alpha\d+)?\b(?!\.\d)"), "an API version as a target"),
    (
        re.compile(
            r"\b(changed|checked|named|acted on|used|ran) \d+"
            r"(?![\d.,]*\s*(times|seconds|s\b|steps|calls))\b"
        ),
        "a bare number",
    ),
    (re.compile(r"\s{2,}|,\s*,|:\s*$|\(\s*\)"), "a hole where a value was left out"),
]


def problems(message: str) -> list[str]:
    """What is wrong with a finding's message as evidence (nothing, for a good one)."""
    if not message.strip():
        return ["an empty message"]
    return [why for pattern, why in MEANINGLESS if pattern.search(message)]


def _names_something_of_the_run(finding: Finding, transcript: str) -> bool:
    """Whether the message holds a word of three characters or more that its run holds too: a
    tool name, an id, a quoted sentence. Words of the message's own template do not count."""
    template = {
        "the",
        "and",
        "model",
        "user",
        "agent",
        "said",
        "told",
        "run",
        "call",
        "changed",
        "system",
        "without",
        "after",
        "before",
        "which",
        "that",
        "what",
        "with",
    }
    tokens = {
        t for t in re.findall(r"[A-Za-z0-9_@.-]{3,}", finding.message) if t.lower() not in template
    }
    return any(t in transcript for t in tokens)


def test_the_check_itself_catches_meaningless_targets():
    assert problems("") == ["an empty message"]
    assert problems("kubectl changed v1 in a read-only task") == ["an API version as a target"]
    assert problems("the model named None and the call acted on {}") != []
    assert problems("restart changed 3 without checking") == ["a bare number"]
    assert problems("update_reservation_flights(reservation_id=OBUT9V) failed") == []
    assert problems("the model told $1,310 ('balance is $1,310')") == []


def test_every_finding_on_the_real_runs_names_something_of_its_run():
    runs = tau_runs()
    findings = all_tau_findings()
    assert sum(len(f) for f in findings.values()) > 100
    bad = []
    for index, found in findings.items():
        transcript = repr(runs[index]["traj"]).replace("\\\\", "\\")
        for finding in found:
            wrong = problems(finding.message)
            if not _names_something_of_the_run(finding, transcript):
                wrong.append("names nothing of its run")
            if wrong:
                bad.append((index, finding.mode, finding.rule, finding.message[:160], wrong))
    assert bad == [], f"{len(bad)} findings with untrustworthy evidence, first: {bad[:5]}"


def test_every_finding_on_the_scenario_corpus_has_a_meaningful_message():
    spec = importlib.util.spec_from_file_location(
        "corpus_fingerprint", ROOT / "scripts" / "corpus_fingerprint.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    findings, _ = module.analyse(module.record_corpus())
    assert len(findings) > 50
    bad = [
        (f.mode, f.rule, f.message, problems(f.message)) for f in findings if problems(f.message)
    ]
    assert bad == [], f"{len(bad)} findings with untrustworthy evidence, first: {bad[:5]}"
