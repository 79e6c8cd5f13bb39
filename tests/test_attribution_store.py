"""Attribution of a failed run, stored: the signature names the decisive step (its span and
position), the responsible agent and the chain back from a finding; `signatures --output json`
carries it and `run` marks the step, read from a real embedded store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mast_otel.collector.importers import team
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.trail import Trail
from tests.load import PYTHONPATH

CLI = [sys.executable, "-m", "mast_otel.collector.cli"]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": PYTHONPATH}

RUN = {
    "question": "How many rows does data.csv have?",
    "is_correct": False,
    "history": [
        {"role": "assistant", "name": "Planner_Expert", "content": "Plan: count data.csv."},
        {"role": "user", "name": "Data_Expert", "content": "```python\nprint(len(open("
         "'d.csv').readlines()))\n```"},
        {"role": "user", "name": "Computer_terminal", "content": "exitcode: 1 (execution "
         "failed)\nCode output: FileNotFoundError: d.csv"},
        {"role": "user", "name": "Verification_Expert", "content": "The file has 42 rows."},
        {"role": "user", "name": "Planner_Expert", "content": "TERMINATE"},
    ],
}  # fmt: skip


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=120, env=ENV, check=False
    )


def test_the_stored_signature_names_the_decisive_step_and_run_marks_it(tmp_path: Path) -> None:
    path = tmp_path / "team.json"
    path.write_text(json.dumps(RUN))
    (spec,) = list(team.runs(str(path)))
    data_dir = str(tmp_path / "store")
    imported = _cli("import", "--data-dir", data_dir, str(path))
    assert imported.returncode == 0, imported.stderr

    out = _cli("signatures", "--data-dir", data_dir, "--output", "json")
    assert out.returncode == 0, out.stderr
    (sig,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert sig["outcome"] == "failure"
    assert sig["responsible_agent"] == "Data_Expert"
    # The decisive span is Data_Expert's message whose code failed (message 1).
    chat = next(
        s
        for s in spec.spans
        if s.name == "chat" and s.attributes["gen_ai.agent.name"] == "Data_Expert"
    )
    assert sig["decisive_span_id"] == chat.span_id
    assert sig["decisive_step"] >= 0
    chain = json.loads(sig["attribution_chain"])
    steps = [link for link in chain if "step" in link]
    assert steps[-1] == {
        "step": sig["decisive_step"],
        "span_id": chat.span_id,
        "agent": "Data_Expert",
        "why": "failed code",
    }
    assert any(link.get("why") == "failed result" for link in steps)

    listing = _cli("run", spec.trace_id, "--data-dir", data_dir)
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert f"decisive step {sig['decisive_step']} (Data_Expert)" in lines[0]
    marks = [i for i, line in enumerate(lines) if ">> decisive step:" in line]
    assert len(marks) == 1
    assert "Data_Expert responsible" in lines[marks[0]]
    assert "failed code" in lines[marks[0]]
    as_json = json.loads(
        _cli("run", spec.trace_id, "--data-dir", data_dir, "--output", "json").stdout
    )
    assert [s["span_id"] for s in as_json["spans"] if s["decisive"]] == [chat.span_id]
    assert as_json["signature"]["responsible_agent"] == "Data_Expert"


def _step(span: str, kind: StepKind, agent: str, **fields: object) -> Step:
    return Step(
        trace_id="ab" * 16,
        span_id=span,
        parent_span_id="",
        name=str(kind),
        kind=kind,
        start_ns=0,
        end_ns=0,
        dialect="genai",
        agent=agent,
        **fields,  # type: ignore[arg-type]
    )


def test_the_chain_starts_at_the_finding_after_the_decisive_step() -> None:
    trail = Trail()
    trail.add(_step("01", StepKind.HUMAN, "", input_text="Count the rows."))
    trail.add(_step("02", StepKind.LLM, "Planner", output_text="Counter, count them."))
    trail.add(_step("03", StepKind.LLM, "Counter", output_text="There are 42 rows."))
    trail.add(_step("04", StepKind.LLM, "Checker", output_text="Verified. TERMINATE"))
    finding = Finding(
        trace_id="ab" * 16,
        span_id="04",
        mode="FM-3.2",
        detector="missing_verification",
        detector_version="1",
        rule="approved_unchecked",
        confidence=0.7,
        message="Checker approved 42 without running anything",
        evidence_span_ids=("04",),
        evidence={},
        time_ns=0,
    )
    trail.on_finding(finding)
    found = trail.attribution()
    assert (found.span_id, found.step, found.agent) == ("03", 2, "Counter")
    chain = json.loads(found.chain)
    assert chain[0] == {
        "finding": finding.finding_id,
        "mode": "FM-3.2",
        "rule": "approved_unchecked",
        "span_id": "04",
    }
    assert chain[1] == {"step": 2, "span_id": "03", "agent": "Counter", "why": "unverified claim"}


def test_a_run_with_nothing_to_attribute_names_nothing() -> None:
    found = Trail().attribution()
    assert (found.span_id, found.step, found.agent, found.chain) == ("", -1, "", "")


def test_the_attribution_does_not_depend_on_when_the_root_arrives() -> None:
    # From a file the root agent span comes first; from a live agent it comes last, and the
    # model calls released before it carry no agent (their agent is named by the root only).
    def turns(agent: str) -> list[Step]:
        steps = [
            _step("01", StepKind.HUMAN, "", input_text="Is checkout healthy?"),
            _step("02", StepKind.LLM, agent, output_text="Restarting it."),
            _step("03", StepKind.TOOL, agent, tool_name="restart", tool_result="ok"),
            _step("04", StepKind.LLM, agent, output_text="Fixed: checkout is healthy."),
        ]
        for step in steps:
            step.parent_span_id = "00"
        return steps

    root = _step("00", StepKind.AGENT, "sre")
    first, last = Trail(), Trail()
    for step in [root, *turns("sre")]:
        first.add(step)
    for step in [*turns(""), root]:
        last.add(step)
    imported, live = first.attribution("sre"), last.attribution("sre")
    assert imported.step >= 0 and imported.agent == "sre"
    assert (live.span_id, live.step, live.agent, live.chain) == (
        imported.span_id,
        imported.step,
        imported.agent,
        imported.chain,
    )
