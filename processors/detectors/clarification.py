"""FM-2.2 Fail to ask for clarification: the agent acts on a guess instead of asking.

Rules:
- `ambiguous_then_mutate`: a tool result left the target unclear (several candidates, not
  found, "which one": `signals.ambiguous_pattern`) and the agent's next move on the system is
  a mutating call, with no clarifying step in between (a user/human step, or a model turn that
  asks a question instead of calling a tool);
- `unnamed_target`: a mutating call on a resource that nothing the agent was given names: not
  the task, not a user message, not any earlier tool result (`check_unnamed_targets`);
- `unasked_choice`: a mutating call passes an identifier (`choice_value_pattern`: a name
  and a number, `gift_card_7815826`) that neither the user nor the instructions named and the
  agent never put to the user (by itself, a value of its object, or its kind when it is the
  only one), while tool results offered others (of its kind, or side by side with it) that the
  instructions allow for that argument of that tool (`instructions_restrict_offers`): it chose
  among them instead of asking which one. A value the changed record already held is no pick
  when the user asked to keep it, or said yes to keeping it, or the change left it as it was
  (clarification_records.py). A choice made before the instructions arrive, or while it was
  the only one of its kind the agent had seen (it chose before looking), is decided at close;
- `unmentioned_count`: in a conversation, a change sets a positive count whose subject neither
  the user nor a question of the agent spoke of (clarification_counts.py): it assumed it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mast_otel.processors import conventions
from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from mast_otel.processors.detectors.clarification_counts import CountWatch, message
from mast_otel.processors.detectors.clarification_findings import (
    ambiguous_finding,
    unasked_finding,
    unnamed_finding,
)
from mast_otel.processors.detectors.clarification_offers import (
    DIGITS,
    allowed_kinds,
    instructions_of,
    kind_of,
    kind_words,
    learn_offers,
    named_by_alias,
    string_arguments,
    tokens,
)
from mast_otel.processors.detectors.clarification_records import REUSE, TargetRecords
from mast_otel.processors.detectors.signals import named, words
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_AGENT = StepKind.AGENT
_HANDOFF = StepKind.HANDOFF
_HUMAN = StepKind.HUMAN
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL

# Words remembered per run from inputs and results (a bound on memory, not on correctness:
# past it, unnamed-target findings stop).
_MAX_WORDS = 50_000
_MAX_FINDINGS = 5


@dataclass
class ClarificationConfig:
    """FM-2.2 fail to ask for clarification: a change right after an ambiguous result, or on a
    target no input named."""

    # Run this detector.
    enabled: bool = True
    # Also report changes to a resource no input named (task, user, tool results).
    check_unnamed_targets: bool = True
    # An argument value that identifies one thing among several (an id with letters and
    # digits); "" turns `unasked_choice` off. Dates and times never count.
    choice_value_pattern: str = r"\b(?P<kind>[a-z][a-z_.-]{2,40}?)[_.-]?\d{3,}\b"
    # Argument names whose values are the agent's own to make up (a summary, a note), not a
    # choice the user makes.
    free_argument_pattern: str = r"summary|note|comment|reason|message|description|title|body"
    # Identifiers listed side by side in one object of a result (the keys of a user's
    # payment methods: a card, a gift card, a voucher) are offers of one choice, whatever
    # their names: choosing one of them unasked is an unasked choice.
    siblings_are_offers: bool = True
    # Offers of a kind the run's instructions do not allow for the argument ("if the flights
    # are changed, the user needs to provide one gift card or credit card": no certificate)
    # are no option: with one allowed offer left, the choice was forced, not made unasked.
    instructions_restrict_offers: bool = True
    # A user's words asking to keep what a record has ("the original payment method"), or the
    # agent's proposal they answered saying so: the record's own value for the argument the
    # sentence names is then theirs; "" turns it off.
    reuse_pattern: str = REUSE
    # A record's own value passed to a change whose result shows the record holding it as often
    # as before (nothing charged to it, nothing moved) was no choice to ask about.
    unchanged_choice_is_no_choice: bool = True
    # In a conversation (the user spoke at least this often; 0 turns the rule off), a change
    # that sets a positive count whose subject no turn spoke of is `unmentioned_count`.
    counts_min_user_turns: int = 2
    # Words of an argument name that say "how many", not "of what" (`total_baggages`).
    count_qualifier_words: list[str] = field(
        default_factory=lambda: ["total", "number", "num", "count", "new", "extra", "free",
                                 "nonfree", "paid", "max", "min", "quantity", "qty", "amount",
                                 "id", "additional"]
    )  # fmt: skip
    # Words sharing this many first letters speak of one subject ("bag", "baggage").
    count_subject_prefix: int = 3

    def validate(self) -> None:
        """Every value of this section is valid."""
        for name in ("choice_value_pattern", "free_argument_pattern", "reuse_pattern"):
            try:
                re.compile(getattr(self, name))
            except re.error as exc:
                raise ValueError(
                    f"detectors.clarification.{name}: invalid regular expression ({exc})"
                ) from exc
        if self.counts_min_user_turns < 0 or self.count_subject_prefix < 1:
            raise ValueError(
                "detectors.clarification.counts_min_user_turns must be >= 0 and "
                "count_subject_prefix >= 1"
            )


class Clarification(Detector):
    mode = "FM-2.2"
    name = "clarification"
    version = "1.0"
    config: ClarificationConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        c = self.config
        self.choice = (
            re.compile(c.choice_value_pattern, re.IGNORECASE) if c.choice_value_pattern else None
        )
        self.free_argument = re.compile(c.free_argument_pattern, re.IGNORECASE)
        self.reuse = re.compile(c.reuse_pattern, re.IGNORECASE) if c.reuse_pattern else None

    def open(self, run: Run) -> DetectorRun:
        return _ClarificationRun(self)


class _ClarificationRun(DetectorRun):
    __slots__ = (
        "aliases",
        "allowed",
        "beside",
        "config",
        "counts",
        "detector",
        "held",
        "known",
        "last_learnt",
        "offered",
        "records",
        "reported",
        "said",
        "siblings",
        "task_seen",
        "told",
        "unclear",
        "user_said",
    )
    kinds = frozenset({_HUMAN, _LLM, _AGENT, _HANDOFF, _TOOL})

    def __init__(self, detector: Clarification) -> None:
        self.detector = detector
        self.config = detector.config
        self.unclear: Step | None = None
        self.known: set[str] = set()
        self.task_seen = False
        self.told = False  # has the agent been given any task text to judge targets by?
        self.reported = 0
        # Every model call of a run usually carries the same prompt: learnt once is enough.
        self.last_learnt = ""
        # Tokens the user, the instructions or the agent's own words to the user said (not
        # tool results): what was put to the user. Bounded as `known` is.
        self.said: set[str] = set()
        # Identifiers tool results offered, by kind (their name without the number), and the
        # other values of the JSON object that holds each (a card's last four digits, a
        # coupon's amount): saying one of those names it.
        self.offered: dict[str, set[str]] = {}
        self.aliases: dict[str, set[str]] = {}
        # Identifiers a result listed side by side (the keys of one object): each with the
        # others of its object.
        self.siblings: dict[str, set[str]] = {}
        # Words (plural endings dropped) of the user's turns and of the agent's answers to the
        # user: "the gift card" there names the only one.
        self.user_said: set[str] = set()
        # The kinds of offer the instructions allow, by (tool, argument).
        c = self.config
        self.counts = CountWatch(c.count_qualifier_words, c.count_subject_prefix)
        # Choices made before the instructions were known: decided at close.
        self.held: list[tuple[Step, tuple[str, str, list[str]]]] = []
        self.allowed: dict[tuple[str, str, frozenset[str]], set[str]] = {}
        self.records = TargetRecords(
            detector.choice, detector.reuse, c.unchanged_choice_is_no_choice
        )

    def _learn(self, text: str) -> None:
        if text == self.last_learnt:
            return
        self.last_learnt = text
        if len(self.known) < _MAX_WORDS:
            self.known |= words(text)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if not self.task_seen:
            task = run.attributes.get(conventions.TASK_DESCRIPTION)
            if isinstance(task, str):
                self._learn(task)
                self._say(task)
                self.task_seen = self.told = True
        if step.kind is _HUMAN:
            self.unclear = None
            self._learn(step.input_text)
            self._say(step.input_text or step.output_text)
            self._name_kinds(step.input_text or step.output_text)
            self.counts.user_turn(step.input_text or step.output_text)
            self.records.user_turn(step.input_text or step.output_text)
            self.told = self.told or bool(step.input_text)
            return ()
        if step.kind in (_LLM, _AGENT, _HANDOFF):
            # What the agent is told (prompts, hand-offs) names things; its own output does not.
            self._learn(step.input_text)
            if step.kind is _LLM:
                self._say(step.input_text)
                self._say(step.output_text)
                self.counts.agent_said(step.output_text)
                self.records.agent_said(step.output_text)
                if not step.tool_calls:
                    self._name_kinds(step.output_text)
            self.told = self.told or bool(step.input_text)
            if (
                step.kind is _LLM
                and not step.tool_calls
                and step.output_text.rstrip().endswith("?")
            ):
                self.unclear = None
            return ()
        if step.kind is not _TOOL or not step.tool_name:
            return ()
        action = self.detector.classifier.classify(step.tool_name, step.tool_arguments)
        findings: list[Finding] = []
        if action.kind is _MUTATING and not step.failed:
            if self.unclear is not None:
                findings.append(ambiguous_finding(self.detector, step, self.unclear, run))
                self.unclear = None
            elif choice := self._unasked(step, run):
                # Instructions still to come (on the root span, often last) may rule the
                # other offers out: decided at close.
                wait = self.config.instructions_restrict_offers
                if wait and instructions_of(run.attributes) is None:
                    self.held.extend([(step, choice)][: _MAX_FINDINGS - len(self.held)])
                else:
                    findings.append(unasked_finding(self.detector, step, choice, run))
            elif (
                self.config.check_unnamed_targets
                and self.told
                and action.targets
                and len(self.known) < _MAX_WORDS
            ):
                unnamed = sorted(t for t in action.targets if not named(t, self.known))
                if unnamed and len(unnamed) == len(action.targets):
                    findings.append(unnamed_finding(self.detector, step, unnamed, run))
            self.records.learn(step.tool_result)
        # A count is assumed when the call is made, whatever the tool answers: a change refused
        # for another reason (a payment that does not add up) still carried the guess.
        if action.kind is _MUTATING and not findings:
            turns = self.config.counts_min_user_turns
            if turns and (count := self.counts.unmentioned(step.tool_arguments, turns)):
                why, (key, value, *_) = message(step.tool_name, *count), count
                values = {"argument": key, "value": value, "action": short(step.tool_arguments)}
                findings.append(
                    self.detector.finding(step, "unmentioned_count", 0.6, why, [step], values, run)
                )
        elif action.kind is not _MUTATING:
            result = step.tool_result or step.error
            if self.detector.signals.ambiguous.found(result):
                self.unclear = step
            elif not step.failed:
                self._learn(result)
                self._offer(result)
                self.records.learn(result)
        findings = findings[: max(0, _MAX_FINDINGS - self.reported)]
        self.reported += len(findings)
        return findings

    def on_close(self, run: Run) -> Iterable[Finding]:
        """The choices held for the instructions, and those made when the value was the only
        one of its kind known: reported when results (read later, for those) offered others
        the instructions do not rule out."""
        findings = []
        for step, (key, value, others) in self.held:
            kind = kind_of(self.detector.choice, value)
            later = not others  # chosen when it was the only one known
            if later:
                seen = self.offered.get(kind, set()) | self.siblings.get(value.lower(), set())
                others = sorted(seen - {value.lower()})
            left = self._allowed(step.tool_name, key, kind, set(others), run)
            if left:
                choice = (key, value, sorted(left)[:5])
                findings.append(unasked_finding(self.detector, step, choice, run, later))
        findings = findings[: max(0, _MAX_FINDINGS - self.reported)]
        self.reported += len(findings)
        return findings

    def _name_kinds(self, text: str) -> None:
        if text and len(self.user_said) < _MAX_WORDS:
            self.user_said |= set(kind_words(text))

    def _say(self, text: str) -> None:
        if text and len(self.said) < _MAX_WORDS:
            self.said |= tokens(text)

    def _offer(self, result: str) -> None:
        keyed = self.config.siblings_are_offers
        c = self.detector.choice
        if c is not None:
            learn_offers(result, c, self.offered, self.aliases, self.siblings, keyed, _MAX_WORDS)

    def _unasked(self, step: Step, run: Run) -> tuple[str, str, list[str]] | None:
        """The first (argument, value, the other offers of its kind) of a change that nobody
        put to the user, where tool results offered several of its kind. Offers of a kind the
        instructions do not allow for this argument of this tool are no option."""
        choice = self.detector.choice
        if choice is None or not self.told:
            return None
        arguments = string_arguments(step.tool_arguments)
        for key, value in arguments:
            if self.detector.free_argument.search(key):
                continue
            match = choice.fullmatch(value)
            if match is None:
                continue
            offers = self.offered.get(match.group("kind").lower(), set()) | self.siblings.get(
                value.lower(), set()
            )
            offers = self._allowed(step.tool_name, key, match.group("kind").lower(), offers, run)
            # The only one of its kind seen so far: whether there was a choice, results read
            # later tell (decided at close).
            alone = len(offers | {value.lower()}) < 2
            if value.lower() in self.said:
                continue
            digits = DIGITS.findall(value)
            if digits and any(d in self.said or d[-4:] in self.said for d in digits):
                continue
            if named_by_alias(value.lower(), offers, self.aliases, self.said):
                continue
            if self.records.kept(arguments, key, value, step.tool_result):
                continue
            kind = match.group("kind").lower()
            # The user's "the gift card" names the only offer of its kind.
            same = self.offered.get(kind, set()) | {value.lower()}
            named = kind_words(kind)
            if len(same) == 1 and named and all(w in self.user_said for w in named):
                continue
            same_kind = {
                v.lower()
                for _, v in arguments
                if (m := choice.fullmatch(v)) is not None and m.group("kind").lower() == kind
            }
            if len(same_kind) > 1:
                continue  # a set of them (a trip's flights), not one chosen among several
            if alone:
                if len(self.held) < _MAX_FINDINGS:
                    self.held.append((step, (key, value, [])))
                continue
            return key, value, sorted(offers - {value.lower()})[:5]
        return None

    def _allowed(self, tool: str, key: str, kind: str, offers: set[str], run: Run) -> set[str]:
        """The offers of a kind the run's instructions allow for this argument of this tool
        ("if the flights are changed, the user needs to provide one gift card or credit card"),
        when they name the value's own kind; else all of them."""
        choice = self.detector.choice
        if choice is None or not self.config.instructions_restrict_offers:
            return offers
        kinds = {m.group("kind").lower() for o in offers if (m := choice.fullmatch(o))}
        every = frozenset(set(self.offered) | kinds | {kind})
        text = instructions_of(run.attributes)
        if text is None:
            return offers
        if (tool, key, every) not in self.allowed and len(self.allowed) < 1000:
            self.allowed[(tool, key, every)] = allowed_kinds(text, tool, key, set(every))
        allowed = self.allowed.get((tool, key, every), set())
        if kind not in allowed:
            return offers
        return {
            o for o in offers if (m := choice.fullmatch(o)) and m.group("kind").lower() in allowed
        }


FACTORY = DetectorFactory(
    type="clarification", mode="FM-2.2", config=ClarificationConfig, create=Clarification
)
