"""Resources as people write them: the one parser for free-form Kubernetes references, URLs
and SQL tables, the targets a call's arguments and commands give, and what a read checks."""

from __future__ import annotations

import json
import random
import string
import time

import pytest

from mast_otel.processors.classify import (
    ActionClassifier,
    Target,
    covers,
    kube_kind,
    kubectl_targets,
    parse_resource,
    parse_url,
    sql_tables,
)

C = ActionClassifier()
PAY = Target("deployment", "payments-api", "payments")
MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: payments-api
  namespace: payments
"""


def refs(name: str, args: object) -> set[Target]:
    return set(C.classify(name, args if isinstance(args, str) else json.dumps(args)).refs)


@pytest.mark.parametrize(
    ("alias", "kind"),
    [
        ("deploy", "deployment"), ("deployment", "deployment"), ("Deployments", "deployment"),
        ("deployment.apps", "deployment"), ("deployments.v1.apps", "deployment"),
        ("svc", "service"), ("services", "service"), ("po", "pod"), ("pods", "pod"),
        ("Pod", "pod"), ("ns", "namespace"), ("cm", "configmap"), ("configmaps", "configmap"),
        ("sts", "statefulset"), ("ds", "daemonset"), ("rs", "replicaset"), ("ing", "ingress"),
        ("hpa", "horizontalpodautoscaler"), ("pvc", "persistentvolumeclaim"), ("no", "node"),
        ("cronjobs", "cronjob"), ("ev", "event"), ("all", "all"),
        ("payments", ""), ("", ""), ("x" * 500, ""),
    ],
)  # fmt: skip
def test_kind_aliases_are_one_kind(alias: str, kind: str):
    assert kube_kind(alias) == kind


def test_short_aliases_are_not_kinds_in_tool_names():
    assert kube_kind("no", short=False) == ""
    assert kube_kind("pods", short=False) == "pod"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("deployment/payments-api -n payments", [PAY]),
        ("deploy/payments-api --namespace=payments", [PAY]),
        ("deploy payments-api --namespace payments", [PAY]),
        ("deployments.apps/payments-api -n=payments", [PAY]),
        ("Deployment/Payments-API -npayments", [PAY]),
        ("svc/checkout", [Target("service", "checkout")]),
        ("pods -n payments", [Target("pod", "", "payments")]),
        ("po -A", [Target("pod", "", "*")]),
        (
            "pods -l app=payments-api -n payments",
            [Target("pod", "", "payments", ("payments-api",))],
        ),
        (
            "deploy/a deploy/b -n x",
            [Target("deployment", "a", "x"), Target("deployment", "b", "x")],
        ),
        (
            "deploy,svc checkout -n shop",
            [Target("deployment", "checkout", "shop"), Target("service", "checkout", "shop")],
        ),
        ("rollouts.argoproj.io/canary -n prod", [Target("rollouts", "canary", "prod")]),
        ("VirtualService/reviews", [Target("virtualservice", "reviews")]),
        ("kubectl get deploy/payments-api -n payments", [PAY]),
        ("https://api.example.com/v1/orders/123", [Target("orders", "123", "api.example.com")]),
    ],
)
def test_free_form_resources(text: str, expected: list[Target]):
    assert list(parse_resource(text)) == expected


def test_a_kind_alone_is_a_listing_where_the_key_says_resource():
    assert parse_resource("pods") == ()
    assert parse_resource("pods", namespace="shop", listing=True) == (Target("pod", "", "shop"),)
    # A bare name takes the kind and namespace the call gave besides.
    assert parse_resource("payments-api -n payments", kind="deployment") == (PAY,)


@pytest.mark.parametrize(
    "text",
    [
        "payments-api",  # a plain name: the caller keeps it as it is
        "John Smith",
        "src/app.py",  # a path, not a kind
        "k8s/deploy.yaml",
        "a/b/c",
        "deploy/",
        "/payments-api",
        "deployment/Payments API!",
        "pods are failing in payments",
        "x" * 600,  # past the length cap
        "",
        "   ",
    ],
)
def test_near_misses_name_no_resource(text: str):
    assert parse_resource(text) == ()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "kubectl -n shop rollout restart deploy/checkout",
            [Target("deployment", "checkout", "shop")],
        ),
        (
            "kubectl rollout status deployment/checkout -n shop --timeout=60s",
            [Target("deployment", "checkout", "shop")],
        ),
        ("kubectl get pods -l app=checkout -A", [Target("pod", "", "*", ("checkout",))]),
        ("kubectl logs checkout-7d9 -n shop --tail 50", [Target("pod", "checkout-7d9", "shop")]),
        (
            "kubectl logs -f deploy/checkout -c app -n shop",
            [Target("deployment", "checkout", "shop")],
        ),
        (
            "kubectl exec -it checkout-1 -n shop -- kubectl get pods -n other",
            [Target("pod", "checkout-1", "shop")],
        ),
        (
            "kubectl set image deployment/checkout app=registry/img:v2 -n shop",
            [Target("deployment", "checkout", "shop")],
        ),
        (
            "kubectl create secret generic db-pass --from-literal=a=b -n shop",
            [Target("secret", "db-pass", "shop")],
        ),
        ("kubectl create namespace staging", [Target("namespace", "staging")]),
        ("kubectl top pod -n shop", [Target("pod", "", "shop")]),
        ("kubectl cordon node-1", [Target("node", "node-1")]),
        ("kubectl apply -f k8s/app.yaml", [Target("file", "k8s/app.yaml")]),
        (
            "kubectl get deployment checkout cart -n shop -o wide",
            [Target("deployment", "checkout", "shop"), Target("deployment", "cart", "shop")],
        ),
        ("kubectl scale --replicas 3 deployment checkout", [Target("deployment", "checkout")]),
        ("kubectl label pods foo unhealthy=true", [Target("pod", "foo")]),
        ("kubectl delete pods --all -n shop", [Target("pod", "", "shop")]),
        (
            "kubectl wait --for=condition=available deploy/checkout -n shop",
            [Target("deployment", "checkout", "shop")],
        ),
        ("kubectl events -n shop", [Target("event", "", "shop")]),
        (
            "kubectl port-forward svc/checkout 8080:80 -n shop",
            [Target("service", "checkout", "shop")],
        ),
        ("kubectl explain deployment.spec", []),
        ("kubectl version", []),
    ],
)
def test_kubectl_argv(line: str, expected: list[Target]):
    assert list(kubectl_targets(line.split())) == expected


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("UPDATE orders SET status = 'x' WHERE id = 2", [Target("table", "orders")]),
        (
            "SELECT * FROM payments.invoices i JOIN customers c ON c.id = i.cid",
            [Target("table", "invoices", "payments"), Target("table", "customers")],
        ),
        ("INSERT INTO `db`.`t` (a) VALUES (1)", [Target("table", "t", "db")]),
        ('DELETE FROM "Orders" WHERE id = 1', [Target("table", "orders")]),
        ("TRUNCATE TABLE logs", [Target("table", "logs")]),
        ("DROP TABLE IF EXISTS tmp", [Target("table", "tmp")]),
        ("SELECT * FROM (SELECT * FROM x) y", [Target("table", "x")]),
        ("SELECT 1", []),
    ],
)
def test_sql_tables(statement: str, expected: list[Target]):
    assert list(sql_tables(statement)) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://api.example.com/v1/orders/123", Target("orders", "123", "api.example.com")),
        (
            "https://API.example.com/v1/orders/123/?expand=items#x",
            Target("orders", "123", "api.example.com"),
        ),
        ("http://checkout.shop:8080/healthz", Target("", "healthz", "checkout.shop")),
        ("https://example.com", Target("host", "example.com")),
        ("ftp://example.com/a", None),
        ("http://[::1", None),
        ("not a url", None),
    ],
)
def test_urls(url: str, expected: Target | None):
    assert parse_url(url) == expected


# --- the targets of a call: argument forms and shell forms agree ------------------------------


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("kubectl_get", {"resource": "deployment/payments-api -n payments"}),
        ("kubectl_rollout_restart", {"deployment": "payments-api", "namespace": "payments"}),
        (
            "kubectl_scale",
            {"resource": "deployment/payments-api", "namespace": "payments", "replicas": 3},
        ),
        (
            "kubectl_get",
            {"resourceType": "deployments", "name": "payments-api", "namespace": "payments"},
        ),
        ("kubectl_patch", {"kind": "Deployment", "name": "payments-api", "namespace": "payments"}),
        ("restart_deployment", {"name": "payments-api", "namespace": "payments"}),
        ("kubectl_describe", {"target": "deploy payments-api --namespace=payments"}),
        ("kubectl", {"command": "kubectl get deploy/payments-api -n payments"}),
        ("kubectl", {"args": ["get", "deploy/payments-api", "-n", "payments"]}),
        ("kubectl", "get deployment payments-api -n payments"),
        ("shell", {"command": ["bash", "-lc", "kubectl get deploy/payments-api -n payments"]}),
        (
            "exec_command",
            {"cmd": ["bash", "-lc", "sudo kubectl -n payments get deployments payments-api"]},
        ),
        ("exec_command", {"cmd": "kubectl get deploy payments-api --namespace=payments | head"}),
        ("kubectl_apply", {"manifest": MANIFEST}),
    ],
)
def test_every_form_gives_the_same_target(name: str, args: object):
    action = C.classify(name, args if isinstance(args, str) else json.dumps(args))
    assert set(action.refs) == {PAY}
    assert action.targets == {"payments-api", "payments"}


def test_listings_from_arguments_and_commands():
    pods = {Target("pod", "", "payments")}
    assert refs("kubectl_get", {"resource": "pods -n payments"}) == pods
    assert refs("kubectl_get", {"resource": "pods", "namespace": "payments"}) == pods
    assert refs("get_pods", {"namespace": "payments"}) == pods
    assert refs("shell", {"command": "kubectl get po -n payments"}) == pods
    assert refs("get_pods", {"namespace": "payments", "label_selector": "app=payments-api"}) == {
        Target("pod", "", "payments", ("payments-api",))
    }
    # A kind in the resource key beside a name is that name's kind, not a listing.
    assert refs(
        "kubectl_get", {"resource": "deployment", "name": "payments-api", "namespace": "payments"}
    ) == {PAY}
    # A namespace and no kind: whatever the tool reads there.
    assert refs("get_alerts", {"namespace": "payments"}) == {Target("", "", "payments")}


def test_plain_values_keep_their_flat_names():
    # Names of other domains are as they always were: lower-cased, after the last `/`.
    action = C.classify("update_customer", json.dumps({"name": "John Smith", "customer_id": "C1"}))
    assert action.targets == {"john smith", "c1"}
    assert C.classify("write_file", json.dumps({"path": "src/app.py"})).targets == {"app.py"}
    assert C.classify("get_table", json.dumps({"table": "payments.invoices"})).refs == {
        Target("table", "invoices", "payments")
    }
    sql = C.classify("run_sql", json.dumps({"query": "UPDATE orders SET s = 1 WHERE id = 5"}))
    assert sql.refs == {Target("table", "orders")} and sql.targets == {"orders"}
    url = {"method": "PUT", "url": "https://api.example.com/v1/orders/123?x=1"}
    assert C.classify("http_request", json.dumps(url)).targets == {"123"}


# --- what a read checks ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("read", "checked"),
    [
        (PAY, True),
        (Target("deployment", "payments-api"), True),  # namespace not said: kubectl's current one
        (Target("service", "payments-api", "payments"), True),  # the same app, named
        (Target("pod", "payments-api-7d9f-x2", "payments"), True),  # one of its pods
        (Target("pod", "", "payments"), True),  # the pods of its namespace
        (Target("pod", "", "*"), True),  # every namespace's pods
        (Target("pod", "", "payments", ("payments-api",)), True),  # its pods by label
        (Target("deployment", "", "payments"), True),  # the deployments of its namespace
        (Target("all", "", "payments"), True),
        (Target("", "", "payments"), True),  # a check scoped to the namespace
        (Target("replicaset", "", "payments"), True),
        (Target("horizontalpodautoscaler", "payments-api", "payments"), True),
        (Target("", "payments-api"), True),  # a name of no kind said
        (Target("secret", "payments-api", "payments"), False),  # a secret of the same name
        (Target("configmap", "payments-api", "payments"), False),
        (Target("deployment", "checkout", "payments"), False),  # another deployment
        (Target("deployment", "payments-api", "staging"), False),  # another namespace
        (Target("pod", "", "staging"), False),
        (Target("pod", "", ""), False),  # pods of an unsaid namespace
        (Target("pod", "", "payments", ("payments",)), True),  # `app=payments`: its app label
        (Target("pod", "", "payments", ("checkout",)), False),  # another app's pods
        (Target("pod", "", "payments", ("api",)), False),
        (Target("pod", "payments-api2-abc", "payments"), False),
        (Target("event", "", "payments"), False),  # events: what happened, not the state
        (Target("service", "", "payments"), False),
        (Target("configmap", "", "payments"), False),
    ],
)
def test_what_checks_a_deployment(read: Target, checked: bool):
    assert covers(PAY, read) is checked


def test_what_checks_other_kinds():
    pod = Target("pod", "payments-api-7d9f-x2", "payments")
    assert covers(pod, PAY)  # a deleted pod, its deployment read
    assert covers(Target("configmap", "payments-config", "payments"), Target("pod", "", "payments"))
    assert not covers(Target("service", "payments-api", "payments"), Target("pod", "", "payments"))
    assert covers(Target("pod", "", "shop"), Target("pod", "checkout-1", "shop"))
    assert not covers(Target("pod", "", "shop"), Target("pod", "checkout-1", "other"))
    ns = Target("namespace", "staging")
    assert covers(ns, Target("pod", "", "staging")) and covers(ns, Target("namespace", "staging"))
    assert covers(Target("node", "node-1"), Target("node", ""))
    # Neither side says a namespace: both are kubectl's current one.
    assert covers(Target("deployment", "checkout"), Target("pod", ""))
    assert covers(Target("table", "orders"), Target("table", "orders", "shop"))
    assert not covers(Target("table", "orders"), Target("table", "customers"))


# --- hostile input -----------------------------------------------------------------------------

HOSTILE = [
    "FROM " * 20000,
    "a" * 100_000,
    "-n " * 5000,
    "deploy/" * 3000,
    "http://" + "a" * 5000,
    "http://[",
    "https://x/%zz/%00/\udcff",
    "SELECT " + "`" * 10000,
    "UPDATE " + "a." * 5000 + " SET",
    "\x00\udcff/\u202e -n \x00",
    "kubectl " + "-l a=b," * 3000,
    "pods -l " + "=," * 4000,
    "FROM `" + "a" * 100 + " " * 10000,
    "deploy/x -n " + "y" * 300,
    "kubectl -n",
    "kubectl get",
    "-",
    "--",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_input_neither_raises_nor_hangs(text: str):
    start = time.perf_counter()
    parse_resource(text)
    parse_resource(text, listing=True)
    kubectl_targets(text.split())
    sql_tables(text)
    parse_url(text)
    C.classify("kubectl_get", json.dumps({"resource": text, "namespace": text[:300]}))
    assert time.perf_counter() - start < 1.0


def test_random_strings_never_raise():
    rnd = random.Random(7)
    alphabet = string.printable + "ÄΩ\u200b/-=.,"
    for _ in range(3000):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 60)))
        for found in (parse_resource(text), kubectl_targets(text.split()), sql_tables(text)):
            assert all(isinstance(t, Target) for t in found)
        parse_url(text)


def test_namespace_and_kind_keys_are_configurable():
    from mast_otel.processors.classify import ClassifierConfig

    args = json.dumps({"name": "payments-api", "project": "payments", "objectKind": "deploy"})
    assert C.classify("kubectl_get", args).refs == {Target("", "payments-api")}
    config = ClassifierConfig(
        namespace_keys=["project"], kind_keys=["objectkind"], target_keys=["name"]
    )
    assert ActionClassifier(config).classify("kubectl_get", args).refs == {PAY}


def test_kubectl_run_by_another_program_or_with_a_redirect():
    pods = {Target("pod", "", "shop")}
    assert refs("shell", {"command": "watch -n 5 kubectl get pods -n shop"}) == pods
    # The file a redirect writes is no pod name.
    assert refs("shell", {"command": "kubectl get pods -n shop > pods.txt"}) == pods | {
        Target("", "pods.txt")
    }
    assert refs("shell", {"command": "ssh bastion kubectl -n shop get po"}) == pods


def test_prose_names_resources_through_the_same_parser():
    from mast_otel.processors.classify import mentioned_targets, prose_targets

    brief = (
        "Deleting the checkout pod failed (Forbidden). Raise the memory limit of "
        "deployment/checkout in shop instead: `kubectl set resources deploy checkout -n shop "
        "--limits=memory=512Mi`. Read/write access and/or apps/v1 are no resources."
    )
    assert set(prose_targets(brief)) == {
        Target("deployment", "checkout"),
        Target("deployment", "checkout", "shop"),
    }
    assert mentioned_targets(brief) == {"checkout", "shop"}
    assert mentioned_targets("pods are failing, -n payments") == {"payments"}
    assert prose_targets("x" * 100_000 + " deploy/late") == ()


def test_kubectl_wait_is_a_check_of_what_it_waits_for():
    action = C.classify(
        "shell", json.dumps({"command": "kubectl wait --for=condition=available deploy/x -n y"})
    )
    assert action.kind.value == "read"
    assert action.refs == {Target("deployment", "x", "y")}
