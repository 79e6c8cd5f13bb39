"""FM-1.3 Step repetition: the agent repeats a step that already told it what it would tell.

Rule `same_call`: the same tool with equivalent arguments (key order, whitespace and volatile
fields such as timestamps and request ids ignored) is called `min_repeats` times, each call at
most `max_gap_steps` tool calls after the previous one, and every call returned the same result
(clocks and ages blanked). A call that returns something new (a rollout being polled while it
progresses) starts the count again, and so does any mutating call in between (re-reading after
a change is verification, not repetition); a mutating call's own repeats do count.

Rule `cycle`: the last tool calls form a short cycle (A,B,A,B,... of up to `max_cycle_period`
distinct calls) that has come round `min_cycle_repeats` times with unchanged results.

One finding per streak or cycle, at the call that completes it. Usually benign on its own (the
study sees it in successful runs too); its cost (time, calls, tokens of the stretch) says how
much it wasted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from processors.classify import ActionKind
from processors.detectors.base import Detector, DetectorFactory, short
from processors.model import Finding, Step, StepKind, StepRef
from processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_TOOL = StepKind.TOOL


@dataclass(slots=True)
class _Streak:
    result: str
    last_index: int
    world: int
    # The calls of the streak until it is reported (then only its growth matters).
    steps: list[StepRef] = field(default_factory=list)
    reported: bool = False


@dataclass
class StepRepetitionConfig:
    """FM-1.3 step repetition: the same call over and over, or a short cycle, unchanged."""

    # Run this detector.
    enabled: bool = True
    # Equivalent calls with unchanged results that make a repetition.
    min_repeats: int = 3
    # Two calls belong to one streak only if at most this many other tool calls lie between.
    max_gap_steps: int = 6
    # Cycles (A,B,A,B,...) of up to this many distinct calls are looked for...
    max_cycle_period: int = 3
    # ...and reported once the whole cycle has come round this many times unchanged.
    min_cycle_repeats: int = 3

    def validate(self) -> None:
        if self.min_repeats < 2:
            raise ValueError("detectors.step_repetition.min_repeats must be at least 2")
        if self.max_gap_steps < 0:
            raise ValueError("detectors.step_repetition.max_gap_steps must not be negative")
        if self.max_cycle_period < 2 and self.max_cycle_period != 0:
            raise ValueError(
                "detectors.step_repetition.max_cycle_period must be 0 (off) or at least 2"
            )
        if self.min_cycle_repeats < 2:
            raise ValueError("detectors.step_repetition.min_cycle_repeats must be at least 2")


class StepRepetition(Detector):
    mode = "FM-1.3"
    name = "step_repetition"
    version = "1.0"
    config: StepRepetitionConfig

    def open(self, run: Run) -> DetectorRun:
        return _StepRepetitionRun(self)


# A call and what it returned: equal tokens are the same observation.
_Token = tuple[str, str]


class _StepRepetitionRun(DetectorRun):
    __slots__ = (
        "config",
        "detector",
        "recent",
        "reported_cycles",
        "streaks",
        "tool_index",
        "world",
    )
    kinds = frozenset({StepKind.TOOL})

    def __init__(self, detector: StepRepetition) -> None:
        self.detector = detector
        self.config = detector.config
        self.tool_index = 0
        # Bumped by every mutating call: reads before and after a change are different calls.
        self.world = 0
        self.streaks: dict[str, _Streak] = {}
        period = max(self.config.max_cycle_period, 0)
        self.recent: deque[tuple[_Token, StepRef]] = deque(
            maxlen=max(period * self.config.min_cycle_repeats, 1)
        )
        self.reported_cycles: set[tuple[_Token, ...]] = set()

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind is not _TOOL or not step.tool_name:
            return ()
        classifier = self.detector.classifier
        self.tool_index += 1
        key = classifier.canonical_call(step.tool_name, step.tool_arguments)
        result = classifier.result_fingerprint(step.tool_result)
        if step.failed:
            result = f"error:{classifier.result_fingerprint(step.error)}|{result}"
        mutating = classifier.classify(step.tool_name, step.tool_arguments).kind is _MUTATING
        findings: list[Finding] = []
        streak = self.streaks.get(key)
        fresh = (
            streak is None
            or streak.result != result
            or self.tool_index - streak.last_index - 1 > self.config.max_gap_steps
            or (streak.world != self.world and not mutating)
        )
        if fresh:
            streak = _Streak(result=result, last_index=self.tool_index, world=self.world)
            self.streaks[key] = streak
        assert streak is not None
        ref = run.ref(step)
        if not streak.reported:
            streak.steps.append(ref)
        streak.last_index = self.tool_index
        if mutating:
            self.world += 1
        streak.world = self.world
        if not streak.reported and len(streak.steps) >= self.config.min_repeats:
            streak.reported = True
            findings.append(self._same_call(step, streak, run))
        self._forget_stale()
        cycle = self._cycle((key, result), ref)
        if cycle is not None:
            findings.append(self._cycle_finding(step, cycle, run))
        return findings

    def _forget_stale(self) -> None:
        """Keep only streaks that could still grow, so memory follows the window."""
        if len(self.streaks) > 64:
            limit = self.tool_index - self.config.max_gap_steps - 1
            self.streaks = {k: s for k, s in self.streaks.items() if s.last_index >= limit}

    def _cycle(self, token: _Token, step: StepRef) -> list[StepRef] | None:
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
                if signature in self.reported_cycles:
                    return None
                self.reported_cycles.add(signature)
                return [s for _, s in list(self.recent)[-span:]]
        return None

    def _same_call(self, step: Step, streak: _Streak, run: Run) -> Finding:
        count = len(streak.steps)
        return self.detector.finding(
            at=step,
            rule="same_call",
            confidence=0.9 if not step.failed else 0.8,
            message=(
                f"{step.tool_name} called {count} times with equivalent arguments and the same "
                f"result"
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

    def _cycle_finding(self, step: Step, cycle: list[StepRef], run: Run) -> Finding:
        period = len(cycle) // self.config.min_cycle_repeats
        tools = [s.tool_name for s in cycle[:period]]
        return self.detector.finding(
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


FACTORY = DetectorFactory(
    type="step_repetition", mode="FM-1.3", config=StepRepetitionConfig, create=StepRepetition
)
