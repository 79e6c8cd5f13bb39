"""Importers: chat transcripts (the real tau-bench file, JSON and JSON-lines variants), Codex
CLI session files, read by content through `analyze` and stored by `import` so that
`findings`, `signatures` and `run` read them back; bad files give one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mast_otel.collector.importers import (
    ImportFormatError,
    chat,
    codex,
    otlp,
    read_requests,
    recognise,
)
from mast_otel.collector.importers.spans import MESSAGE_INDEX, RESULT_MESSAGE_INDEX
from mast_otel.processors.ids import stable_hex
from tests.corpora import tau_file
from tests.load import PYTHONPATH

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "mast_otel.collector.cli"]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": PYTHONPATH}
CODEX = (
    ROOT
    / "tests/fixtures/codex/rollout-2025-11-22T21-45-35-019aad50-0000-7000-8000-00000000c0de.jsonl"
)
CODEX_SESSION = "019aad50-0000-7000-8000-00000000c0de"
SAMPLE_LABELS = ROOT / "tests/fixtures/labels/tau_airline_sample.jsonl"


TAU = tau_file()


def run_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=ENV, timeout=timeout, cwd=ROOT
    )


def _spans(run):  # type: ignore[no-untyped-def]
    return {s.name.split(" ")[0]: s for s in run.spans}


# --- the real tau-bench file ----------------------------------------------------------------


def test_tau_bench_runs_map_every_span_to_its_message():
    data = json.loads(TAU.read_text())
    runs = list(chat.runs(str(TAU)))
    assert recognise(str(TAU)) is chat
    assert len(runs) == 200 == len(data)
    assert len({r.trace_id for r in runs}) == 200
    assert [r.trace_id for r in chat.runs(str(TAU))] == [r.trace_id for r in runs]
    outcomes = [r.spans[0].attributes["mast.run.outcome"] for r in runs]
    assert outcomes.count("success") == sum(d["reward"] == 1.0 for d in data) == 84
    tools = 0
    for run, raw in zip(runs, data, strict=True):
        traj = raw["traj"]
        root = run.spans[0]
        assert root.attributes["mast.import.task_id"] == raw["task_id"]
        assert root.attributes["mast.run.score"] == raw["reward"]
        # As an instrumented loop sends them: no task attribute and no span per user turn; the
        # instructions and every user turn are in the model calls' input.
        assert "mast.task.description" not in root.attributes
        first_chat = next(s for s in run.spans if s.name.startswith("chat"))
        opening = json.loads(first_chat.attributes["gen_ai.input.messages"])
        assert opening[0]["role"] == "system"
        assert opening[0]["parts"][0]["content"] == traj[0]["content"]
        assert [m["role"] for m in opening].count("user") == sum(
            m["role"] == "user" for m in traj[: first_chat.attributes[MESSAGE_INDEX]]
        )
        previous = -1
        for span in run.spans[1:]:
            index = span.attributes[MESSAGE_INDEX]
            message = traj[index]
            assert span.start_ns > root.start_ns and index >= previous
            previous = index
            if span.name.startswith("chat"):
                assert message["role"] == "assistant"
                out = json.loads(span.attributes["gen_ai.output.messages"])[0]
                assert len([p for p in out["parts"] if p["type"] == "tool_call"]) == len(
                    message.get("tool_calls") or []
                )
                assert len(json.loads(span.attributes["gen_ai.input.messages"])) == index
            elif span.name.startswith("execute_tool"):
                tools += 1
                result = traj[span.attributes[RESULT_MESSAGE_INDEX]]
                assert result["role"] == "tool"
                assert result["tool_call_id"] == span.attributes["gen_ai.tool.call.id"]
                assert span.attributes["gen_ai.tool.call.result"] == result["content"]
                assert (span.error is not None) == result["content"].startswith("Error")
                called = [c["id"] for c in message["tool_calls"]]
                assert span.attributes["gen_ai.tool.call.id"] in called
            else:
                raise AssertionError(f"unexpected span {span.name}")
    assert tools == 1164


def test_analyze_reads_the_tau_bench_file_by_content():
    result = run_cli("analyze", str(TAU), "--output", "json")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows, "the detectors raise findings on real runs"
    traces = {r.trace_id for r in chat.runs(str(TAU))}
    assert {row["trace_id"] for row in rows} <= traces
    assert all(row["message"] for row in rows)


# --- JSON and JSON-lines variants -----------------------------------------------------------

CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "cancel_order", "arguments": '{"order_id": "A17"}'},
        }
    ],
}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "cancelled A17"}
MESSAGES = [
    {"role": "system", "content": "You handle orders."},
    {"role": "user", "content": "Cancel order A17."},
    CALL,
    RESULT,
    {"role": "assistant", "content": "Done: A17 is cancelled."},
    {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
]


def _check_run(run, outcome=""):  # type: ignore[no-untyped-def]
    names = [s.name for s in run.spans]
    assert names == ["invoke_agent assistant", "chat", "execute_tool cancel_order", "chat"]
    tool = run.spans[2]
    assert tool.attributes["gen_ai.tool.call.arguments"] == '{"order_id": "A17"}'
    assert tool.attributes["gen_ai.tool.call.result"] == "cancelled A17"
    assert tool.attributes[MESSAGE_INDEX] == 2 and tool.attributes[RESULT_MESSAGE_INDEX] == 3
    # The task is read from the first model call's input, as from a live agent's.
    assert "mast.task.description" not in run.spans[0].attributes
    first_input = json.loads(run.spans[1].attributes["gen_ai.input.messages"])
    assert [m["role"] for m in first_input] == ["system", "user"]
    assert run.spans[0].attributes.get("mast.run.outcome", "") == outcome


def test_chat_layouts(tmp_path):
    layouts = {
        "list.json": (json.dumps(MESSAGES), [""]),
        "run.json": (json.dumps({"messages": MESSAGES, "outcome": "success"}), ["success"]),
        "runs.json": (
            json.dumps([{"traj": MESSAGES, "reward": 1.0}, {"traj": MESSAGES, "reward": 0.0}]),
            ["success", "failure"],
        ),
        "lists.jsonl": ("\n".join([json.dumps(MESSAGES)] * 2) + "\n", ["", ""]),
        "objects.jsonl": (
            json.dumps({"conversation": MESSAGES, "success": False}) + "\n",
            ["failure"],
        ),
        "messages.jsonl": ("\n".join(json.dumps(m) for m in MESSAGES) + "\n", [""]),
    }
    seen: set[str] = set()
    for name, (text, outcomes) in layouts.items():
        path = tmp_path / name
        path.write_text(text)
        assert recognise(str(path)) is chat, name
        runs = list(chat.runs(str(path)))
        assert len(runs) == len(outcomes), name
        for run, outcome in zip(runs, outcomes, strict=True):
            _check_run(run, outcome)
            seen.add(run.trace_id)
        assert len(list(read_requests(str(path)))) == len(outcomes)
    assert len(seen) == sum(len(o) for _, o in layouts.values()), "trace ids differ by file"


def test_a_result_without_an_id_answers_the_oldest_open_call(tmp_path):
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "function_call": {"name": "lookup", "arguments": "{}"},
        },
        {"role": "function", "name": "lookup", "content": "found"},
    ]
    path = tmp_path / "legacy.json"
    path.write_text(json.dumps(messages))
    (run,) = chat.runs(str(path))
    tool = next(s for s in run.spans if s.name == "execute_tool lookup")
    assert tool.attributes["gen_ai.tool.call.result"] == "found"


# --- Codex CLI session files ----------------------------------------------------------------


def test_codex_session_file():
    assert recognise(str(CODEX)) is codex
    (run,) = codex.runs(str(CODEX))
    assert run.trace_id == stable_hex("codex", CODEX_SESSION)
    root = run.spans[0]
    assert root.attributes["gen_ai.conversation.id"] == CODEX_SESSION
    assert root.attributes["gen_ai.request.model"] == "gpt-5.1-codex-max"
    task = root.attributes["mast.task.description"]
    assert task.startswith("# AGENTS.md instructions") and task.endswith("keep the tests green.")
    assert "<environment_context>" not in task
    tools = {
        s.attributes["gen_ai.tool.name"]: s for s in run.spans if "gen_ai.tool.name" in s.attributes
    }
    assert set(tools) == {"shell_command", "shell", "update_plan", "apply_patch", "exec_command"}
    shell = tools["shell"]
    assert json.loads(shell.attributes["gen_ai.tool.call.arguments"])["command"] == [
        "bash",
        "-lc",
        "pytest -q tests/test_cart.py",
    ]
    assert shell.error is not None, "exit code 1 fails the call"
    assert tools["shell_command"].error is None and tools["exec_command"].error is None
    assert (
        tools["apply_patch"]
        .attributes["gen_ai.tool.call.arguments"]
        .startswith("*** Begin Patch\n*** Update File: cart.py")
    )
    lines = CODEX.read_text().splitlines()
    for span in run.spans[1:]:
        line = json.loads(lines[span.attributes[MESSAGE_INDEX]])
        if span.name.startswith("execute_tool"):
            assert line["payload"]["call_id"] == span.attributes["gen_ai.tool.call.id"]
            result = json.loads(lines[span.attributes[RESULT_MESSAGE_INDEX]])
            assert result["payload"]["call_id"] == span.attributes["gen_ai.tool.call.id"]
    chats = [s for s in run.spans if s.name.startswith("chat")]
    assert chats[0].attributes["gen_ai.usage.input_tokens"] == 3559
    failed = [s for s in chats if s.error]
    assert len(failed) == 1 and "stream disconnected" in (failed[0].error or "")
    users = [s.attributes["mast.import.content"] for s in run.spans if s.name == "user message"]
    assert users[-1] == "Also add a test for an unknown code."
    assert any(s.name == "turn aborted" for s in run.spans)


def test_codex_result_without_a_call_is_refused(tmp_path):
    lines = CODEX.read_text().splitlines()
    kept = [line for line in lines if 'call_KLyTWxCoVwf4p9s4u1x5YS1b"}' not in line]
    assert len(kept) == len(lines) - 1
    path = tmp_path / "rollout-broken.jsonl"
    path.write_text("\n".join(kept) + "\n")
    with pytest.raises(ImportFormatError, match="no earlier call"):
        list(codex.runs(str(path)))


def test_otlp_files_stay_with_the_otlp_reader(tmp_path):
    path = tmp_path / "otlp.jsonl"
    path.write_text('{"resourceSpans": []}\n')
    assert recognise(str(path)) is otlp


# --- import, then read back -----------------------------------------------------------------


def test_import_then_findings_signatures_and_run_read_them_back(tmp_path):
    runs_file = tmp_path / "runs.json"
    runs_file.write_text(
        json.dumps([{"traj": MESSAGES, "reward": 1.0}, {"traj": MESSAGES, "reward": 0.0}])
    )
    data_dir = str(tmp_path / "store")
    first = run_cli("import", "--data-dir", data_dir, str(runs_file), str(CODEX))
    assert first.returncode == 0, first.stderr
    assert "imported 3 runs" in first.stdout
    assert "runs.json: 2 runs" in first.stderr, "plain counts when stderr is not a terminal"

    signatures = run_cli("signatures", "--data-dir", data_dir, "--output", "json")
    assert signatures.returncode == 0, signatures.stderr
    sigs = {s["trace_id"]: s for s in map(json.loads, signatures.stdout.splitlines())}
    chat_ids = [r.trace_id for r in chat.runs(str(runs_file))]
    codex_id = stable_hex("codex", CODEX_SESSION)
    assert set(sigs) == {*chat_ids, codex_id}
    assert [sigs[t]["outcome"] for t in chat_ids] == ["success", "failure"]

    findings = run_cli("findings", "--data-dir", data_dir, "--output", "json")
    rows = [json.loads(line) for line in findings.stdout.splitlines()]
    assert rows and {r["trace_id"] for r in rows} <= set(sigs)
    assert sorted({r["mode"] for r in rows if r["trace_id"] == codex_id}) == sigs[codex_id]["modes"]

    # The user's turns, which only the model calls' input holds, are shown at those calls.
    chat_run = run_cli("run", chat_ids[0], "--data-dir", data_dir)
    assert chat_run.returncode == 0, chat_run.stderr
    turn = next(line for line in chat_run.stdout.splitlines() if "Cancel order A17." in line)
    assert " human " in turn and turn.endswith("(from the model's input)")
    chat_json = json.loads(
        run_cli("run", chat_ids[0], "--data-dir", data_dir, "--output", "json").stdout
    )
    recovered = [r for s in chat_json["spans"] for r in s["recovered"]]
    assert [(r["kind"], r["input"]) for r in recovered] == [("human", "Cancel order A17.")]

    timeline = run_cli("run", codex_id, "--data-dir", data_dir, "--output", "json")
    assert timeline.returncode == 0, timeline.stderr
    spans = json.loads(timeline.stdout)["spans"]
    (codex_run,) = codex.runs(str(CODEX))
    assert len(spans) == len(codex_run.spans)
    # A run with findings shows them on its spans.
    flagged = run_cli("run", rows[0]["trace_id"], "--data-dir", data_dir, "--output", "json")
    assert any(s["findings"] for s in json.loads(flagged.stdout)["spans"])

    again = run_cli("import", "--data-dir", data_dir, str(runs_file), str(CODEX))
    assert again.returncode == 0, again.stderr
    timeline = run_cli("run", codex_id, "--data-dir", data_dir, "--output", "json")
    assert len(json.loads(timeline.stdout)["spans"]) == len(codex_run.spans), "stored once"
    summary = run_cli("summary", "--data-dir", data_dir, "--output", "json")
    groups = {g["model"]: g for g in map(json.loads, summary.stdout.splitlines())}
    assert set(groups) == {"", "gpt-5.1-codex-max"}, "by model, once each after two imports"
    assert (groups[""]["runs"], groups[""]["success_runs"], groups[""]["failed_runs"]) == (2, 1, 1)
    assert groups["gpt-5.1-codex-max"]["runs"] == 1


# --- bad input ------------------------------------------------------------------------------

BAD = {
    "prose.txt": ("just some words\n", "bad-prose"),
    "number.json": ("42\n", "not a format"),
    "wrong-role.json": (json.dumps([{"role": "robot", "content": "hi"}]), "role must be one of"),
    "no-messages.json": (json.dumps([{"task_id": 1, "reward": 1.0}]), "not a format"),
    "second-run-bad.json": (
        json.dumps([{"traj": MESSAGES}, {"task_id": 2, "reward": 1.0}]),
        "run 1: a run object needs its messages",
    ),
    "messages-not-list.json": (json.dumps({"messages": "hi"}), "messages must be a list"),
    "orphan.json": (
        json.dumps(
            [
                {"role": "user", "content": "x"},
                {"role": "tool", "tool_call_id": "c9", "content": "r"},
            ]
        ),
        "which no earlier assistant message requested",
    ),
    "broken.jsonl": ('{"messages": []}\n{"messages": [\n', "broken.jsonl:2: malformed JSON"),
    "bad-rollout.jsonl": (
        '{"timestamp":"2025-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s"}}\n[1]\n',
        "bad-rollout.jsonl:2",
    ),
    "empty.json": ("", "empty file"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_one_line_and_exit_2(tmp_path, name):
    text, expected = BAD[name]
    path = tmp_path / name
    path.write_text(text)
    for command in ("analyze", "import"):
        extra = ["--data-dir", str(tmp_path / "store")] if command == "import" else []
        result = run_cli(command, *extra, str(path))
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        errors = [line for line in result.stderr.splitlines() if line.startswith("mast-otel:")]
        assert len(errors) == 1, result.stderr
        assert "Traceback" not in result.stderr
        if expected != "bad-prose":
            assert expected in errors[0], errors[0]


# --- the real-corpus script -----------------------------------------------------------------


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts/real_accuracy.py"), *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=180,
    )


def test_real_accuracy_script_on_fixture_labels(tmp_path):
    result = _script("--data", str(TAU), "--labels", str(SAMPLE_LABELS), "--json", "--check")
    assert result.returncode in (0, 1), result.stderr
    figures = json.loads(result.stdout)
    assert figures["runs"] == 200 and figures["failed_runs"] == 116
    assert figures["labelled_runs"] == 4 and figures["doubly_labelled_runs"] == 1
    assert figures["clean_success_runs"] == 3
    assert figures["per_mode"]["FM-3.2"]["labelled_positives"] == 1, "reader A's labels count"
    assert figures["per_mode"]["FM-1.1"]["labelled_positives"] == 0
    assert figures["agreement"]["FM-1.1"]["only_b"] == 1
    assert figures["agreement"]["FM-3.2"]["both"] == 1
    for row in figures["lift"].values():
        assert row["failed_runs_with"] <= 116 and row["success_runs_with"] <= 84
        assert (
            abs(row["difference_points"] - 100 * (row["rate_failed"] - row["rate_success"])) < 1e-9
        )
    assert (result.returncode == 1) == bool(figures["targets_missed"])

    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text('{"index": 0, "reward": 1.0, "reader": "A", "labels": []}\n')
    bad = _script("--data", str(TAU), "--labels", str(wrong))
    assert bad.returncode == 2 and "says reward 1.0" in bad.stderr and "Traceback" not in bad.stderr

    shown = _script("--data", str(TAU), "--labels", str(SAMPLE_LABELS), "--show-findings")
    assert shown.returncode == 0, shown.stderr
    assert "Findings:" in shown.stdout and "message " in shown.stdout


# --- user turns are steps --------------------------------------------------------------------


def test_chat_user_turns_are_human_steps():
    from mast_otel.processors.model import StepKind
    from tests.imported import chat_steps, read_steps, steps_of

    messages = [
        {"role": "system", "content": "You are a support agent for Acme CRM."},
        {"role": "user", "content": "Close ticket T-42."},
        {"role": "assistant", "content": "Closing T-42 now, is that right"},
        {"role": "user", "content": "yes"},
        {"role": "assistant", "content": "Done."},
    ]
    steps = chat_steps(messages)
    humans = [s.input_text for s in steps if s.kind is StepKind.HUMAN]
    assert humans == ["Close ticket T-42.", "yes"]
    _, attributes = read_steps(steps_of(chat.build_run({"messages": messages}, 0, "test run")))
    assert attributes["mast.task.description"] == (
        "You are a support agent for Acme CRM.\n\nClose ticket T-42."
    )


def test_tau_bench_simulated_user_turns_are_human_steps():
    from mast_otel.processors.model import StepKind
    from tests.imported import tau_run, tau_steps

    run = tau_run(0)
    traj = run["traj"]
    # Every user turn the agent answered (a turn after its last message no model call read).
    last_answer = max(i for i, m in enumerate(traj) if m["role"] == "assistant")
    users = [m["content"] for m in traj[:last_answer] if m["role"] == "user"]
    steps = tau_steps(0)
    assert [s.input_text for s in steps if s.kind is StepKind.HUMAN] == users
    assert len(users) > 1


def test_codex_typed_user_turns_are_human_steps_and_instructions_are_not():
    from mast_otel.processors.model import StepKind
    from tests.imported import steps_of

    (run,) = codex.runs(str(CODEX))
    humans = [s.input_text for s in steps_of(run) if s.kind is StepKind.HUMAN]
    assert humans and humans[-1] == "Also add a test for an unknown code."
    assert not [h for h in humans if h.startswith(("# AGENTS.md", "<environment_context>"))]
