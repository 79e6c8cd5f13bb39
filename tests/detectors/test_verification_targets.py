"""FM-3.2 and FM-3.3 on the targets SRE agents write: kubectl-style tools given free-form
resource strings, kubectl in a shell, Codex's `shell` and `exec_command`, manifests, SQL and
URLs. A read-fix-verify run raises neither mode; a change followed only by a check of
another deployment, another namespace or another app's pods still does."""

from __future__ import annotations

from typing import Any

import pytest

from mast_otel.processors.model import Step
from tests.steps import RunBuilder, analyse, rules

TASK = "payments-api in namespace payments is returning 503s; fix it and confirm it is healthy."
READ_FIRST = ("kubectl_get", {"resource": "deployment/payments-api -n payments"})
HEALTHY = "payments-api 3/3 Running"
SUCCESS = "payments-api is healthy again: 3/3 pods ready, no more 503s."
UNSURE = "I restarted payments-api."

MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: payments-api
  namespace: payments
spec:
  replicas: 3
"""

# The same change written the ways agents of different frameworks write it.
CHANGES: dict[str, tuple[str, dict[str, Any]]] = {
    "tool with keys": (
        "kubectl_rollout_restart",
        {"deployment": "payments-api", "namespace": "payments"},
    ),
    "tool with a resource string": (
        "kubectl_scale",
        {"resource": "deployment/payments-api", "namespace": "payments", "replicas": 3},
    ),
    "kind and name": (
        "kubectl_patch",
        {"kind": "Deployment", "name": "payments-api", "namespace": "payments", "patch": "{}"},
    ),
    "verb in the tool name": (
        "restart_deployment",
        {"name": "payments-api", "namespace": "payments"},
    ),
    "kubectl tool given a command": (
        "kubectl",
        {"command": "kubectl rollout restart deploy/payments-api -n payments"},
    ),
    "bash -lc": (
        "shell",
        {"command": ["bash", "-lc", "kubectl -n payments rollout restart deployment payments-api"]},
    ),
    "codex exec_command": (
        "exec_command",
        {
            "cmd": [
                "bash",
                "-lc",
                "kubectl scale deploy/payments-api --replicas=3 --namespace=payments",
            ]
        },
    ),
    "manifest": ("kubectl_apply", {"manifest": MANIFEST}),
}

# Checks of that change, as people write them.
CHECKS: dict[str, tuple[str, dict[str, Any]]] = {
    "resource string": ("kubectl_get", {"resource": "deployment/payments-api -n payments"}),
    "kind alias and long flag": (
        "kubectl_describe",
        {"resource": "deploy payments-api --namespace=payments"},
    ),
    "resource type key": (
        "kubectl_get",
        {"resourceType": "deployments", "name": "payments-api", "namespace": "payments"},
    ),
    "pods of the namespace": ("kubectl_get", {"resource": "pods -n payments"}),
    "pods tool": ("get_pods", {"namespace": "payments"}),
    "pods by the app's label": (
        "exec_command",
        {"cmd": ["bash", "-lc", "kubectl get pods -n payments -l app=payments-api"]},
    ),
    "shell": ("shell", {"command": ["bash", "-lc", "kubectl get deploy/payments-api -n payments"]}),
    "rollout status": (
        "kubectl",
        {"command": "kubectl rollout status deployment/payments-api -n payments --timeout=60s"},
    ),
    "a pod of the deployment": (
        "kubectl_logs",
        {"pod": "payments-api-7d9f-x2k4", "namespace": "payments"},
    ),
    "all namespaces": ("shell", {"command": "kubectl get pods -A | grep payments-api"}),
}

# Checks that look elsewhere: the change stays unverified.
ELSEWHERE: dict[str, tuple[str, dict[str, Any]]] = {
    "another deployment, same namespace": (
        "kubectl_get",
        {"resource": "deployment/checkout -n payments"},
    ),
    "the same name in another namespace": (
        "kubectl_get",
        {"resource": "deployment/payments-api -n staging"},
    ),
    "pods of another namespace": ("kubectl_get", {"resource": "pods -n staging"}),
    "another app's pods": (
        "exec_command",
        {"cmd": ["bash", "-lc", "kubectl get pods -n payments -l app=checkout"]},
    ),
    "another deployment in a shell": (
        "shell",
        {"command": ["bash", "-lc", "kubectl get deploy/orders-api -n payments"]},
    ),
    "another namespace's pods tool": ("get_pods", {"namespace": "staging"}),
    # Events say what happened, not the state the change left: an SRE reads the pods.
    "events of the namespace": ("kubectl_get", {"resource": "events -n payments"}),
}


def _run(
    change: tuple[str, dict[str, Any]], check: tuple[str, dict[str, Any]], answer: str
) -> list[Step]:
    """Read, change (with the user's task given), wait a minute, check, answer."""
    run = RunBuilder()
    run.llm(input_text=TASK, calls=(READ_FIRST[0],))
    run.tool(*READ_FIRST, "payments-api 0/3 CrashLoopBackOff")
    run.llm(input_text=TASK, calls=(change[0],))
    run.tool(*change, "deployment.apps/payments-api restarted")
    run.t += 60_000_000_000  # a minute for the rollout
    run.llm(input_text=TASK, calls=(check[0],))
    run.tool(*check, HEALTHY)
    run.llm(input_text=TASK, output=answer)
    return [*run.steps, run.root()]


def _verification(steps: list[Step]) -> list[tuple[str, str]]:
    return [r for r in rules(steps) if r[0] in ("FM-3.2", "FM-3.3")]


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("change", CHANGES)
def test_a_check_of_the_changed_resource_is_its_verification(change: str, check: str):
    assert _verification(_run(CHANGES[change], CHECKS[check], SUCCESS)) == []
    assert _verification(_run(CHANGES[change], CHECKS[check], UNSURE)) == []


@pytest.mark.parametrize("elsewhere", ELSEWHERE)
@pytest.mark.parametrize("change", CHANGES)
def test_a_check_of_another_resource_leaves_the_change_unverified(change: str, elsewhere: str):
    claimed = _verification(_run(CHANGES[change], ELSEWHERE[elsewhere], SUCCESS))
    assert claimed == [("FM-3.3", "wrong_target")]
    unsure = _verification(_run(CHANGES[change], ELSEWHERE[elsewhere], UNSURE))
    assert unsure == [("FM-3.2", "unverified_change")]


def test_the_finding_names_the_real_targets():
    steps = _run(
        CHANGES["tool with a resource string"], ELSEWHERE["pods of another namespace"], SUCCESS
    )
    findings = [f for f in analyse(steps)[0] if f.mode == "FM-3.3"]
    assert findings[0].evidence["changed"] == ["payments", "payments-api"]
    assert findings[0].evidence["checked"] == ["staging"]


def test_a_deleted_pod_is_checked_by_its_deployment_or_the_pod_list():
    for check in (CHECKS["resource string"], CHECKS["pods of the namespace"]):
        run = RunBuilder()
        run.llm(input_text=TASK, calls=("kubectl_delete",))
        run.tool(
            "kubectl_delete", {"resource": "pod/payments-api-7d9f-x2k4 -n payments"}, "deleted"
        )
        run.t += 60_000_000_000
        run.tool(*check, HEALTHY)
        run.llm(input_text=TASK, output=SUCCESS)
        assert _verification([*run.steps, run.root()]) == []


def test_a_config_change_is_checked_by_the_pods_running_with_it():
    run = RunBuilder()
    run.tool("shell", {"command": "kubectl -n payments edit cm payments-api-config"}, "edited")
    run.tool("shell", {"command": "kubectl -n payments rollout restart deploy/payments-api"}, "ok")
    run.t += 60_000_000_000
    run.tool("shell", {"command": "kubectl -n payments get pods"}, HEALTHY)
    run.llm(input_text=TASK, output=SUCCESS)
    assert _verification([*run.steps, run.root()]) == []


# --- SQL tables and URLs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "verified"),
    [
        ("SELECT status FROM orders WHERE id = 42", True),
        ("SELECT o.status FROM shop.orders o JOIN customers c ON c.id = o.customer_id", True),
        ("SELECT * FROM customers WHERE id = 7", False),
    ],
)
def test_a_sql_change_is_checked_by_a_read_of_its_table(check: str, verified: bool):
    run = RunBuilder(agent="dba")
    run.tool("run_sql", {"query": "UPDATE orders SET status = 'shipped' WHERE id = 42"}, "1 row")
    run.tool("run_sql", {"query": check}, "shipped")
    run.llm(output="Order 42 was successfully marked shipped.")
    found = _verification([*run.steps, run.root()])
    assert found == ([] if verified else [("FM-3.3", "wrong_target")])


@pytest.mark.parametrize(
    ("url", "verified"),
    [
        ("https://api.example.com/v1/orders/123?expand=items", True),
        ("/v1/orders/123", True),
        ("https://api.example.com/v1/orders/124", False),
        ("https://staging.example.com/v1/orders/123", False),
    ],
)
def test_an_http_change_is_checked_by_a_read_of_the_same_record(url: str, verified: bool):
    run = RunBuilder(agent="ops")
    run.tool(
        "http_request",
        {"method": "PUT", "url": "https://api.example.com/v1/orders/123", "body": "{}"},
        "204",
    )
    run.tool("http_request", {"method": "GET", "url": url}, '{"status": "cancelled"}')
    run.llm(output="Order 123 was successfully cancelled.")
    found = _verification([*run.steps, run.root()])
    assert found == ([] if verified else [("FM-3.3", "wrong_target")])
