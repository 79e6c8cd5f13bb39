"""FM-2.6 Reasoning-action mismatch: what the model says and what the agent does disagree.

Rules, comparing a model call's output with what follows it:
- `target_mismatch`: the reasoning right before a tool call names resources, and the call acts
  on others (none of the named ones among its targets);
- `verb_mismatch`: the reasoning says it will only look (check, inspect, describe, ...) and the
  call changes the system;
- `other_tool_executed`: the model asked for one tool and the agent ran another;
- `claims_done_then_acts`: the output says the task is done and, in the same turn, asks for
  more tool calls;
- `unsupported_observation`: the reasoning states an observation (`observation_terms`, such
  as CrashLoopBackOff or OOMKilled) that no tool result so far has shown;
- `announced_then_stopped`: the run's last model output announces a tool call ("I will run
  ...") and asks for none, and nothing follows;
- `unsupported_value`: the model tells an amount (`value_pattern`, such as "$1,234.50") that
  appears in no tool result, no user message and not in the run's instructions, and is not
  the sum or difference of two values seen there, nor the total of a field over a list of a
  JSON result (numbers compared as numbers: 1,234.50 is 1234.5);
- `unsupported_operand`: the agent computes with a number nothing gave it: a call's argument
  is an arithmetic expression (`expression_pattern`, "(122 + 127) * 2 * 1.5") with an operand
  no tool result, user message or instruction holds (small whole numbers, counts, excepted);
- `claimed_unperformed_action`: the model says it has done something ("one bag has been
  added", "I have cancelled ...": `claimed_action_pattern`) and no successful change before
  it is of that kind: no successful mutating call names the verb or the thing claimed in its
  tool name or argument names;
- `report_contradicts_result`: a change's result is a record the run had read before (a JSON
  object holding an id of the call's arguments), the items it added to that record's lists
  (a payment line, a new segment) hold numbers, and the model's next words to the user tell
  an amount in a sentence about money moving (`charge_statement_pattern`: "charged",
  "processed", "refunded") that is none of those numbers: it reports what it meant to do, not
  what the result shows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from mast_otel.processors import conventions
from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from mast_otel.processors.detectors.records import record_asked_for
from mast_otel.processors.detectors.signals import words
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN

_READ_ONLY_INTENT = re.compile(
    r"\b(check|inspect|look at|describe|view|list|examine|read|investigate|query|verify)\b",
    re.IGNORECASE,
)
_CHANGE_INTENT = re.compile(
    r"\b(restart|delete|scale|patch|apply|roll ?back|rollout|set|increase|raise|update|fix|"
    r"change|modify|remove|kill|drain|cordon|upgrade|edit)\b",
    re.IGNORECASE,
)
_MAX_WORDS = 50_000
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# A sentence about what is still to happen or might, or an amount per unit ("$38 per
# passenger"): no report of the total that was moved.
_NOT_DONE = re.compile(
    r"\b(will|would|can|could|may|once|if|when|should|per|each)\b", re.IGNORECASE
)
_LET_ME_KNOW = re.compile(r"\blet me know\b", re.IGNORECASE)


@dataclass
class ReasoningActionConfig:
    """FM-2.6 reasoning-action mismatch: the model says one thing and the agent does another."""

    # Run this detector.
    enabled: bool = True
    # Findings reported per run; the rest are not reported.
    max_findings_per_run: int = 5
    # Observations a model may state only if a tool result showed them.
    observation_terms: list[str] = field(
        default_factory=lambda: [
            "CrashLoopBackOff",
            "OOMKilled",
            "ImagePullBackOff",
            "ErrImagePull",
            "Evicted",
            "NotReady",
            "connection refused",
            "out of memory",
            "disk full",
            "certificate expired",
        ]
    )

    # Amounts the model may tell only if a tool result, a user message or the instructions
    # hold them (case-insensitive regular expression; the number is read from the match).
    # "" turns `unsupported_value` off.
    value_pattern: str = (
        r"(?:[$€£]|\b(?:USD|EUR|GBP)\s?)\s?\d[\d,]*(?:\.\d+)?|"
        r"\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP|dollars|euros)\b"
    )
    # A statement that something was done: the verb (group `verb`) and the thing (group
    # `thing`) are compared with the run's successful changes. "" turns the rule off.
    claimed_action_pattern: str = (
        r"(?P<thing>(?:\b\w+\s+){0,3}?\w+)\s+(?:has|have)\s+(?:now\s+)?(?:also\s+)?been\s+"
        r"(?:successfully\s+)?(?P<verb>added|removed|cancell?ed|booked|sent|issued|deleted|"
        r"created|closed|restarted|deployed|merged|submitted|scheduled|assigned)\b|"
        r"\bI(?:'ve| have)\s+(?:now\s+)?(?:also\s+)?(?:successfully\s+)?(?P<verb2>added|removed|"
        r"cancell?ed|booked|sent|issued|deleted|created|closed|restarted|deployed|merged|"
        r"submitted|scheduled|assigned)\s+(?P<thing2>(?:\w+\s+){0,3}\w+)|"
        # a list item of a summary: "- **Checked Bag:** 1 checked bag added"
        r"(?m:^\s*(?:[-*•]|\d+[.)])\s+(?:\*\*[^*\n]{1,40}\*\*:?\s*)?"
        r"(?P<thing3>(?:[\w-]+\s+){0,3}?[\w-]+)\s+(?P<verb3>added|removed|cancell?ed|booked|sent|"
        r"issued|deleted|created|closed)(?=\s*(?:[.(,;]|$)))"
    )
    # Words too common to tell one change from another ("your", "the", "reservation" stays).
    claim_stopwords: list[str] = field(
        default_factory=lambda: [
            "the",
            "a",
            "an",
            "your",
            "my",
            "our",
            "all",
            "and",
            "also",
            "one",
            "two",
            "three",
            "it",
            "this",
            "that",
            "these",
            "those",
            "has",
            "have",
            "been",
            "now",
            "successfully",
            "additionally",
            "new",
            "same",
            "both",
            "each",
            "i",
            "we",
            "you",
            "for",
            "to",
            "of",
        ]
    )
    # Words before a claim in its sentence that make it no claim ("once they have been added",
    # "if it has been sent", "not yet").
    claim_condition_pattern: str = (
        r"\b(once|if|when|whether|after|before|unless|until|not|never|cannot|can't|no|none)\b"
    )
    # Words in the thing claimed that make it a possibility, not a deed ("bags can be added").
    claim_modal_pattern: str = r"\b(be|to|will|would|can|could|may|might|should|must|being)\b"
    # A sentence telling the user money moved; an amount in it is compared with the numbers
    # of the items a change added to its record. "" turns `report_contradicts_result` off.
    charge_statement_pattern: str = (
        r"\b(charged|processed|paid|billed|debited|deducted|refunded|credited|collected)\b"
    )
    # Records (by id) whose list items are remembered per run for that comparison.
    max_tracked_records: int = 256
    # A call argument that is a calculation; "" turns `unsupported_operand` off.
    expression_pattern: str = r"^[\d\s.,+\-*/()%]*\d\s*[+\-*/%]\s*[\d(][\d\s.,+\-*/()%]*$"
    # Whole numbers up to this may appear in a calculation unsupported (counts, multipliers).
    small_integer_max: int = 12
    # Values remembered per run for `unsupported_value` (a bound on memory: past it the rule
    # stops for the run, counted in the finding-free `values_dropped`).
    max_values_per_run: int = 20_000

    def validate(self) -> None:
        """Every value of this section is valid."""
        for name in (
            "value_pattern",
            "claimed_action_pattern",
            "claim_condition_pattern",
            "claim_modal_pattern",
            "expression_pattern",
            "charge_statement_pattern",
        ):
            try:
                re.compile(getattr(self, name))
            except re.error as exc:
                raise ValueError(
                    f"detectors.reasoning_action.{name}: invalid regular expression ({exc})"
                ) from exc
        if self.max_values_per_run < 0:
            raise ValueError("detectors.reasoning_action.max_values_per_run must be >= 0")
        if self.max_tracked_records < 1:
            raise ValueError("detectors.reasoning_action.max_tracked_records must be >= 1")


_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_DIGIT_COMMA = re.compile(r"(?<=\d),(?=\d{3}\b)")


def numbers(text: str) -> set[float]:
    """Every number in `text`, as a value: "1,234.50" and "1234.5" are the same."""
    out = set()
    for match in _NUMBER.finditer(_DIGIT_COMMA.sub("", text)):
        try:
            out.add(round(float(match.group().replace(",", "")), 2))
        except ValueError:
            continue
    return out


def list_totals(text: str) -> set[float]:
    """For a JSON tool result: the total of each numeric field over the items of each list
    ("price" over the flights of a reservation, "amount" over the lines of an invoice), the
    totals a model tells without a calculator."""
    if not text or text.lstrip()[:1] not in ("{", "["):
        return set()
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return set()
    out: set[float] = set()
    todo = [doc]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            todo.extend(node.values())
        elif isinstance(node, list):
            sums: dict[str, float] = {}
            for item in node:
                todo.append(item)
                if isinstance(item, dict):
                    for key, value in item.items():
                        if isinstance(value, int | float) and not isinstance(value, bool):
                            sums[key] = sums.get(key, 0.0) + value
            out |= {round(v, 2) for v in sums.values()}
    return out


def _stem(word: str) -> str:
    """A crude stem, enough to match "bags"/"baggage", "flights"/"flight", "cancelled"/
    "cancel" between a sentence and a tool's name."""
    word = word.lower()
    for suffix in ("gages", "gage", "ing", "ies", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("ll") else word


class ReasoningAction(Detector):
    mode = "FM-2.6"
    name = "reasoning_action"
    version = "1.0"
    config: ReasoningActionConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.terms = [t.lower() for t in self.config.observation_terms]
        # The terms a text contains, remembered: the same answers and results recur.
        self.terms_in: Callable[[str], frozenset[str]] = lru_cache(maxsize=4096)(self._terms_in)
        c = self.config
        self.value = re.compile(c.value_pattern, re.IGNORECASE) if c.value_pattern else None
        self.charge = (
            re.compile(c.charge_statement_pattern, re.IGNORECASE)
            if c.charge_statement_pattern
            else None
        )
        self.claimed = (
            re.compile(c.claimed_action_pattern, re.IGNORECASE)
            if c.claimed_action_pattern
            else None
        )
        self.claim_stopwords = frozenset(w.lower() for w in c.claim_stopwords)
        self.claim_condition = re.compile(c.claim_condition_pattern, re.IGNORECASE)
        self.claim_modal = re.compile(c.claim_modal_pattern, re.IGNORECASE)
        self.expression = re.compile(c.expression_pattern) if c.expression_pattern else None

    def _terms_in(self, text: str) -> frozenset[str]:
        lowered = text.lower()
        return frozenset(t for t in self.terms if t in lowered)

    def open(self, run: Run) -> DetectorRun:
        return _ReasoningRun(self)


@dataclass(slots=True)
class _Told:
    """An amount the model told, decided at close (the instructions may arrive last)."""

    step: StepRef
    text: str  # as written ("$1,234.50")
    value: float
    said: str
    # For an operand of a calculation: the call's tool name (else "").
    tool: str = ""


class _ReasoningRun(DetectorRun):
    __slots__ = (
        "changes",
        "config",
        "detector",
        "findings",
        "names",
        "pending_report",
        "reasoning",
        "records",
        "seen",
        "told",
        "unobserved",
        "user_text",
    )
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.HUMAN})

    def __init__(self, detector: ReasoningAction) -> None:
        self.detector = detector
        self.config = detector.config
        self.reasoning: dict[str, Step] = {}  # agent → its last model output before a call
        self.names: set[str] = set()  # resources the run's calls have acted on
        # The observation terms no tool result has shown yet, in the configured order (not
        # the results: memory stays the size of the term list however long the run). Shared
        # with the detector until the first one is seen.
        self.unobserved: list[str] = detector.terms
        self.findings = 0
        # Values seen in tool results and user messages (None once past the bound), the
        # amounts told that none supported yet, the stems of each successful change (its
        # tool name and argument names), and the last user message read.
        self.seen: set[float] | None = set()
        self.told: list[_Told] = []
        self.changes: list[frozenset[str]] = []
        self.user_text = ""
        # The list items of each record read, by id (fingerprints), and the last change that
        # added items to a record read before: (change, call, id, the added items' numbers).
        self.records: dict[str, frozenset[str]] = {}
        self.pending_report: tuple[StepRef, str, str, frozenset[float]] | None = None

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind is _LLM:
            self._user(step.input_text)
            return self._on_model(step, run)
        if step.kind is _TOOL and step.tool_name:
            self._operands(step, run)
            self._learn(step.tool_result or step.error)
            if self.seen is not None and self.detector.value is not None:
                self.seen |= list_totals(step.tool_result)
            return self._on_tool(step, run)
        if step.kind is _HUMAN:
            self._user(step.input_text or step.output_text)
        return ()

    def _user(self, text: str) -> None:
        if text and text != self.user_text:
            self.user_text = text
            self._learn(text)

    def _learn(self, text: str) -> None:
        if self.seen is None or not text or self.detector.value is None:
            return
        self.seen |= numbers(text)
        if len(self.seen) > self.config.max_values_per_run:
            self.seen = None  # past the bound: the rule stops for this run
            self.told.clear()

    def _supported(self, value: float, seen: set[float]) -> bool:
        if value in seen:
            return True
        return any(round(value - a, 2) in seen or round(a - value, 2) in seen for a in seen)

    def _amounts(self, step: Step, run: Run) -> None:
        """Amounts in a model output that nothing seen so far supports: held for close."""
        pattern = self.detector.value
        if pattern is None or self.seen is None or not step.output_text:
            return
        for match in pattern.finditer(step.output_text):
            values = numbers(match.group())
            if len(values) != 1:
                continue
            value = next(iter(values))
            if self._supported(value, self.seen) or any(
                t.value == value and not t.tool for t in self.told
            ):
                continue
            if len(self.told) < self.config.max_findings_per_run:
                said = _around(step.output_text, match.start(), match.end())
                self.told.append(_Told(run.ref(step), match.group().strip(), value, said))

    def _operands(self, step: Step, run: Run) -> None:
        """Operands of a calculation in a call's arguments that nothing seen so far holds."""
        expression = self.detector.expression
        if expression is None or self.seen is None or not step.tool_arguments:
            return
        try:
            arguments = json.loads(step.tool_arguments)
        except (ValueError, RecursionError):
            return
        if not isinstance(arguments, dict):
            return
        for value in arguments.values():
            if not isinstance(value, str) or not expression.match(value.strip()):
                continue
            for operand in sorted(numbers(value)):
                small = operand.is_integer() and operand <= self.config.small_integer_max
                # An operand is copied from somewhere, not computed: it must be there as is.
                if small or operand in self.seen:
                    continue
                if len(self.told) < self.config.max_findings_per_run:
                    text = f"{operand:g}"
                    self.told.append(
                        _Told(run.ref(step), text, operand, value.strip()[:120], step.tool_name)
                    )
                return

    def _claims(self, step: Step, run: Run) -> list[Finding]:
        """Things the model says were done that no successful change before did."""
        pattern = self.detector.claimed
        if pattern is None or not step.output_text:
            return []
        out: list[Finding] = []
        for match in pattern.finditer(step.output_text):
            verb = match.group("verb") or match.group("verb2") or match.group("verb3") or ""
            thing = match.group("thing") or match.group("thing2") or match.group("thing3") or ""
            wanted = {
                _stem(w)
                for w in re.findall(r"[a-z]+", thing.lower())
                if w not in self.detector.claim_stopwords
            }
            if not wanted:
                continue
            text = step.output_text
            sentence = text[
                max(
                    text.rfind(". ", 0, match.start()), text.rfind("\n", 0, match.start()), 0
                ) : match.start()
            ]
            if self.detector.claim_condition.search(
                sentence + " " + thing
            ) or self.detector.claim_modal.search(thing):
                continue
            verb_stem = _stem(verb)
            if any(verb_stem in change or wanted & change for change in self.changes):
                continue
            said = _around(step.output_text, match.start(), match.end())
            done = ", ".join(sorted({c for change in self.changes for c in change})) or "none"
            out.extend(
                self._emit(
                    step,
                    "claimed_unperformed_action",
                    0.7,
                    f"the model said {said!r}, and no successful change before it did that "
                    f"(successful changes named: {done})",
                    [step],
                    {"said": said, "verb": verb, "thing": thing.strip()},
                    run,
                )
            )
            break
        return out

    def on_close(self, run: Run) -> Iterable[Finding]:
        findings: list[Finding] = []
        if self.told and self.seen is not None:
            instructions = str(run.attributes.get(conventions.TASK_DESCRIPTION) or "")
            seen = self.seen | numbers(instructions)
            for told in self.told:
                if told.tool:
                    if told.value in seen:
                        continue
                    findings.extend(
                        self._emit(
                            told.step,
                            "unsupported_operand",
                            0.65,
                            f"{told.tool} computed {told.said!r} with {told.text}, a number no "
                            "tool result, user message or instruction holds",
                            [told.step],
                            {"operand": told.text, "expression": told.said},
                            run,
                        )
                    )
                    continue
                if self._supported(told.value, seen):
                    continue
                findings.extend(
                    self._emit(
                        told.step,
                        "unsupported_value",
                        0.65,
                        f"the model told {told.text} ({told.said!r}), a value no tool result, "
                        "user message or instruction holds, nor a sum or difference of two",
                        [told.step],
                        {"value": told.text, "said": told.said},
                        run,
                    )
                )
        findings.extend(self._announced(run))
        return findings

    def _announced(self, run: Run) -> Iterable[Finding]:
        last = next((s for s in reversed(run.window) if s.kind in (_LLM, _TOOL, _HUMAN)), None)
        if last is None or last.kind is not _LLM or last.tool_calls:
            return ()  # a user turn after it: the user had the word, the agent did not stop
        text = last.output_text
        # The sentences that announce something ("let me know" asks the user, announces
        # nothing), and the tools or resources of the run they name.
        announcing = [
            sentence
            for sentence in _SENTENCE.split(text)
            if self.detector.signals.announce.found(_LET_ME_KNOW.sub("", sentence))
        ]
        if not announcing:
            return ()
        mentioned = words(" ".join(announcing)) & (
            self.names | {s.tool_name.lower() for s in run.window if s.tool_name}
        )
        if not mentioned:
            return ()
        return self._emit(
            last,
            "announced_then_stopped",
            0.65,
            f"the model announced {', '.join(sorted(mentioned))} "
            f"({short(announcing[0].strip(), 120)!r}) and the run ended without it",
            [last],
            {"said": short(text), "named": sorted(mentioned)},
            run,
        )

    def _record(self, step: Step, action_kind: ActionKind, run: Run) -> None:
        """Remember a record's list items; after a change, what it added to a record."""
        if self.detector.charge is None or step.failed:
            return
        asked = record_asked_for(self.detector.classifier, step)
        if asked is None:
            return
        record, ids = asked
        items = _list_items(record)
        for one in sorted(ids):
            before = self.records.get(one)
            if action_kind is _MUTATING and before is not None:
                added = [json.loads(i) for i in items - before]
                found = frozenset(
                    round(abs(float(v)), 2)
                    for item in added
                    for v in item.values()
                    if isinstance(v, int | float) and not isinstance(v, bool)
                )
                if found:
                    call = f"{step.tool_name}({short(step.tool_arguments, 160)})"
                    self.pending_report = (run.ref(step), call, one, found)
            if before is not None or len(self.records) < self.config.max_tracked_records:
                self.records[one] = items

    def _report(self, step: Step, run: Run) -> list[Finding]:
        """The model's first words after a change that added items to a record."""
        pending = self.pending_report
        if pending is None or not step.output_text or self.detector.value is None:
            return []
        self.pending_report = None
        change, call, record, found = pending
        charge = self.detector.charge
        assert charge is not None
        for sentence in _SENTENCE.split(step.output_text[:8000]):
            if not charge.search(sentence) or _NOT_DONE.search(sentence):
                continue
            told = []
            for match in self.detector.value.finditer(sentence):
                values = numbers(match.group())
                if len(values) == 1:
                    told.append((match.group().strip(), next(iter(values))))
            # A sentence naming several amounts (a split payment) contradicts the result only
            # if none of them is what the result shows.
            if not told or any(value in found or value == 0 for _, value in told):
                continue
            amount, value = told[0]
            shown = ", ".join(f"{v:g}" for v in sorted(found)[:8])
            return self._emit(
                step,
                "report_contradicts_result",
                0.75,
                f"the model told {amount} ({short(sentence.strip(), 140)!r}) after {call}, "
                f"whose result added to {record} items holding {shown}, not {amount}",
                [change, step],
                {
                    "said": short(sentence.strip()),
                    "told": value,
                    "call": call,
                    "record": record,
                    "result_values": sorted(found)[:20],
                },
                run,
            )
        return []

    def _on_model(self, step: Step, run: Run) -> list[Finding]:
        findings: list[Finding] = []
        text = step.output_text
        findings.extend(self._report(step, run))
        self._amounts(step, run)
        findings.extend(self._claims(step, run))
        if step.tool_calls:
            self.reasoning[step.agent] = step
            if self.detector.signals.claims_success(text):
                findings.extend(
                    self._emit(
                        step,
                        "claims_done_then_acts",
                        0.75,
                        f"the model said the task is done ({short(text, 100)!r}) and asked for "
                        f"more tool calls: {', '.join(c.name for c in step.tool_calls)}",
                        [step],
                        {"said": short(text), "calls": [c.name for c in step.tool_calls]},
                        run,
                    )
                )
        else:
            self.reasoning.pop(step.agent, None)
        unsupported = []
        if self.unobserved:
            present = self.detector.terms_in(text)
            if present:
                unsupported = [t for t in self.unobserved if t in present]
        if unsupported and not self.detector.signals.negation.found(text):
            findings.extend(
                self._emit(
                    step,
                    "unsupported_observation",
                    0.6,
                    f"the model stated {unsupported[0]}, which no tool result had shown",
                    [step],
                    {"said": short(text), "unsupported": unsupported},
                    run,
                )
            )
        return findings

    def _on_tool(self, step: Step, run: Run) -> list[Finding]:
        action = self.detector.classifier.classify(step.tool_name, step.tool_arguments)
        reasoning = self.reasoning.pop(step.agent, None)
        findings: list[Finding] = []
        if reasoning is not None:
            findings.extend(self._compare(reasoning, step, action.kind, action.targets, run))
        self._record(step, action.kind, run)
        if len(self.names) < _MAX_WORDS:
            self.names |= action.targets
        if action.kind is _MUTATING and not step.failed and len(self.changes) < _MAX_WORDS:
            self.changes.append(_call_stems(step.tool_name, step.tool_arguments))
        if self.unobserved:
            present = self.detector.terms_in(step.tool_result or step.error)
            if present:
                shown = [t for t in self.unobserved if t in present]
                if shown:
                    self.unobserved = [t for t in self.unobserved if t not in shown]
        return findings

    def _compare(
        self, reasoning: Step, step: Step, kind: ActionKind, targets: frozenset[str], run: Run
    ) -> list[Finding]:
        text = reasoning.output_text
        requested = {c.name for c in reasoning.tool_calls if c.name}
        if requested and step.tool_name not in requested:
            return self._emit(
                step,
                "other_tool_executed",
                0.8,
                f"the model asked for {', '.join(sorted(requested))} and the agent ran "
                f"{step.tool_name}",
                [reasoning, step],
                {"requested": sorted(requested), "executed": step.tool_name},
                run,
            )
        if kind is _MUTATING and _READ_ONLY_INTENT.search(text) and not _CHANGE_INTENT.search(text):
            return self._emit(
                step,
                "verb_mismatch",
                0.8,
                f"the model said it would only look ({short(text, 100)!r}), and "
                f"{step.tool_name}({short(step.tool_arguments, 100)}) changed the system",
                [reasoning, step],
                {"said": short(text), "call": short(step.tool_arguments)},
                run,
            )
        said = words(text) & self.names
        if said and targets and not (targets & said) and not (targets & words(text)):
            return self._emit(
                step,
                "target_mismatch",
                0.75,
                f"the model named {', '.join(sorted(said))} and the call acted on "
                f"{', '.join(sorted(targets))}",
                [reasoning, step],
                {"named": sorted(said), "acted_on": sorted(targets), "said": short(text)},
                run,
            )
        return []

    def _emit(
        self,
        at: Step | StepRef,
        rule: str,
        confidence: float,
        message: str,
        evidence: list[Step | StepRef],
        values: dict[str, object],
        run: Run,
    ) -> list[Finding]:
        if self.findings >= self.config.max_findings_per_run:
            return []
        self.findings += 1
        return [self.detector.finding(at, rule, confidence, message, evidence, dict(values), run)]


def _list_items(record: dict[str, Any]) -> frozenset[str]:
    """The objects in a record's top-level lists, each as canonical JSON."""
    out: set[str] = set()
    for value in record.values():
        if isinstance(value, list):
            for item in value[:256]:
                if isinstance(item, dict):
                    out.add(json.dumps(item, sort_keys=True))
    return frozenset(out)


def _call_stems(tool: str, arguments: str) -> frozenset[str]:
    """The stems of a call's tool name and argument names: what kind of change it is."""
    names = re.findall(r"[a-z]+", tool.lower())
    try:
        parsed = json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):
        parsed = {}
    if isinstance(parsed, dict):
        for key in parsed:
            names += re.findall(r"[a-z]+", str(key).lower())
    return frozenset(_stem(n) for n in names if len(n) > 2)


def _around(text: str, start: int, end: int, width: int = 60) -> str:
    """The words around a span of `text`, within its line, for the evidence."""
    left = max(text.rfind("\n", 0, start) + 1, start - width, 0)
    right = text.find("\n", end)
    right = min(right if right >= 0 else len(text), end + width)
    cut = text[left:right].strip()
    return (
        ("…" if left > 0 and text[left - 1] != "\n" else "")
        + cut
        + ("…" if right < len(text) and text[right] != "\n" else "")
    )


FACTORY = DetectorFactory(
    type="reasoning_action", mode="FM-2.6", config=ReasoningActionConfig, create=ReasoningAction
)
