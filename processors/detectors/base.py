"""What every detector shares: its factory (a name, a mode, a config class with its defaults
and its own `validate`, a create function), the context it is created in (the services it may
use besides its own section), how it opens per-run state, how it words a finding and what the
failing stretch cost.

A detector is a folder (processors/detectors/__init__.py says its shape): its rules are given
its context, with a `Reporter` to word their findings, never the detector itself."""

from __future__ import annotations

import builtins
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.signals import Signals
from mast_otel.processors.model import Cost, Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL


class DetectorConfig(Protocol):
    """What every detector's config class has: an `enabled` switch and a `validate` that
    raises ValueError naming the key to fix (`detectors.<name>.<field>`)."""

    enabled: bool

    def validate(self) -> None: ...


T = TypeVar("T")
C = TypeVar("C", bound=DetectorConfig)


@dataclass
class DetectorContext:
    """What a detector is created with besides its own section: the services detectors share.
    Detectors are created in the factories' order, so a detector finds what those listed
    before it offered."""

    classifier: ActionClassifier
    signals: Signals
    # Every detector's section by its name, for a detector that must agree with another's
    # settings (FM-1.4 reads FM-2.1's "back to the opening").
    sections: Mapping[str, Any] = field(default_factory=dict)
    # What detectors created earlier offer the later ones, by name (FM-3.2 its change ledgers).
    offered: dict[str, object] = field(default_factory=dict)

    def offer(self, name: str, service: object) -> None:
        """Make `service` available to the detectors created after this one."""
        self.offered[name] = service

    def find(self, name: str, kind: type[T]) -> T | None:
        """What an earlier detector offered under `name`, if anything of this kind."""
        service = self.offered.get(name)
        return service if isinstance(service, kind) else None


@dataclass(frozen=True)
class DetectorFactory(Generic[C]):
    """How one failure mode's detector is configured and made: its config section's name
    (`type`, the key under `detectors:`), its mode, its config class (whose defaults are the
    default config) and the function that creates the detector from a validated config."""

    type: str
    mode: str
    config: builtins.type[C]
    create: Callable[[C, DetectorContext], Detector]

    def default_config(self) -> C:
        return self.config()


class Detector(ABC):
    """One failure mode's detector. Subclasses set `mode`, `name` and `version` and return
    fresh per-run state from `open`; the state sees each step as it is released (`on_step`)
    and the run as it closes (`on_close`)."""

    mode: ClassVar[str]
    name: ClassVar[str]
    version: ClassVar[str]

    def __init__(self, config: Any, context: DetectorContext) -> None:
        self.config = config
        self.classifier = context.classifier
        self.signals = context.signals
        self.report = Reporter(self.mode, self.name, self.version)

    @abstractmethod
    def open(self, run: Run) -> DetectorRun: ...


@dataclass(frozen=True, slots=True)
class Reporter:
    """How a detector's rules word a finding: the mode, detector name and version every finding
    of theirs carries. A rule is given one (in its family's context) instead of its detector."""

    mode: str
    detector: str
    version: str

    def finding(
        self,
        at: Step | StepRef,
        rule: str,
        confidence: float,
        message: str,
        evidence: Sequence[Step | StepRef],
        values: dict[str, Any],
        run: Run,
    ) -> Finding:
        """A finding shown at step `at`, supported by the `evidence` steps (the steps
        themselves, or the digests a detector kept of them)."""
        evidence_ids = tuple(dict.fromkeys(s.span_id for s in evidence))
        return Finding(
            trace_id=run.trace_id,
            span_id=at.span_id,
            mode=self.mode,
            detector=self.detector,
            detector_version=self.version,
            rule=rule,
            confidence=confidence,
            message=named_subject(_SPACES.sub(" ", message), at.agent, run),
            evidence_span_ids=evidence_ids,
            evidence={"rule": rule, **values},
            time_ns=at.start_ns,
            cost=stretch_cost(run, evidence),
            service=at.service,
            agent=at.agent,
            model=at.model,
        )


_NAMELESS = ("the model ", "the agent ")
# A finding's message is one line of prose: a quoted table's padding is one space.
_SPACES = re.compile(r"[ \t]{2,}")


def named_subject(message: str, agent: str, run: Run) -> str:
    """In a team's run (two or more agents made model calls) a finding's "the model ..." /
    "the agent ..." names the agent it shows at: which of the team said it."""
    if agent and len(run.speakers) > 1 and agent in run.speakers and message.startswith(_NAMELESS):
        return agent + message[message.index(" ", 4) :]
    return message


def stretch_cost(run: Run, evidence: Sequence[Step | StepRef]) -> Cost:
    """What the run spent from the first to the last evidence step: wall time, and the model
    and tool calls and tokens of the steps still in the window over that stretch."""
    if not evidence:
        return Cost()
    first = min(s.start_ns for s in evidence)
    last = max(s.end_ns for s in evidence)
    cost = Cost(seconds=max(0, last - first) / 1e9)
    for step in run.window:
        if step.start_ns < first or step.end_ns > last:
            continue
        if step.kind is _LLM:
            cost.llm_calls += 1
            cost.input_tokens += step.input_tokens or 0
            cost.output_tokens += step.output_tokens or 0
        elif step.kind is _TOOL:
            cost.tool_calls += 1
    return cost


def short(text: str, limit: int = 160) -> str:
    """Text cut for a message or evidence value."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def json_doc(text: str) -> Any:
    """`text` parsed if it is a JSON object or list (a tool's result or arguments), else None.

    Several detectors read the same step's result: it is parsed once, and the parse of the
    last few texts is shared. Callers only read what this returns, never change it."""
    if not text or text.lstrip()[:1] not in ("{", "["):
        return None
    return _parsed(text)


@lru_cache(maxsize=16)
def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None
