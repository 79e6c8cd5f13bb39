"""FM-1.3's rule `same_call`: the same call, with the same result, over and over.

`same_call`: the same tool with equivalent arguments (key order, whitespace and volatile
fields such as timestamps and request ids ignored) is called `min_repeats` times, each call at
most `max_gap_steps` tool calls after the previous one, and every call returned the same result
(clocks and ages blanked). A call that returns something new (a rollout being polled while it
progresses) starts the count again, and so does any mutating call in between (re-reading after
a change is verification, not repetition); a mutating call's own repeats do count.

A failing call repeated unchanged by one agent needs only `min_repeats_failed` calls
(retrying what just failed, the same way, with the same error). A read repeated unchanged by
one agent with a turn of the user between needs only `min_repeats_across_user_turn` calls: the
user asked something new (another option, a narrower search) and the agent answered with the
very call it had already made, which told it nothing new.

Fires: `kubectl get pods -n shop` three times, the second with extra spaces in the command,
each listing the same crash-looping pod (only its age ticks from 12m to 13m): reported at the
third call. `close_ticket({"ticket_id": "T-1"})` twice, "ticket T-1 is locked" both times. An
agent greps for `parse_config`, the user asks "Any uses in the tests too?", and it runs the same
grep and gets the same `src/app.py:12`: two calls, a turn of the user between.

Near miss: `kubectl rollout status` polled while "1 of 4 updated replicas" becomes "2 of 4"
(the result changed: progress, not repetition); get pods, get pods, restart the deployment, get
pods (the read after the restart checks it); `search_tickets({"q": "refund"})` twice with no
user turn between (a successful read needs three); the same grep after the user's turn that
now finds `src/cli.py:3` too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.step_repetition.context import StepRepetitionContext
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run


@dataclass(slots=True)
class _Streak:
    result: str
    last_index: int
    world: int
    # The calls of the streak until it is reported (then only its growth matters).
    steps: list[StepRef] = field(default_factory=list)
    reported: bool = False
    # The agent that made the first call, and whether every call was its own (a receiver of a
    # hand-off redoing the sender's call is FM-2.4/2.5's business, at the usual count).
    agent: str = ""
    one_agent: bool = True
    # The user turns seen when the streak's last call was made, and whether a user turn came
    # between two of its calls (the user asked something new; the same read answered it).
    user_turns: int = 0
    across_user_turn: bool = False


class SameCall:
    """One run's streaks of equivalent calls, by canonical call, each reported once."""

    __slots__ = ("config", "report", "streaks", "user_turns", "world")

    def __init__(self, context: StepRepetitionContext) -> None:
        self.config = context.config
        self.report = context.report
        # Bumped by every mutating call: reads before and after a change are different calls.
        self.world = 0
        # Turns of the user so far: a call repeated across one answered a new turn.
        self.user_turns = 0
        self.streaks: dict[str, _Streak] = {}

    def user_turn(self) -> None:
        self.user_turns += 1

    def call(
        self,
        step: Step,
        ref: StepRef,
        key: str,
        result: str,
        mutating: bool,
        index: int,
        run: Run,
    ) -> tuple[bool, Finding | None]:
        """The tool call numbered `index` (its canonical call `key`, its result's fingerprint):
        whether it starts a streak, and the finding when it completes one."""
        config = self.config
        streak = self.streaks.get(key)
        fresh = (
            streak is None
            or streak.result != result
            or index - streak.last_index - 1 > config.max_gap_steps
            or (streak.world != self.world and not mutating)
        )
        if fresh:
            streak = _Streak(
                result=result,
                last_index=index,
                world=self.world,
                agent=step.agent,
                user_turns=self.user_turns,
            )
            self.streaks[key] = streak
        assert streak is not None
        if streak.user_turns != self.user_turns:
            streak.across_user_turn = True
        streak.user_turns = self.user_turns
        if step.agent != streak.agent:
            streak.one_agent = False
        if not streak.reported:
            streak.steps.append(ref)
        streak.last_index = index
        if mutating:
            self.world += 1
        streak.world = self.world
        needed = config.min_repeats
        if step.failed and streak.one_agent:
            needed = min(needed, config.min_repeats_failed)
        elif streak.across_user_turn and not mutating and streak.one_agent:
            needed = min(needed, config.min_repeats_across_user_turn)
        found = None
        if not streak.reported and len(streak.steps) >= needed:
            streak.reported = True
            found = self._finding(step, streak, run)
        self._forget_stale(index)
        return fresh, found

    def _forget_stale(self, index: int) -> None:
        """Keep only streaks that could still grow, so memory follows the window."""
        if len(self.streaks) > 64:
            limit = index - self.config.max_gap_steps - 1
            self.streaks = {k: s for k, s in self.streaks.items() if s.last_index >= limit}

    def _finding(self, step: Step, streak: _Streak, run: Run) -> Finding:
        count = len(streak.steps)
        across = ""
        if streak.across_user_turn and not step.failed:
            across = ", a turn of the user between: the new request got the old answer"
        return self.report.finding(
            at=step,
            rule="same_call",
            confidence=0.9 if not step.failed else 0.8,
            message=(
                f"{step.tool_name}({short(step.tool_arguments, 100)}) called {count} times "
                f"with equivalent arguments and the same result{across}"
            ),
            evidence=streak.steps,
            values={
                "tool": step.tool_name,
                "arguments": short(step.tool_arguments),
                "repeats": count,
                "threshold": self.config.min_repeats,
                "result": short(step.tool_result or step.error),
            },
            run=run,
        )
