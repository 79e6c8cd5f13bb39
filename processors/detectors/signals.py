"""What the words in a run say: claims of success, health of a checked resource, ambiguity,
announced plans, limits hit. Several detectors read the same signals, so they are worded once,
here, and every pattern is configuration (`detectors.signals`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING

from mast_otel.processors.model import Step, StepKind

if TYPE_CHECKING:
    from mast_otel.processors.run import Run


@dataclass
class SignalsConfig:
    """Patterns several detectors read in a run's words (case-insensitive regular expressions)."""

    # A final answer that says the task is done.
    success_claim_pattern: str = (
        r"\b(resolved|fixed|mitigated|remediated|restored|recovered|is (now )?healthy|"
        r"(is|are) (now )?(running|ready|back)|successfully|issue (is )?gone|alert (has )?cleared|"
        r"problem solved)\b"
    )
    # Words that turn a success claim around ("could not fix", "not resolved").
    negation_pattern: str = (
        r"\b(not|unable|could ?n[o']t|cannot|can't|failed to|unresolved|no longer able)\b"
    )
    # Phrases that say a checked resource is fine; removed before looking for trouble, so
    # "no alerts firing" does not read as "firing".
    healthy_pattern: str = (
        r"no (active )?alerts?( (are )?firing)?|0 alerts|all (pods|replicas) (are )?(ready|running)"
        r"|successfully rolled out|\b(\d+)/\1\b|\brunning\b|\bhealthy\b|\bready\b|status: ok"
    )
    # Words that say a checked resource is in trouble (crash loops, errors, a firing alert).
    unhealthy_pattern: str = (
        r"CrashLoopBackOff|OOMKilled|ImagePullBackOff|ErrImagePull|\bError\b|\bfiring\b|"
        r"NotReady|\bFailed\b|\bPending\b|\bEvicted\b|\b0/[1-9]\d*\b|Waiting for|unhealthy|"
        r"\b5\d\d\b errors?|degraded|timed out"
    )
    # A tool result that leaves the target unclear.
    ambiguous_pattern: str = (
        r"multiple (matches|resources|candidates|pods|deployments)|more than one|ambiguous|"
        r"did you mean|which one|NotFound|not found|no resources found|no such"
    )
    # The model saying what it is about to do.
    announce_pattern: str = (
        r"\b(I will|I'll|I am going to|I'm going to|let me|next,? I|now I will|then I will)\b"
    )
    # A final answer admitting work is left.
    pending_pattern: str = (
        r"(next steps?:|\bstill need to\b|\bremaining steps\b|\bwill follow up\b|"
        r"\bto be continued\b|\bTODO\b|\bnot yet (done|finished|verified)\b)"
    )
    # An error that says the run hit a turn, step or time limit.
    limit_pattern: str = (
        r"max(imum)?[ _-]?(turns|iterations|steps)|recursion limit|MaxTurnsExceeded|"
        r"GraphRecursionError|step limit|turn limit|timed? ?out|deadline exceeded|"
        r"budget exceeded|too many (steps|iterations)"
    )

    def validate(self) -> None:
        for name, pattern in vars(self).items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"detectors.signals.{name}: invalid regular expression ({exc})"
                ) from exc


_UPPER_ESCAPE = re.compile(r"\\[A-Z]")


class CaseFreePattern:
    """A case-insensitive pattern that searches lower-cased text with a lower-cased pattern:
    about ten times faster than re.IGNORECASE on long tool results. Patterns with escapes
    whose meaning depends on case (\\S, \\D, \\W, \\B) keep re.IGNORECASE."""

    def __init__(self, pattern: str) -> None:
        self.lowered = not _UPPER_ESCAPE.search(pattern)
        self.regex = re.compile(pattern.lower()) if self.lowered else re.compile(pattern, re.I)
        # Whether a text matches, remembered: the same results and answers recur within and
        # across runs, and lower-casing and searching a long tool result costs microseconds.
        self.found: Callable[[str], bool] = lru_cache(maxsize=4096)(self._found)

    def _found(self, text: str) -> bool:
        return self.regex.search(self.prepare(text)) is not None

    def prepare(self, text: str) -> str:
        return text.lower() if self.lowered else text

    def search(self, text: str) -> re.Match[str] | None:
        return self.regex.search(self.prepare(text))


class Health(StrEnum):
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    UNKNOWN = "unknown"


class Signals:
    """The compiled patterns, with the questions detectors ask of text."""

    def __init__(self, config: SignalsConfig) -> None:
        self.success = CaseFreePattern(config.success_claim_pattern)
        self.negation = CaseFreePattern(config.negation_pattern)
        self.healthy = CaseFreePattern(config.healthy_pattern)
        self.unhealthy = CaseFreePattern(config.unhealthy_pattern)
        self.ambiguous = CaseFreePattern(config.ambiguous_pattern)
        self.announce = CaseFreePattern(config.announce_pattern)
        self.pending = CaseFreePattern(config.pending_pattern)
        self.limit = CaseFreePattern(config.limit_pattern)
        # Answers by text, remembered (several detectors ask of the same answers and results).
        self.claims_success: Callable[[str], bool] = lru_cache(maxsize=4096)(self._claims_success)
        self.health: Callable[[str], Health] = lru_cache(maxsize=4096)(self._health)

    def _claims_success(self, text: str) -> bool:
        """The text says the task is done, and does not say the opposite."""
        if not self.success.found(text):
            return False
        return not self.negation.found(text)

    def _health(self, result: str) -> Health:
        """What a check's result says about the resource it looked at."""
        if not result:
            return Health.UNKNOWN
        text = self.healthy.prepare(result)
        rest = self.healthy.regex.sub(" ", text)
        if self.unhealthy.regex.search(self.unhealthy.prepare(rest)):
            return Health.UNHEALTHY
        if rest != text:
            return Health.HEALTHY
        return Health.UNKNOWN


# A team's last word: a message that is or ends with AG2's TERMINATE, or that gives the
# orchestrator's conclusion (Magentic-One's `FINAL ANSWER:`).
LAST_WORD = re.compile(r"\bTERMINATE\W*\Z|(?:\A|\n)\W*FINAL ANSWER\s*:", re.IGNORECASE)
_TERMINATE = re.compile(r"\s*\bTERMINATE\W*\Z", re.IGNORECASE)


def is_team(run: Run | None) -> bool:
    """Two or more agents made model calls in the run: each message without a call is a turn
    of the team's conversation, not an answer."""
    return run is not None and len(run.speakers) > 1


def may_be_team(run: Run) -> bool:
    """One agent has spoken so far, under a root agent that is not it (a team whose other
    members have not spoken yet, a group chat, or a workflow around one agent), or under a root
    that has not arrived: a live agent exports its root span last, so until then the run may be
    a team's as much as an imported one whose root came first."""
    if len(run.speakers) != 1:
        return False
    root = run.root
    return root is None or (bool(root.agent) and root.agent not in run.speakers)


def is_final_answer(step: Step, run: Run | None = None) -> bool:
    """A model call that answers instead of calling a tool: the agent thinks it is done. A
    question to the user is not an answer. In a team's run (`is_team`) the final answer is
    the team's last word (`LAST_WORD`), not any message without a call."""
    if step.kind is not StepKind.LLM or step.tool_calls:
        return False
    if is_team(run):
        return bool(LAST_WORD.search(step.output_text))
    if step.output_text.rstrip().endswith("?"):
        return False
    reason = step.finish_reason.lower()
    if reason in ("tool_calls", "tool_use", "function_call", "length", "max_tokens"):
        return False
    return bool(step.output_text.strip())


def without_last_word(text: str) -> str:
    """A team's message without the TERMINATE that ends it (empty for a bare TERMINATE)."""
    return _TERMINATE.sub("", text).strip()


_WORD = re.compile(r"[a-z0-9][a-z0-9._-]{2,}")
_PARTS = re.compile(r"[-._]")
_STOPWORD_TEXT = (
    "the and for with that this from into was were are has have had not but you your our its "
    "will then than there their them they what when which who why how all any can could "
    "should would may might been being also just only some more most other such very over "
    "under after before about again once here out off per via use used using get got let now "
    "new one two "
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@lru_cache(maxsize=4096)
def words(text: str) -> frozenset[str]:
    """The lower-cased words of a text that could name something (no stop words). A compound
    name also gives its parts: a pod `checkout-7d9f` names the deployment `checkout`.
    Cached: the same prompts and results recur across a fleet's runs."""
    found = set(_WORD.findall(text.lower()))
    # Most words are plain letters and digits; only compounds need trimming and splitting.
    compounds = [word for word in found if not word.isalnum()]
    if compounds:
        found.difference_update(compounds)
        for word in compounds:
            word = word.strip("._-")
            found.add(word)
            if "-" in word or "." in word or "_" in word:
                found.update(p for p in _PARTS.split(word) if len(p) >= 3)
    return frozenset(found - _STOPWORDS)


def named(target: str, known: frozenset[str] | set[str]) -> bool:
    """A call's target is among the words a text named: as it is, or as the whole words it is
    written with (`#W7713055` is named by "W7713055", `ana.costa@heliolabs.io` by "ana.costa"
    and "heliolabs.io"; `shop-db` is not named by "shop" and "db")."""
    if target in known:
        return True
    tokens = [w.strip("._-") for w in _WORD.findall(target.lower())]
    return bool(tokens) and all(t in known for t in tokens)
