"""FM-1.4's `reacquire`: a read-only call identical to a successful one made at least
`reacquire_min_gap_steps` tool calls earlier returns the same result, with no change in
between that touched what it names: the agent fetched again what it already had, which it
would not need to had it kept it. (Closer repeats are step repetition, FM-1.3.) Lower
confidence: an agent may re-read on purpose.

- Fires: `kubectl describe deployment checkout -n shop` returns "x", nine metric queries
  follow, and the same describe returns "x" again: reported at the second describe (citing
  both). Also when a change in between touched something else: a helpdesk agent lists the open
  tickets of customer C-204, reads nine articles, closes ticket T-12 (of another customer),
  and lists C-204's open tickets again, unchanged.
- Near miss: the same describe after `kubectl scale deployment checkout` in between: the re-read
  checks the change. So is a re-read of the ticket list after a change to T-91 (a ticket the
  listing holds) or to customer C-204 (whom the listing names). A repeat fewer than 8 tool
  calls after the first is FM-1.3's, not this.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.history_loss.context import HistoryLossContext
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_READ = ActionKind.READ


@dataclass(slots=True)
class _Read:
    """A successful read remembered for the re-acquisition rule: when it was made, the state
    of the world then, a hash of its result (results can be large) and where it is."""

    index: int
    world: int
    result: int
    ref: StepRef


class Reacquire:
    """Per run: the reads made (by a hash of the canonical call) and the changes since."""

    __slots__ = ("changes", "config", "context", "reads", "tool_index", "world")

    def __init__(self, context: HistoryLossContext) -> None:
        self.context = context
        self.config = context.config
        self.tool_index = 0
        self.world = 0
        # The changes made, each with the values its arguments gave (by its `world` number).
        self.changes: list[tuple[int, frozenset[str]]] = []
        # By a hash of the canonical call. A plain dict keeps insertion order at a fraction of
        # OrderedDict's memory per entry; a read made again moves to the end by re-insertion.
        self.reads: dict[int, _Read] = {}

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

    def tool_call(self, step: Step, run: Run) -> list[Finding]:
        classifier = self.context.classifier
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
            self.context.report.finding(
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
