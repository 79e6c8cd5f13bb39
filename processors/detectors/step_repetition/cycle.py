"""FM-1.3's rule `cycle`: a short cycle of calls come round again and again, unchanged.

`cycle`: the last tool calls form a short cycle (A,B,A,B,... of two to `max_cycle_period`
distinct calls, 0 turning the rule off) that has come round `min_cycle_repeats` times, each
call with the same result as a period before; each cycle (its set of calls and results) is
reported once, at the call that completes it.

Fires: `get_alerts` ("HighErrorRate firing") then `kubectl describe pod checkout-7d9 -n shop`
("Back-off"), three times round: reported at the sixth call, period 2, the six calls as
evidence.

Near miss: the same round where the second `describe pod` returns something new (a call and
its result make one element of the cycle, so a changed result breaks it); one call repeated
six times (a period of one distinct call is `same_call`'s business, not a cycle).
"""

from __future__ import annotations

from collections import deque

from mast_otel.processors.detectors.step_repetition.context import StepRepetitionContext
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

# A call and what it returned: equal tokens are the same observation.
Token = tuple[str, str]


class Cycle:
    """One run's last tool calls (as many as the longest cycle needs) and the cycles
    reported."""

    __slots__ = ("config", "recent", "report", "reported")

    def __init__(self, context: StepRepetitionContext) -> None:
        self.config = config = context.config
        self.report = context.report
        period = max(config.max_cycle_period, 0)
        self.recent: deque[tuple[Token, StepRef]] = deque(
            maxlen=max(period * config.min_cycle_repeats, 1)
        )
        self.reported: set[tuple[Token, ...]] = set()

    def call(self, step: Step, token: Token, ref: StepRef, run: Run) -> Finding | None:
        """A tool call (`token`: its canonical call and result): the finding when it completes
        a cycle."""
        cycle = self._cycle(token, ref)
        return None if cycle is None else self._finding(step, cycle, run)

    def _cycle(self, token: Token, step: StepRef) -> list[StepRef] | None:
        self.recent.append((token, step))
        repeats = self.config.min_cycle_repeats
        if len(self.recent) < 2 * repeats:
            return None  # too few calls yet for the shortest cycle
        tokens = [t for t, _ in self.recent]
        for period in range(2, self.config.max_cycle_period + 1):
            span = period * repeats
            if len(tokens) < span:
                break
            if tokens[-1] != tokens[-1 - period]:
                continue  # the last call does not repeat the one a period earlier
            tail = tokens[-span:]
            if len(set(tail[:period])) < 2:
                continue  # one call repeated: the same_call rule's business
            if all(tail[i] == tail[i - period] for i in range(period, span)):
                signature = tuple(sorted(set(tail[:period])))
                if signature in self.reported:
                    return None
                self.reported.add(signature)
                return [s for _, s in list(self.recent)[-span:]]
        return None

    def _finding(self, step: Step, cycle: list[StepRef], run: Run) -> Finding:
        period = len(cycle) // self.config.min_cycle_repeats
        tools = [s.tool_name for s in cycle[:period]]
        return self.report.finding(
            at=step,
            rule="cycle",
            confidence=0.8,
            message=(
                f"cycle {' → '.join(tools)} repeated {self.config.min_cycle_repeats} times "
                f"with unchanged results"
            ),
            evidence=cycle,
            values={
                "cycle": tools,
                "period": period,
                "repeats": self.config.min_cycle_repeats,
            },
            run=run,
        )
