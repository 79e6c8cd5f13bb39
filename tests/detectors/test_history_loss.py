"""FM-1.4 loss of conversation history.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.detectors.real_runs import tau_findings
from tests.imported import codex_findings
from tests.steps import GET_PODS, PODS_BAD, RunBuilder, analyse, modes, only


def test_context_shrinking_by_more_than_half_is_history_loss():
    run = RunBuilder()
    run.llm(input_tokens=800)
    run.tool("kubectl", GET_PODS, PODS_BAD)
    before = run.llm(input_tokens=4200)
    after = run.llm(input_tokens=1500)
    findings, _ = analyse(run.steps)
    loss = only(findings, "FM-1.4")
    assert modes(loss) == [("FM-1.4", "context_shrink")]
    assert loss[0].span_id == after.span_id
    assert loss[0].evidence_span_ids == (before.span_id, after.span_id)
    assert loss[0].evidence["before"] == 4200 and loss[0].evidence["after"] == 1500


def test_a_summarized_context_is_not_history_loss():
    run = RunBuilder()
    run.llm(input_tokens=4200)
    run.llm(input_tokens=600, name="summarize_history", agent="summarizer")
    run.llm(input_tokens=900)
    findings, _ = analyse(run.steps)
    assert only(findings, "FM-1.4") == []


def test_shrink_uses_message_counts_when_tokens_are_not_reported():
    run = RunBuilder()
    run.llm(input_tokens=None, messages=14)
    run.llm(input_tokens=None, messages=2)
    findings, _ = analyse(run.steps)
    assert modes(only(findings, "FM-1.4")) == [("FM-1.4", "context_shrink")]


def test_small_contexts_and_other_agents_do_not_count():
    run = RunBuilder()
    run.llm(input_tokens=500)
    run.llm(input_tokens=100)  # below min_prior_input_tokens
    run.llm(input_tokens=5000, agent="planner")
    run.llm(input_tokens=1000, agent="executor")  # another agent's first call
    findings, _ = analyse(run.steps)
    assert only(findings, "FM-1.4") == []


def test_reacquiring_an_unchanged_result_long_after_is_history_loss():
    run = RunBuilder()
    first = run.tool("kubectl", {"command": "kubectl describe deployment checkout -n shop"}, "x")
    for i in range(9):
        run.tool("query_metrics", {"query": f"rate(errors[{i}m])"}, str(i))
    again = run.tool("kubectl", {"command": "kubectl describe deployment checkout -n shop"}, "x")
    findings, _ = analyse(run.steps)
    loss = only(findings, "FM-1.4")
    assert modes(loss) == [("FM-1.4", "reacquire")]
    assert loss[0].span_id == again.span_id
    assert loss[0].evidence_span_ids == (first.span_id, again.span_id)


def test_rereading_after_a_change_is_not_history_loss():
    run = RunBuilder()
    run.tool("kubectl", {"command": "kubectl describe deployment checkout -n shop"}, "x")
    for i in range(9):
        run.tool("query_metrics", {"query": f"q{i}"}, str(i))
    run.tool("kubectl", {"command": "kubectl scale deployment checkout --replicas=3 -n shop"})
    run.tool("kubectl", {"command": "kubectl describe deployment checkout -n shop"}, "x")
    findings, _ = analyse(run.steps)
    assert only(findings, "FM-1.4") == []


# --- a Codex compaction is not a loss of history ------------------------------------------------

_CODEX_FIXTURE = (
    Path(__file__).resolve().parent.parent
    / "fixtures/codex/rollout-2025-11-22T21-45-35-019aad50-0000-7000-8000-00000000c0de.jsonl"
)


def _codex_session(compacted: bool) -> list[dict[str, Any]]:
    """The fixture session's first turn (its context grows to 8000 tokens), then a second turn
    whose first model call sends 900 tokens: after a compaction, or with none."""
    lines = [json.loads(line) for line in _CODEX_FIXTURE.read_text().splitlines()][:27]
    summary = "total() in cart.py applies discount codes now; the cart tests pass."

    def line(second: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {
            "timestamp": f"2025-11-22T20:51:{second:02d}.000Z",
            "type": kind,
            "payload": payload,
        }

    def usage(tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": tokens,
            "cached_input_tokens": 0,
            "output_tokens": 10,
            "reasoning_output_tokens": 0,
            "total_tokens": tokens + 10,
        }

    user = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Also add a test for an unknown code."}],
    }
    extra = [
        line(
            0,
            "compacted",
            {
                "message": summary,
                "replacement_history": [
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": summary}],
                    }
                ],
            },
        ),
        line(10, "response_item", user),
        line(
            20,
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "call_id": "c9",
                "arguments": json.dumps({"command": ["bash", "-lc", "cat tests/test_cart.py"]}),
            },
        ),
        line(
            21,
            "event_msg",
            {
                "type": "token_count",
                "info": {"total_token_usage": usage(9000), "last_token_usage": usage(900)},
            },
        ),
        line(
            22,
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "c9",
                "output": "Exit code: 0\nOutput:\ndef test_total(): ...",
            },
        ),
        line(
            30,
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "The test file has one case."}],
            },
        ),
    ]
    return lines + (extra if compacted else extra[1:])


def test_fm14_codex_compaction_is_not_a_loss_of_history():
    findings = codex_findings(_codex_session(compacted=True))
    assert [f for f in findings if f.mode in ("FM-1.4", "FM-2.1")] == []
    # The same drop with no compaction before it is a loss.
    lost = [f for f in codex_findings(_codex_session(compacted=False)) if f.mode == "FM-1.4"]
    assert [f.rule for f in lost] == ["context_shrink"]
    assert "from 8000 to 900 input tokens" in lost[0].message


def test_codex_compaction_is_a_step_detectors_read_as_a_summary(tmp_path):
    from mast_otel.collector.importers import codex
    from mast_otel.processors.detectors.history_loss.config import HistoryLossConfig
    from tests.imported import steps_of

    path = tmp_path / "rollout-compacted.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in _codex_session(compacted=True)))
    (run,) = codex.runs(str(path))
    compactions = [s for s in steps_of(run) if s.name == "compacted"]
    assert len(compactions) == 1 and compactions[0].agent == "codex"
    assert re.search(HistoryLossConfig().summary_pattern, compactions[0].name)


# --- a change in between that touched something else -----------------------------------------


def _ticket_desk(change: dict[str, Any]) -> RunBuilder:
    """A helpdesk agent lists a customer's open tickets, works on, changes one thing, and lists
    the same tickets again, unchanged."""
    run = RunBuilder(agent="helpdesk")
    listing = '[{"ticket_id": "T-88", "status": "open"}, {"ticket_id": "T-91", "status": "open"}]'
    run.tool("list_tickets", {"customer_id": "C-204", "status": "open"}, listing)
    for i in range(9):
        run.tool("get_article", {"article_id": f"KB-{i}"}, f"article {i}")
    run.tool(change["tool"], change["args"], "ok")
    run.tool("list_tickets", {"customer_id": "C-204", "status": "open"}, listing)
    return run


def test_fm14_a_reread_after_a_change_to_something_else_is_history_loss():
    # The change closed ticket T-12 of another customer: the open list of C-204 did not
    # depend on it, and listing it again re-fetched what the agent had.
    run = _ticket_desk({"tool": "update_ticket", "args": {"ticket_id": "T-12", "status": "closed"}})
    loss = only(analyse(run.steps)[0], "FM-1.4")
    assert modes(loss) == [("FM-1.4", "reacquire")]
    assert "list_tickets" in loss[0].message and "C-204" in loss[0].message


def test_fm14_a_reread_of_what_a_change_touched_is_a_check():
    # The change touched T-91, which the listing holds, or the customer the listing names:
    # the re-read checks the change.
    listed = {"tool": "update_ticket", "args": {"ticket_id": "T-91", "status": "closed"}}
    assert only(analyse(_ticket_desk(listed).steps)[0], "FM-1.4") == []
    named = {"tool": "update_customer", "args": {"customer_id": "C-204", "tier": "gold"}}
    assert only(analyse(_ticket_desk(named).steps)[0], "FM-1.4") == []


def test_fm14_real_run_searches_again_after_cancelling_another_reservation():
    # Run 33 searches MSP-EWR on 2024-05-25 at message 22 and again at 54, as if new; the
    # cancellation of S61CZX in between touched no flight the search names.
    found = tau_findings(33, "FM-1.4")
    assert found and found[0].rule == "reacquire"
    assert '"date":"2024-05-25"' in found[0].message
