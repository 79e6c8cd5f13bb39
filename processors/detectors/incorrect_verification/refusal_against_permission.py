"""FM-3.3's `refusal_against_permission`: the agent tells the user an action is not allowed that
the run's own instructions grant.

The instructions (`mast.task.description`) grant an action without condition ("The user can
modify passengers but cannot modify the number of passengers"; "all reservations, including
basic economy, can change cabin without changing the flights"; permission_text.py reads them),
and the agent tells the user that very action on that object is not allowed ("changing passenger
names is not allowed"; "basic economy ... cannot be modified to change flights or cabin class"):
a form of the granted verb or of a synonym (`permission_verb_synonyms`), every word of the
granted object, and, in the refusal's clause, no word of what the permission leaves out
("number": the agent refusing to change the number of passengers is right). It read its
instructions and concluded the opposite. A refusal after a failed call (an error status, or
`failure_result_pattern`) that named the object or the action is the system's word, not the
agent's conclusion: no finding. Decided when the run closes (the instructions come with the
run); one finding per run, at the first such refusal.

    Fires: a workspace admin bot's instructions say "Admins can rename workspaces but cannot
    delete them."; the bot tells the user "I'm sorry, but workspaces cannot be renamed once
    created."
    Near miss: "Workspaces cannot be deleted, only renamed." (what the grant excepts); "The
    billing email cannot be updated on a monthly plan." against "if the plan is annual, the
    admin can update the billing email" (a grant under a condition); the same refusal after
    `rename_workspace` failed with "Error: rename_workspace not permitted while a migration
    runs" (the system's word).
"""

from __future__ import annotations

import re
from functools import lru_cache

from mast_otel.processors import conventions
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.incorrect_verification.context import (
    IncorrectVerificationContext,
)
from mast_otel.processors.detectors.permission_text import (
    Permission,
    Refusal,
    contradicts,
    permissions,
    refusals,
    stem,
)
from mast_otel.processors.detectors.reasoning_common import SENTENCE
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_WORD = re.compile(r"[a-z]+")
# Refusing sentences kept per run, and the text of a reply and of an error read.
_MAX_CANDIDATES = 16
_TEXT_CHARS = 4_000
_ERROR_CHARS = 1_000
# Distinct words of failed calls remembered per run; past it, later failures add none.
_MAX_FAILED_WORDS = 4_096


class RefusedPermissions:
    """Per run: the agent's refusing sentences, and the words of the calls that failed before
    each."""

    __slots__ = ("candidates", "context", "failed_words")

    def __init__(self, context: IncorrectVerificationContext) -> None:
        self.context = context
        # The stemmed words of every failed call so far: its tool's name and its error.
        self.failed_words: frozenset[str] = frozenset()
        # (the reply, the sentence, its refusals, the failed calls' words before it)
        self.candidates: list[tuple[StepRef, str, list[Refusal], frozenset[str]]] = []

    def observe(self, step: Step, run: Run) -> None:
        if len(self.candidates) >= _MAX_CANDIDATES:
            return  # no more refusals are kept: the failed calls after them do not matter
        if step.kind is _TOOL and step.tool_name:
            if len(self.failed_words) >= _MAX_FAILED_WORDS:
                return
            result = (step.tool_result or step.error)[:_ERROR_CHARS]
            failure = self.context.failure_result
            if step.failed or (failure is not None and failure.search(result)):
                text = f"{step.tool_name.replace('_', ' ')} {result}".lower()
                words = {stem(w) for w in _WORD.findall(text)}
                if not words <= self.failed_words:
                    self.failed_words |= words
        elif step.kind is _LLM and step.output_text:
            ref: StepRef | None = None
            for sentence in SENTENCE.split(step.output_text[:_TEXT_CHARS]):
                found = refusals(sentence)
                if found and len(self.candidates) < _MAX_CANDIDATES:
                    ref = ref or run.ref(step)
                    self.candidates.append((ref, sentence.strip(), found, self.failed_words))

    def close(self, run: Run) -> list[Finding]:
        if not self.candidates:
            return []
        instructions = run.attributes.get(conventions.TASK_DESCRIPTION)
        if not isinstance(instructions, str) or not instructions:
            return []
        synonyms = tuple(tuple(g.split()) for g in self.context.config.permission_verb_synonyms)
        granted = _permissions(instructions, synonyms)
        for reply, sentence, found, failed in self.candidates:
            for refusal in found:
                for permission in granted:
                    if contradicts(permission, refusal) and not _told_by_error(permission, failed):
                        return [self._finding(reply, sentence, refusal, permission, run)]
        return []

    def _finding(
        self, reply: StepRef, sentence: str, refusal: Refusal, permission: Permission, run: Run
    ) -> Finding:
        said, grant = short(sentence, 240), short(permission.text, 240)
        action = f"{permission.verb} {' '.join(sorted(permission.object))}"
        return self.context.report.finding(
            at=reply,
            rule="refusal_against_permission",
            confidence=0.7,
            message=(
                f"the agent told the user {said!r}, refusing to {action}, while its instructions "
                f"grant it: {grant!r}"
                + (
                    f"; the refusal does not name what the grant excepts "
                    f"({', '.join(sorted(permission.restriction))})"
                    if permission.restriction
                    else ""
                )
            ),
            evidence=[reply],
            values={
                "said": said,
                "refused_verb": refusal.verb,
                "refused_object": sorted(refusal.object),
                "permission": grant,
                "restriction": sorted(permission.restriction),
            },
            run=run,
        )


@lru_cache(maxsize=16)
def _permissions(
    instructions: str, synonyms: tuple[tuple[str, ...], ...]
) -> tuple[Permission, ...]:
    """The permissions of a run's instructions (the same text in every run of an agent)."""
    return tuple(permissions(instructions, synonyms))


def _told_by_error(permission: Permission, failed: frozenset[str]) -> bool:
    """Whether a call that failed before the refusal named the permission's object or verb."""
    return bool(failed & (permission.object | permission.forms))
