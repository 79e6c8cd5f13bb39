"""Team transcripts (AG2 group chats, Magentic-One logs, Who&When files) read by content, code
blocks as the writing agent's tool calls, instructions as hand-offs; and the structural
attribution of a failed team run to an agent and a step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mast_otel.collector.importers import recognise, team
from mast_otel.collector.importers.spans import MESSAGE_INDEX
from mast_otel.processors.attribution import Turn, attribute
from tests import corpora

WHO_AND_WHEN = corpora.who_and_when_dir()

AG2 = [
    {"role": "assistant", "name": "Data_Expert", "content": "Task: count the rows of data.csv."},
    {
        "role": "user",
        "name": "Data_Expert",
        "content": (
            "Counting:\n```python\nimport pandas as pd\nprint(len(pd.read_csv('d.csv')))\n```"
        ),
    },
    {
        "role": "user",
        "name": "Computer_terminal",
        "content": "exitcode: 1 (execution failed)\nCode output: FileNotFoundError: d.csv",
    },
    {"role": "user", "name": "Verification_Expert", "content": "The file has 42 rows. TERMINATE"},
]

MAGENTIC = {
    "question": "Find the opening hours of the museum.",
    "history": [
        {"role": "human", "content": "Find the opening hours of the museum."},
        {"role": "Orchestrator (thought)", "content": "Plan: ask WebSurfer to search."},
        {"role": "Orchestrator (-> WebSurfer)", "content": "Search the museum opening hours."},
        {"role": "WebSurfer", "content": "I typed 'museum' into the search bar."},
        {"role": "Orchestrator (-> WebSurfer)", "content": "Search the museum opening hours."},
        {"role": "WebSurfer", "content": "The museum opens at 9."},
    ],
    "is_corrected": False,
}


def _write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    return path


def test_ag2_group_chat_is_recognised_and_code_is_the_writer_tool_call(tmp_path: Path) -> None:
    path = _write(tmp_path, AG2)
    assert recognise(str(path)) is team
    (run,) = list(team.runs(str(path)))
    tools = [s for s in run.spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert len(tools) == 1
    (tool,) = tools
    assert tool.attributes["gen_ai.agent.name"] == "Data_Expert"
    assert tool.attributes["gen_ai.tool.name"] == "python"
    assert "read_csv" in json.loads(tool.attributes["gen_ai.tool.call.arguments"])["code"]
    assert tool.error is not None and "exitcode: 1" in tool.error
    assert tool.attributes[MESSAGE_INDEX] == 1
    agents = [
        s.attributes["gen_ai.agent.name"]
        for s in run.spans
        if s.attributes.get("gen_ai.operation.name") == "chat"
    ]
    # The executor's reply is the tool's result, not a model call of its own.
    assert agents == ["Data_Expert", "Data_Expert", "Verification_Expert"]


def test_magentic_one_instruction_is_a_handoff_and_the_task_the_first_input(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, MAGENTIC)
    assert recognise(str(path)) is team
    (run,) = list(team.runs(str(path)))
    names = [s.name for s in run.spans]
    assert "handoff from Orchestrator to WebSurfer" in names
    chats = [s for s in run.spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    first_input = json.loads(chats[0].attributes["gen_ai.input.messages"])
    assert first_input[0]["role"] == "user"
    assert "opening hours" in first_input[0]["parts"][0]["content"]
    assert "mast.task.description" not in run.spans[0].attributes
    assert run.spans[0].attributes["mast.run.outcome"] == "failure"


def test_attribution_names_the_code_whose_failure_the_team_built_on() -> None:
    turns, _, _ = team.turns(AG2, "ag2")
    found = attribute([Turn(*t) for t in turns])
    assert (found.agent, found.step, found.rule) == ("Data_Expert", 1, "failed code")
    assert found.chain == [1, 2]


def test_attribution_names_the_instruction_not_carried_out() -> None:
    turns, _, _ = team.turns(MAGENTIC, "magentic")
    found = attribute([Turn(*t) for t in turns])
    assert (found.agent, found.step, found.rule) == ("WebSurfer", 3, "instruction not carried out")
    assert found.chain == [3, 2, 3, 4]


def test_attribution_names_an_unverified_claim() -> None:
    turns = [
        Turn("Planner_Expert", "", "Plan: look up the population and verify it."),
        Turn("Census_Expert", "", "The population is 12,000 according to the census."),
        Turn("Verification_Expert", "", "Confirmed. TERMINATE"),
    ]
    found = attribute(turns)
    assert (found.agent, found.step, found.rule) == ("Census_Expert", 1, "unverified claim")


@pytest.mark.skipif(not WHO_AND_WHEN.is_dir(), reason="../shared/data is absent")
def test_every_who_and_when_file_is_read_as_a_team() -> None:
    for path in sorted(WHO_AND_WHEN.glob("*/*.json")):
        assert recognise(str(path)) is team, path
        (run,) = list(team.runs(str(path)))
        agents = {s.attributes.get("gen_ai.agent.name") for s in run.spans}
        assert len(agents - {team.TEAM}) >= 1, path


def _findings(tmp_path: Path, doc: object) -> list[tuple[str, str]]:
    from mast_otel.collector.analyze import run_files
    from mast_otel.collector.config import load_config
    from mast_otel.collector.store.exporter import MemoryExporter

    exporter = MemoryExporter()
    run_files(load_config(None), [str(_write(tmp_path, doc))], exporter)
    return [(f.mode, f.message) for f in exporter.findings]


def test_a_message_a_teammate_answers_is_not_a_final_answer(tmp_path: Path) -> None:
    chat = [
        {"role": "assistant", "name": "Planner_Expert", "content": "Plan: count the rows."},
        {"role": "user", "name": "Data_Expert", "content": "I will count the rows next."},
        {"role": "user", "name": "Planner_Expert", "content": "Please go ahead."},
        {
            "role": "user",
            "name": "Data_Expert",
            "content": "```python\nprint(1 + 1)\n```",
        },
        {"role": "user", "name": "Computer_terminal", "content": "exitcode: 0 (execution "
         "succeeded)\nCode output: 2"},
        {"role": "user", "name": "Planner_Expert", "content": "The answer is 2. TERMINATE"},
    ]  # fmt: skip
    modes = [mode for mode, _ in _findings(tmp_path, chat)]
    assert "FM-1.5" not in modes


def test_an_orchestrator_that_hands_work_to_its_agents_has_acted(tmp_path: Path) -> None:
    turns = [{"role": "human", "content": "Find the opening hours of the museum."}]
    for attempt in range(4):
        turns += [
            {"role": "Orchestrator (thought)", "content": f"Step {attempt}: WebSurfer searches."},
            {"role": "Orchestrator (-> WebSurfer)", "content": f"Search page {attempt}."},
            {"role": "WebSurfer", "content": f"I typed 'museum hours' on page {attempt}."},
        ]
    doc = {"question": "Find the opening hours of the museum.", "history": turns}
    modes = [mode for mode, _ in _findings(tmp_path, doc)]
    assert "FM-3.1" not in modes


def test_a_failure_the_whole_group_chat_saw_was_not_withheld(tmp_path: Path) -> None:
    chat = [
        {"role": "assistant", "name": "Planner_Expert", "content": "Count the rows of d.csv."},
        {"role": "user", "name": "Data_Expert", "content": "```python\nopen('d.csv')\n```"},
        {"role": "user", "name": "Computer_terminal", "content": "exitcode: 1 (execution "
         "failed)\nCode output: FileNotFoundError: d.csv"},
        {"role": "user", "name": "Verification_Expert", "content": "The file is missing."},
        {"role": "user", "name": "Planner_Expert", "content": "TERMINATE"},
    ]  # fmt: skip
    assert "FM-2.4" not in [mode for mode, _ in _findings(tmp_path, chat)]
