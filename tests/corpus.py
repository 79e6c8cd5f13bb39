"""The scenario corpus: agent runs at work, each labelled with the MAST modes it carries.

Every mode has positives, and near misses that must stay silent. Runs are produced by the
scripted agent (collector/demo/agent.py) through the real OpenTelemetry SDK, in every span
dialect the collector reads (see DIALECTS). Labels say what a careful reader of the run would
mark, not what the detectors happen to say.
"""

from __future__ import annotations

from mast_otel.collector.demo.agent import (
    ALERTS,
    DESCRIBE,
    FIX,
    LOGS,
    PODS,
    RESTART,
    Act,
    Scenario,
    final,
    kubectl,
)
from mast_otel.collector.demo.agent import (
    SCENARIOS as DEMO_SCENARIOS,
)
from mast_otel.processors import conventions

DONE = final("Raised memory limit; alert cleared.")
DELETE_POD = kubectl("kubectl delete pod checkout-1f7c -n shop")
FIND = Act("tool", tool="find_deployment", arguments=(("name", "checkout"),))
REMEDIATOR = "remediator"
GOOD_BRIEF = (
    "checkout in shop is OOMKilled at 64Mi (from its logs). Raise the memory limit of "
    "deployment/checkout in shop and verify the pods."
)
READ_ONLY_TRIAGE = (("sre-agent", ((conventions.AGENT_READ_ONLY, True),)),)


def handoff(text: str, target: str = REMEDIATOR) -> Act:
    return Act("handoff", target=target, text=text)


def billing(command: str) -> Act:
    return kubectl(command)


DERAIL = (
    billing("kubectl get pods -n billing"),
    billing("kubectl describe deployment payments -n billing"),
    billing("kubectl logs deployment/payments -n billing"),
    billing("kubectl get configmap payments-config -n billing"),
)

CORPUS: tuple[Scenario, ...] = (
    *DEMO_SCENARIOS,
    # FM-1.1 -----------------------------------------------------------------------------------
    Scenario(
        "read_only_task_changed",
        "a read-only triage task, and the agent changes the deployment anyway",
        ("FM-1.1",),
        (ALERTS, PODS, LOGS, FIX, PODS, ALERTS, DONE),
        "failure",
        attributes=((conventions.TASK_READ_ONLY, True),),
    ),
    Scenario(
        "tool_outside_task",
        "uses a tool the task does not allow",
        ("FM-1.1",),
        (ALERTS, FIND, PODS, LOGS, final("Diagnosis: checkout is OOMKilled at 64Mi.")),
        "success",
        attributes=((conventions.TASK_ALLOWED_TOOLS, ("kubectl", "get_alerts")),),
    ),
    Scenario(
        "read_only_task_respected",
        "near miss: a read-only task that only reads",
        (),
        (ALERTS, PODS, LOGS, DESCRIBE, final("Diagnosis: checkout is OOMKilled at 64Mi.")),
        "success",
        attributes=(
            (conventions.TASK_READ_ONLY, True),
            (conventions.TASK_ALLOWED_TOOLS, ("kubectl", "get_alerts")),
            (conventions.TASK_MAX_STEPS, 30),
        ),
    ),
    Scenario(
        "over_step_budget",
        "passes its step budget by a little",
        ("FM-1.1",),
        (ALERTS, PODS, DESCRIBE, LOGS, FIX, PODS, DONE),
        "success",
        attributes=((conventions.TASK_MAX_STEPS, 12),),
    ),
    # FM-1.2 -----------------------------------------------------------------------------------
    Scenario(
        "triage_role_remediates",
        "a read-only triage agent applies the fix itself",
        ("FM-1.2",),
        (ALERTS, PODS, LOGS, FIX, PODS, ALERTS, DONE),
        "success",
        agent_attributes=READ_ONLY_TRIAGE,
    ),
    Scenario(
        "crew_by_the_book",
        "near miss: triage hands a full brief to the remediator, which fixes and verifies",
        (),
        (ALERTS, PODS, LOGS, handoff(GOOD_BRIEF), FIX, PODS, ALERTS, DONE),
        "success",
        agent_attributes=READ_ONLY_TRIAGE,
    ),
    # FM-1.5 -----------------------------------------------------------------------------------
    Scenario(
        "loop_until_turn_limit",
        "lists pods until the framework stops it at its turn limit",
        ("FM-1.3", "FM-1.5"),
        (
            ALERTS,
            PODS,
            PODS,
            PODS,
            PODS,
            PODS,
            Act("limit", text="MaxTurnsExceeded: max turns (12)"),
        ),
        "failure",
    ),
    Scenario(
        "keeps_going_after_fixed",
        "the check shows the fix worked, and it keeps poking around",
        ("FM-1.5",),
        (ALERTS, PODS, LOGS, FIX, PODS, DESCRIBE, LOGS, ALERTS, DONE),
        "success",
    ),
    Scenario(
        "acts_after_final_answer",
        "gives its final answer, then calls more tools",
        ("FM-1.5",),
        (ALERTS, PODS, LOGS, FIX, PODS, DONE, ALERTS, PODS),
        "success",
    ),
    Scenario(
        "far_over_step_budget",
        "ignores its step budget and goes on well past it",
        ("FM-1.1", "FM-1.5"),
        (ALERTS, PODS, DESCRIBE, LOGS, FIX, PODS, ALERTS, DONE),
        "success",
        attributes=((conventions.TASK_MAX_STEPS, 8),),
    ),
    # FM-2.1 -----------------------------------------------------------------------------------
    Scenario(
        "conversation_restarts",
        "its history falls back to the opening prompt half-way",
        ("FM-2.1",),
        (
            ALERTS,
            PODS,
            LOGS,
            DESCRIBE,
            Act("reset"),
            ALERTS,
            PODS,
            final("checkout is crash-looping."),
        ),
        "failure",
    ),
    # FM-2.2 -----------------------------------------------------------------------------------
    Scenario(
        "guesses_between_two",
        "finds two deployments named checkout and changes one without asking",
        ("FM-2.2",),
        (ALERTS, FIND, FIX, PODS, ALERTS, DONE),
        "success",
    ),
    Scenario(
        "asks_which_one",
        "near miss: finds two deployments named checkout and asks which one first",
        (),
        (
            ALERTS,
            FIND,
            Act(
                "ask",
                text="There are two checkout deployments, in shop and staging: which one?",
                answer="The one in shop.",
            ),
            FIX,
            PODS,
            ALERTS,
            DONE,
        ),
        "success",
    ),
    # FM-2.3 -----------------------------------------------------------------------------------
    Scenario(
        "wanders_to_billing",
        "drifts into the billing namespace, which nothing points to",
        ("FM-2.3",),
        (ALERTS, PODS, *DERAIL, final("payments looks fine; no cause found.")),
        "failure",
    ),
    Scenario(
        "follows_the_dependency",
        "near miss: checkout's logs blame payments in billing, and it follows them there",
        (),
        (
            ALERTS,
            PODS,
            LOGS,
            *DERAIL,
            final("checkout fails because payments in billing times out."),
        ),
        "success",
        cluster="dependency",
    ),
    # FM-2.4 -----------------------------------------------------------------------------------
    Scenario(
        "brief_without_findings",
        "triage hands off a bare request; the remediator must read the logs again",
        ("FM-2.4",),
        (
            ALERTS,
            PODS,
            LOGS,
            handoff("Please fix checkout in shop."),
            LOGS,
            FIX,
            PODS,
            ALERTS,
            DONE,
        ),
        "success",
    ),
    Scenario(
        "brief_hides_failure",
        "triage's pod deletion was refused and its hand-off does not say so",
        ("FM-2.4",),
        (
            ALERTS,
            DELETE_POD,
            LOGS,
            handoff("checkout in shop is OOMKilled; raise its limit on deployment/checkout."),
            FIX,
            PODS,
            ALERTS,
            DONE,
        ),
        "success",
    ),
    Scenario(
        "sub_agent_not_briefed",
        "a sub-agent invoked with a bare request re-reads the logs its caller had read",
        ("FM-2.4",),
        (
            ALERTS,
            PODS,
            LOGS,
            Act("delegate", target=REMEDIATOR, text="Please fix checkout in shop."),
            LOGS,
            FIX,
            PODS,
            ALERTS,
            DONE,
        ),
        "success",
    ),
    Scenario(
        "sub_agent_briefed",
        "near miss: a sub-agent invoked with the findings goes straight to the fix",
        (),
        (
            ALERTS,
            PODS,
            LOGS,
            Act("delegate", target=REMEDIATOR, text=GOOD_BRIEF),
            FIX,
            PODS,
            ALERTS,
            DONE,
        ),
        "success",
        agent_attributes=READ_ONLY_TRIAGE,
    ),
    # FM-2.5 -----------------------------------------------------------------------------------
    Scenario(
        "remediator_looks_elsewhere",
        "the remediator never touches the deployment it was told to fix",
        ("FM-2.5",),
        (
            ALERTS,
            PODS,
            LOGS,
            handoff(GOOD_BRIEF),
            kubectl("kubectl describe deployment cart -n shop"),
            kubectl("kubectl logs deployment/cart -n shop"),
            final("cart looks fine."),
        ),
        "failure",
    ),
    Scenario(
        "retries_what_failed",
        "told that deleting the pod was refused, the remediator tries exactly that",
        ("FM-2.5",),
        (
            ALERTS,
            DELETE_POD,
            LOGS,
            handoff(
                "Deleting the checkout pod failed (Forbidden). Raise the memory limit of "
                "deployment/checkout in shop instead."
            ),
            DELETE_POD,
            FIX,
            PODS,
            ALERTS,
            DONE,
        ),
        "success",
    ),
    # FM-2.6 -----------------------------------------------------------------------------------
    Scenario(
        "says_check_does_change",
        "says it will only look at the deployment, and changes it",
        ("FM-2.6",),
        (
            ALERTS,
            PODS,
            LOGS,
            kubectl(FIX.command, say="Let me check the checkout deployment's configuration first."),
            PODS,
            ALERTS,
            DONE,
        ),
        "success",
    ),
    Scenario(
        "done_but_keeps_calling",
        "says the issue is resolved while asking for another tool call",
        ("FM-2.6",),
        (
            ALERTS,
            PODS,
            LOGS,
            FIX,
            kubectl(PODS.command, say="The issue is resolved. Listing the pods once more."),
            ALERTS,
            DONE,
        ),
        "success",
    ),
    Scenario(
        "sees_what_was_not_shown",
        "states the pods were OOMKilled before any tool showed it",
        ("FM-2.6",),
        (
            ALERTS,
            kubectl(PODS.command, say="The checkout pods are OOMKilled; listing them to confirm."),
            LOGS,
            FIX,
            PODS,
            ALERTS,
            DONE,
        ),
        "success",
    ),
    # FM-3.1 -----------------------------------------------------------------------------------
    Scenario(
        "gives_up_after_refusal",
        "its pod deletion is refused and it stops there",
        ("FM-3.1",),
        (ALERTS, PODS, DELETE_POD, final("I could not delete the checkout pod.")),
        "failure",
    ),
    Scenario(
        "stops_with_steps_left",
        "diagnoses, lists the next steps, and ends the run",
        ("FM-3.1",),
        (
            ALERTS,
            PODS,
            LOGS,
            final("checkout is OOMKilled at 64Mi. Next steps: raise the memory limit and verify."),
        ),
        "failure",
    ),
    Scenario(
        "recovers_from_refusal",
        "near miss: its pod deletion is refused, it takes another way and verifies",
        (),
        (ALERTS, PODS, DELETE_POD, LOGS, FIX, PODS, ALERTS, DONE),
        "success",
    ),
    # FM-3.3 -----------------------------------------------------------------------------------
    Scenario(
        "restart_did_not_help",
        "restarts, sees the pods still crash-looping, and declares success",
        ("FM-3.3",),
        (
            ALERTS,
            PODS,
            LOGS,
            RESTART,
            PODS,
            final("Resolved: checkout restarted and is running again."),
        ),
        "failure",
    ),
    Scenario(
        "checks_the_wrong_namespace",
        "fixes checkout in shop, checks pods in staging, and declares success",
        ("FM-3.3",),
        (
            ALERTS,
            PODS,
            LOGS,
            FIX,
            kubectl("kubectl get pods -n staging"),
            final("Fixed: the checkout pods are running."),
        ),
        "failure",
    ),
)

CORPUS_BY_NAME = {s.name: s for s in CORPUS}
