"""The MAST taxonomy and the `mast.*` attribute names: the one place that spells them.

`schemas/conventions.md` documents the attributes for agent authors.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Mode:
    code: str
    name: str
    category: str
    intervention: str
    # The study's static prior: does this mode separate failed runs from successful ones?
    # Used until enough outcomes exist to measure it per model (processors/scoring.py);
    # storage writes it as `Fatal` on each finding.
    fatal_prior: bool = False


_SPEC = "FC1 specification and system design"
_ALIGN = "FC2 inter-agent misalignment"
_VERIFY = "FC3 task verification and termination"

_STOP_RULE = "Take termination out of the model: a loop detector or step budget outside the agent."
_VERIFY_FIX = (
    "Externalize verification: require tool evidence (cleared alert, changed resource state) "
    "before the agent may declare success."
)
_CONTEXT_FIX = "Context hygiene: a summarizer or state-manager agent that keeps what was learnt."
_CLARIFY_FIX = "Treat ambiguity as a branch: clarify, or stay read-only until the target is clear."
_SPEC_FIX = "Enforce the task's policy outside the model: tool allow-lists and read-only guards."

MODES: tuple[Mode, ...] = (
    Mode("FM-1.1", "Disobey task specification", _SPEC, _SPEC_FIX),
    Mode("FM-1.2", "Disobey role specification", _SPEC, _SPEC_FIX),
    Mode("FM-1.3", "Step repetition", _SPEC, _STOP_RULE),
    Mode("FM-1.4", "Loss of conversation history", _SPEC, _CONTEXT_FIX, fatal_prior=True),
    Mode("FM-1.5", "Unaware of termination conditions", _SPEC, _STOP_RULE, fatal_prior=True),
    Mode("FM-2.1", "Conversation reset", _ALIGN, _CONTEXT_FIX),
    Mode("FM-2.2", "Fail to ask for clarification", _ALIGN, _CLARIFY_FIX, fatal_prior=True),
    Mode("FM-2.3", "Task derailment", _ALIGN, _SPEC_FIX),
    Mode("FM-2.4", "Information withholding", _ALIGN, _CONTEXT_FIX),
    Mode("FM-2.5", "Ignored other agent's input", _ALIGN, _CONTEXT_FIX),
    Mode("FM-2.6", "Reasoning-action mismatch", _ALIGN, _VERIFY_FIX, fatal_prior=True),
    Mode("FM-3.1", "Premature termination", _VERIFY, _STOP_RULE, fatal_prior=True),
    Mode("FM-3.2", "No or incomplete verification", _VERIFY, _VERIFY_FIX),
    Mode("FM-3.3", "Incorrect verification", _VERIFY, _VERIFY_FIX, fatal_prior=True),
)
MODE_CODES: tuple[str, ...] = tuple(m.code for m in MODES)
# The study (ITBench SRE traces, three models): these modes appear far more often in failed
# than in successful runs (FM-3.3 +52% for Gemini-3-Flash; FM-3.1 +46% and FM-1.5 +43% for
# Kimi-K2; FM-2.6 in 92-94% of failed runs; FM-1.4 and FM-2.2 with cascading failures).
FATAL_PRIOR: frozenset[str] = frozenset(m.code for m in MODES if m.fatal_prior)
MODES_BY_CODE: dict[str, Mode] = {m.code: m for m in MODES}
FATAL_PRIOR_CODES: tuple[str, ...] = tuple(sorted(FATAL_PRIOR))


def fatal_prior(code: str) -> bool:
    """Whether a mode counts as fatal before outcomes say otherwise (unknown codes: no)."""
    mode = MODES_BY_CODE.get(code)
    return bool(mode and mode.fatal_prior)


# mast.* span attributes (set by the agent or its harness, usually on the run's root span).
TASK_DESCRIPTION = "mast.task.description"
TASK_READ_ONLY = "mast.task.read_only"
TASK_ALLOWED_TOOLS = "mast.task.allowed_tools"
TASK_MAX_STEPS = "mast.task.max_steps"
AGENT_ALLOWED_TOOLS = "mast.agent.allowed_tools"
AGENT_READ_ONLY = "mast.agent.read_only"
RUN_OUTCOME = "mast.run.outcome"
RUN_SCORE = "mast.run.score"
# Any span carrying mast.run.end=true closes its run explicitly (no need to wait for the root).
RUN_END = "mast.run.end"

# Words that plainly say whether a run succeeded, compared lower-cased: one vocabulary for every
# way an outcome arrives (`mast.run.outcome`, an importer's outcome field, the label of a GenAI
# evaluation, `gen_ai.evaluation.score.label`).
RUN_SUCCESS_WORDS: frozenset[str] = frozenset(
    {"success", "succeeded", "successful", "pass", "passed", "correct", "resolved"}
)
RUN_FAILURE_WORDS: frozenset[str] = frozenset(
    {"failure", "failed", "fail", "incorrect", "unresolved"}
)
# Yes/no words: an outcome only where the value is the run's outcome itself (`mast.run.outcome`,
# an importer's outcome field). An evaluation's label answers that evaluation's own question
# ("toxic: false", "hallucination: true"), so there they say nothing about the run.
RUN_SUCCESS_BOOLEANS: frozenset[str] = frozenset({"ok", "true"})
RUN_FAILURE_BOOLEANS: frozenset[str] = frozenset({"error", "false"})


def outcome_of(word: str, *, booleans: bool = True) -> str:
    """`success` or `failure` for a word of the outcome vocabulary, else "" (unknown); yes/no
    words count only with `booleans` (see RUN_SUCCESS_BOOLEANS)."""
    word = word.strip().lower()
    if word in RUN_SUCCESS_WORDS or (booleans and word in RUN_SUCCESS_BOOLEANS):
        return "success"
    if word in RUN_FAILURE_WORDS or (booleans and word in RUN_FAILURE_BOOLEANS):
        return "failure"
    return ""


# The value type of each run attribute. Stores keep attribute values as text (as the
# OpenTelemetry Collector's ClickHouse exporter does); re-reading stored spans restores these.
RUN_ATTRIBUTE_TYPES: dict[str, type] = {
    TASK_DESCRIPTION: str,
    TASK_READ_ONLY: bool,
    TASK_ALLOWED_TOOLS: list,
    TASK_MAX_STEPS: int,
    AGENT_ALLOWED_TOOLS: list,
    AGENT_READ_ONLY: bool,
    RUN_OUTCOME: str,
    RUN_SCORE: float,
    RUN_END: bool,
}

# Written by the collector on a span it had to cut (limits.*): how many attributes, events or
# links past the configured count were dropped.
DROPPED_ATTRIBUTES = "mast.dropped.attributes"
DROPPED_EVENTS = "mast.dropped.events"
DROPPED_LINKS = "mast.dropped.links"

RUN_ATTRIBUTES: frozenset[str] = frozenset(
    {
        TASK_DESCRIPTION,
        TASK_READ_ONLY,
        TASK_ALLOWED_TOOLS,
        TASK_MAX_STEPS,
        AGENT_ALLOWED_TOOLS,
        AGENT_READ_ONLY,
        RUN_OUTCOME,
        RUN_SCORE,
        RUN_END,
    }
)
