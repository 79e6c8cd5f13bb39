"""FM-3.3's `unavailable_option_offered`: the agent offers an item at the price of a class its own
read showed none left of.

A read (a search, a catalogue lookup) returned items that carry what is left of them and their
price, per class (`available_seats: {economy: 0, business: 5}` beside `prices: {economy: 179,
business: 306}`) or in all (`stock: 0` beside `price: 12`): the fields are found by name
(`availability_field_pattern`, `price_field_pattern`), the item by its id-shaped values (letters
and digits: `HAT088`, `SKU-12`). The agent then names the item to the user and, before the next
item it names (or a blank line, or 400 characters), quotes the price of a class with nothing
left (a price no class with some left has), or the total of that price and the same class's
price of the item it named just before (two legs, two parts of one offer). Unless it says beside
it that none is left (`unavailable_said_pattern`), it read the availability and offered what is
not there. One finding per run, at the reply, as the run goes; the latest read of an item is the
one that counts.

    Fires: `search_products {"query": "drill"}` returns DR-450 with `stock: {"12v": 14,
    "18v_kit": 0}` and `prices: {"12v": 89, "18v_kit": 149}`; the agent lists "1. DR-450
    Cordless drill, 18V kit: $149".
    Near miss: "DR-450 in 12V costs $89" (a class with stock left); "DR-450 as an 18V kit
    ($149) is sold out" (it says none is left); a later read of DR-450 showing two 18V kits
    left (the latest read counts).
"""

from __future__ import annotations

import re
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import json_doc, short
from mast_otel.processors.detectors.incorrect_verification.context import (
    IncorrectVerificationContext,
)
from mast_otel.processors.detectors.verification import figures
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

_READ = ActionKind.READ
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
# An item's name: an id-shaped value, letters and digits (not a date, a time or a word).
_ITEM_ID = re.compile(r"^(?=[\w-]*[a-z])(?=[\w-]*\d)[\w-]{3,40}$", re.IGNORECASE)
# A word of a reply that may name an item: a whole run of the characters of an item's name.
_TOKEN = re.compile(r"[\w-]+")
# Objects looked at in one result, and results longer than this are not read.
_MAX_NODES = 5000
_MAX_RESULT = 200_000
# What the agent says of an item runs to the next item it names, a blank line, or this many
# characters, whichever comes first.
_MAX_PART = 400
# Characters of a reply read for the items it names.
_MAX_REPLY = 20_000
_PARAGRAPH = re.compile(r"\n\s*\n")

# One item as last read: (the read, the availability field's name, class -> (left, price)).
Stock = tuple[StepRef, str, dict[str, tuple[float, float]]]


def _amounts(value: Any) -> dict[str, float] | None:
    """A field's numbers: a map of class -> number, or one number under the class ""."""
    if isinstance(value, bool):
        return {"": 1.0 if value else 0.0}
    if isinstance(value, int | float):
        number = _number(value)
        return None if number is None else {"": number}
    if isinstance(value, dict) and value:
        out = {}
        for key, item in value.items():
            number = None if isinstance(item, bool) else _number(item)
            if number is None:
                return None
            out[str(key)] = number
        return out
    return None


def _number(value: object) -> float | None:
    """An int or float as a float; None for another type or an int too large for a float."""
    if not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


class OfferedUnavailable:
    """Per run: the items read with what is left of them, and the replies that quote them."""

    __slots__ = ("context", "found", "items")

    def __init__(self, context: IncorrectVerificationContext) -> None:
        self.context = context
        # Item name (lowercase) -> (its name as read, its stock as last read).
        self.items: dict[str, tuple[str, Stock]] = {}
        self.found = False

    def observe(self, step: Step, run: Run) -> list[Finding]:
        if self.found:
            return []
        if step.kind is _TOOL and step.tool_name and not step.failed:
            self._read(step, run)
        elif step.kind is _LLM and step.output_text and self.items:
            return self._reply(step, run)
        return []

    def _read(self, step: Step, run: Run) -> None:
        context = self.context
        text = step.tool_result
        if len(text) > _MAX_RESULT:
            return
        doc = json_doc(text)
        if doc is None:
            return
        if context.classifier.classify(step.tool_name, step.tool_arguments).kind is not _READ:
            return
        assert context.availability_field is not None
        limit = context.config.max_tracked_records
        ref = run.ref(step)
        stack: list[Any] = [doc]
        seen = 0
        while stack and seen < _MAX_NODES:
            node = stack.pop()
            seen += 1
            if isinstance(node, list):
                stack.extend(node)
                continue
            if not isinstance(node, dict):
                continue
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
            stock = self._stock(node, ref)
            if stock is None:
                continue
            for value in node.values():
                if isinstance(value, str) and _ITEM_ID.match(value):
                    key = value.lower()
                    if key in self.items or len(self.items) < limit:
                        self.items[key] = (value, stock)

    def _stock(self, node: dict[str, Any], ref: StepRef) -> Stock | None:
        """The item's classes with what is left and their price, if `node` carries both."""
        context = self.context
        assert context.availability_field is not None
        left = price = None
        field = ""
        for name, value in node.items():
            name = str(name)
            if left is None and context.availability_field.search(name):
                left, field = _amounts(value), name
            elif price is None and context.price_field.search(name):
                price = _amounts(value)
        if not left or not price:
            return None
        classes = {k: (left[k], price[k]) for k in left.keys() & price.keys()}
        return (ref, field, classes) if classes else None

    def _reply(self, step: Step, run: Run) -> list[Finding]:
        text = step.output_text[:_MAX_REPLY]
        items = self.items
        # The items named, in order: each a whole word of the reply, matched without case.
        named = [
            (m.start(), key) for m in _TOKEN.finditer(text) if (key := m.group().lower()) in items
        ]
        said = self.context.unavailable_said
        least = self.context.config.min_figure
        if not named:
            return []
        ends = [at for at, _ in named[1:]] + [len(text)]
        parts = [
            _PARAGRAPH.split(text[at:end])[0][:_MAX_PART]
            for (at, _), end in zip(named, ends, strict=True)
        ]
        for i, (_, key) in enumerate(named):
            part = parts[i]
            if said.search(part):
                continue
            quoted = set(figures(part, least))
            if not quoted:
                continue
            name, (read, field, classes) = self.items[key]
            open_prices = {p for n, p in classes.values() if n > 0}
            for cls, (n, p) in classes.items():
                if n <= 0 and p in quoted and p not in open_prices:
                    return self._found(step, run, [name], cls, p, read, field, part, name)
            before = named[i - 1][1] if i else None
            if before is None or before == key or said.search(parts[i - 1]):
                continue
            name0, (read0, field0, classes0) = self.items[before]
            sums = {c: classes0[c][1] + classes[c][1] for c in classes0.keys() & classes.keys()}
            open_sums = {s for c, s in sums.items() if classes0[c][0] > 0 and classes[c][0] > 0}
            plain = open_prices | {p for n, p in classes0.values() if n > 0}
            for cls, total in sums.items():
                if total not in quoted or total in open_sums or total in plain:
                    continue
                if classes0[cls][0] <= 0:
                    return self._found(
                        step, run, [name0, name], cls, total, read0, field0, part, name0
                    )
                if classes[cls][0] <= 0:
                    return self._found(
                        step, run, [name0, name], cls, total, read, field, part, name
                    )
        return []

    def _found(
        self,
        step: Step,
        run: Run,
        names: list[str],
        cls: str,
        price: float,
        read: StepRef,
        field: str,
        part: str,
        empty: str,
    ) -> list[Finding]:
        self.found = True
        quoted = f"{price:g}"
        which = f" in {cls.replace('_', ' ')}" if cls else ""
        shown = f"{field}.{cls}" if cls else field
        # The line that quotes the price, else the whole part.
        line = next((ln for ln in part.splitlines() if price in figures(ln, 0)), part)
        said = short(" ".join(line.split()), 200)
        offer = " with ".join(names)
        return [
            self.context.report.finding(
                at=step,
                rule="unavailable_option_offered",
                confidence=0.7,
                message=(
                    f"the agent quoted {quoted} for {offer}{which} ({said!r}), but "
                    f"{read.tool_name} showed {shown} = 0 for {empty}: none is left to offer"
                ),
                evidence=[read, step],
                values={
                    "items": names,
                    "class": cls,
                    "price": price,
                    "unavailable": empty,
                    "field": field,
                    "said": said,
                },
                run=run,
            )
        ]
