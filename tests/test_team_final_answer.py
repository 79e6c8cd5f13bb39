"""A team's final answer is its last word (a message that is or ends with TERMINATE, the
orchestrator's `FINAL ANSWER:`), not any message without a call: FM-1.5's calls after the
final answer, FM-3.1's ending and FM-3.2 / FM-3.3's claim of success read it so; a single
agent's final answer is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from mast_otel.collector.analyze import run_files
from mast_otel.collector.config import load_config
from mast_otel.collector.store.exporter import MemoryExporter
from mast_otel.processors.detectors.signals import LAST_WORD, without_last_word
from tests.steps import GET_PODS, PODS_BAD, RESTART, RunBuilder, analyse, rules


def _findings(tmp_path: Path, doc: object) -> list[tuple[str, str, str]]:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    exporter = MemoryExporter()
    run_files(load_config(None), [str(path)], exporter)
    return [(f.mode, f.rule, f.message) for f in exporter.findings]


def _said(name: str, text: str) -> dict[str, str]:
    return {"role": "user", "name": name, "content": text}


def _ran(code: int, output: str) -> dict[str, str]:
    outcome = "succeeded" if code == 0 else "failed"
    return _said(
        "Computer_terminal", f"exitcode: {code} (execution {outcome})\nCode output: {output}"
    )


def test_the_last_word_is_terminate_or_the_orchestrators_conclusion() -> None:
    for text in (
        "TERMINATE",
        "The answer is 42. TERMINATE",
        "Done.\nTERMINATE.",
        "FINAL ANSWER: 5",
    ):
        assert LAST_WORD.search(text), text
    for text in ("I will TERMINATE the job after the check.", "The final answer needs a check."):
        assert not LAST_WORD.search(text), text
    assert without_last_word("TERMINATE") == ""
    assert without_last_word("The answer is 42. TERMINATE") == "The answer is 42."


def test_an_experts_opening_message_before_its_own_code_is_no_final_answer(
    tmp_path: Path,
) -> None:
    # CaptainAgent's first expert relays the task, then writes the code itself.
    chat = [
        _said("Data_Expert", "You are given a task: count the rows of data.csv."),
        _said("Data_Expert", "```python\nprint(sum(1 for _ in open('data.csv')))\n```"),
        _ran(0, "42"),
        _said("Verification_Expert", "The file has 42 rows, as the output shows."),
        _said("Data_Expert", "TERMINATE"),
    ]
    assert [m for m, _, _ in _findings(tmp_path, chat) if m == "FM-1.5"] == []


def test_an_expert_alone_with_the_executor_talks_to_a_team(tmp_path: Path) -> None:
    # The executor's "no code to run" reply is a teammate's turn: the expert's plan before it
    # was a message to the group chat, not its final answer.
    chat = [
        _said("Data_Expert", "You are given a task: count the rows of data.csv."),
        _said("Computer_terminal", "There is no code from the last 1 message for me to execute."),
        _said("Data_Expert", "Plan: read the file and count its lines."),
        _said("Data_Expert", "```python\nprint(sum(1 for _ in open('data.csv')))\n```"),
        _ran(0, "42"),
    ]
    assert [m for m, _, _ in _findings(tmp_path, chat) if m == "FM-1.5"] == []


def test_code_run_after_the_team_ended_its_conversation_is_found(tmp_path: Path) -> None:
    chat = [
        _said("Planner_Expert", "Count the rows of data.csv."),
        _said("Data_Expert", "```python\nprint(sum(1 for _ in open('data.csv')))\n```"),
        _ran(0, "42"),
        _said("Planner_Expert", "The file has 42 rows. TERMINATE"),
        _said("Data_Expert", "```python\nprint(open('data.csv').readline())\n```"),
        _ran(0, "id,name"),
    ]
    found = [(r, msg) for m, r, msg in _findings(tmp_path, chat) if m == "FM-1.5"]
    assert found == [
        (
            "calls_after_final_answer",
            "Data_Expert ran python after Planner_Expert had ended the team's conversation "
            "('The file has 42 rows. TERMINATE')",
        )
    ]


def test_a_magentic_run_ends_on_the_orchestrators_final_answer(tmp_path: Path) -> None:
    doc = {
        "question": "Find the museum's opening hours.",
        "history": [
            {"role": "human", "content": "Find the museum's opening hours."},
            {"role": "Orchestrator (-> WebSurfer)", "content": "Search the opening hours."},
            {"role": "WebSurfer", "content": "I typed 'museum hours'. I'll check the page next."},
            {"role": "Orchestrator (thought)", "content": "Request satisfied."},
            {"role": "Orchestrator (termination condition)", "content": "FINAL ANSWER: 9 to 5"},
        ],
    }
    # The WebSurfer's announcement is a turn of the conversation; the run ended on a
    # conclusion, not on a next step it never took.
    assert [r for m, r, _ in _findings(tmp_path, doc) if m == "FM-3.1"] == []


def test_a_team_that_stops_on_an_unsaid_next_step_has_no_final_answer(tmp_path: Path) -> None:
    chat = [
        _said("Planner_Expert", "Find the museum's opening hours."),
        _said("Web_Expert", "I'll inspect the museum's page and report the hours shortly."),
        _said("Planner_Expert", "Thank you, waiting for the hours."),
    ]
    assert [r for m, r, _ in _findings(tmp_path, chat) if m == "FM-3.1"] == []


def _restart_then_claim(run: RunBuilder, *, last_word: str) -> None:
    run.llm(agent="fixer", output="Restarting checkout.", calls=("kubectl",))
    run.tool("kubectl", RESTART, "deployment.apps/checkout restarted", agent="fixer")
    run.llm(agent="checker", output="Checking the pods.", calls=("kubectl",))
    run.tool("kubectl", GET_PODS, PODS_BAD, agent="checker")
    run.llm(agent="fixer", output="The checkout service is fixed and running again.")
    if last_word:
        run.llm(agent="checker", output=last_word)


def test_the_conclusion_before_a_bare_terminate_is_the_teams_claim() -> None:
    run = RunBuilder(agent="team")
    _restart_then_claim(run, last_word="TERMINATE")
    findings, _ = analyse(run.steps)
    claims = [f.evidence.get("claim", "") for f in findings if f.mode == "FM-3.3"]
    assert claims and all("fixed and running" in c for c in claims)


def test_a_team_that_never_said_its_last_word_claimed_nothing() -> None:
    run = RunBuilder(agent="team")
    _restart_then_claim(run, last_word="")
    assert rules(run.steps, mode="FM-3.3") == []


def test_a_single_agents_answer_is_still_its_final_answer() -> None:
    run = RunBuilder(agent="fixer")
    run.tool("kubectl", RESTART, "deployment.apps/checkout restarted")
    run.tool("kubectl", GET_PODS, "checkout-1 1/1 Running")
    run.final("The checkout service is fixed and running again.")
    run.tool("kubectl", GET_PODS, "checkout-1 1/1 Running")
    findings, _ = analyse(run.steps)
    assert [(f.rule, f.message) for f in findings if f.mode == "FM-1.5"][:1] == [
        ("calls_after_final_answer", "fixer kept calling tools after its final answer")
    ]
