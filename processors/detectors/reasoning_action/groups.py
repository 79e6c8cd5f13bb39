"""FM-2.6 reasoning-action mismatch: the price of a group told as the price of one member.

- `group_told_as_member`: a tool result holds a group of records (a list of objects nested in
  the result: the legs of a connection, the lines of an order), the model's words about that
  group (a line and the lines indented under it) name every member by its identifier and tell
  one amount, and that amount is a number of one member only, not the members' total: "HAT069
  & HAT011 - Price: $123", where $123 is HAT069's fare and the connection costs $300.
  Fires: a result's bundle of CAM-100 ($240) and LENS-35 ($180), told as "- CAM-100 with
  LENS-35" with "- Price: $240" indented under it.
  Near miss: the same bundle told at $420 (its total), or as "- CAM-100 ($240) and LENS-35
  ($180)" (several amounts show its parts); "CAM-100 and CAM-200 are in stock; the cheaper
  is $240." of a result that is a list of both: search hits side by side are alternatives.

A list at the top of a result is a list of alternatives (search hits), not a group: it is left
alone, as are words that tell several amounts (they show their parts)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mast_otel.processors.detectors.base import json_doc, short
from mast_otel.processors.detectors.reasoning_action.context import ReasoningActionContext
from mast_otel.processors.detectors.reasoning_common import Emit, numbers
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run

_ID = re.compile(r"(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{3,40}")
_MAX_GROUPS = 512
_MAX_NODES = 4000


@dataclass(frozen=True, slots=True)
class Group:
    """A group of records: each member's identifier and its numbers by field path."""

    ids: tuple[str, ...]
    values: tuple[dict[str, float], ...]


def _leaves(node: Any, path: str, out: dict[str, float]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            _leaves(value, f"{path}.{key}", out)
    elif isinstance(node, int | float) and not isinstance(node, bool):
        out[path] = round(float(node), 2)


def groups_of(text: str) -> list[Group]:
    """The groups of a JSON result: lists of two or more objects below its top level, each
    member with an identifier (a word with letters and digits) no other member holds."""
    doc = json_doc(text)
    if doc is None:
        return []
    out: list[Group] = []
    todo: list[tuple[Any, bool]] = [(doc, True)]
    seen = 0
    while todo and seen < _MAX_NODES:
        node, top = todo.pop()
        seen += 1
        if isinstance(node, dict):
            todo.extend((v, False) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            todo.extend((v, False) for v in node[:256] if isinstance(v, dict | list))
            members = [m for m in node if isinstance(m, dict)]
            if top or len(members) < 2 or len(members) != len(node) or len(members) > 8:
                continue
            strings = [
                {v for v in m.values() if isinstance(v, str) and _ID.fullmatch(v)} for m in members
            ]
            ids = []
            for i, own in enumerate(strings):
                others = set().union(*(s for j, s in enumerate(strings) if j != i))
                unique = sorted(own - others)
                if not unique:
                    break
                ids.append(unique[0])
            if len(ids) != len(members):
                continue
            values = []
            for m in members:
                leaves: dict[str, float] = {}
                _leaves(m, "", leaves)
                values.append(leaves)
            out.append(Group(tuple(ids), tuple(values)))
    return out


class Groups:
    """One run's groups of records read."""

    __slots__ = ("groups", "value")

    def __init__(self, context: ReasoningActionContext) -> None:
        self.value = context.amounts.value
        self.groups: dict[tuple[str, ...], Group] = {}

    def tool(self, step: Step) -> None:
        if self.value is None or step.failed or len(self.groups) >= _MAX_GROUPS:
            return
        for group in groups_of(step.tool_result):
            self.groups.setdefault(group.ids, group)

    def model(self, step: Step, run: Run, emit: Emit) -> list[Finding]:
        if not self.groups or self.value is None or not step.output_text:
            return []
        for block in _blocks(step.output_text[:8000]):
            amounts = [m.group() for m in self.value.finditer(block)]
            if len(amounts) != 1:
                continue
            told = numbers(amounts[0])
            if len(told) != 1:
                continue
            value = next(iter(told))
            lowered = block.lower()
            for group in self.groups.values():
                if not all(re.search(rf"\b{re.escape(i.lower())}\b", lowered) for i in group.ids):
                    continue
                holders = [
                    i for i, v in zip(group.ids, group.values, strict=True) if value in v.values()
                ]
                paths = {p for v in group.values for p, x in v.items() if x == value}
                totals = {round(sum(v.get(p, 0.0) for v in group.values), 2) for p in paths}
                if len(holders) != 1 or value in totals:
                    continue
                total = ", ".join(f"{t:g}" for t in sorted(totals))
                return emit(
                    step,
                    "group_told_as_member",
                    0.7,
                    f"the model told {amounts[0].strip()} for {' & '.join(group.ids)} "
                    f"({short(block.strip(), 120)!r}): that is {holders[0]}'s value alone; "
                    f"the group's total of that field is {total}",
                    [step],
                    {"said": short(block.strip()), "group": list(group.ids), "told": value},
                    run,
                )
        return []


def _blocks(text: str) -> list[str]:
    """Each line with the lines indented under it."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        block = [line]
        for below in lines[i + 1 :]:
            if not below.strip() or len(below) - len(below.lstrip()) <= indent:
                break
            block.append(below)
        out.append("\n".join(block))
    return out
