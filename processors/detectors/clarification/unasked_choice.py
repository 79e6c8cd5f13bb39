"""FM-2.2's rule `unasked_choice`: an identifier chosen among several without asking which.

`unasked_choice`: a change that went through passes an identifier (`choice_value_pattern`: a
name and a number, `gift_card_7815826`; not a free-text argument, `free_argument_pattern`, nor
one of a set of its kind such as a trip's flights) that neither the user nor the instructions
named and the agent never put to the user (by itself, by its digits, by a value of its object
such as a card's last four digits, or by its kind when it is the only one), while tool results
offered others of its kind, or listed it side by side with others as the keys of one object
(`siblings_are_offers`). Offers of a kind the run's instructions do not allow for that argument
of that tool (`instructions_restrict_offers`) are no option: with one allowed offer left, the
choice was forced. A value the changed record already held is no pick when the user asked to
keep it (`reuse_pattern`), or said yes to the agent's proposal to keep it, or the change's
result shows the record holding it as before (`unchanged_choice_is_no_choice`;
clarification_records.py). A choice made before the instructions arrive (on the root span,
often last), or while it was the only one of its kind the agent had seen (it chose before
looking), is decided at close.

Fires: a support agent reads a customer's two cards (`card_40021`, a visa ending 4242, and
`card_77310`, an amex ending 0005), says "I can refund order 5512 now.", the user says "Just
refund it, thanks.", and it calls `create_refund` with `payment_method: card_77310`. The same
refund made before it reads the wallet, which then shows `card_40021` too: reported at close,
"results read after it offered card_40021".

Near miss: the user said "The amex ending 0005, please." (named by its object's value); the
agent asked "Shall I refund to card_77310?" first; the wallet holds one card; a clinic's
instructions say a moved slot is paid by "one insurance plan ... vouchers cannot pay for a
move", and the patient has one plan and a voucher (the choice was forced); the user asked to
"send the money back to the original payment method" and the order was paid with `card_77310`.
"""

from __future__ import annotations

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.clarification.context import (
    MAX_FINDINGS,
    MAX_WORDS,
    ClarificationContext,
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
from mast_otel.processors.detectors.clarification_records import TargetRecords
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run

# (argument, value, the other offers of its kind) of a change.
Choice = tuple[str, str, list[str]]


class UnaskedChoice:
    """What was put to the user, what tool results offered, the records they returned, and the
    choices held until the run's instructions or its later results are known."""

    __slots__ = (
        "aliases",
        "allowed",
        "choice",
        "free_argument",
        "held",
        "keyed",
        "offered",
        "records",
        "report",
        "restrict",
        "said",
        "siblings",
        "user_said",
    )

    def __init__(self, context: ClarificationContext) -> None:
        c = context.config
        self.choice = context.choice
        self.free_argument = context.free_argument
        self.keyed = c.siblings_are_offers
        self.restrict = c.instructions_restrict_offers
        self.report = context.report
        # Tokens the user, the instructions or the agent's own words to the user said (not
        # tool results): what was put to the user.
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
        # Choices made before the instructions were known, or while the only one of their
        # kind: decided at close.
        self.held: list[tuple[Step, Choice]] = []
        # The kinds of offer the instructions allow, by (tool, argument, kinds known).
        self.allowed: dict[tuple[str, str, frozenset[str]], set[str]] = {}
        self.records = TargetRecords(context.choice, context.reuse, c.unchanged_choice_is_no_choice)

    def say(self, text: str) -> None:
        """Words put to the user or said by them (the task, a turn, the agent's words)."""
        if text and len(self.said) < MAX_WORDS:
            self.said |= tokens(text)

    def _name_kinds(self, text: str) -> None:
        if text and len(self.user_said) < MAX_WORDS:
            self.user_said |= set(kind_words(text))

    def user_turn(self, text: str) -> None:
        self.say(text)
        self._name_kinds(text)
        self.records.user_turn(text)

    def model_call(self, step: Step) -> None:
        """A model call: its prompt and its words to the user."""
        self.say(step.input_text)
        self.say(step.output_text)
        self.records.agent_said(step.output_text)
        if not step.tool_calls:
            self._name_kinds(step.output_text)

    def read(self, result: str) -> None:
        """A successful read's result: the offers it lists and the records it returns."""
        c = self.choice
        if c is not None:
            offered, aliases, siblings = self.offered, self.aliases, self.siblings
            learn_offers(result, c, offered, aliases, siblings, self.keyed, MAX_WORDS)
        self.records.learn(result)

    def changed(self, result: str) -> None:
        """A change's result: the records as they now are."""
        self.records.learn(result)

    def unasked(self, step: Step, run: Run) -> Choice | None:
        """The first (argument, value, the other offers of its kind) of a change that nobody
        put to the user, where tool results offered several of its kind. Offers of a kind the
        instructions do not allow for this argument of this tool are no option."""
        choice = self.choice
        if choice is None:
            return None
        arguments = string_arguments(step.tool_arguments)
        for key, value in arguments:
            if self.free_argument.search(key):
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
                if len(self.held) < MAX_FINDINGS:
                    self.held.append((step, (key, value, [])))
                continue
            return key, value, sorted(offers - {value.lower()})[:5]
        return None

    def report_or_hold(self, step: Step, choice: Choice, run: Run) -> Finding | None:
        """The finding of an unasked choice; held instead while the instructions (on the root
        span, often last) are still to come, since they may rule the other offers out."""
        if self.restrict and instructions_of(run.attributes) is None:
            self.held.extend([(step, choice)][: MAX_FINDINGS - len(self.held)])
            return None
        return self._finding(step, choice, run)

    def close(self, run: Run) -> list[Finding]:
        """The choices held for the instructions, and those made when the value was the only
        one of its kind known: reported when results (read later, for those) offered others
        the instructions do not rule out."""
        findings = []
        for step, (key, value, others) in self.held:
            kind = kind_of(self.choice, value)
            later = not others  # chosen when it was the only one known
            if later:
                seen = self.offered.get(kind, set()) | self.siblings.get(value.lower(), set())
                others = sorted(seen - {value.lower()})
            left = self._allowed(step.tool_name, key, kind, set(others), run)
            if left:
                choice = (key, value, sorted(left)[:5])
                findings.append(self._finding(step, choice, run, later))
        return findings

    def _allowed(self, tool: str, key: str, kind: str, offers: set[str], run: Run) -> set[str]:
        """The offers of a kind the run's instructions allow for this argument of this tool
        ("if the flights are changed, the user needs to provide one gift card or credit card"),
        when they name the value's own kind; else all of them."""
        choice = self.choice
        if choice is None or not self.restrict:
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

    def _finding(self, step: Step, choice: Choice, run: Run, later: bool = False) -> Finding:
        """`later`: the other offers came in results read after the change (it chose before
        looking)."""
        key, value, others = choice
        when = "results read after it" if later else "the results also"
        return self.report.finding(
            at=step,
            rule="unasked_choice",
            confidence=0.65,
            message=(
                f"{step.tool_name} used {key}={value} without asking which: {when} "
                f"offered {', '.join(others)}, and neither the user nor the instructions named "
                f"it, nor did the agent put it to the user"
            ),
            evidence=[step],
            values={
                "argument": key,
                "value": value,
                "others": others,
                "offered_later": later,
                "action": short(step.tool_arguments),
            },
            run=run,
        )
