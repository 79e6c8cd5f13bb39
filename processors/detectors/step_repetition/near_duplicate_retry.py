"""FM-1.3's rule `near_duplicate_retry`: a failing call retried with a detail changed and the
same failure each time.

`near_duplicate_retry`: a failing call retried with its arguments regenerated with small
differences (at most `near_duplicate_max_changed_fields` fields changed, or text arguments at
least `near_duplicate_text_similarity` alike) and the same failure each time (the errors equal
once ids and numbers are blanked), `near_duplicate_min_repeats` times, by one agent, each retry
at most `max_gap_steps` tool calls after the last: a retry loop that changes a detail and never
the approach. Successful calls whose results change (polling) are never near duplicates.

Fires: `create_ticket` with `owner_id` u-17, then u-18, then u-19, title and queue the same,
failing each time with "owner u-N cannot be assigned to queue billing": reported at the third.
A coding agent's `apply_patch` to src/cart.py reworded three times ("+a = 2", "+a = 2  # fix",
"+a = 2  # fixed"), each "Failed to find expected lines in src/cart.py".

Near miss: `create_ticket` retried with another owner and failing another way ("owner u-1
away", then "queue is full"): a new failure is a new attempt; polling `get_job_status` while
the state goes from "queued" to "done" (successful calls are never retries).
"""

from __future__ import annotations

import difflib
import json
import re
from collections import deque
from dataclasses import dataclass

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.step_repetition.context import StepRepetitionContext
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

_TOP_FIELD = re.compile(r"^\.?[^.\[]*")
_ID_LIKE = re.compile(r"[a-z0-9_.@-]*\d[a-z0-9_.@-]*")


@dataclass(slots=True)
class _Retry:
    """A failing call in a retry loop: its tool, arguments' fields, blanked error, where."""

    tool: str
    fields: dict[str, str] | str
    error: str
    index: int
    steps: list[StepRef]
    agent: str = ""
    reported: bool = False


class NearDuplicateRetry:
    """One run's recent failing calls, each the latest of its retry loop."""

    __slots__ = ("config", "report", "retries")

    def __init__(self, context: StepRepetitionContext) -> None:
        self.config = context.config
        self.report = context.report
        self.retries: deque[_Retry] = deque(maxlen=16)

    def failed(self, step: Step, ref: StepRef, index: int, run: Run) -> Finding | None:
        """A failing call (the tool call numbered `index`) that starts no streak of the same
        call: the finding when it completes a retry loop."""
        retry = self._join(step, ref, index)
        return None if retry is None else self._finding(step, retry, run)

    def _join(self, step: Step, ref: StepRef, index: int) -> _Retry | None:
        """Join a failing call to the retry loop it nearly repeats; the loop when it is due."""
        error = _blank_ids(step.error or step.tool_result)
        fields = _fields(step.tool_arguments)
        limit = self.config.max_gap_steps
        for retry in reversed(self.retries):
            if index - retry.index - 1 > limit:
                continue
            if retry.tool != step.tool_name or retry.error != error or retry.agent != step.agent:
                continue
            if not self._near(retry.fields, fields):
                continue
            retry.fields = fields
            retry.index = index
            retry.steps.append(ref)
            if not retry.reported and len(retry.steps) >= self.config.near_duplicate_min_repeats:
                retry.reported = True
                return retry
            return None
        self.retries.append(_Retry(step.tool_name, fields, error, index, [ref], step.agent))
        return None

    def _near(self, before: dict[str, str] | str, after: dict[str, str] | str) -> bool:
        if isinstance(before, dict) and isinstance(after, dict):
            # A field is an argument: a list of payment methods changed in two places is one
            # argument changed.
            changed = {
                _top_field(k) for k in before.keys() | after.keys() if before.get(k) != after.get(k)
            }
            return len(changed) <= self.config.near_duplicate_max_changed_fields
        if isinstance(before, str) and isinstance(after, str):
            ratio = difflib.SequenceMatcher(None, before[:2000], after[:2000]).ratio()
            return ratio >= self.config.near_duplicate_text_similarity
        return False

    def _finding(self, step: Step, retry: _Retry, run: Run) -> Finding:
        count = len(retry.steps)
        return self.report.finding(
            at=step,
            rule="near_duplicate_retry",
            confidence=0.75,
            message=(
                f"{step.tool_name} retried {count} times with nearly the same arguments and "
                f"the same failure: {short(step.error or step.tool_result, 120)}"
            ),
            evidence=retry.steps,
            values={
                "tool": step.tool_name,
                "arguments": short(step.tool_arguments),
                "retries": count,
                "threshold": self.config.near_duplicate_min_repeats,
                "error": short(step.error or step.tool_result),
            },
            run=run,
        )


def _top_field(path: str) -> str:
    match = _TOP_FIELD.match(path)
    return match[0] if match else path


def _blank_ids(text: str) -> str:
    """An error with ids, amounts and other words holding digits blanked."""
    return " ".join(_ID_LIKE.sub("#", text.lower()[:500]).split())


def _fields(arguments: str) -> dict[str, str] | str:
    """A call's arguments as leaf fields (`a.b[0].c` → value), or as normalized text."""
    try:
        parsed = json.loads(arguments) if arguments.strip()[:1] in ("{", "[") else None
    except (ValueError, RecursionError):
        parsed = None
    if parsed is None:
        return " ".join(arguments.lower().split())
    out: dict[str, str] = {}

    def walk(value: object, path: str, depth: int) -> None:
        if len(out) >= 256:
            return
        if isinstance(value, dict) and depth < 6:
            for key, item in value.items():
                walk(item, f"{path}.{key}", depth + 1)
        elif isinstance(value, list) and depth < 6:
            for position, item in enumerate(value):
                walk(item, f"{path}[{position}]", depth + 1)
        else:
            out[path] = " ".join(str(value).lower().split())

    walk(parsed, "", 0)
    return out
