"""FM-1.4 Loss of conversation history: the agent loses what it had already learnt.

Rule `context_shrink`: between two model calls of the same agent, the input it sends shrinks
by more than `shrink_ratio` (input tokens, or message count when tokens are not reported), from
a context of at least `min_prior_input_tokens` tokens (or `min_prior_messages` messages). A
shrink right after a step that summarizes or compacts the context on purpose (a step whose
name, agent or operation matches `summary_pattern`, or a model call whose own input says it is
a summary) is context hygiene, not loss, and stays silent. A shrink all the way back to the
agent's first call is a conversation reset (FM-2.1), not this.

Rule `reacquire`: a read-only call identical to a successful one made at least
`reacquire_min_gap_steps` tool calls earlier returns the same result, with no mutating call in
between: the agent fetched again what it already had, which it would not need to had it kept
it. (Closer repeats are step repetition, FM-1.3.) Lower confidence: an agent may re-read on
purpose.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from mast_otel.processors.detectors.conversation_reset import (
    ConversationResetConfig,
    is_back_to_opening,
)
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_READ = ActionKind.READ
_AGENT = StepKind.AGENT
_LLM = StepKind.LLM
_OTHER = StepKind.OTHER
_TOOL = StepKind.TOOL


@dataclass(slots=True)
class _Read:
    """A successful read remembered for the re-acquisition rule: when it was made, the state
    of the world then, a hash of its result (results can be large) and where it is."""

    index: int
    world: int
    result: int
    ref: StepRef


@dataclass
class HistoryLossConfig:
    """FM-1.4 loss of conversation history: the context shrinks, or known facts are re-read."""

    # Run this detector.
    enabled: bool = True
    # The model's input shrinking by more than this fraction between two calls of one agent.
    shrink_ratio: float = 0.5
    # Only a context at least this large before the drop counts (small ones fluctuate).
    min_prior_input_tokens: int = 800
    # The same for message counts, when the spans report messages rather than tokens.
    min_prior_messages: int = 6
    # A read-only call identical to a successful one at least this many tool calls earlier,
    # with the same result and nothing changed since, means the agent lost what it had.
    reacquire_min_gap_steps: int = 8
    # Steps matching this (by name, agent or operation) summarize the context on purpose.
    summary_pattern: str = r"summar|compact|condens|compress|memory"
    # Distinct read calls remembered per run for the re-acquisition rule.
    max_remembered_calls: int = 2_048

    def validate(self) -> None:
        if not 0 < self.shrink_ratio < 1:
            raise ValueError("detectors.history_loss.shrink_ratio must be between 0 and 1")
        if self.reacquire_min_gap_steps < 1 or self.max_remembered_calls < 1:
            raise ValueError(
                "detectors.history_loss.reacquire_min_gap_steps and max_remembered_calls "
                "must be at least 1"
            )
        try:
            re.compile(self.summary_pattern)
        except re.error as exc:
            raise ValueError(
                f"detectors.history_loss.summary_pattern: invalid regular expression ({exc})"
            ) from exc


class HistoryLoss(Detector):
    mode = "FM-1.4"
    name = "history_loss"
    version = "1.1"
    config: HistoryLossConfig
    summary: re.Pattern[str]
    # What counts as a reset to the opening (FM-2.1's rule), so the two modes never overlap.
    reset_config: ConversationResetConfig = ConversationResetConfig()

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.reset_config = context.sections.get("conversation_reset", self.reset_config)
        self.summary = re.compile(self.config.summary_pattern, re.IGNORECASE)
        # Step names, agents and operations recur across a fleet's runs.
        self.names_summary = lru_cache(maxsize=4096)(self._names_summary)

    def _names_summary(self, name: str, agent: str, operation: str) -> bool:
        return bool(self.summary.search(f"{name} {agent} {operation}"))

    def open(self, run: Run) -> DetectorRun:
        return _HistoryLossRun(self)


class _HistoryLossRun(DetectorRun):
    __slots__ = (
        "changes",
        "config",
        "detector",
        "last_llm",
        "opening",
        "reads",
        "summaries",
        "tool_index",
        "world",
    )
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.AGENT, StepKind.OTHER})

    def __init__(self, detector: HistoryLoss) -> None:
        self.detector = detector
        self.config = detector.config
        # Per agent: its last model call, and how many summarizing steps the run had then.
        self.last_llm: dict[str, tuple[Step, int]] = {}
        # Per agent: its first model call, to tell a reset to the opening (FM-2.1) from loss.
        self.opening: dict[str, Step] = {}
        self.summaries = 0
        self.tool_index = 0
        self.world = 0
        # The changes made, each with the values its arguments gave (by its `world` number).
        self.changes: list[tuple[int, frozenset[str]]] = []
        # By a hash of the canonical call. A plain dict keeps insertion order at a fraction of
        # OrderedDict's memory per entry; a read made again moves to the end by re-insertion.
        self.reads: dict[int, _Read] = {}

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if self._is_summary(step):
            self.summaries += 1
        if step.kind is _LLM:
            return self._on_llm(step, run)
        if step.kind is _TOOL and step.tool_name:
            return self._on_tool(step, run)
        return ()

    def _is_summary(self, step: Step) -> bool:
        if step.kind not in (_LLM, _AGENT, _OTHER):
            return False
        return self.detector.names_summary(step.name, step.agent, step.operation)

    def _on_llm(self, step: Step, run: Run) -> list[Finding]:
        agent = step.agent
        last = self.last_llm.get(agent)
        self.last_llm[agent] = (step, self.summaries)
        opening = self.opening.setdefault(agent, step)
        if last is None or self._is_summary(step):
            return []
        previous, summaries_then = last
        if summaries_then != self.summaries:
            return []  # the context was summarized on purpose in between
        ratio = self.config.shrink_ratio
        before, after, unit = previous.input_tokens, step.input_tokens, "input tokens"
        floor = self.config.min_prior_input_tokens
        if before is None or after is None:
            before, after, unit = previous.input_messages, step.input_messages, "messages"
            floor = self.config.min_prior_messages
        if before is None or after is None or before < floor:
            return []
        if after >= before * (1 - ratio):
            return []
        if opening is not previous and is_back_to_opening(
            opening,
            previous.input_tokens or 0,
            previous.input_messages or 0,
            step,
            self.detector.reset_config,
        ):
            return []  # back to the very beginning: a conversation reset, FM-2.1
        if self.detector.summary.search(step.input_text[:512]):
            return []  # the call's own input says it is a summary
        return [
            self.detector.finding(
                at=step,
                rule="context_shrink",
                confidence=0.8,
                message=(
                    f"{agent or 'the agent'}'s model input fell from {before} to {after} {unit} "
                    f"between two calls, with no summarization in between"
                ),
                evidence=[previous, step],
                values={
                    "unit": unit,
                    "before": before,
                    "after": after,
                    "drop": round(1 - after / before, 3) if before else 0.0,
                    "threshold": ratio,
                },
                run=run,
            )
        ]

    def _touched(self, since: int, read: Step, targets: frozenset[str]) -> bool:
        """Whether a change made after world `since` touched what this read names: a value or
        target of the change's arguments among the read's arguments and targets or in its
        result (a re-read of what was changed checks the change), or a change no record of
        which is left."""
        if not self.changes or self.changes[0][0] > since + 1:
            return True
        named = _values(read.tool_arguments) | targets
        result = read.tool_result[:100_000].lower()
        return any(
            world > since and (values & named or any(v in result for v in values))
            for world, values in self.changes
        )

    def _on_tool(self, step: Step, run: Run) -> list[Finding]:
        classifier = self.detector.classifier
        self.tool_index += 1
        action = classifier.classify(step.tool_name, step.tool_arguments)
        if action.kind is _MUTATING:
            self.world += 1
            if len(self.changes) >= self.config.max_remembered_calls:
                self.changes.pop(0)
            self.changes.append((self.world, _values(step.tool_arguments) | action.targets))
            return []
        if step.failed or action.kind is not _READ:
            return []
        key = hash(classifier.canonical_call(step.tool_name, step.tool_arguments))
        result = hash(classifier.result_fingerprint(step.tool_result))
        earlier = self.reads.pop(key, None)
        self.reads[key] = _Read(self.tool_index, self.world, result, run.ref(step))
        if len(self.reads) > self.config.max_remembered_calls:
            del self.reads[next(iter(self.reads))]
        if earlier is None or earlier.result != result:
            return []
        if earlier.world != self.world and self._touched(earlier.world, step, action.targets):
            return []
        gap = self.tool_index - earlier.index
        if gap < self.config.reacquire_min_gap_steps:
            return []
        return [
            self.detector.finding(
                at=step,
                rule="reacquire",
                confidence=0.6,
                message=(
                    f"{step.tool_name}({short(step.tool_arguments, 120)}) fetched again what it "
                    f"returned {gap} tool calls earlier, with nothing it names changed in between"
                ),
                evidence=[earlier.ref, step],
                values={
                    "tool": step.tool_name,
                    "arguments": short(step.tool_arguments),
                    "gap_steps": gap,
                    "threshold": self.config.reacquire_min_gap_steps,
                },
                run=run,
            )
        ]


def _values(arguments: str) -> frozenset[str]:
    """The scalar values of a call's JSON arguments, at any depth, lower-cased (three
    characters or more): what the call names."""
    try:
        doc = json.loads(arguments) if arguments.lstrip()[:1] in ("{", "[") else None
    except (ValueError, RecursionError):
        return frozenset()
    found: set[str] = set()
    todo: list[Any] = [doc]
    while todo and len(found) < 256:
        node = todo.pop()
        if isinstance(node, dict):
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
        elif isinstance(node, str | int | float) and not isinstance(node, bool):
            text = str(node).strip().lower()
            if len(text) >= 3:
                found.add(text)
    return frozenset(found)


FACTORY = DetectorFactory(
    type="history_loss", mode="FM-1.4", config=HistoryLossConfig, create=HistoryLoss
)
