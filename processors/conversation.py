"""Conversation recovery: what each model call's input says that no span said.

An instrumented agent loop sends a span per model call whose input holds the conversation so
far (system prompt, user turns, the tools' results), and spans for its tool calls if its
instrumentation makes them. The user's later turns, the instructions and, without tool spans,
the tools' results exist only inside those inputs, repeated and growing from call to call. The
run windows call this module as they release each step in start order, per conversation (the
calls of one agent in one run):

- before a model call, what its input holds that is new since the conversation's previous call
  (found after that call's own answer, the last message the previous input could not hold) is
  turned into steps placed before it: each user message a HUMAN step; each `tool` message
  answering a call that no tool span ran a TOOL step with that result (a result starting with
  "Error" is a failed call, the convention of function-calling harnesses);
- at the run's first call, the instructions (the system/developer messages) and the first user
  message become the run's task (`mast.task.description`), unless the run set it; the first
  call of another agent (a hand-off's receiver, a sub-agent) adds nothing: its input repeats
  what the run already showed, or is the brief the hand-off carries;
- when the run closes, calls the model asked for that no tool span and no later input showed
  become TOOL steps without a result (the run ended on them).

In a team's conversation every agent's input holds the others' turns. A turn another agent of
the run wrote (its `name` is that agent's, it is an answer a released call of the run gave, or,
named for no one, a user message that is another agent's turn: `processors.teammates`) is that
agent's: its calls are followed in that agent's conversation, and it is no user's turn.

So a run sent by any instrumentation and the same run imported from a transcript give the
detectors the same steps. The recovered steps point at the model call's span (findings must
point at spans that exist); a recovered tool call at the span of the call that asked for it.

Bounds: `MAX_CONVERSATIONS` per run and `MAX_OPEN_CALLS` per conversation (past them nothing
more is recovered for that conversation or call, and the window counts it); each call's input
is bounded where it is read (`normalize.history`) and let go once read.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from mast_otel.processors import conventions
from mast_otel.processors.model import (
    InputMessage,
    Step,
    StepKind,
    ToolCallRequest,
)
from mast_otel.processors.normalize import history, values
from mast_otel.processors.normalize.tool_status import mark_failed_result
from mast_otel.processors.teammates import Turns, words

MAX_CONVERSATIONS = 64
MAX_OPEN_CALLS = 256
# Answers of the run's model calls remembered to recognise them in other agents' inputs.
MAX_ANSWERS = 4096

_HUMAN = StepKind.HUMAN
_TOOL = StepKind.TOOL


@dataclass(slots=True)
class RecoveryStats:
    """What recovery found, and when a bound stopped it."""

    turns_recovered: int = 0
    results_recovered: int = 0
    calls_closed_unanswered: int = 0
    conversations_untracked: int = 0
    calls_untracked: int = 0


@dataclass(slots=True)
class _OpenCall:
    request: ToolCallRequest
    span_id: str
    parent_span_id: str
    end_ns: int


@dataclass(slots=True)
class _Conversation:
    calls_read: int = 0
    # The message the next input should hold last of what is known: this call's answer, and
    # failing that the last message of this call's input.
    anchor: str = ""
    # The ids of the calls that answer asked for: an input that repeats the answer without its
    # text (openai-v2's message events keep only an assistant turn's calls) still shows them.
    anchor_calls: tuple[str, ...] = ()
    fallback: str = ""
    open_calls: OrderedDict[str, _OpenCall] = field(default_factory=OrderedDict)
    tool_steps_since_call: int = 0
    had_tool_steps: bool = False
    last_call: Step | None = None


class Conversations:
    """The conversations of one run, as its steps are released."""

    __slots__ = ("_answers", "_by_agent", "_said", "stats", "task_set", "turns")

    def __init__(self, stats: RecoveryStats) -> None:
        self._by_agent: dict[str, _Conversation] = {}
        # The answers the run's released model calls gave (keys), every agent's.
        self._answers: set[str] = set()
        # User turns a span of their own already showed (an importer's or a harness's span
        # per turn), by key, until a model call's input shows them: not recovered twice.
        self._said: dict[str, int] = {}
        # The turns the run's agents gave: a group chat hands every member the others' turns
        # as the user's.
        self.turns = Turns()
        self.stats = stats
        self.task_set = False

    def on_human(self, step: Step) -> None:
        """A user's turn a span showed."""
        said = self._said
        key = _key(history.USER, step.input_text, ())
        if key in said or len(said) < MAX_OPEN_CALLS:
            said[key] = said.get(key, 0) + 1

    def _conversation(self, agent: str) -> _Conversation | None:
        found = self._by_agent.get(agent)
        if found is None:
            if len(self._by_agent) >= MAX_CONVERSATIONS:
                self.stats.conversations_untracked += 1
                return None
            found = self._by_agent[agent] = _Conversation()
        return found

    def before_call(self, step: Step, attributes: dict[str, Any]) -> list[Step]:
        """The steps a model call's input shows that came before it; sets the run's task at
        its first call (in `attributes`, unless set). Returns [] when nothing is new."""
        messages = step.input_history
        conversation = self._conversation(step.agent)
        if conversation is None or not messages:
            return []
        if self.turns.team:
            self.turns.users_turn(step, messages)
        if not self.task_set:
            self.task_set = True
            task = task_of(messages)
            if task and conventions.TASK_DESCRIPTION not in attributes:
                attributes[conventions.TASK_DESCRIPTION] = task
        elif not conversation.calls_read:
            # Another agent's first call (a hand-off's receiver, a sub-agent): its input is
            # what the run already said, or the brief the hand-off carries. Nothing new.
            return []
        new = _new_messages(conversation, messages)
        out: list[Step] = []
        for message in new:
            if self._another_agents(message, step.agent):
                continue  # a teammate's turn: its own spans showed it
            if message.role == history.USER:
                if not message.text.strip():
                    continue  # a turn with nothing said (an image, a file): no step
                if self._said:
                    key = _key(history.USER, message.text, ())
                    count = self._said.get(key, 0)
                    if count:
                        if count == 1:
                            del self._said[key]
                        else:
                            self._said[key] = count - 1
                        continue
                out.append(self._human(step, message))
            elif message.role == history.TOOL:
                recovered = self._result(conversation, step, message)
                if recovered is not None:
                    out.append(recovered)
            elif message.role == history.ASSISTANT and message.calls:
                # Calls asked for in a turn no span showed (an input that carries history the
                # run did not send as spans): known, so that their results are read.
                self._open(conversation, message.calls, step, step.start_ns)
        return out

    def _another_agents(self, message: InputMessage, agent: str) -> bool:
        """A message another agent of the run wrote: named for one, an assistant turn with
        calls that one of the run's released calls gave, or a user message that is another
        agent's turn (a group chat's members see each other's turns as the user's)."""
        if message.name and message.name != agent and message.name in self._by_agent:
            return True
        if message.role == history.USER:
            return self.turns.author(message, agent) is not None
        return (
            message.role == history.ASSISTANT
            and bool(message.calls)
            and _key(message.role, message.text, message.calls) in self._answers
        )

    def on_agent(self, step: Step, result: bool = False) -> None:
        """A released agent span: its reply, if it shows one, is its agent's turn (`result`:
        an executor's output for code it ran)."""
        if step.output_text:
            self.turns.said(step.agent, words(step.output_text), result)

    def after_call(self, step: Step) -> None:
        """Remember a released model call: its answer (where the next input continues) and
        the calls it asked for."""
        conversation = self._conversation(step.agent)
        messages, step.input_history = step.input_history, ()
        if conversation is None:
            return
        conversation.calls_read += 1
        said = words(step.output_text)
        names = (call.name for call in step.tool_calls)
        conversation.anchor = "\x1f".join((history.ASSISTANT, said, *names))
        conversation.anchor_calls = _call_ids(step.tool_calls)
        if len(self._answers) < MAX_ANSWERS:
            self._answers.add(conversation.anchor)
        self.turns.said(step.agent, said)
        last = messages[-1] if messages else None
        conversation.fallback = _key(last.role, last.text, last.calls) if last else ""
        conversation.tool_steps_since_call = 0
        conversation.last_call = step
        if step.tool_calls:
            self._open(conversation, step.tool_calls, step, step.end_ns)

    def on_tool(self, step: Step) -> None:
        """A span ran one of the calls asked for: a tool span, or a hand-off made by calling
        a tool (`transfer_to_<agent>`). A call another agent's model asked for, run by an
        executor agent (AG2's), is the asking agent's: the step is named for it."""
        conversation = self._by_agent.get(step.agent)
        call_id = step.tool_call_id
        if call_id and (conversation is None or call_id not in conversation.open_calls):
            for agent, asking in self._by_agent.items():
                if agent and agent != step.agent and call_id in asking.open_calls:
                    step.agent, conversation = agent, asking
                    break
        if conversation is None or not (step.tool_name or step.tool_call_id):
            return
        conversation.tool_steps_since_call += 1
        conversation.had_tool_steps = True
        calls = conversation.open_calls
        if step.tool_call_id and step.tool_call_id in calls:
            del calls[step.tool_call_id]
        elif calls:
            calls.popitem(last=False)

    def at_close(self) -> list[Step]:
        """Calls asked for that nothing showed run, in conversations without tool spans: the
        run ended on them. TOOL steps without a result."""
        out: list[Step] = []
        for agent, conversation in self._by_agent.items():
            if conversation.had_tool_steps or conversation.last_call is None:
                continue
            for call_id, call in conversation.open_calls.items():
                out.append(_tool_step(conversation.last_call, agent, call_id, call, None))
                self.stats.calls_closed_unanswered += 1
            conversation.open_calls.clear()
        return out

    def _open(
        self,
        conversation: _Conversation,
        calls: tuple[ToolCallRequest, ...],
        step: Step,
        end_ns: int,
    ) -> None:
        open_calls = conversation.open_calls
        for position, call in enumerate(calls):
            call_id = call.call_id or f"{step.span_id}#{position}"
            if call_id in open_calls:
                continue
            if len(open_calls) >= MAX_OPEN_CALLS:
                self.stats.calls_untracked += 1
                continue
            open_calls[call_id] = _OpenCall(call, step.span_id, step.parent_span_id, end_ns)

    def _human(self, step: Step, message: InputMessage) -> Step:
        self.stats.turns_recovered += 1
        return Step(
            trace_id=step.trace_id,
            span_id=step.span_id,
            parent_span_id=step.parent_span_id,
            name="user message",
            kind=_HUMAN,
            start_ns=step.start_ns,
            end_ns=step.start_ns,
            dialect=step.dialect,
            service=step.service,
            agent=step.agent,
            conversation_id=step.conversation_id,
            input_text=values.plain_prose(message.text),
        )

    def _result(
        self, conversation: _Conversation, step: Step, message: InputMessage
    ) -> Step | None:
        """The TOOL step for a tool message, unless a tool span ran its call."""
        calls = conversation.open_calls
        call_id = message.call_id if message.call_id in calls else ""
        if not call_id:
            if message.call_id or not calls:
                return None  # answers a call already run, or one never asked for
            call_id = next(iter(calls))
        call = calls.pop(call_id)
        if conversation.tool_steps_since_call:
            return None  # the instrumentation sends tool spans: they said it
        self.stats.results_recovered += 1
        return _tool_step(step, step.agent, call_id, call, message.text)


def _tool_step(before: Step, agent: str, call_id: str, call: _OpenCall, result: str | None) -> Step:
    recovered = Step(
        trace_id=before.trace_id,
        span_id=call.span_id,
        parent_span_id=call.parent_span_id,
        name=f"execute_tool {call.request.name}",
        kind=_TOOL,
        start_ns=call.end_ns,
        end_ns=max(call.end_ns, before.start_ns),
        dialect=before.dialect,
        service=before.service,
        agent=agent,
        operation="execute_tool",
        tool_name=call.request.name,
        tool_call_id=call.request.call_id or call_id,
        tool_arguments=call.request.arguments,
        tool_result=result or "",
        result_unknown=result is None,
    )
    return mark_failed_result(recovered)


def task_of(messages: tuple[InputMessage, ...]) -> str:
    """The instructions (system/developer messages) followed by the first user message."""
    prompts: list[str] = []
    for message in messages:
        if message.role == history.SYSTEM:
            text = message.text.strip()
            if text:
                prompts.append(text)
        elif message.role == history.USER:
            text = message.text.strip()
            if text:
                prompts.append(text)
                break
    return "\n\n".join(prompts)


def _new_messages(
    conversation: _Conversation, messages: tuple[InputMessage, ...]
) -> tuple[InputMessage, ...]:
    """The messages of this input after what the conversation's previous call knew."""
    if not conversation.calls_read:
        return messages
    calls = conversation.anchor_calls
    if calls:
        for position in range(len(messages) - 1, -1, -1):
            item = messages[position]
            if item.role == history.ASSISTANT and _call_ids(item.calls) == calls:
                return messages[position + 1 :]
    for key in (conversation.anchor, conversation.fallback):
        if not key:
            continue
        role = key.partition("\x1f")[0]
        for position in range(len(messages) - 1, -1, -1):
            item = messages[position]
            if item.role == role and _key(item.role, item.text, item.calls) == key:
                return messages[position + 1 :]
    # Neither found (the input was cut or rewritten): what follows the model's last turn.
    for position in range(len(messages) - 1, -1, -1):
        if messages[position].role == history.ASSISTANT:
            return messages[position + 1 :]
    return ()


def _call_ids(calls: tuple[ToolCallRequest, ...]) -> tuple[str, ...]:
    return tuple(call.call_id for call in calls if call.call_id)


def _key(role: str, text: str, calls: tuple[ToolCallRequest, ...]) -> str:
    """What identifies a message across calls: role, the start of its text (`words`) and the
    names of the calls it asked for."""
    return "\x1f".join((role, words(text), *(call.name for call in calls)))
