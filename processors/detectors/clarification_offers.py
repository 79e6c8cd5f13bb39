"""What FM-2.2's `unasked_choice` reads in a run: the tokens of what was said, the offers a
tool result lists (identifiers of one kind, or the keys of one object side by side) with the
other values of the object that holds each (a card's last four digits), a call's string
arguments, and the kinds of offer the run's instructions allow for one kind of change."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from mast_otel.processors import conventions
from mast_otel.processors.classify import name_words
from mast_otel.processors.detectors.base import json_doc

_TOKEN = re.compile(r"[a-z0-9][a-z0-9_.-]*[a-z0-9]|[a-z0-9]", re.IGNORECASE)
DIGITS = re.compile(r"\d{4,}")


# What several detectors read of the same texts (a user's message is the input of every
# model call until the next; FM-1.1 and FM-2.2 both read each result's offers) is computed
# once per text and shared, immutable, for the last few texts.


@lru_cache(maxsize=64)
def tokens(text: str) -> frozenset[str]:
    """Lower-cased tokens of a text (ids kept whole: "credit_card_7815826"), and its runs of
    four or more digits ("ending in 7815")."""
    return frozenset(map(str.lower, _TOKEN.findall(text))).union(DIGITS.findall(text))


@lru_cache(maxsize=16)
def offers_in(text: str, choice: re.Pattern[str]) -> tuple[tuple[str, str], ...]:
    """(kind, identifier) of every identifier (`choice`) in a text, lower-cased."""
    return tuple((m.group("kind").lower(), m.group().lower()) for m in choice.finditer(text))


@lru_cache(maxsize=16)
def objects_holding(text: str, choice: re.Pattern[str]) -> tuple[tuple[str, frozenset[str]], ...]:
    """For a JSON result: each identifier that is a value of an object, with the object's
    other scalar values (lower-cased, three characters or more)."""
    doc = json_doc(text)
    if doc is None:
        return ()
    out: list[tuple[str, frozenset[str]]] = []
    todo = [doc]
    while todo and len(out) < 1000:
        node = todo.pop()
        if isinstance(node, list):
            todo.extend(node)
        elif isinstance(node, dict):
            scalars = [
                str(v).lower()
                for v in node.values()
                if isinstance(v, str | int | float) and not isinstance(v, bool)
            ]
            for value in scalars:
                if choice.fullmatch(value):
                    others = frozenset({s for s in scalars if s != value and len(s) >= 3})
                    out.append((value, others))
            todo.extend(v for v in node.values() if isinstance(v, dict | list))
    return tuple(out)


def keyed_side_by_side(text: str, choice: re.Pattern[str]) -> list[set[str]]:
    """For a JSON result: the identifiers that are the keys of one object (two or more),
    lower-cased: `{"credit_card_1": {...}, "gift_card_2": {...}}` lists two offers."""
    doc = json_doc(text)
    if doc is None:
        return []
    out: list[set[str]] = []
    todo = [doc]
    while todo and len(out) < 1000:
        node = todo.pop()
        if isinstance(node, list):
            todo.extend(node)
        elif isinstance(node, dict):
            keyed = {str(k).lower() for k in node if choice.fullmatch(str(k))}
            if len(keyed) >= 2:
                out.append(keyed)
            todo.extend(v for v in node.values() if isinstance(v, dict | list))
    return out


def string_arguments(arguments: str) -> list[tuple[str, str]]:
    """(name, value) of every string value in a call's JSON arguments, nested ones included."""
    try:
        doc = json.loads(arguments) if arguments else None
    except (ValueError, RecursionError):
        return []
    out: list[tuple[str, str]] = []
    todo: list[tuple[str, Any]] = [("", doc)]
    while todo and len(out) < 200:
        key, node = todo.pop(0)
        if isinstance(node, dict):
            todo.extend((str(k), v) for k, v in node.items())
        elif isinstance(node, list):
            todo.extend((key, v) for v in node)
        elif isinstance(node, str) and key:
            out.append((key, node))
    return out


_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


def _stem(word: str) -> str:
    """A word without its plural ending: "cards" and "card", "flights" and "flight"."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def argument_words(argument: str) -> set[str]:
    """The words of an argument's name but `id` (`payment_id` is a payment), stemmed."""
    return {_stem(w) for w in _WORD.findall(argument.lower())} - {"id", "ids"}


def sentence_words(text: str) -> list[tuple[str, set[str]]]:
    """Each sentence of a text, lower-cased, with its words stemmed."""
    out = []
    for sentence in _SENTENCE_END.split(text[:20_000].lower()):
        if sentence.strip():
            out.append((sentence, {_stem(w) for w in _WORD.findall(sentence)}))
    return out


@lru_cache(maxsize=64)
def kind_words(kind: str) -> tuple[str, ...]:
    """The words of an offer's kind (`gift_card` gives gift, card), stemmed."""
    return tuple(_stem(w) for w in _WORD.findall(kind.lower()))


def kind_of(choice: re.Pattern[str] | None, value: str) -> str:
    """The kind of an identifier (`gift_card` of `gift_card_7815826`), lower-cased."""
    match = choice.fullmatch(value) if choice is not None else None
    return match.group("kind").lower() if match else ""


def instructions_of(attributes: dict[str, Any]) -> str | None:
    """The run's instructions (`mast.task.description`), once known."""
    text = attributes.get(conventions.TASK_DESCRIPTION)
    return text if isinstance(text, str) else None


def allowed_kinds(instructions: str, tool_name: str, argument: str, kinds: set[str]) -> set[str]:
    """The kinds of offer (of `kinds`) the run's instructions allow for this tool's argument:
    those named by the sentences that name both the thing the tool changes (the last word of
    its name: `update_order_items` changes items) and the argument (the words of its name but
    `id`: `payment_id` is a payment), and at least one of `kinds`. Empty when no sentence does,
    or when the tool's name is one word: then the instructions restrict nothing.

    "Payment: if the flights are changed, the user needs to provide one gift card or credit
    card" allows `gift_card` and `credit_card` as the `payment_id` of
    `update_reservation_flights`, not `certificate`."""
    words = name_words(tool_name)
    subject = argument_words(argument)
    if len(words) < 2 or not subject or not instructions or not kinds:
        return set()
    thing = _stem(words[-1])
    wanted = {kind: kind_words(kind) for kind in kinds}
    allowed: set[str] = set()
    for said in _sentence_stems(instructions):
        if thing not in said or not subject <= said:
            continue
        named = {kind for kind, parts in wanted.items() if parts and all(p in said for p in parts)}
        allowed |= named
    return allowed


@lru_cache(maxsize=8)
def _sentence_stems(instructions: str) -> tuple[frozenset[str], ...]:
    """The stemmed words of each sentence of a run's instructions (the same for every change
    a run makes, and for the runs of one deployment)."""
    return tuple(
        frozenset({_stem(w) for w in _WORD.findall(sentence.lower())})
        for sentence in _SENTENCE_END.split(instructions[:100_000])
    )


def named_by_alias(
    value: str, offers: set[str], aliases: dict[str, set[str]], said: set[str]
) -> bool:
    """Whether the user or the agent said a value of the object holding `value` that no
    other offer of its kind shares (its last four digits, its own amount)."""
    mine = aliases.get(value, set())
    if not mine:
        return False
    shared = set().union(*(aliases.get(o, set()) for o in offers if o != value))
    return any(a in said for a in mine - shared)


def learn_offers(
    result: str,
    choice: re.Pattern[str],
    offered: dict[str, set[str]],
    aliases: dict[str, set[str]],
    siblings: dict[str, set[str]],
    keyed: bool,
    limit: int,
) -> None:
    """Add a result's offers: its identifiers by kind, the other values of the object holding
    each (`aliases`), and (with `keyed`) the identifiers listed side by side as keys of one
    object (`siblings`). Nothing past `limit` kinds or siblings."""
    if len(offered) >= limit:
        return
    for kind, value in offers_in(result[:100_000], choice):
        offered.setdefault(kind, set()).add(value)
    for value, others in objects_holding(result[:100_000], choice):
        aliases.setdefault(value, set()).update(others)
    if keyed:
        for group in keyed_side_by_side(result[:100_000], choice):
            for value in group:
                if len(siblings) < limit:
                    siblings.setdefault(value, set()).update(group - {value})
