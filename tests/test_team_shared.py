"""What a team's shared conversation changes: code no executor ran is no call; a call whose
result every agent read (a group chat) is not withheld when another agent runs it again; an
instruction given again and again that no teammate acts on is ignored input."""

from __future__ import annotations

import json
from pathlib import Path

from mast_otel.collector.analyze import run_files
from mast_otel.collector.config import load_config
from mast_otel.collector.importers import team
from mast_otel.collector.store.exporter import MemoryExporter
from tests.test_team_final_answer import _findings, _ran, _said


def test_code_another_agent_speaks_after_is_no_call(tmp_path: Path) -> None:
    chat = [
        _said("Planner_Expert", "Count the rows of data.csv."),
        _said("Data_Expert", "```python\nprint(sum(1 for _ in open('data.csv')))\n```"),
        _said("Verification_Expert", "Wait: check the header line first."),
        _said("Data_Expert", "```python\nprint(open('data.csv').readline())\n```"),
        _ran(0, "id,name"),
    ]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(chat))
    (run,) = list(team.runs(str(path)))
    tools = [s for s in run.spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert [s.attributes[team.S.MESSAGE_INDEX] for s in tools] == [3]
    unrun = next(
        s for s in run.spans if s.name == "chat" and s.attributes[team.S.MESSAGE_INDEX] == 1
    )
    (said,) = json.loads(unrun.attributes["gen_ai.output.messages"])
    assert said["finish_reason"] == "stop"
    assert [p["type"] for p in said["parts"]] == ["text"]


def test_a_result_the_whole_group_chat_read_is_not_withheld(tmp_path: Path) -> None:
    code = "```python\nprint(sum(1 for _ in open('data.csv')))\n```"
    chat = [
        _said("Planner_Expert", "Count the rows of data.csv."),
        _said("Data_Expert", code),
        _ran(0, "42"),
        _said("Verification_Expert", f"Let me run it again to be sure.\n{code}"),
        _ran(0, "42"),
        _said("Verification_Expert", "42 rows, confirmed. TERMINATE"),
    ]
    assert [m for m, _, _ in _findings(tmp_path, chat) if m == "FM-2.4"] == []


def test_an_instruction_given_three_times_without_a_call_is_ignored_input(
    tmp_path: Path,
) -> None:
    order = "Data_Expert: count the rows of data.csv with code."
    chat = [_said("Planner_Expert", "Plan: Data_Expert counts the rows.")]
    for _ in range(3):
        chat += [_said("Planner_Expert", order), _said("Data_Expert", "Sure, I will do that.")]
    # No code in it: a Who&When run object (`history`) says it is a team's.
    found = [(r, msg) for m, r, msg in _findings(tmp_path, {"history": chat}) if m == "FM-2.5"]
    assert found == [
        (
            "instruction_reissued",
            f"Planner_Expert gave the same instruction 3 times ({order!r}); Data_Expert "
            "answered without a single tool call",
        )
    ]


def test_the_same_instruction_acted_on_in_between_is_no_reissue(tmp_path: Path) -> None:
    order = "Data_Expert: count the rows of data.csv with code."
    chat = [_said("Planner_Expert", "Plan: Data_Expert counts the rows.")]
    for rows in (41, 42, 43):
        chat += [
            _said("Planner_Expert", order),
            _said("Data_Expert", "```python\nprint(sum(1 for _ in open('data.csv')))\n```"),
            _ran(0, str(rows)),
        ]
    assert [m for m, _, _ in _findings(tmp_path, {"history": chat}) if m == "FM-2.5"] == []


def test_a_reissued_instruction_finding_keeps_the_teammates_it_named(tmp_path: Path) -> None:
    # A teammate who speaks only after the finding was made is not added to it afterwards.
    order = "Data_Expert: count the rows of data.csv with code."
    chat = [_said("Planner_Expert", "Plan: Data_Expert counts the rows.")]
    for _ in range(3):
        chat += [_said("Planner_Expert", order), _said("Data_Expert", "Sure, I will do that.")]
    chat += [_said("Verification_Expert", "I will check the count once it is there.")]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"history": chat}))
    exporter = MemoryExporter()
    run_files(load_config(None), [str(path)], exporter)
    (finding,) = [f for f in exporter.findings if f.rule == "instruction_reissued"]
    assert finding.evidence["receivers"] == ["Data_Expert"]
    assert "Verification_Expert" not in finding.message
