"""Door equivalence on team runs: Who&When's AG2 group chats read through the team importer and
replayed through real AG2 with its own OpenTelemetry tracing (`tests/replay/team_agent.py`: a
ConversableAgent per recorded agent answered by a loopback server with its recorded messages,
the recorded speaker order, the terminal's recorded output from an executor that runs nothing)
to a real `mast-otel serve` are stored alike, run by run: the outcome, the attribution
(responsible agent, decisive message, rule, chain) and the findings (mode, rule, message).

The runs are the development split's (`Algorithm-Generated` files whose number is divisible by
4), from the Who&When logs shipped in tests/data, replayed at full speed: about half a minute
on two cores. `scripts/team_accuracy.py --door ag2` replays them all, `--latency S` at a
model's pace.
"""

from __future__ import annotations

import pytest

from tests import corpora
from tests.frameworks.harness import ROOT
from tests.replay import teams
from tests.replay.model import RecordedTeam

AG2 = ROOT / ".venv-ag2" / "bin" / "python"


@pytest.fixture(scope="module")
def readings(tmp_path_factory):
    assert AG2.exists(), f"{AG2} is missing: run scripts/setup.sh"
    folder = corpora.who_and_when_dir() / "Algorithm-Generated"
    numbers = sorted(n for p in folder.glob("*.json") if (n := int(p.stem)) % 4 == 0)
    imported = teams.imported([folder / f"{n}.json" for n in numbers])
    replayed, seconds = teams.replayed("ag2", folder, numbers, tmp_path_factory.mktemp("ag2"))
    print(f"ag2: {len(replayed)} runs in {seconds['total']:.0f}s")
    return numbers, imported, replayed


def test_every_development_run_is_replayed_as_the_failed_run_it_is(readings):
    numbers, _, replayed = readings
    assert sorted(replayed) == numbers
    assert {run.outcome for run in replayed.values()} == {"failure"}
    assert all(run.agent and run.step >= 0 for run in replayed.values())


def test_the_door_reads_each_run_as_the_importer_does(readings):
    numbers, imported, replayed = readings
    diffs = {n: d for n in numbers if (d := teams.differences(imported[f"{n}.json"], replayed[n]))}
    assert not diffs, (
        f"{len(diffs)} of {len(numbers)} runs differ (- importer, + ag2):\n"
        + "\n".join(f"{n}.json: {line}" for n, lines in diffs.items() for line in lines)
    )


def test_the_recorded_team_answers_each_agent_in_turn_and_refuses_a_drifted_chat():
    chat = [
        {"name": "user", "content": "How many rows?"},
        {"name": "Data_Expert", "content": "```python\nprint(42)\n```"},
        {
            "name": "Computer_terminal",
            "content": "exitcode: 0 (execution succeeded)\nCode output: 42",
        },
        {"name": "Data_Expert", "content": "42. TERMINATE"},
    ]
    model = RecordedTeam()
    model.load(4, chat)
    system = {"role": "system", "content": "You are Data_Expert."}
    # Its own earlier message is the assistant's in its conversation, the others' the user's.
    sent = [{"role": "assistant" if m["name"] == "Data_Expert" else "user", **m} for m in chat[:3]]
    status, answer = model.answer(4, {"messages": [system, *sent]})
    assert (status, answer["choices"][0]["message"]["content"]) == (200, "42. TERMINATE")
    as_the_users = [sent[0], dict(sent[1], role="user"), sent[2]]
    status, refused = model.answer(4, {"messages": [system, *as_the_users]})
    assert status == 409 and "message 1" in refused["error"]["message"]
    renamed = [*sent[:2], dict(sent[2], name="Data_Expert")]
    status, refused = model.answer(4, {"messages": [system, *renamed]})
    assert status == 409 and "names" in refused["error"]["message"]


# Development runs whose experts answer and then run code before a teammate speaks: live, each
# agent's root span comes last, so until it does the run may still be a team's and a finding
# that holds only for one agent must wait (the importer sends the root first).
PACED_RUNS = (32, 60, 124)


def test_at_a_models_pace_the_door_still_reads_each_run_as_the_importer_does(tmp_path):
    assert AG2.exists(), f"{AG2} is missing: run scripts/setup.sh"
    folder = corpora.who_and_when_dir() / "Algorithm-Generated"
    imported = teams.imported([folder / f"{n}.json" for n in PACED_RUNS])
    replayed, _ = teams.replayed("ag2", folder, list(PACED_RUNS), tmp_path, latency_s=0.3)
    diffs = {
        n: d for n in PACED_RUNS if (d := teams.differences(imported[f"{n}.json"], replayed[n]))
    }
    assert not diffs, "\n".join(f"{n}.json: {line}" for n, lines in diffs.items() for line in lines)
