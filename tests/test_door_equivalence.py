"""Door equivalence on real runs: tau-bench's 200 airline runs read through the chat-transcript
importer and replayed through real instrumentation (`tests/replay/`: a real OpenAI client or a
pydantic-ai agent, the recorded turns and tool results, one `mast-otel serve` per door) raise
the same findings, mode, rule and the message each points at, run by run.

The importer's findings come from `scripts/real_accuracy.py`'s offline path; the data file is
the one shipped in tests/data. The doors run two at a time; then fifteen runs go again through
every door but openai-v2-tools at a model's pace (0.3 s an answer); all of it about five and a
half minutes on two cores.
MAST_REPLAY_LATENCY_S=S makes every model answer take S seconds, a real model's pace (0.3 takes
about fourteen minutes with all doors at once).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from typing import Any

import pytest

from tests.frameworks.harness import ROOT
from tests.replay.doors import DOORS, differences, readable, replay_doors

TOOLS = ROOT / "tests" / "labels" / "tau_airline" / "tools.json"


def _real_accuracy() -> Any:
    spec = importlib.util.spec_from_file_location(
        "real_accuracy", ROOT / "scripts" / "real_accuracy.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    accuracy = _real_accuracy()
    data = accuracy.default_data()
    assert data.is_file(), f"{data}: the tau-bench file shipped in tests/data is missing"
    started = time.monotonic()
    importer = {r.index: r.findings for r in accuracy.analyse(data, None, str(TOOLS))}
    imported = time.monotonic() - started
    latency = float(os.environ.get("MAST_REPLAY_LATENCY_S") or 0)
    doors = replay_doors(
        list(DOORS),
        data,
        str(TOOLS),
        tmp_path_factory.mktemp("doors"),
        parallel=len(DOORS) if latency else 2,
        latency_s=latency,
    )
    recorded = json.loads(data.read_text("utf-8"))
    print(
        f"importer {imported:.0f}s; "
        + "; ".join(f"{n} {d.seconds['total']:.0f}s" for n, d in doors.items())
    )
    return recorded, importer, doors


@pytest.mark.parametrize("door", list(DOORS))
def test_every_run_is_replayed_with_its_outcome(corpus, door):
    recorded, _, doors = corpus
    runs = doors[door].runs
    assert sorted(runs) == list(range(len(recorded)))
    wrong = [
        i
        for i, run in runs.items()
        if run.outcome != ("success" if recorded[i]["reward"] >= 1.0 else "failure")
        or run.score != float(recorded[i]["reward"])
    ]
    assert not wrong, f"runs whose outcome or score was not read: {wrong[:20]}"
    assert len({run.trace_id for run in runs.values()}) == len(runs)


@pytest.mark.parametrize("door", list(DOORS))
def test_the_door_finds_what_the_importer_finds(corpus, door):
    _, importer, doors = corpus
    got = {i: run.findings for i, run in doors[door].runs.items()}
    diffs = differences(importer, got)
    assert not diffs, (
        f"{len(diffs)} of {len(importer)} runs differ between the importer (-) and "
        f"{door} (+):\n{readable(diffs)}"
    )


# Runs replayed again at a model's pace: those whose reading once depended on when spans
# arrived (the agent span exported last, a change's result known only from the next call's
# input, a repeated call split between two names of one agent), and a spread of the rest.
PACED_RUNS = [3, 13, 15, 33, 34, 52, 65, 109, 113, 125, 133, 150, 163, 173, 196]
PACE_S = 0.3


@pytest.fixture(scope="module")
def paced(corpus, tmp_path_factory):
    accuracy = _real_accuracy()
    doors = [name for name in DOORS if name != "openai-v2-tools"]
    return replay_doors(
        doors,
        accuracy.default_data(),
        str(TOOLS),
        tmp_path_factory.mktemp("paced"),
        indices=PACED_RUNS,
        parallel=len(doors),
        latency_s=PACE_S,
    )


@pytest.mark.parametrize("door", [name for name in DOORS if name != "openai-v2-tools"])
def test_at_a_models_pace_the_door_finds_what_the_importer_finds(corpus, paced, door):
    # Each answer takes PACE_S: the spans of a run arrive over seconds, the agent span last,
    # each model call's input (the previous call's results, the user's turn) after the window
    # has released the steps before it.
    _, importer, _ = corpus
    got = {i: run.findings for i, run in paced[door].runs.items()}
    assert sorted(got) == PACED_RUNS
    diffs = differences({i: importer[i] for i in PACED_RUNS}, got)
    assert not diffs, f"{door} at {PACE_S}s an answer (+) vs the importer (-):\n{readable(diffs)}"


def test_the_recorded_model_answers_in_order_and_refuses_a_drifted_replay():
    from tests.replay.model import RecordedModel

    traj = [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "ok"},
        {"role": "assistant", "content": "done"},
    ]
    model = RecordedModel()
    model.load(7, traj)
    status, first = model.answer(7, {"messages": traj[:2]})
    assert status == 200
    assert first["choices"][0]["message"]["tool_calls"][0]["id"] == "c1"
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    sent = [*traj[:2], first["choices"][0]["message"], traj[3]]
    status, second = model.answer(7, {"messages": sent})
    assert (status, second["choices"][0]["message"]["content"]) == (200, "done")
    status, refused = model.answer(7, {"messages": [*sent[:3], dict(traj[3], content="other")]})
    assert status == 409 and "message 3" in refused["error"]["message"]
    assert model.errors
