"""FM-1.5's `calls_after_final_answer`: an agent gave its final answer (a model call answering
rather than calling a tool, with no user turn after it: `signals.is_final_answer`) and then
made `calls_after_final_answer` tool calls itself. A text-only turn the user or another agent
answers is a turn of the conversation, not the final answer. In a team's run
(`signals.is_team`) the final answer is the team's last word (TERMINATE, the orchestrator's
`FINAL ANSWER:`), and any agent's call after it is reported. While the run may still turn out
to be a team's (`signals.may_be_team`: one agent has spoken, under a root agent that is not
it), the finding is held until the run closes, and dropped if another agent speaks.

- Fires: a CRM agent closes ticket T-42, answers "T-42 is closed.", then calls
  `list_tickets`: reported at that call, citing the answer. In a team's chat: the planner says
  "The file has 42 rows. TERMINATE" and the data expert then runs more code: "Data_Expert ran
  python after Planner_Expert had ended the team's conversation".
- Near miss: the agent says "I can move T-42 from general to billing. Please confirm.", the
  user answers "yes, go ahead" and the agent calls `update_ticket`: the user's turn made the
  statement a turn of the conversation. A question ("Which namespace do you mean?") followed
  by a call is no answer either. (An empty user turn reopens nothing: a call after it is
  still reported.) In a team's chat, an expert's opening message that the executor answers
  ("There is no code ... to execute") was a message to the group, not its final answer.
"""

from __future__ import annotations

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.signals import is_final_answer, is_team, may_be_team
from mast_otel.processors.detectors.termination_awareness.context import (
    TerminationAwarenessContext,
)
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

# Where a team's last word is kept: it ends the conversation for all of its agents.
_TEAM = "\x00team"
_RULE = "calls_after_final_answer"


class CallsAfterFinalAnswer:
    """Per run: each agent's final answer (or the team's last word) and the calls after it."""

    __slots__ = ("after_final", "config", "context", "final_answer", "held", "reported")

    def __init__(self, context: TerminationAwarenessContext) -> None:
        self.context = context
        self.config = context.config
        self.final_answer: dict[str, Step] = {}  # agent → its final answer
        # Per agent, its calls after its final answer, up to the number that is reported.
        self.after_final: dict[str, list[StepRef]] = {}
        # A finding on calls after an answer, held while the run may still turn out to be a
        # team's (`signals.may_be_team`): reported at close unless another agent speaks.
        self.held: tuple[Step, list[Step | StepRef], str, dict[str, object]] | None = None
        self.reported = False

    def user_spoke(self) -> None:
        """The user answered: the text-only turns before were turns of the conversation."""
        self.final_answer.clear()

    def model_call(self, step: Step, run: Run) -> None:
        if is_team(run) and (
            self.held is not None
            or len(self.final_answer) > 1
            or (self.final_answer and _TEAM not in self.final_answer)
        ):
            # A teammate spoke: the earlier answers were turns of the team's conversation.
            self.held = None
            for agent in [a for a in self.final_answer if a != _TEAM]:
                del self.final_answer[agent]
                self.after_final.pop(agent, None)
        if self.final_answer and step.agent:
            # Another agent answering is a teammate's turn of the conversation: the
            # earlier text-only turns were messages to it, not final answers.
            for agent in [a for a in self.final_answer if a not in (step.agent, _TEAM)]:
                if agent not in self.after_final:
                    del self.final_answer[agent]
        if is_final_answer(step, run):
            # A team's last word ends the conversation for every one of its agents.
            self.final_answer.setdefault(_TEAM if is_team(run) else step.agent, step)

    def tool_call(self, step: Step, ref: StepRef, run: Run) -> list[Finding]:
        key = _TEAM if _TEAM in self.final_answer else step.agent
        answer = self.final_answer.get(key)
        if answer is None:
            return []
        calls_after = self.config.calls_after_final_answer
        calls = self.after_final.setdefault(key, [])
        if len(calls) >= calls_after:
            return []
        calls.append(ref)
        if len(calls) != calls_after:
            return []
        message = (
            f"{step.agent or 'the agent'} kept calling tools after its final answer"
            if key != _TEAM
            else f"{step.agent} ran {step.tool_name} after {answer.agent} had ended "
            f"the team's conversation ({short(answer.output_text, 80)!r})"
        )
        values: dict[str, object] = {
            "final_answer": answer.output_text[:200],
            "calls_after": len(calls),
        }
        if key != _TEAM and may_be_team(run):
            if self.held is None:
                self.held = (step, [answer, *calls], message, values)
            return []
        return self._report(step, [answer, *calls], message, values, run)

    def close(self, run: Run) -> list[Finding]:
        """The held finding, if the run did not turn out to be a team's."""
        if self.held is None or is_team(run):
            return []
        at, evidence, message, values = self.held
        return self._report(at, evidence, message, values, run)

    def _report(
        self,
        at: Step,
        evidence: list[Step | StepRef],
        message: str,
        values: dict[str, object],
        run: Run,
    ) -> list[Finding]:
        if self.reported:
            return []
        self.reported = True
        return [self.context.report.finding(at, _RULE, 0.75, message, evidence, dict(values), run)]
