"""Permissions a run's instructions grant, and refusals an agent tells the user, read from text.

A permission is an unconditional "<subject> can <verb> <object>" clause of the instructions ("The
user can modify passengers but cannot modify the number of passengers"; "all reservations can
change cabin without changing the flights"), with the words of what it leaves out: a "but
cannot ..." or "without ..." part (`number`; `flights`). A clause under a condition ("if",
"unless", "only", "when", "once", "provided", or a "no"/"nobody"/"none" subject), with a bounded
object ("at most five", "only", "any"), or passive ("can be cancelled") grants nothing here.

A refusal is one of an agent's sentences (at most 600 characters, not a question) saying an
action on an object is not allowed: "<object> cannot be <verb>ed", "<object> is not
[allowed to be] <verb>ed / <verb>able" (either with ", including [<verb>ing] <object>" after
it, the first also with "... to <verb> <object>"), "not possible / allowed / permitted / able
to, unable to, I cannot <verb> <object>", "<verb>ing <object> is not allowed", "<verb-noun>
to / of <object> are not permitted". Its object is split on "or" and commas into the
alternatives it refuses one by one; naming those others is no restriction of each ("flights
or cabin class").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_WORD = re.compile(r"[a-z]+")
# Characters of a run's instructions read for permissions.
_MAX_INSTRUCTIONS = 100_000
_SENTENCE = re.compile(r"(?<=[.!?;:])\s+|\n+")
# Words that name nothing of an object.
_FUNCTION = frozenset(
    re.findall(
        r"\w+",
        "a an the this that these those my your our their his her its any all each every some "
        "of to for on in at by with from and or same own such it them they one",
    )
)
# What a clause's object runs to: punctuation or a word that starts another part.
_OBJECT_END = re.compile(
    r"[,.;:!?()]|\s(?:but|without|except|if|unless|when|once|because|since|as|due|so|which|"
    r"who|that|is|are|was|were|will|would|can|cannot|could|should|must|may|until|before|after|"
    r"under|per|provided|while|although|though|however|even)\b"
)
_NEG = r"(?:cannot|can't|can not|could not|couldn't|may not|must not|will not|won't)"
# A permission clause: "can <verb> <rest>" (group verb, rest); the words before it are read
# for a condition or a negated subject.
_PERMISSION = re.compile(
    r"\b(?:can|(?:is|are) (?:allowed|permitted) to)\s+(?:also\s+)?(?P<verb>[a-z]+)\s+"
    r"(?P<rest>[^.;:]*)"
)
_CONDITION = re.compile(r"\b(?:if|unless|only|when|whenever|provided|once|no|nobody|none)\b")
_NOT_VERB = frozenset(re.findall(r"\w+", "be not only also always never just still have help"))
_BOUNDED = re.compile(r"^(?:at most|at least|up to|no more|more than|less than|only|one|any)\b")
_RESTRICTION = re.compile(
    r"\b(?:but|and)\s+(?:cannot|can't|can not|may not|not|never)\s+(?P<but>[^.;:]*)|"
    r"\bwithout\s+(?P<without>[^.;:,]*)"
)
# Refusals; each names its groups verb/object, and optionally verb2/object2 (what the refused
# verb was "to" do) and object3/verb3 (", including ...").
# A subject read before a refusal starts where its clause does (the sentence's start or a
# comma, semicolon or colon): a search that tried every position in between would read a long
# clause once per position.
_CLAUSE_START = r"(?:^|(?<=[,;:]))"
# An object read after a verb is at most this long: the same bound for the forms that start at
# a word anywhere in the clause.
_OBJECT_MAX = 160
_INCLUDING = r"(?:,?\s+including\s+(?:(?P<verb3>[a-z]+ing)\s+)?(?P<object3>[^.;:!?]*))?"
_REFUSALS: tuple[tuple[re.Pattern[str], bool], ...] = (
    (
        re.compile(
            rf"{_CLAUSE_START}(?P<object>[^,;:]*?)\s+{_NEG}\s+be\s+(?P<verb>[a-z]+)"
            rf"(?:\s+to\s+(?P<verb2>[a-z]+)\s+(?P<object2>[^.;:!?]*))?{_INCLUDING}"
        ),
        True,
    ),
    (
        re.compile(
            rf"{_CLAUSE_START}(?P<object>[^,;:]*?)\s+(?:is|are)\s+not\s+(?:allowed\s+to\s+be\s+)?"
            rf"(?!allowed|permitted)(?P<verb>[a-z]+(?:able|ed))\b{_INCLUDING}"
        ),
        True,
    ),
    (
        re.compile(
            r"\b(?:(?:not|n't)\s+(?:possible|allowed|permitted|able)\s+to|unable\s+to|"
            rf"i\s+{_NEG}|i(?:'m| am)\s+not\s+able\s+to)\s+"
            r"(?P<verb>[a-z]+)\s+(?P<object>[^.;:!?]*)"
        ),
        False,
    ),
    (
        re.compile(
            rf"\b(?P<verb>[a-z]+ing)\s+(?P<object>[^,;:]{{0,{_OBJECT_MAX}}}?)\s+(?:is|are)\s+not\s+"
            r"(?:possible|allowed|permitted)\b"
        ),
        False,
    ),
    (
        re.compile(
            rf"\b(?P<verb>[a-z]+)\s+(?:to|of)\s+(?P<object>[^,;:]{{0,{_OBJECT_MAX}}}?)\s+(?:is|are)\s+not\s+"
            r"(?:possible|allowed|permitted)\b"
        ),
        False,
    ),
)
# A sentence is split into clauses at "; " and ", and " / ", but ".
_CLAUSE = re.compile(r";\s+|,\s+(?:and|but)\s+")
# Every refusal says one of these; a sentence without any is not read further.
_NEGATION = re.compile(r"\b(?:not|cannot|unable)\b|n't\b")
# A sentence longer than this is not read for refusals (a pasted record, not a reply).
_MAX_SENTENCE = 600
_ALTERNATIVE = re.compile(r"\s+or\s+|,\s+")


def stem(word: str) -> str:
    """A noun without its possessive or plural ending: "passengers", "passenger's" give
    "passenger"."""
    word = word.removesuffix("'s").removesuffix("s'")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def object_words(text: str) -> frozenset[str]:
    """The stemmed words of an object phrase, up to where the phrase ends."""
    end = _OBJECT_END.search(" " + text)
    phrase = (" " + text)[: end.start()] if end else text
    return frozenset(stem(w) for w in re.findall(r"[a-z']+", phrase) if w not in _FUNCTION)


def verb_forms(verb: str) -> frozenset[str]:
    """The forms of a verb a sentence may use: "modify" gives modified, modifies, modifying,
    modification, modifiable; "change" gives changed, changes, changing, changeable."""
    forms = {verb, verb + "s", verb + "es", verb + "ed", verb + "d", verb + "ing", verb + "able"}
    forms |= {verb + "ment", verb + "ments", verb + "ion", verb + "ions"}
    if verb.endswith("e"):
        base = verb[:-1]
        forms |= {base + "ing", base + "able", base + "ation", base + "ations", base + "ion"}
    if verb.endswith("y"):
        base = verb[:-1]
        forms |= {base + "ies", base + "ied", base + "iable", base + "ication", base + "ications"}
    if len(verb) > 2 and verb[-1] not in "aeiouyw" and verb[-2] in "aeiou":
        forms |= {verb + verb[-1] + "ed", verb + verb[-1] + "ing"}
    return frozenset(forms)


@dataclass(frozen=True, slots=True)
class Permission:
    """A clause of the instructions that grants an action on an object."""

    text: str  # the sentence, as the instructions give it
    verb: str
    forms: frozenset[str]  # the forms of the verb and of its synonyms
    object: frozenset[str]
    restriction: frozenset[str]  # the words of what the clause leaves out


@dataclass(frozen=True, slots=True)
class Refusal:
    """An action on an object an agent's clause says is not allowed."""

    verb: str
    object: frozenset[str]
    clause: frozenset[str]  # the clause's words, stemmed: a restriction named in it counts


def permissions(instructions: str, synonyms: Iterable[Sequence[str]]) -> list[Permission]:
    """The unconditional permissions of `instructions`: each verb with the forms of its
    synonyms (each of `synonyms` is one set of verbs that mean the same)."""
    out: list[Permission] = []
    for sentence in _SENTENCE.split(instructions[:_MAX_INSTRUCTIONS]):
        lowered = sentence.lower().strip()
        for match in _PERMISSION.finditer(lowered):
            verb, rest = match.group("verb"), match.group("rest")
            head = lowered[: match.start()]
            if verb in _NOT_VERB or _CONDITION.search(head) or _BOUNDED.match(rest):
                continue
            if _CONDITION.search(_clause_of(rest)):
                continue
            obj = object_words(rest)
            if not obj:
                continue
            forms = set(verb_forms(verb))
            for group in synonyms:
                if verb in group:
                    for other in group:
                        forms |= verb_forms(other)
            left_out: set[str] = set()
            for part in _RESTRICTION.finditer(rest):
                words = part.group("but") or part.group("without") or ""
                left_out |= {stem(w) for w in _WORD.findall(words) if w not in _FUNCTION}
            left_out -= obj | forms
            grant = Permission(sentence.strip(), verb, frozenset(forms), obj, frozenset(left_out))
            out.append(grant)
    return out


def _clause_of(rest: str) -> str:
    """The part of a permission's clause up to its "but" or "without"."""
    end = re.search(r"\b(?:but|without)\b|[,.;:]", rest)
    return rest[: end.start()] if end else rest


def refusals(sentence: str) -> list[Refusal]:
    """The refusals of one of the agent's sentences (none in a question). Its apostrophes are
    plain: normalization gives a step's prose so ("can\u2019t" reads "can't")."""
    lowered = sentence.lower().strip()
    if not lowered or lowered.endswith("?") or len(lowered) > _MAX_SENTENCE:
        return []
    if not _NEGATION.search(lowered):
        return []
    out: list[Refusal] = []
    for clause in _CLAUSE.split(lowered):
        words = frozenset(stem(w) for w in re.findall(r"[a-z']+", clause))
        for pattern, subject_first in _REFUSALS:
            for match in pattern.finditer(clause):
                groups = match.groupdict()
                parts = [(groups["verb"], groups["object"], subject_first)]
                if groups.get("verb2"):
                    parts.append((groups["verb2"], groups["object2"] or "", False))
                if groups.get("object3"):
                    parts.append((groups.get("verb3") or groups["verb"], groups["object3"], False))
                # Each refused (verb, object words): a subject read back from the refusal,
                # an object forward; one per alternative of the phrase.
                refused = [
                    (verb, (_subject_words if subject else object_words)(alternative))
                    for verb, phrase, subject in parts
                    for alternative in _ALTERNATIVE.split(phrase or "")
                ]
                for n, (verb, obj) in enumerate(refused):
                    # The clause without the other things refused beside this one ("flights or
                    # cabin class", "flights ..., including cabin upgrades"): naming them is no
                    # restriction of this one.
                    others = frozenset().union(*(o for m, (_, o) in enumerate(refused) if m != n))
                    if obj:
                        out.append(Refusal(verb, obj, words - (others - obj)))
    return out


def _subject_words(phrase: str) -> frozenset[str]:
    """The words of a subject phrase before a refusal ("which means that the flights"): the
    words after its last clause word."""
    cut = re.split(r"\b(?:which|that|means|so|therefore|thus|because|since|as|and|but)\b", phrase)
    tail = cut[-1]
    return frozenset(stem(w) for w in re.findall(r"[a-z']+", tail) if w not in _FUNCTION)


def contradicts(permission: Permission, refusal: Refusal) -> bool:
    """Whether `refusal` refuses what `permission` grants: a form of its verb (or a synonym's),
    every word of its object, and no word of what it leaves out in the refusal's clause."""
    if refusal.verb not in permission.forms or not permission.object <= refusal.object:
        return False
    return not (permission.restriction & refusal.clause)
