"""FM-2.6 reasoning-action mismatch: a call against the words right before it, and a last
announcement nothing followed.

- `other_tool_executed`: the model asked for one tool and the agent ran another.
  Fires: "Listing alerts." asking for `get_alerts`, and the next call is `kubectl`.
  Near miss: the same words followed by `get_alerts`.
- `verb_mismatch`: the reasoning says it will only look (check, inspect, describe, ...) and
  the call changes the system; reasoning that names the call's own verb ("I'll send a code"
  before `send_code`) said it would change.
  Fires: "Let me check the checkout deployment's configuration first." and then `kubectl set
  resources deployment/checkout ...`; "Let me check your account." and then
  `send_verification_code`.
  Near miss: "To verify it's you, I'll send a one-time code ..." before
  `send_verification_code`: "verify" only looks, but "send" is the call's own verb, so the
  words said it would act.
- `target_mismatch`: the reasoning right before a tool call names resources, and the call
  acts on others (none of the named ones among its targets).
  Fires: after a call on deployment `payments`, "I will look at the payments deployment
  logs." and then `kubectl logs deployment/cart -n shop`.
  Near miss: "I will list the checkout pods in shop." and then `kubectl get pods -n shop`:
  the call acts on what the words name.
- `announced_then_stopped`: the run's last model output announces a tool call ("I will run
  ...") and asks for none, and nothing follows.
  Fires: "Patched. Now I will run apply_patch on the tests." as the run's last words.
  Near miss: "R-1 is cancelled. Let me know about cancel_booking." ("let me know" asks the
  user, it announces nothing); "I will also check cancel_booking's receipt." followed by
  the user's "No need, thanks. Bye!": the user had the last word, the agent did not stop."""

from __future__ import annotations

import re

from mast_otel.processors.classify import ActionKind, name_words
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.reasoning_common import SENTENCE, Emit
from mast_otel.processors.detectors.signals import Signals, words
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import Run

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
_LET_ME_KNOW = re.compile(r"\blet me know\b", re.IGNORECASE)


def compare(
    reasoning: Step,
    step: Step,
    kind: ActionKind,
    targets: frozenset[str],
    names: set[str],
    run: Run,
    emit: Emit,
    change_verbs: frozenset[str] = frozenset(),
) -> list[Finding]:
    """The call that followed a model output with tool calls, against that output:
    `other_tool_executed`, `verb_mismatch`, `target_mismatch`. `change_verbs`: the verbs of
    tool names that change something."""
    text = reasoning.output_text
    requested = {c.name for c in reasoning.tool_calls if c.name}
    if requested and step.tool_name not in requested:
        return emit(
            step,
            "other_tool_executed",
            0.8,
            f"the model asked for {', '.join(sorted(requested))} and the agent ran "
            f"{step.tool_name}",
            [reasoning, step],
            {"requested": sorted(requested), "executed": step.tool_name},
            run,
        )
    if (
        kind is _MUTATING
        and _READ_ONLY_INTENT.search(text)
        and not _CHANGE_INTENT.search(text)
        and not _says_own_verb(text, step.tool_name, change_verbs)
    ):
        return emit(
            step,
            "verb_mismatch",
            0.8,
            f"the model said it would only look ({short(text, 100)!r}), and "
            f"{step.tool_name}({short(step.tool_arguments, 100)}) changed the system",
            [reasoning, step],
            {"said": short(text), "call": short(step.tool_arguments)},
            run,
        )
    said = words(text) & names
    if said and targets and not (targets & said) and not (targets & words(text)):
        return emit(
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


def _says_own_verb(text: str, tool_name: str, change_verbs: frozenset[str]) -> bool:
    """The text names a verb of the call's name that changes something (`send` of
    `send_verification_code`, in any regular form: sends, sending, ...)."""
    verbs = [w for w in name_words(tool_name) if w in change_verbs]
    return any(
        re.search(rf"\b{re.escape(verb)}(?:s|es|d|ed|ing)?\b", text, re.IGNORECASE)
        for verb in verbs
    )


def announced(run: Run, names: set[str], signals: Signals, emit: Emit) -> list[Finding]:
    """`announced_then_stopped`: the run's last model output announces a tool call or a
    resource of the run ("I will run ...") and asks for none, and nothing follows."""
    last = next((s for s in reversed(run.window) if s.kind in (_LLM, _TOOL, _HUMAN)), None)
    if last is None or last.kind is not _LLM or last.tool_calls:
        return []  # a user turn after it: the user had the word, the agent did not stop
    text = last.output_text
    # The sentences that announce something ("let me know" asks the user, announces
    # nothing), and the tools or resources of the run they name.
    announcing = [
        sentence
        for sentence in SENTENCE.split(text)
        if signals.announce.found(_LET_ME_KNOW.sub("", sentence))
    ]
    if not announcing:
        return []
    mentioned = words(" ".join(announcing)) & (
        names | {s.tool_name.lower() for s in run.window if s.tool_name}
    )
    if not mentioned:
        return []
    return emit(
        last,
        "announced_then_stopped",
        0.65,
        f"the model announced {', '.join(sorted(mentioned))} "
        f"({short(announcing[0].strip(), 120)!r}) and the run ended without it",
        [last],
        {"said": short(text), "named": sorted(mentioned)},
        run,
    )
