"""The rules of FM-1.3 step repetition (`step_repetition`, which describes them), as the
per-run state its detector opens for each run: streaks of the same call, retry loops, cycles
and repeated requests to the user, each reported once where it completes."""

from __future__ import annotations

import difflib
import json
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import short
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

if TYPE_CHECKING:
    from mast_otel.processors.detectors.step_repetition import StepRepetition

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_TOOL = StepKind.TOOL
_LLM = StepKind.LLM
_HUMAN = StepKind.HUMAN


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


@dataclass(slots=True)
class _Retry:
    """A failing call in a retry loop: its tool, arguments' fields, blanked error, where."""

    tool: str
    fields: dict[str, str] | str
    error: str
    index: int
    steps: list[StepRef]
    agent: str = ""
    reported: bool = False


_TOP_FIELD = re.compile(r"^\.?[^.\[]*")
# A value right after the thing named ("flight number HAT266", "ticket id: 4521").
_GIVEN_VALUE = re.compile(r"[\s:*#'\"`(]{1,6}[a-z0-9_.@-]*\d", re.IGNORECASE)
_ID_LIKE = re.compile(r"[a-z0-9_.@-]*\d[a-z0-9_.@-]*")
# The thing named inside a condition on the user's side ("once you have the ticket number",
# "when you find it", "if you can locate the order id"): waiting for it, not asking for it.
_CONDITION = re.compile(
    r"\b(?:once|when|whenever|if|after|as soon as)\s+you\b[^.!?;]*$", re.IGNORECASE
)


def _waiting(text: str, start: int) -> bool:
    """Whether the mention at `start` sits in a condition on the user's side."""
    return _CONDITION.search(text, max(0, start - 80), start) is not None


# A call and what it returned: equal tokens are the same observation.
_Token = tuple[str, str]


class _StepRepetitionRun(DetectorRun):
    __slots__ = (
        "config",
        "detector",
        "recent",
        "reported_cycles",
        "reported_requests",
        "request_words",
        "requests",
        "retries",
        "streaks",
        "tool_index",
        "user_turns",
        "world",
    )
    kinds = frozenset({StepKind.TOOL, StepKind.LLM, StepKind.HUMAN})

    def __init__(self, detector: StepRepetition) -> None:
        self.detector = detector
        self.config = detector.config
        self.tool_index = 0
        # Bumped by every mutating call: reads before and after a change are different calls.
        self.world = 0
        # Turns of the user so far: a call repeated across one answered a new turn.
        self.user_turns = 0
        self.streaks: dict[str, _Streak] = {}
        period = max(self.config.max_cycle_period, 0)
        self.recent: deque[tuple[_Token, StepRef]] = deque(
            maxlen=max(period * self.config.min_cycle_repeats, 1)
        )
        self.reported_cycles: set[tuple[_Token, ...]] = set()
        # Recent failing calls, each the latest of its retry loop.
        self.retries: deque[_Retry] = deque(maxlen=16)
        # Identifiers the agent asked the user for since the last tool call: their turns.
        self.requests: dict[str, list[StepRef]] = {}
        self.reported_requests: set[str] = set()
        self.request_words: dict[str, str] = {}

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind is _LLM:
            return self._request(step, run)
        if step.kind is _HUMAN:
            self.user_turns += 1
            return ()
        if step.kind is not _TOOL or not step.tool_name:
            return ()
        self.requests.clear()
        self.request_words.clear()
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
            streak = _Streak(
                result=result,
                last_index=self.tool_index,
                world=self.world,
                agent=step.agent,
                user_turns=self.user_turns,
            )
            self.streaks[key] = streak
        assert streak is not None
        if streak.user_turns != self.user_turns:
            streak.across_user_turn = True
        streak.user_turns = self.user_turns
        ref = run.ref(step)
        if step.agent != streak.agent:
            streak.one_agent = False
        if not streak.reported:
            streak.steps.append(ref)
        streak.last_index = self.tool_index
        if mutating:
            self.world += 1
        streak.world = self.world
        needed = self.config.min_repeats
        if step.failed and streak.one_agent:
            needed = min(needed, self.config.min_repeats_failed)
        elif streak.across_user_turn and not mutating and streak.one_agent:
            needed = min(needed, self.config.min_repeats_across_user_turn)
        if not streak.reported and len(streak.steps) >= needed:
            streak.reported = True
            findings.append(self._same_call(step, streak, run))
        if step.failed and fresh:
            retry = self._near_duplicate(step, ref)
            if retry is not None:
                findings.append(self._retry_finding(step, retry, run))
        self._forget_stale()
        cycle = self._cycle((key, result), ref)
        if cycle is not None:
            findings.append(self._cycle_finding(step, cycle, run))
        return findings

    def _request(self, step: Step, run: Run) -> Iterable[Finding]:
        """An agent turn that speaks to the user (no tool call) asking for identifiers."""
        needed = self.config.request_min_turns
        if not needed or step.tool_calls or not step.output_text:
            return ()
        text = step.output_text[:4000]
        asked = {
            " ".join(m.group(1).lower().replace("_", " ").replace("-", " ").split())
            for m in self.detector.request.finditer(text)
            # "reservation ID UM3OG5": the agent names the value, it does not ask for it.
            if not _GIVEN_VALUE.match(text, m.end())
            # "Once you have the reservation ID, let me know": the agent waits, it does not ask.
            and not _waiting(text, m.start())
        }
        # A request counts in a row: a turn of the agent that does not ask for it again ends
        # the stretch (the agent moved on, or only waits for it); a stretch that already made
        # the count stands until a tool call.
        needed = self.config.request_min_turns
        for item in [
            i for i, turns in self.requests.items() if i not in asked and len(turns) < needed
        ]:
            del self.requests[item]
            self.request_words.pop(item, None)
        ref = run.ref(step)
        for item in sorted(asked):
            turns = self.requests.setdefault(item, [])
            if len(turns) < needed:
                turns.append(ref)
                # The words of the turn that completes the count, for the message.
                if len(turns) == needed:
                    self.request_words[item] = short(text, 240)
        if len(self.requests) > 64:
            self.requests = {k: v for k, v in self.requests.items() if len(v) > 1}
        return ()

    def on_close(self, run: Run) -> Iterable[Finding]:
        """Requests still unanswered when the run ends: the stretch since the last tool call
        asked for the same identifier `request_min_turns` times and nothing came of it."""
        needed = self.config.request_min_turns
        findings: list[Finding] = []
        for item, turns in sorted(self.requests.items()):
            if needed and len(turns) >= needed and item not in self.reported_requests:
                self.reported_requests.add(item)
                findings.append(self._request_finding(item, turns, run))
        return findings

    def _request_finding(self, item: str, turns: list[StepRef], run: Run) -> Finding:
        last = turns[-1]
        words = self.request_words.get(item, "")
        return self.detector.finding(
            at=last,
            rule="repeated_request",
            confidence=0.7,
            message=(
                f"the agent asked the user for the {item} in {len(turns)} turns in a row with "
                f"no tool call between them and the run ended there, never trying another "
                f"way: "
                f"{short(words, 120)!r}"
            ),
            evidence=turns,
            values={
                "asked_for": item,
                "turns": len(turns),
                "threshold": self.config.request_min_turns,
                "last_turn": words,
            },
            run=run,
        )

    def _near_duplicate(self, step: Step, ref: StepRef) -> _Retry | None:
        """Join a failing call to the retry loop it nearly repeats; the loop when it is due."""
        error = _blank_ids(step.error or step.tool_result)
        fields = _fields(step.tool_arguments)
        limit = self.config.max_gap_steps
        for retry in reversed(self.retries):
            if self.tool_index - retry.index - 1 > limit:
                continue
            if retry.tool != step.tool_name or retry.error != error or retry.agent != step.agent:
                continue
            if not self._near(retry.fields, fields):
                continue
            retry.fields = fields
            retry.index = self.tool_index
            retry.steps.append(ref)
            if not retry.reported and len(retry.steps) >= self.config.near_duplicate_min_repeats:
                retry.reported = True
                return retry
            return None
        self.retries.append(
            _Retry(step.tool_name, fields, error, self.tool_index, [ref], step.agent)
        )
        return None

    def _near(self, before: dict[str, str] | str, after: dict[str, str] | str) -> bool:
        if isinstance(before, dict) and isinstance(after, dict):
            # A field is an argument: a list of payment methods changed in two places is one
            # argument changed.
            changed = {
                _top_field(k) for k in before.keys() | after.keys() if before.get(k) != after.get(k)
            }
            return len(changed) <= self.config.near_duplicate_max_changed_fields
        if isinstance(before, str) and isinstance(after, str):
            ratio = difflib.SequenceMatcher(None, before[:2000], after[:2000]).ratio()
            return ratio >= self.config.near_duplicate_text_similarity
        return False

    def _retry_finding(self, step: Step, retry: _Retry, run: Run) -> Finding:
        count = len(retry.steps)
        return self.detector.finding(
            at=step,
            rule="near_duplicate_retry",
            confidence=0.75,
            message=(
                f"{step.tool_name} retried {count} times with nearly the same arguments and "
                f"the same failure: {short(step.error or step.tool_result, 120)}"
            ),
            evidence=retry.steps,
            values={
                "tool": step.tool_name,
                "arguments": short(step.tool_arguments),
                "retries": count,
                "threshold": self.config.near_duplicate_min_repeats,
                "error": short(step.error or step.tool_result),
            },
            run=run,
        )

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
        across = ""
        if streak.across_user_turn and not step.failed:
            across = ", a turn of the user between: the new request got the old answer"
        return self.detector.finding(
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


def _top_field(path: str) -> str:
    match = _TOP_FIELD.match(path)
    return match[0] if match else path


def _blank_ids(text: str) -> str:
    """An error with ids, amounts and other words holding digits blanked."""
    return " ".join(_ID_LIKE.sub("#", text.lower()[:500]).split())


def _fields(arguments: str) -> dict[str, str] | str:
    """A call's arguments as leaf fields (`a.b[0].c` → value), or as normalized text."""
    try:
        parsed = json.loads(arguments) if arguments.strip()[:1] in ("{", "[") else None
    except (ValueError, RecursionError):
        parsed = None
    if parsed is None:
        return " ".join(arguments.lower().split())
    out: dict[str, str] = {}

    def walk(value: object, path: str, depth: int) -> None:
        if len(out) >= 256:
            return
        if isinstance(value, dict) and depth < 6:
            for key, item in value.items():
                walk(item, f"{path}.{key}", depth + 1)
        elif isinstance(value, list) and depth < 6:
            for position, item in enumerate(value):
                walk(item, f"{path}[{position}]", depth + 1)
        else:
            out[path] = " ".join(str(value).lower().split())

    walk(parsed, "", 0)
    return out
