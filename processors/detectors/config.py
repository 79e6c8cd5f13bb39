"""Thresholds of every detector, one section each, all overridable from the config file."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from processors.detectors.signals import SignalsConfig


@dataclass
class StepRepetitionConfig:
    """FM-1.3 step repetition: the same call over and over, or a short cycle, unchanged."""

    # Run this detector.
    enabled: bool = True
    # Equivalent calls with unchanged results that make a repetition.
    min_repeats: int = 3
    # Two calls belong to one streak only if at most this many other tool calls lie between.
    max_gap_steps: int = 6
    # Cycles (A,B,A,B,...) of up to this many distinct calls are looked for...
    max_cycle_period: int = 3
    # ...and reported once the whole cycle has come round this many times unchanged.
    min_cycle_repeats: int = 3


@dataclass
class HistoryLossConfig:
    """FM-1.4 loss of conversation history: the context shrinks, or known facts are re-read."""

    # Run this detector.
    enabled: bool = True
    # The model's input shrinking by more than this fraction between two calls of one agent.
    shrink_ratio: float = 0.5
    # Only a context at least this large before the drop counts (small ones fluctuate).
    min_prior_input_tokens: int = 800
    # The same for message counts, when the spans report messages rather than tokens.
    min_prior_messages: int = 6
    # A read-only call identical to a successful one at least this many tool calls earlier,
    # with the same result and nothing changed since, means the agent lost what it had.
    reacquire_min_gap_steps: int = 8
    # Steps matching this (by name, agent or operation) summarize the context on purpose.
    summary_pattern: str = r"summar|compact|condens|compress|memory"
    # Distinct read calls remembered per run for the re-acquisition rule.
    max_remembered_calls: int = 2_048


@dataclass
class MissingVerificationConfig:
    """FM-3.2 no or incomplete verification: a change never checked before the run ends."""

    # Run this detector.
    enabled: bool = True
    # Read-only calls with no resource named in their arguments still verify a change when
    # their tool's name says it checks the system (alerts, health, status, ...).
    check_tool_pattern: str = r"alert|health|status|verify|check|probe|metric|monitor"
    # Unchecked changes reported per run (the last ones, when a run leaves more unchecked).
    max_findings_per_run: int = 5
    # Mutating calls remembered per run awaiting their check.
    max_tracked_mutations: int = 256


@dataclass
class TaskSpecificationConfig:
    """FM-1.1 disobey task specification: tools outside the task's list, changes in a read-only
    task, budgets overrun."""

    # Run this detector.
    enabled: bool = True
    # Defaults for every run; a run's own `mast.task.*` attributes take precedence.
    allowed_tools: list[str] = field(default_factory=list)
    # Every run is read-only unless it says otherwise (`mast.task.read_only`).
    read_only: bool = False
    # Budgets; 0 means none. Steps are model calls plus tool calls.
    max_steps: int = 0
    # Wall-clock budget of a run in seconds; 0 means none.
    max_seconds: float = 0.0
    # Token budget of a run (input plus output); 0 means none.
    max_tokens: int = 0
    # Findings reported per run; the rest are not reported.
    max_findings_per_run: int = 5


@dataclass
class RoleSpecificationConfig:
    """FM-1.2 disobey role specification: an agent uses a tool outside its role, or a read-only
    role changes something."""

    # Run this detector.
    enabled: bool = True
    # Agent name → the tools its role may use (a `mast.agent.allowed_tools` attribute on the
    # agent's span takes precedence).
    agent_tools: dict[str, list[str]] = field(default_factory=dict)
    # Agents whose role is to investigate, not to change anything (regular expressions on the
    # agent name; `mast.agent.read_only` on the agent's span also says so).
    read_only_agents: list[str] = field(default_factory=list)
    # Findings reported per run; the rest are not reported.
    max_findings_per_run: int = 5


@dataclass
class TerminationAwarenessConfig:
    """FM-1.5 unaware of termination conditions: limits hit, calls after the final answer or after
    success, ending in a loop."""

    # Run this detector.
    enabled: bool = True
    # Tool calls by the same agent after its final answer that show it did not stop.
    calls_after_final_answer: int = 1
    # Tool calls after a check showed the problem solved.
    calls_after_success: int = 3
    # Steps past the step budget (mast.task.max_steps) before the run counts as not stopping.
    steps_past_budget: int = 3
    # The run's last tool calls are all one repeated call: it ended inside a loop.
    final_loop_length: int = 3


@dataclass
class ConversationResetConfig:
    """FM-2.1 conversation reset: an agent's context falls back to its opening prompt."""

    # Run this detector.
    enabled: bool = True
    # The context must have grown by this many messages (or doubled in tokens) before a fall
    # back to the opening size counts as a reset.
    min_growth_messages: int = 3
    # "Back to the opening size": within this factor of the agent's first call.
    opening_tolerance: float = 1.15


@dataclass
class ClarificationConfig:
    """FM-2.2 fail to ask for clarification: a change right after an ambiguous result, or on a
    target no input named."""

    # Run this detector.
    enabled: bool = True
    # Also report changes to a resource no input named (task, user, tool results).
    check_unnamed_targets: bool = True


@dataclass
class DerailmentConfig:
    """FM-2.3 task derailment: tool calls in a row on resources unrelated to the task and its
    evidence."""

    # Run this detector.
    enabled: bool = True
    # Consecutive tool calls on resources unrelated to the task and the evidence so far.
    min_off_task_steps: int = 4


@dataclass
class WithholdingConfig:
    """FM-2.4 information withholding: after a hand-off, the receiver redoes the sender's call, or
    an error is not passed on."""

    # Run this detector.
    enabled: bool = True


@dataclass
class IgnoredInputConfig:
    """FM-2.5 ignored other agent's input: the receiver never acts on what the hand-off told it."""

    # Run this detector.
    enabled: bool = True
    # The receiver must have made at least this many tool calls for "never acted on it".
    min_receiver_calls: int = 2


@dataclass
class ReasoningActionConfig:
    """FM-2.6 reasoning-action mismatch: the model says one thing and the agent does another."""

    # Run this detector.
    enabled: bool = True
    # Findings reported per run; the rest are not reported.
    max_findings_per_run: int = 5
    # Observations a model may state only if a tool result showed them.
    observation_terms: list[str] = field(
        default_factory=lambda: [
            "CrashLoopBackOff",
            "OOMKilled",
            "ImagePullBackOff",
            "ErrImagePull",
            "Evicted",
            "NotReady",
            "connection refused",
            "out of memory",
            "disk full",
            "certificate expired",
        ]
    )


@dataclass
class PrematureTerminationConfig:
    """FM-3.1 premature termination: the run ends after a failure, with work announced, or without
    its deliverable."""

    # Run this detector.
    enabled: bool = True
    # When set, a run whose final answer does not match this is missing its deliverable
    # (for example "root cause" for incident triage).
    required_final_pattern: str = ""


@dataclass
class IncorrectVerificationConfig:
    """FM-3.3 incorrect verification: success declared while the last check shows trouble, or a
    check made too early."""

    # Run this detector.
    enabled: bool = True
    # A check sooner than this after the change may not see its effect yet.
    min_settle_seconds: float = 5.0


@dataclass
class DetectorsConfig:
    """Thresholds of each failure mode's detector, one section per detector."""

    signals: SignalsConfig = field(default_factory=SignalsConfig)
    task_specification: TaskSpecificationConfig = field(default_factory=TaskSpecificationConfig)
    role_specification: RoleSpecificationConfig = field(default_factory=RoleSpecificationConfig)
    step_repetition: StepRepetitionConfig = field(default_factory=StepRepetitionConfig)
    history_loss: HistoryLossConfig = field(default_factory=HistoryLossConfig)
    termination_awareness: TerminationAwarenessConfig = field(
        default_factory=TerminationAwarenessConfig
    )
    conversation_reset: ConversationResetConfig = field(default_factory=ConversationResetConfig)
    clarification: ClarificationConfig = field(default_factory=ClarificationConfig)
    derailment: DerailmentConfig = field(default_factory=DerailmentConfig)
    withholding: WithholdingConfig = field(default_factory=WithholdingConfig)
    ignored_input: IgnoredInputConfig = field(default_factory=IgnoredInputConfig)
    reasoning_action: ReasoningActionConfig = field(default_factory=ReasoningActionConfig)
    premature_termination: PrematureTerminationConfig = field(
        default_factory=PrematureTerminationConfig
    )
    missing_verification: MissingVerificationConfig = field(
        default_factory=MissingVerificationConfig
    )
    incorrect_verification: IncorrectVerificationConfig = field(
        default_factory=IncorrectVerificationConfig
    )

    def validate(self) -> None:
        self.signals.validate()
        for pattern in self.role_specification.read_only_agents:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"detectors.role_specification.read_only_agents: {pattern!r} is not a "
                    f"valid regular expression ({exc})"
                ) from exc
        if self.premature_termination.required_final_pattern:
            try:
                re.compile(self.premature_termination.required_final_pattern)
            except re.error as exc:
                raise ValueError(
                    f"detectors.premature_termination.required_final_pattern: invalid "
                    f"regular expression ({exc})"
                ) from exc
        rep = self.step_repetition
        if rep.min_repeats < 2:
            raise ValueError("detectors.step_repetition.min_repeats must be at least 2")
        if rep.max_gap_steps < 0:
            raise ValueError("detectors.step_repetition.max_gap_steps must not be negative")
        if rep.max_cycle_period < 2 and rep.max_cycle_period != 0:
            raise ValueError(
                "detectors.step_repetition.max_cycle_period must be 0 (off) or at least 2"
            )
        if rep.min_cycle_repeats < 2:
            raise ValueError("detectors.step_repetition.min_cycle_repeats must be at least 2")
        hist = self.history_loss
        if not 0 < hist.shrink_ratio < 1:
            raise ValueError("detectors.history_loss.shrink_ratio must be between 0 and 1")
        if hist.reacquire_min_gap_steps < 1 or hist.max_remembered_calls < 1:
            raise ValueError(
                "detectors.history_loss.reacquire_min_gap_steps and max_remembered_calls "
                "must be at least 1"
            )
        ver = self.missing_verification
        if ver.max_findings_per_run < 1 or ver.max_tracked_mutations < 1:
            raise ValueError(
                "detectors.missing_verification.max_findings_per_run and "
                "max_tracked_mutations must be at least 1"
            )
        for key, pattern in (
            ("history_loss.summary_pattern", hist.summary_pattern),
            ("missing_verification.check_tool_pattern", ver.check_tool_pattern),
        ):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"detectors.{key}: invalid regular expression ({exc})") from exc
