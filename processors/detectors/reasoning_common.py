"""FM-2.6 reasoning-action mismatch: what its rule modules share: reading numbers as values,
the totals of a JSON result's lists, a crude stem, the words around a span, and the signature
of the function that words a finding (it counts findings against the run's bound).

It stays here, beside the families' folders (reasoning_action/ holds FM-2.6's rules): FM-2.4
and FM-3.3 read numbers and sentences with it too."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from mast_otel.processors.detectors.base import json_doc
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

# Words a finding: (at, rule, confidence, message, evidence, values, run) -> findings (none
# once the run's bound is reached).
Emit = Callable[
    [Step | StepRef, str, float, str, list[Step | StepRef], dict[str, object], Run],
    list[Finding],
]

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_DIGIT_COMMA = re.compile(r"(?<=\d),(?=\d{3}\b)")
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


@lru_cache(maxsize=64)
def numbers(text: str) -> frozenset[float]:
    """Every number in `text`, as a value: "1,234.50" and "1234.5" are the same. The same
    text is read by several rules (a model's answer, a result seen by many runs): the last
    few are kept."""
    out = set()
    for match in _NUMBER.finditer(_DIGIT_COMMA.sub("", text)):
        try:
            out.add(round(float(match.group().replace(",", "")), 2))
        except ValueError:
            continue
    return frozenset(out)


def list_totals(text: str) -> set[float]:
    """For a JSON tool result: the total of each numeric field over the items of each list
    ("price" over the flights of a reservation, "amount" over the lines of an invoice), the
    totals a model tells without a calculator."""
    doc = json_doc(text)
    if doc is None:
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


def list_counts(text: str, most: int) -> set[int]:
    """For a JSON tool result: the lengths (2 to `most`) of its lists of objects, the counts
    a model multiplies by (two passengers, three flights)."""
    doc = json_doc(text)
    if doc is None:
        return set()
    out: set[int] = set()
    todo = [doc]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
            if 2 <= len(node) <= most and all(isinstance(i, dict) for i in node):
                out.add(len(node))
    return out


def stem(word: str) -> str:
    """A crude stem, enough to match "bags"/"baggage", "flights"/"flight", "cancelled"/
    "cancel" between a sentence and a tool's name."""
    word = word.lower()
    for suffix in ("gages", "gage", "ing", "ies", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("ll") else word


def around(text: str, start: int, end: int, width: int = 60) -> str:
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
