"""The SRE agent every framework runs: its tools, the cluster they act on, and the model's
script for each scenario, with what the collector must make of it.

Standard library only: the agent side of some frameworks runs in an environment of its own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from tests.frameworks.model_server import Call, Turn

NAMESPACE = "shop"
DEPLOYMENT = "checkout"
TASK = "The checkout deployment in namespace shop is crash-looping. Find out why and fix it."

MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: checkout
  namespace: shop
spec:
  template:
    spec:
      containers:
        - name: checkout
          resources:
            limits:
              memory: 512Mi
"""

CRASHING = "checkout: 0/3 pods ready, CrashLoopBackOff (OOMKilled), 7 restarts"
HEALTHY = "checkout: 3/3 pods ready, Running"
LOGS = "java.lang.OutOfMemoryError: Java heap space; container OOMKilled at memory limit 256Mi"
APPLIED = "deployment.apps/checkout configured"
RESTARTED = "deployment.apps/checkout restarted"


class Cluster:
    """The shop namespace as the tools see it: checkout crashes until its memory limit is
    raised to 512Mi; a restart changes nothing."""

    def __init__(self) -> None:
        self.memory_limit = "256Mi"

    def get_pod_status(self, deployment: str, namespace: str = NAMESPACE) -> str:
        if deployment != DEPLOYMENT or namespace != NAMESPACE:
            return f"Error: deployment {namespace}/{deployment} not found"
        return HEALTHY if self.memory_limit == "512Mi" else CRASHING

    def get_logs(self, deployment: str, namespace: str = NAMESPACE) -> str:
        if deployment != DEPLOYMENT or namespace != NAMESPACE:
            return f"Error: deployment {namespace}/{deployment} not found"
        return "Started checkout on port 8080" if self.memory_limit == "512Mi" else LOGS

    def apply_manifest(self, manifest: str) -> str:
        found = re.search(r"memory:\s*(\S+)", manifest)
        if found:
            self.memory_limit = found[1]
        return APPLIED

    def restart_deployment(self, deployment: str, namespace: str = NAMESPACE) -> str:
        return RESTARTED


TOOL_DOCS = {
    "get_pod_status": "Readiness and state of a deployment's pods.",
    "get_logs": "Recent logs of a deployment's pods.",
    "apply_manifest": "Apply a Kubernetes manifest (YAML) to the cluster.",
    "restart_deployment": "Restart a deployment's pods (kubectl rollout restart).",
}


def status() -> Call:
    return Call("get_pod_status", {"deployment": DEPLOYMENT, "namespace": NAMESPACE})


def logs() -> Call:
    return Call("get_logs", {"deployment": DEPLOYMENT, "namespace": NAMESPACE})


def apply() -> Call:
    return Call("apply_manifest", {"manifest": MANIFEST})


def restart() -> Call:
    return Call("restart_deployment", {"deployment": DEPLOYMENT, "namespace": NAMESPACE})


@dataclass(frozen=True)
class ToolStep:
    """A tool step the collector must read: which agent, which tool, which arguments (the
    parsed keyword arguments) and what the result contains."""

    tool: str
    arguments: dict
    result: str
    agent: str = ""


@dataclass(frozen=True)
class Scenario:
    name: str
    turns: tuple[Turn, ...]
    # Mode → the tool step (index into `tools`) the finding must point at.
    expected: dict[str, int] = field(default_factory=dict)
    tools: tuple[ToolStep, ...] = ()
    answer: str = ""
    # Two agents: the tools before the hand-off are the first agent's.
    handoff_after: int | None = None


def _steps(calls_results: list[tuple[Call, str]]) -> tuple[ToolStep, ...]:
    return tuple(ToolStep(c.tool, c.arguments, r) for c, r in calls_results)


CLEAN_ANSWER = (
    "checkout was OOMKilled at its 256Mi memory limit. I raised the limit to 512Mi; the "
    "read-back shows 3/3 pods ready and Running."
)
LOOP_ANSWER = "I could not find why checkout keeps crashing."
UNVERIFIED_ANSWER = "Fixed: checkout was restarted and is healthy now."
CLAIMED_ANSWER = "Fixed: checkout is healthy now after the restart."
HANDOFF_ANSWER = "checkout's memory limit is now 512Mi and 3/3 pods are ready and Running."

CLEAN = Scenario(
    "clean",
    (
        Turn((status(),)),
        Turn((logs(),)),
        Turn((apply(),)),
        Turn((status(),)),
        Turn(answer=CLEAN_ANSWER),
    ),
    tools=_steps([(status(), CRASHING), (logs(), LOGS), (apply(), APPLIED), (status(), HEALTHY)]),
    answer=CLEAN_ANSWER,
)
LOOP = Scenario(
    "loop",
    (*[Turn((status(),))] * 5, Turn(answer=LOOP_ANSWER)),
    expected={"FM-1.3": 2},
    tools=_steps([(status(), CRASHING)] * 5),
    answer=LOOP_ANSWER,
)
UNVERIFIED = Scenario(
    "unverified_fix",
    (Turn((status(),)), Turn((restart(),)), Turn(answer=UNVERIFIED_ANSWER)),
    expected={"FM-3.2": 1},
    tools=_steps([(status(), CRASHING), (restart(), RESTARTED)]),
    answer=UNVERIFIED_ANSWER,
)
CLAIMED = Scenario(
    "claimed_despite_failure",
    (Turn((status(),)), Turn((restart(),)), Turn((status(),)), Turn(answer=CLAIMED_ANSWER)),
    expected={"FM-3.3": 2},
    tools=_steps([(status(), CRASHING), (restart(), RESTARTED), (status(), CRASHING)]),
    answer=CLAIMED_ANSWER,
)
SINGLE_AGENT = (CLEAN, LOOP, UNVERIFIED, CLAIMED)


def handoff(transfer_tool: str) -> Scenario:
    """Triage reads the logs and hands off without them; the fixer reads them again."""
    return Scenario(
        "handoff_drops_logs",
        (
            Turn((logs(),)),
            Turn((Call(transfer_tool, {}),)),
            Turn((logs(),)),
            Turn((apply(),)),
            Turn((status(),)),
            Turn(answer=HANDOFF_ANSWER),
        ),
        expected={"FM-2.4": 1},
        tools=_steps([(logs(), LOGS), (logs(), LOGS), (apply(), APPLIED), (status(), HEALTHY)]),
        answer=HANDOFF_ANSWER,
        handoff_after=1,
    )


def emit(runs: dict[str, list[str]]) -> None:
    """What the agent process reports: each scenario's trace ids, as one JSON line."""
    print("RUNS " + json.dumps(runs), flush=True)
